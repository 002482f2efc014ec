// `mixlab generate`: text from an lm checkpoint, streamed to stdout as it is decoded.
//
//   mixlab generate --checkpoint runs/train/lm-attention/checkpoint.pt --prompt "The jury said"
//       [--max-tokens 256] [--temperature 1] [--top-k 0] [--top-p 1] [--seed 0]
// --temperature 0 is greedy decoding (top-k/top-p then have no effect); a negative temperature,
// a negative --max-tokens, --top-k < 0 or --top-p outside (0, 1] is an error. An empty prompt
// starts from the begin token. The text goes to stdout, flushed after every token; the summary
// line (tokens/s, prefill time, decode state bytes) goes to stderr. Ctrl-C stops decoding and
// still prints the summary (exit code 0). Only lm checkpoints are accepted (mixlab/train/generate.h).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/train/generate.h"
#include "mixlab/train/task_lm.h"
#include "mixlab/train/trainer.h"

namespace mixlab::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint, prompt, max_tokens, temperature, top_k, top_p, seed;
};

std::atomic<bool> g_stop{false};
void on_sigint(int) { g_stop.store(true); }  // async-signal-safe: one lock-free store

void run_generate(const GenerateArgs& a) {
  GenerateOptions o;
  o.prompt = a.prompt;
  if (!a.max_tokens.empty()) o.max_tokens = parse_int(a.max_tokens, "--max-tokens", 0, int64_t{1} << 40);
  if (!a.temperature.empty()) o.sampling.temperature = parse_double(a.temperature, "--temperature", 0.0);
  if (!a.top_k.empty()) o.sampling.top_k = parse_int(a.top_k, "--top-k", 0, int64_t{1} << 40);
  if (!a.top_p.empty()) o.sampling.top_p = parse_double(a.top_p, "--top-p", 0.0, 1.0);
  if (!a.seed.empty()) o.seed = parse_uint64(a.seed, "--seed");
  sampling_validate(o.sampling);

  const LoadedCheckpoint ckpt = checkpoint_read(a.checkpoint);
  MIXLAB_CHECK(ckpt.config.task.name == "lm",
               "generate: checkpoint '{}' is a model of task {}, not a language model; train one with "
               "`mixlab train --task lm`",
               a.checkpoint, ckpt.config.task.name);
  MIXLAB_CHECK(ckpt.config.task.tokenizer != "ids",
               "generate: checkpoint '{}' was trained on token ids without text (tokenizer ids): there is no "
               "tokenizer to encode a prompt or decode tokens; train with tokenizer bytes or gpt2",
               a.checkpoint);
  const LmTokenizer& tok = lm_task_tokenizer(ckpt.config.task);
  Trainer trainer(ckpt.config);
  trainer.checkpoint_load(ckpt);

  g_stop.store(false);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old);
  GenerateStats s;
  try {
    s = generate_text(
        trainer.model(), tok, o,
        [](const std::string& text) {
          std::fwrite(text.data(), 1, text.size(), stdout);
          std::fflush(stdout);
        },
        &g_stop);
  } catch (...) {
    ::sigaction(SIGINT, &old, nullptr);
    throw;
  }
  ::sigaction(SIGINT, &old, nullptr);
  std::fflush(stdout);
  std::cerr << fmt::format(
      "\n-- {}{} tokens in {:.3f} s ({:.1f} tokens/s); prefill {} tokens in {:.3f} s; decode state {} bytes{} "
      "({}, {} tokenizer)\n",
      s.interrupted ? "interrupted: " : "", s.generated, s.decode_seconds, s.tokens_per_s(), s.prompt_tokens,
      s.prefill_seconds, s.state_bytes,
      s.context_shifts > 0 ? fmt::format("; {} context shifts", s.context_shifts) : std::string(), ckpt.config.mixer,
      tok.name());
}

}  // namespace

void cmd_generate_register(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a checkpoint of `mixlab train --task lm`");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint file (task lm)")->required();
  sub->add_option("--prompt", args->prompt, "Prompt text (default empty: start from the begin token)");
  sub->add_option("--max-tokens", args->max_tokens, "Tokens to generate, >= 0 (default 256)");
  sub->add_option("--temperature", args->temperature, "Sampling temperature >= 0; 0 = greedy (default 1)");
  sub->add_option("--top-k", args->top_k, "Keep the k most probable tokens, 0 = off (default 0)");
  sub->add_option("--top-p", args->top_p, "Keep the smallest set of tokens with mass >= p, in (0, 1] (default 1)");
  sub->add_option("--seed", args->seed, "Sampling seed, 0 to 2^64-1 (default 0)");
  sub->callback([args] { run_generate(*args); });
}

}  // namespace mixlab::cli
