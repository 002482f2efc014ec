// Row buffers of the synthetic task generators -> Batch (mixlab/train/task_rows.h).
#include "mixlab/train/task_rows.h"

namespace mixlab {

TaskRows::TaskRows(int64_t b, int64_t t)
    : B(b), T(t), tokens(b * t, kTokenPad), targets(b * t, kTokenPad), mask(b * t, 0), answer(b * t, -1) {}

void TaskRows::score(int64_t b, int64_t t, int64_t label, int64_t answer_index) {
  targets[b * T + t] = label;
  mask[b * T + t] = 1;
  answer[b * T + t] = answer_index;
}

Batch TaskRows::to_batch(int64_t length) const {
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto tensor = [&](const std::vector<int64_t>& v) {
    return torch::from_blob(const_cast<int64_t*>(v.data()), {B, T}, i64).clone();
  };
  Batch out;
  out.tokens = tensor(tokens);
  out.targets = tensor(targets);
  out.mask = tensor(mask).to(torch::kFloat32);
  out.answer = tensor(answer);
  out.hops = torch::full({B, T}, -1, i64);
  out.length = length;
  out.pairs = 0;
  return out;
}

}  // namespace mixlab
