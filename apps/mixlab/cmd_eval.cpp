// `mixlab eval --checkpoint FILE`: held-out evaluation of a trained checkpoint.
//
// Rebuilds the model from the config stored in the checkpoint, loads the weights and evaluates
// on the task's held-out batches (the evaluation seed stream; --batches overrides the count).
// A file checkpoint reads its data file again (the absolute path in its config) and scores
// every held-out row once.
// An lm checkpoint is scored on the whole valid stream (or --split test) with a sliding window
// (--stride, default the config's eval_stride, i.e. T / 2; --tokens N scores only the first N
// tokens): perplexity and bits per byte (mixlab/train/lm_eval.h).
#include <cmath>
#include <iostream>

#include "commands.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/train/lm_eval.h"
#include "mixlab/train/trainer.h"

namespace mixlab::cli {
namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string batches, split, stride, tokens;
  bool json = false;
};

void run_eval_lm(const EvalArgs& a, Trainer& trainer) {
  const TrainConfig& config = trainer.config();
  const LmSplit split = a.split.empty() ? LmSplit::kValid : lm_split_parse(a.split, "--split");
  MIXLAB_CHECK(split != LmSplit::kTrain, "--split must be valid or test (the model was trained on train), got 'train'");
  const int64_t stride = a.stride.empty() ? 0 : parse_int(a.stride, "--stride", 1, config.task.length);
  const int64_t tokens = a.tokens.empty() ? 0 : parse_int(a.tokens, "--tokens", 0, int64_t{1} << 40);
  const int64_t used_stride = stride > 0 ? stride : config_eval_stride(config);
  const LmEvalResult r = lm_evaluate_split(trainer.model(), config, split, used_stride, tokens);
  MIXLAB_CHECK(r.tokens > 0, "eval: the {} stream has no token to score", lm_split_name(split));
  if (!std::isfinite(r.nll)) {
    throw NonFiniteError(
        fmt::format("eval: checkpoint '{}' gives a non-finite loss; its weights are unusable", a.checkpoint));
  }
  if (a.json) {
    nlohmann::json j = {{"checkpoint", a.checkpoint},
                        {"task", "lm"},
                        {"mixer", config.mixer},
                        {"tokenizer", config.task.tokenizer},
                        {"step", trainer.step()},
                        {"split", lm_split_name(split)},
                        {"T", config.task.length},
                        {"stride", used_stride},
                        {"loss", r.loss()},
                        {"perplexity", r.perplexity()},
                        {"bits_per_byte", r.bits_per_byte()},
                        {"tokens", r.tokens},
                        {"bytes", r.bytes},
                        {"eval_token_acc", r.tokens ? double(r.correct) / r.tokens : 0.0}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} on lm/{} (step {}/{}), {} split, window {} stride {}: loss {:.4f}  perplexity {:.3f}  bits/byte {:.4f}  "
      "({} tokens, {} bytes)\n",
      config.mixer, config.task.tokenizer, trainer.step(), config.steps, lm_split_name(split), config.task.length,
      used_stride, r.loss(), r.perplexity(), r.bits_per_byte(), r.tokens, r.bytes);
}

void run_eval(const EvalArgs& a) {
  // The file is read once (a concurrent writer cannot give us the config of one checkpoint and
  // the weights of another) and verified (header, size, checksum) before anything is built.
  // Flags first: a bad flag is reported without reading a (possibly large) file.
  const int64_t batches = a.batches.empty() ? 0 : parse_positive_int(a.batches, "--batches", int64_t{1} << 30);
  if (!a.split.empty()) lm_split_parse(a.split, "--split");
  const LoadedCheckpoint ckpt = checkpoint_read(a.checkpoint);
  TrainConfig config = ckpt.config;
  const bool lm = config.task.name == "lm";
  MIXLAB_CHECK(lm || (a.split.empty() && a.stride.empty() && a.tokens.empty()),
               "eval: --split, --stride and --tokens apply to lm checkpoints; '{}' is a {} checkpoint", a.checkpoint,
               config.task.name);
  MIXLAB_CHECK(batches == 0 || config.task.name != "file",
               "eval: --batches does not apply to task file checkpoints ('{}'): their evaluation covers every "
               "held-out row once",
               a.checkpoint);
  if (batches > 0) config.eval_batches = batches;
  Trainer trainer(config);
  trainer.checkpoint_load(ckpt);
  if (lm) return run_eval_lm(a, trainer);
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
  sub->add_option("--split", args->split, "lm: valid (default) or test");
  sub->add_option("--stride", args->stride, "lm: sliding-window stride, 1..T (default: the config's, T/2)");
  sub->add_option("--tokens", args->tokens, "lm: score only the first N tokens of the split (default: all)");
  sub->add_flag("--json", args->json, "Print JSON");
  sub->callback([args] { run_eval(*args); });
}

}  // namespace mixlab::cli
