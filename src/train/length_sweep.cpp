// Error against sequence length for a trained model; see mixlab/train/length_sweep.h.
#include "mixlab/train/length_sweep.h"

#include <algorithm>
#include <set>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/train/config.h"
#include "mixlab/train/task_s5.h"
#include "mixlab/train/trainer.h"

namespace mixlab {
namespace {

// Seed stream of the sweep's rows: far above the streams tasks.cpp and task_s5.cpp use (1..13+n).
constexpr uint64_t kSweepStream = uint64_t{1} << 40;

Batch sweep_batch(const TaskSpec& spec, int64_t rows, int64_t length, uint64_t seed) {
  const uint64_t s = task_seed_mix(seed, kSweepStream, static_cast<uint64_t>(length));
  if (spec.name == "s5") return s5_generate(spec, rows, length, s);
  TaskSpec at = spec;
  at.length = length;  // task_generate draws lengths up to spec.length
  return task_generate(at, rows, length, spec.name == "copy" ? 0 : spec.pairs, s);
}

}  // namespace

void length_sweep_check(const TaskSpec& spec, const std::vector<int64_t>& lengths, int64_t max_len) {
  MIXLAB_CHECK(spec.name != "lm" && spec.name != "textcopy" && spec.name != "file",
               "length_sweep: task {} has no length sweep (copy, recall, multihop and s5 do)", spec.name);
  MIXLAB_CHECK(!lengths.empty(), "length_sweep: lengths is empty");
  for (int64_t L : lengths) {
    const int64_t minimum = spec.name == "s5" ? 1 : spec.name == "copy" ? 1 : 2 * spec.pairs + 3;
    MIXLAB_CHECK(L >= minimum, "length_sweep: length {} is below task {}'s minimum {}{}", L, spec.name, minimum,
                 spec.name == "copy" || spec.name == "s5" ? "" : fmt::format(" ({} pairs)", spec.pairs));
    const int64_t T = spec.name == "s5" ? L : task_sequence_length(spec, L);
    MIXLAB_CHECK(T <= max_len,
                 "length_sweep: length {} makes sequences of {} tokens, beyond the model's max_len {} (train with "
                 "the config key max_len >= {})",
                 L, T, max_len, T);
  }
}

std::vector<LengthError> length_sweep(DecoderModel& model, const TaskSpec& spec, const std::vector<int64_t>& lengths,
                                      int64_t rows, int64_t batch_size, uint64_t seed) {
  length_sweep_check(spec, lengths, model.dims().max_len);
  MIXLAB_CHECK(rows >= 1, "length_sweep: rows must be >= 1, got {}", rows);
  MIXLAB_CHECK(batch_size >= 1, "length_sweep: batch_size must be >= 1, got {}", batch_size);
  torch::NoGradGuard no_grad;
  model.eval();
  std::vector<LengthError> out;
  for (int64_t L : lengths) {
    LengthError e;
    e.length = L;
    int64_t tokens = 0, correct_tokens = 0, answers = 0, correct_answers = 0, final_wrong = 0;
    // All rows of a length are drawn at once and evaluated in slices, so the rows do not depend
    // on batch_size.
    const Batch all = sweep_batch(spec, rows, L, seed);
    for (int64_t done = 0; done < rows;) {
      const int64_t b = std::min(batch_size, rows - done);
      const Batch batch = batch_rows(all, done, b);
      const torch::Tensor logits = model.forward(batch.tokens);
      const BatchScore s = batch_score(logits, batch);
      // The last scored position of each row: the largest index whose mask is 1.
      const auto positions = torch::arange(batch.mask.size(1), torch::kFloat32).unsqueeze(0);
      const auto last = (batch.mask * (positions + 1)).argmax(1, /*keepdim=*/true);  // (b,1)
      const auto predicted = logits.argmax(2).gather(1, last);
      final_wrong += predicted.ne(batch.targets.gather(1, last)).sum().item<int64_t>();
      tokens += s.answer_tokens;
      correct_tokens += s.correct_tokens;
      answers += s.answers;
      correct_answers += s.correct_answers;
      done += b;
    }
    e.rows = rows;
    e.token_error = tokens > 0 ? 1.0 - static_cast<double>(correct_tokens) / static_cast<double>(tokens) : 0.0;
    e.final_error = static_cast<double>(final_wrong) / static_cast<double>(rows);
    e.answer_error = answers > 0 ? 1.0 - static_cast<double>(correct_answers) / static_cast<double>(answers) : 0.0;
    out.push_back(e);
  }
  return out;
}

std::vector<int64_t> length_list_parse(const std::string& text, const std::string& what) {
  std::set<int64_t> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    begin = end + 1;
    const std::string where = fmt::format("{} item '{}'", what, item);
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      out.insert(parse_int(item, where, 1, kConfigMaxLen));
    } else {
      const auto slash = item.find('/', dash);
      const int64_t lo = parse_int(item.substr(0, dash), where + " (start)", 1, kConfigMaxLen);
      const int64_t hi =
          parse_int(item.substr(dash + 1, slash == std::string::npos ? std::string::npos : slash - dash - 1),
                    where + " (end)", lo, kConfigMaxLen);
      const int64_t by =
          slash == std::string::npos ? 1 : parse_int(item.substr(slash + 1), where + " (step)", 1, kConfigMaxLen);
      for (int64_t L = lo; L <= hi; L += by) out.insert(L);
      out.insert(hi);
    }
  }
  MIXLAB_CHECK(out.size() <= 4096, "{}: at most 4096 lengths, got {}", what, out.size());
  return {out.begin(), out.end()};
}

}  // namespace mixlab
