// `mixlab eval --checkpoint FILE`: held-out evaluation of a trained checkpoint.
//
// Rebuilds the model from the config stored in the checkpoint, loads the weights and evaluates
// on the task's held-out batches (the evaluation seed stream; --batches overrides the count).
#include <cmath>
#include <iostream>

#include "commands.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/train/trainer.h"

namespace mixlab::cli {
namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string batches;
  bool json = false;
};

void run_eval(const EvalArgs& a) {
  // The file is read once (a concurrent writer cannot give us the config of one checkpoint and
  // the weights of another) and verified (header, size, checksum) before anything is built.
  // Flags first: a bad flag is reported without reading a (possibly large) file.
  const int64_t batches = a.batches.empty() ? 0 : parse_positive_int(a.batches, "--batches", int64_t{1} << 30);
  const LoadedCheckpoint ckpt = checkpoint_read(a.checkpoint);
  TrainConfig config = ckpt.config;
  if (batches > 0) config.eval_batches = batches;
  Trainer trainer(config);
  trainer.checkpoint_load(ckpt);
  const EvalResult r = trainer.evaluate();
  if (!std::isfinite(r.loss)) {
    throw NonFiniteError(fmt::format("eval: checkpoint '{}' gives a non-finite loss ({}); its weights are unusable",
                                     a.checkpoint, r.loss));
  }
  if (a.json) {
    nlohmann::json j = {{"checkpoint", a.checkpoint},
                        {"task", config.task.name},
                        {"mixer", config.mixer},
                        {"step", trainer.step()},
                        {"loss", r.loss},
                        {"eval_token_acc", r.token_acc},
                        {"answer_acc", r.answer_acc},
                        {"answers", r.answers},
                        {"answer_tokens", r.answer_tokens},
                        {"chain_acc", r.chain_acc},
                        {"chain_queries", r.chain_queries}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} on {} (step {}/{}): loss {:.4f}  token acc {:.2f}%  answer acc {:.2f}%  "
      "({} answers, {} answer tokens){}\n",
      config.mixer, config.task.name, trainer.step(), config.steps, r.loss, 100 * r.token_acc, 100 * r.answer_acc,
      r.answers, r.answer_tokens,
      r.chain_queries > 0 ? fmt::format("  chain acc {:.2f}% ({} chain queries)", 100 * r.chain_acc, r.chain_queries)
                          : "");
}

}  // namespace

void cmd_eval_register(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "Evaluate a checkpoint written by `mixlab train`");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint file")->required();
  sub->add_option("--batches", args->batches, "Held-out batches (default: the config's eval_batches)");
  sub->add_flag("--json", args->json, "Print JSON");
  sub->callback([args] { run_eval(*args); });
}

}  // namespace mixlab::cli
