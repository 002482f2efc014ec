// `mixlab train`: train one mixer on one task from a config file and/or flags.
//
//   mixlab train --config configs/copy_attention.json
//   mixlab train --task recall --mixer resolvent:pow2 --steps 500 --set d_model=128
//   mixlab train --config c.json --until 100          # stop at step 100 (checkpoint written)
//   mixlab train --config c.json --resume runs/train/copy-attention/checkpoint.pt
// Writes into --out (default runs/train/<task>-<mixer>): checkpoint.pt, metrics.jsonl,
// config.json (resolved) and result.json (final evaluation).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "mixlab/core/error.h"
#include "mixlab/train/trainer.h"

namespace mixlab::cli {
namespace {

struct TrainArgs {
  std::string config, task, mixer, out, checkpoint, resume, metrics;
  std::vector<std::string> sets;
  int64_t steps = 0, seed = -1, until = 0;
  bool quiet = false;
};

std::string sanitize(const std::string& s) {
  std::string r = s;
  for (char& c : r)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return r;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  MIXLAB_CHECK(in.good(), "config {}: cannot open the file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("config {}: malformed JSON: {}", path, e.what()));
  }
}

void run_train(const TrainArgs& a) {
  MIXLAB_CHECK(!a.config.empty() || !a.task.empty(), "train: give --config FILE or --task T (with --mixer SPEC)");
  nlohmann::json j = a.config.empty() ? nlohmann::json::object() : read_json_file(a.config);
  MIXLAB_CHECK(j.is_object(), "config {}: expected a JSON object", a.config);
  if (!a.task.empty()) j["task"] = a.task;
  if (!a.mixer.empty()) j["mixer"] = a.mixer;
  if (a.steps > 0) j["steps"] = a.steps;
  if (a.seed >= 0) j["seed"] = a.seed;
  for (const auto& kv : a.sets) {
    const auto eq = kv.find('=');
    MIXLAB_CHECK(eq != std::string::npos && eq > 0, "train: --set expects KEY=VALUE, got '{}'", kv);
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    try {
      j[key] = nlohmann::json::parse(value);
    } catch (const nlohmann::json::parse_error&) {
      j[key] = value;  // a bare word is a string (e.g. --set mixer=local:8)
    }
  }
  const std::string origin = a.config.empty() ? "(command line)" : a.config;
  const TrainConfig config = config_from_json(j, origin);

  const std::string out = a.out.empty() ? "runs/train/" + sanitize(config.task.name + "-" + config.mixer) : a.out;
  std::filesystem::create_directories(out);
  TrainOptions o;
  o.checkpoint_path = a.checkpoint.empty() ? out + "/checkpoint.pt" : a.checkpoint;
  o.metrics_path = a.metrics.empty() ? out + "/metrics.jsonl" : a.metrics;
  o.resume_path = a.resume;
  o.until = a.until;
  o.progress = !a.quiet;
  o.label = config.mixer + "/" + config.task.name;
  {
    std::ofstream cfg(out + "/config.json");
    cfg << config_to_json(config).dump(2) << "\n";
  }
  Trainer trainer(config);
  if (!a.quiet) {
    std::cerr << fmt::format("train: {} on {} ({} parameters), {} steps, output in {}\n", config.mixer,
                             config.task.name, trainer.model().parameter_count(), config.steps, out);
  }
  const TrainResult r = trainer.run(o);
  nlohmann::json res = {{"step", r.step},
                        {"eval_loss", r.eval.loss},
                        {"eval_token_acc", r.eval.token_acc},
                        {"eval_answer_acc", r.eval.answer_acc},
                        {"eval_answers", r.eval.answers},
                        {"eval_chain_acc", r.eval.chain_acc},
                        {"eval_chain_queries", r.eval.chain_queries},
                        {"train_loss", r.last_loss},
                        {"train_acc", r.last_acc},
                        {"tokens_per_s", r.tokens_per_s},
                        {"seconds", r.seconds},
                        {"checkpoint", o.checkpoint_path}};
  std::ofstream(out + "/result.json") << res.dump(2) << "\n";
  std::cout << fmt::format("step {}/{}  eval loss {:.4f}  token acc {:.2f}%  answer acc {:.2f}%  ({} answers)\n",
                           r.step, config.steps, r.eval.loss, 100 * r.eval.token_acc, 100 * r.eval.answer_acc,
                           r.eval.answers);
  std::cout << "checkpoint: " << o.checkpoint_path << "\n";
}

}  // namespace

void cmd_train_register(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train one mixer on one synthetic task (see configs/)");
  sub->add_option("--config", args->config, "JSON config file (keys: mixlab/train/config.h)");
  sub->add_option("--task", args->task, "Task: copy | recall | multihop (overrides the config)");
  sub->add_option("--mixer", args->mixer, "Mixer spec, e.g. attention, local:8, resolvent:pow2");
  sub->add_option("--steps", args->steps, "Training steps (overrides the config)")->check(CLI::PositiveNumber);
  sub->add_option("--seed", args->seed, "Seed (overrides the config)")->check(CLI::NonNegativeNumber);
  sub->add_option("--set", args->sets, "Override any config key: --set d_model=128 (repeatable)");
  sub->add_option("--out", args->out, "Output directory (default runs/train/<task>-<mixer>)");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint path (default <out>/checkpoint.pt)");
  sub->add_option("--metrics", args->metrics, "Metrics JSONL path (default <out>/metrics.jsonl)");
  sub->add_option("--resume", args->resume, "Resume from this checkpoint (same config required)");
  sub->add_option("--until", args->until, "Stop after this step (a checkpoint is written)")->check(CLI::PositiveNumber);
  sub->add_flag("--quiet", args->quiet, "No progress lines");
  sub->callback([args] { run_train(*args); });
}

}  // namespace mixlab::cli
