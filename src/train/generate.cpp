// Prompt prefill + token-by-token decoding with sampling (mixlab/train/generate.h).
#include "mixlab/train/generate.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Feeds `tokens` into a fresh state through the model's chunked prefill (every block's
// Mixer::prefill, chunks of kPrefillChunk tokens so a long prompt never builds one (T,T) score
// matrix) and returns the last logits (V).
constexpr int64_t kPrefillChunk = 256;
torch::Tensor prefill(DecoderModel& model, DecoderState& state, const std::vector<int64_t>& tokens) {
  state = model.init_state(1);
  torch::Tensor logits;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t begin = 0; begin < n; begin += kPrefillChunk) {
    const int64_t len = std::min(kPrefillChunk, n - begin);
    auto chunk =
        torch::tensor(std::vector<int64_t>(tokens.begin() + begin, tokens.begin() + begin + len), torch::kInt64)
            .unsqueeze(0);
    logits = model.prefill(state, chunk).select(1, len - 1).squeeze(0);
  }
  return logits;
}

}  // namespace

GenerateStats generate_text(DecoderModel& model, const LmTokenizer& tok, const GenerateOptions& o,
                            const std::function<void(const std::string&)>& emit, const std::atomic<bool>* stop) {
  MIXLAB_CHECK(o.max_tokens >= 0, "--max-tokens must be >= 0, got {}", o.max_tokens);
  sampling_validate(o.sampling);
  // A model may pad its vocabulary past the tokenizer's (nanoGPT's 50304 for GPT-2's 50257): the
  // padding ids are never sampled (the logits are cut to the tokenizer's ids below).
  MIXLAB_CHECK(model.dims().vocab >= tok.vocab_size(),
               "generate: the model's vocabulary ({}) is smaller than the {} tokenizer's ({})", model.dims().vocab,
               tok.name(), tok.vocab_size());
  const int64_t text_vocab = tok.vocab_size();
  const bool padded = model.dims().vocab > text_vocab;
  const int64_t max_len = model.dims().max_len;
  std::vector<int64_t> context = {tok.separator()};
  for (int64_t id : tok.encode(o.prompt)) context.push_back(id);
  MIXLAB_CHECK(static_cast<int64_t>(context.size()) <= max_len,
               "--prompt is {} tokens (with the begin token); the model's context is {} tokens", context.size(),
               max_len);
  torch::NoGradGuard no_grad;
  model.eval();
  GenerateStats s;
  s.prompt_tokens = static_cast<int64_t>(context.size());
  DecoderState state;
  const auto t0 = Clock::now();
  torch::Tensor logits = prefill(model, state, context);
  s.prefill_seconds = seconds_since(t0);
  Sampler sampler(o.seed);
  const auto t1 = Clock::now();
  while (s.generated < o.max_tokens) {
    if (stop != nullptr && stop->load()) {
      s.interrupted = true;
      break;
    }
    const int64_t id = sampler.next(padded ? logits.slice(0, 0, text_vocab) : logits, o.sampling);
    context.push_back(id);
    ++s.generated;
    emit(tok.decode_token(id));
    if (s.generated == o.max_tokens) break;
    if (state.position >= max_len) {  // context full: keep its last half
      ++s.context_shifts;
      const std::vector<int64_t> tail(context.end() - std::max<int64_t>(1, max_len / 2), context.end());
      logits = prefill(model, state, tail);
    } else {
      logits = model.step(state, torch::tensor({id}, torch::kInt64)).squeeze(0);
    }
  }
  s.decode_seconds = seconds_since(t1);
  s.state_bytes = state.bytes();
  return s;
}

}  // namespace mixlab
