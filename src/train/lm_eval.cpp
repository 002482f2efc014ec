// Sliding-window perplexity and bits per byte (mixlab/train/lm_eval.h).
#include "mixlab/train/lm_eval.h"

#include <algorithm>
#include <cmath>

#include "mixlab/core/error.h"
#include "mixlab/train/task_lm.h"

namespace mixlab {

double LmEvalResult::perplexity() const { return std::exp(loss()); }

LmEvalResult lm_evaluate(DecoderModel& model, const torch::Tensor& stream, const std::vector<int64_t>& token_bytes,
                         const LmEvalOptions& o) {
  const char* fn = "lm_evaluate";
  MIXLAB_CHECK(stream.dim() == 1 && stream.scalar_type() == torch::kInt64, "{}: stream must be (N) int64, got [{}]", fn,
               fmt::join(stream.sizes(), ","));
  MIXLAB_CHECK(o.T >= 1 && o.T <= model.dims().max_len, "{}: T must be in [1, max_len = {}], got {}", fn,
               model.dims().max_len, o.T);
  MIXLAB_CHECK(o.batch >= 1, "{}: batch must be >= 1, got {}", fn, o.batch);
  MIXLAB_CHECK(o.limit >= 0, "{}: limit must be >= 0, got {}", fn, o.limit);
  const int64_t V = model.dims().vocab;
  MIXLAB_CHECK(static_cast<int64_t>(token_bytes.size()) == V, "{}: token_bytes has {} entries, the vocabulary {}", fn,
               token_bytes.size(), V);
  const torch::Tensor x = o.limit > 0 && o.limit < stream.size(0) ? stream.slice(0, 0, o.limit) : stream;
  if (x.numel() > 0) {
    MIXLAB_CHECK(x.min().item<int64_t>() >= 0 && x.max().item<int64_t>() < V,
                 "{}: stream ids must be in [0, {}), got [{}, {}]", fn, V, x.min().item<int64_t>(),
                 x.max().item<int64_t>());
  }
  const auto windows = lm_sliding_windows(x.size(0), o.T, o.stride);
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  LmEvalResult r;
  const int64_t* xs = x.data_ptr<int64_t>();
  for (size_t w0 = 0; w0 < windows.size();) {
    // A batch of consecutive windows of one length.
    size_t w1 = w0 + 1;
    while (w1 < windows.size() && static_cast<int64_t>(w1 - w0) < o.batch && windows[w1].length == windows[w0].length)
      ++w1;
    const int64_t B = static_cast<int64_t>(w1 - w0), L = windows[w0].length;
    auto inputs = torch::empty({B, L}, torch::kInt64), targets = torch::empty({B, L}, torch::kInt64);
    auto mask = torch::zeros({B, L}, torch::kFloat64);
    int64_t* in = inputs.data_ptr<int64_t>();
    int64_t* tg_all = targets.data_ptr<int64_t>();
    double* mk = mask.data_ptr<double>();
    for (int64_t b = 0; b < B; ++b) {
      const LmWindow& w = windows[w0 + static_cast<size_t>(b)];
      for (int64_t t = 0; t < L; ++t) {
        in[b * L + t] = xs[w.begin + t];
        tg_all[b * L + t] = xs[w.begin + t + 1];
        mk[b * L + t] = t >= w.score_from ? 1.0 : 0.0;
      }
    }
    // log_softmax in the model's precision (a (B,L,V) float64 copy would be 8 bytes x 50257 per
    // position with gpt2); the sum is accumulated in float64.
    auto logits = model.forward(inputs);  // (B,L,V)
    auto logp = torch::log_softmax(logits, 2).gather(2, targets.unsqueeze(2)).squeeze(2).to(torch::kFloat64);
    r.nll -= (logp * mask).sum().item<double>();
    auto scored = mask > 0;
    r.correct += ((logits.argmax(2) == targets) & scored).sum().item<int64_t>();
    auto tg = targets.masked_select(scored);
    r.tokens += tg.numel();
    const int64_t* tp = tg.data_ptr<int64_t>();
    for (int64_t i = 0; i < tg.numel(); ++i) r.bytes += token_bytes[static_cast<size_t>(tp[i])];
    w0 = w1;
  }
  if (was_training) model.train();
  return r;
}

LmEvalResult lm_evaluate_split(DecoderModel& model, const TrainConfig& c, LmSplit split, int64_t stride,
                               int64_t limit) {
  const LmDataset& data = lm_task_dataset(c.task, split);
  const LmTokenizer& tok = lm_task_tokenizer(c.task);
  LmEvalOptions o;
  o.T = c.task.length;
  o.stride = stride >= 1 ? stride : config_eval_stride(c);
  o.batch = c.eval_batch;
  o.limit = limit >= 0 ? limit : c.eval_tokens;
  const int64_t n = o.limit > 0 ? std::min(o.limit, data.size()) : data.size();
  // A padded vocabulary (tokens= with gpt2, V > 50257): ids past the tokeniser's are 0 bytes.
  std::vector<int64_t> token_bytes = tok.token_bytes();
  token_bytes.resize(static_cast<size_t>(model.dims().vocab), 0);
  return lm_evaluate(model, data.slice(0, n), token_bytes, o);
}

}  // namespace mixlab
