// `mixlab train`: train one mixer on one task from a config file and/or flags.
//
//   mixlab train --config configs/copy_attention.json
//   mixlab train --task recall --mixer resolvent:pow2 --steps 500 --set d_model=128
//   mixlab train --task recall --mixer "ssm*3|attention" --layers 4   # a hybrid: one spec per layer
//   mixlab train --config c.json --until 100          # stop at step 100 (checkpoint written)
//   mixlab train --config c.json --resume runs/train/copy-attention/checkpoint.pt
//   mixlab train --config long.json --init-from runs/train/short/checkpoint.pt  # a new run, its weights
//   mixlab train --task copy --mixer attention --nproc 2      # data parallel, 2 local processes
//   mixlab train --task file --set data=mqar/train.npz --set eval_data=mqar/test.npz  # rows from NumPy
//   torchrun-style: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set -> joins that launch
// Writes into --out (default runs/train/<task>-<mixer>): checkpoint.pt, metrics.jsonl,
// config.json (resolved) and result.json (final evaluation).
//
// Order (docs/RELIABILITY.md): every input is validated first — flags, config, mixer spec,
// memory estimate, the --resume / --init-from checkpoint and its compatibility — and only then
// is --out created and locked (a second run on the same --out fails with "in use by pid N").
// Every file is written with a checked, fsync'ed, atomic write.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "commands.h"
#include "mixlab/core/atomic_file.h"
#include "mixlab/core/dir_lock.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/dist/data_parallel.h"
#include "mixlab/dist/gradient_reducer.h"
#include "mixlab/dist/launch.h"
#include "mixlab/dist/launch_fingerprint.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/train/task_lm.h"
#include "mixlab/train/trainer.h"

namespace mixlab::cli {
namespace {

struct TrainArgs {
  std::string config, task, mixer, out, checkpoint, resume, init_from, metrics;
  std::vector<std::string> sets;
  // Numbers arrive as text and go through parse_number: out of range is an error, not a clamp.
  std::string steps, layers, seed, until, max_memory, skip_nonfinite;
  std::string nproc, master_port, dist_timeout, bucket_kb;
  bool mixer_given = false;  // --mixer '' is an error (empty spec), not "keep the config's"
  bool quiet = false;
};

std::string sanitize(const std::string& s) {
  std::string r = s;
  for (char& c : r)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return r;
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = file_read(path, kConfigMaxBytes, "config");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("config {}: malformed JSON: {}", path, e.what()));
  }
}

// "8G", "512M", "1000000" (bytes); K/M/G/T are powers of 1024.
double parse_memory(const std::string& text) {
  std::string digits = text;
  double unit = 1;
  if (!digits.empty()) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
    const double k = 1024;
    if (u == 'K' || u == 'M' || u == 'G' || u == 'T') {
      unit = u == 'K' ? k : u == 'M' ? k * k : u == 'G' ? k * k * k : k * k * k * k;
      digits.pop_back();
    }
  }
  return static_cast<double>(
             parse_positive_int(digits, "--max-memory (bytes, or a number with K/M/G/T)", int64_t{1} << 50)) *
         unit;
}

void run_train(const TrainArgs& a) {
  // 1. Flags and config: nothing on disk is touched until everything below has passed.
  MIXLAB_CHECK(!a.config.empty() || !a.task.empty(), "train: give --config FILE or --task T (with --mixer SPEC)");
  nlohmann::json j = a.config.empty() ? nlohmann::json::object() : read_json_file(a.config);
  MIXLAB_CHECK(j.is_object(), "config {}: expected a JSON object", a.config);
  if (!a.task.empty()) j["task"] = a.task;
  if (a.mixer_given) j["mixer"] = a.mixer;
  if (!a.steps.empty()) j["steps"] = parse_positive_int(a.steps, "--steps", int64_t{1} << 40);
  if (!a.layers.empty()) j["layers"] = parse_positive_int(a.layers, "--layers", int64_t{1} << 24);
  if (!a.seed.empty()) j["seed"] = parse_uint64(a.seed, "--seed");
  const int64_t until = a.until.empty() ? 0 : parse_positive_int(a.until, "--until", int64_t{1} << 40);
  const int64_t skip = a.skip_nonfinite.empty() ? 0 : parse_int(a.skip_nonfinite, "--skip-nonfinite", 0, 1 << 30);
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

  // 2. Resources, then the mixer spec at the config's dims (one layer per distinct member of a
  // per-layer list, no model).
  double limit = machine_memory_bytes();
  std::string limit_name = "this machine's memory";
  if (!a.max_memory.empty()) {
    limit = std::min(limit, parse_memory(a.max_memory));
    limit_name = "--max-memory";
  }
  config_check_memory(config, limit, origin, limit_name);
  check_mixer_layer_specs(config.mixer, config.layers,
                          MixerDims{config.d_model, config.heads, model_dims_for(config).max_len});
  if (config.task.name == "lm") {
    // The tokenizer files and the token caches (built on first use) before --out is touched.
    for (LmSplit split : {LmSplit::kTrain, LmSplit::kValid}) {
      const LmDataset& d = lm_task_dataset(config.task, split);
      MIXLAB_CHECK(d.size() >= config.task.length + 1,
                   "train: the {} stream '{}' has {} tokens, fewer than a window of length + 1 = {} (a larger corpus, "
                   "or a smaller --set length=)",
                   lm_split_name(split), d.path(), d.size(), config.task.length + 1);
    }
  }

  // 3. The checkpoint to resume from: read once, verified, compatible.
  MIXLAB_CHECK(a.resume.empty() || a.init_from.empty(),
               "train: --init-from and --resume exclude each other (--resume continues a run; --init-from starts a "
               "new one from another run's weights)");
  std::optional<LoadedCheckpoint> resume;
  if (!a.resume.empty()) {
    resume = checkpoint_read(a.resume);
    const std::string mismatch = config_resume_mismatch(resume->config, config);
    MIXLAB_CHECK(mismatch.empty(), "checkpoint '{}': was written with a different config: {}", a.resume, mismatch);
    MIXLAB_CHECK(until == 0 || until >= resume->step, "train: --until {} is before the checkpoint's step {}", until,
                 resume->step);
  }
  // --init-from: another run's weights start this one (a new optimiser, schedule and step 0).
  std::optional<LoadedCheckpoint> init;
  if (!a.init_from.empty()) {
    init = checkpoint_read(a.init_from);
    const std::string mismatch = config_weights_mismatch(init->config, config);
    MIXLAB_CHECK(mismatch.empty(), "--init-from '{}': its weights cannot start this model: {}", a.init_from, mismatch);
  }

  // 4. Data parallel. --nproc N: this process becomes the launcher of N workers (each re-runs
  // this command line without --nproc) and passes on their outcome. A worker (torchrun's
  // variables set) joins the launch before building the model.
  const DistEnv env = dist_env_from_environment();
  const double timeout_s =
      a.dist_timeout.empty() ? 120.0 : parse_double(a.dist_timeout, "--dist-timeout (seconds)", 0.1, 86400.0);
  const int64_t bucket_bytes = a.bucket_kb.empty()
                                   ? kDefaultGradientBucketBytes
                                   : parse_positive_int(a.bucket_kb, "--bucket-kb", int64_t{1} << 22) * 1024;
  if (!a.nproc.empty()) {
    const int64_t nproc = parse_positive_int(a.nproc, "--nproc", 256);
    MIXLAB_CHECK(!env.launched, "train: --nproc {} cannot be used inside a launched worker (WORLD_SIZE = {} is set)",
                 nproc, env.world_size);
    MIXLAB_CHECK(config.batch % nproc == 0,
                 "key 'batch' = {} must be divisible by --nproc {} (each process trains on batch / nproc rows)",
                 config.batch, nproc);
    config_check_row_groups_for_processes(config, nproc);
    LaunchOptions lo;
    lo.nproc = nproc;
    lo.master_port = a.master_port.empty() ? 0 : parse_int(a.master_port, "--master-port", 1, 65535);
    std::vector<std::string> worker_args;
    const auto& args = command_line_args();
    bool threads_given = false;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& s = args[i];
      if (s == "--nproc" || s == "--master-port") {
        ++i;  // and its value
        continue;
      }
      if (s.rfind("--nproc=", 0) == 0 || s.rfind("--master-port=", 0) == 0) continue;
      threads_given = threads_given || s == "--threads" || s.rfind("--threads=", 0) == 0;
      worker_args.push_back(s);
    }
    // N workers share the cores: one intra-op thread pool each, of cores / N threads.
    if (!threads_given && !std::getenv("MIXLAB_THREADS")) {
      const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
      lo.extra_env.push_back(fmt::format("MIXLAB_THREADS={}", std::max<int64_t>(1, cores / nproc)));
    }
    throw CommandExit{launch_local_workers(lo, worker_args)};
  }
  MIXLAB_CHECK(a.master_port.empty(), "train: --master-port goes with --nproc (a launched worker reads MASTER_PORT)");
  std::unique_ptr<DataParallel> dp;
  if (env.world_size > 1) {
    MIXLAB_CHECK(config.batch % env.world_size == 0,
                 "key 'batch' = {} must be divisible by WORLD_SIZE = {} (each process trains on batch / {} rows)",
                 config.batch, env.world_size, env.world_size);
    // What every rank must share, checked at rendezvous before the first step: the build, the
    // resolved config and the options that change which collectives run (launch_fingerprint.h).
    LaunchFingerprint fingerprint{{"executable", executable_identity()},
                                  {"WORLD_SIZE", std::to_string(env.world_size)},
                                  {"--until", std::to_string(until)},
                                  {"--skip-nonfinite", std::to_string(skip)},
                                  {"--bucket-kb", std::to_string(bucket_bytes / 1024)},
                                  {"--resume step", resume ? std::to_string(resume->step) : "(none)"},
                                  {"--init-from step", init ? std::to_string(init->step) : "(none)"}};
    fingerprint_add_json(fingerprint, "config.", config_to_json(config));
    dp = std::make_unique<DataParallel>(env, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)),
                                        DataParallel::kDefaultBucketBytes, fingerprint);
  }
  const bool writer = env.rank == 0;  // rank 0 alone writes the run directory

  // 5. Only now: the output directory, locked for this process.
  const std::string out = a.out.empty() ? "runs/train/" + sanitize(config.task.name + "-" + config.mixer) : a.out;
  std::optional<DirLock> lock;
  if (writer) {
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    MIXLAB_CHECK_IO(!ec, "--out '{}': cannot create the directory: {}", out, ec.message());
    lock.emplace(out, "run directory");
    // A run killed inside a write left its temporary file here; holding the lock, none is live.
    const int64_t stale = remove_stale_temp_files(out);
    if (stale > 0 && !a.quiet)
      std::cerr << fmt::format("train: removed {} stale temporary file(s) in {}\n", stale, out);
  }
  TrainOptions o;
  o.checkpoint_path = a.checkpoint.empty() ? out + "/checkpoint.pt" : a.checkpoint;
  o.metrics_path = a.metrics.empty() ? out + "/metrics.jsonl" : a.metrics;
  o.resume_path = a.resume;
  o.until = until;
  o.progress = !a.quiet && writer;
  o.label = config.mixer + "/" + config.task.name;
  o.skip_nonfinite = skip;
  if (writer) atomic_write_file(out + "/config.json", config_to_json(config).dump(2) + "\n");
  Trainer trainer(config);
  if (init) trainer.init_weights(*init);  // before data parallel broadcasts rank 0's weights
  trainer.set_data_parallel(dp.get(), bucket_bytes);
  if (o.progress) {
    std::cerr << fmt::format("train: {} on {} ({} parameters), {} steps{}{}{}, output in {}\n", config.mixer,
                             config.task.name, trainer.model().parameter_count(), config.steps,
                             dp ? fmt::format(", {} processes", env.world_size) : std::string(),
                             trainer.row_groups() > 1 ? fmt::format(", batch rows in {} groups on {} threads",
                                                                    trainer.row_groups(), trainer.row_group_threads())
                                                      : std::string(),
                             init ? fmt::format(", weights from {} (step {})", init->path, init->step) : "", out);
  }
  const TrainResult r = resume ? trainer.run(o, *resume) : trainer.run(o);
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
                        {"stopped_early", r.stopped_early},
                        {"skipped_steps", r.skipped_steps},
                        {"world_size", r.world_size},
                        {"all_reduce_seconds", r.all_reduce_seconds},
                        {"peer_wait_seconds", r.peer_wait_seconds},
                        {"checkpoint", o.checkpoint_path},
                        {"init_from", a.init_from}};
  if (config.task.name == "lm") {
    res["eval_ppl"] = std::exp(r.eval.loss);
    res["eval_bpb"] = r.eval.bits_per_byte;
  }
  if (!writer) return;
  atomic_write_file(out + "/result.json", res.dump(2) + "\n");
  if (config.task.name == "lm") {
    std::cout << fmt::format(
        "step {}/{}  valid loss {:.4f}  perplexity {:.3f}  bits/byte {:.4f}  ({} tokens, {} bytes)\n", r.step,
        config.steps, r.eval.loss, std::exp(r.eval.loss), r.eval.bits_per_byte, r.eval.answer_tokens,
        r.eval.scored_bytes);
    std::cout << "checkpoint: " << o.checkpoint_path << "\n";
    return;
  }
  std::cout << fmt::format("step {}/{}  eval loss {:.4f}  token acc {:.2f}%  answer acc {:.2f}%  ({} answers)\n",
                           r.step, config.steps, r.eval.loss, 100 * r.eval.token_acc, 100 * r.eval.answer_acc,
                           r.eval.answers);
  std::cout << "checkpoint: " << o.checkpoint_path << "\n";
}

}  // namespace

void cmd_train_register(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train one mixer on one task: a synthetic task or language modelling (--task lm; see configs/)");
  sub->add_option("--config", args->config, "JSON config file (keys: mixlab/train/config.h; at most 1 MiB)");
  sub->add_option(
      "--task", args->task,
      "Task: copy | recall | multihop | textcopy | s5 | lm | file (with --set data=PATH.npz) | mad_recall | "
      "mad_fuzzy_recall | mad_noisy_recall | selective_copy | mad_compression | mad_memorization | induction "
      "(overrides the config)");
  sub->add_option("--mixer", args->mixer,
                  "Mixer spec, e.g. attention, local:8, resolvent:pow2; or one per layer (a hybrid): 'ssm*3|attention' "
                  "('|' between layers, '*N' repeats; a shorter list repeats when it divides --layers)")
      ->each([args](const std::string&) { args->mixer_given = true; });
  sub->add_option("--steps", args->steps, "Training steps, 1 to 2^40 (overrides the config)");
  sub->add_option("--layers", args->layers, "Blocks of the model, 1 to 2^24 (overrides the config)");
  sub->add_option("--seed", args->seed, "Seed, 0 to 2^64-1 (overrides the config)");
  sub->add_option("--set", args->sets, "Override any config key: --set d_model=128 (repeatable)");
  sub->add_option("--out", args->out, "Output directory (default runs/train/<task>-<mixer>); locked while training");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint path (default <out>/checkpoint.pt)");
  sub->add_option("--metrics", args->metrics, "Metrics JSONL path (default <out>/metrics.jsonl)");
  sub->add_option("--resume", args->resume, "Resume from this checkpoint (same config required)");
  sub->add_option("--init-from", args->init_from,
                  "Start from this checkpoint's model weights (another run's: same mixer and sizes; task, length "
                  "and schedule may differ) with a fresh optimiser and step 0");
  sub->add_option("--until", args->until, "Stop after this step (a checkpoint is written)");
  sub->add_option("--max-memory", args->max_memory,
                  "Refuse configs estimated to need more memory than this (bytes, or e.g. 4G; default: RAM)");
  sub->add_option("--skip-nonfinite", args->skip_nonfinite,
                  "Skip up to N steps with a non-finite loss/gradient instead of stopping (default 0)");
  sub->add_option("--nproc", args->nproc,
                  "Data parallel: start N local worker processes (global batch split across them)");
  sub->add_option("--master-port", args->master_port, "With --nproc: rendezvous port (default: a free port)");
  sub->add_option("--dist-timeout", args->dist_timeout,
                  "Data parallel: seconds to wait for every rank to join, and for a peer in each collective, "
                  "before failing (default 120)");
  sub->add_option("--bucket-kb", args->bucket_kb,
                  fmt::format("Data parallel: gradient bucket size in KiB; each bucket's all-reduce starts during "
                              "backward as soon as its gradients exist (default {})",
                              kDefaultGradientBucketBytes / 1024));
  sub->add_flag("--quiet", args->quiet, "No progress lines");
  sub->callback([args] { run_train(*args); });
}

}  // namespace mixlab::cli
