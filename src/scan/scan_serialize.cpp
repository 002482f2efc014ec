// Saving and restoring the roots of a tensor-valued online binary counter (mixlab/scan/scan.h).
#include <fmt/format.h>

#include "mixlab/core/error.h"
#include "mixlab/scan/scan.h"

namespace mixlab {

void scan_counter_save_tensors(const std::string& path, int64_t count, const std::vector<int64_t>& levels,
                               const std::vector<at::Tensor>& roots, const std::vector<at::Tensor>& folds) {
  MIXLAB_CHECK(levels.size() == roots.size() && roots.size() == folds.size(),
               "scan_counter_save: {} levels, {} roots, {} folds differ", levels.size(), roots.size(), folds.size());
  torch::serialize::OutputArchive archive;
  archive.write("count", torch::tensor(count, torch::kInt64));
  archive.write("levels", torch::tensor(levels, torch::kInt64));
  for (size_t i = 0; i < roots.size(); ++i) {
    archive.write(fmt::format("root_{}", i), roots[i].detach());
    archive.write(fmt::format("fold_{}", i), folds[i].detach());
  }
  try {
    archive.save_to(path);
  } catch (const c10::Error& e) {
    MIXLAB_FAIL("scan_counter_save: cannot write '{}': {}", path, e.what_without_backtrace());
  }
}

SavedCounterTensors scan_counter_load_tensors(const std::string& path) {
  torch::serialize::InputArchive archive;
  SavedCounterTensors out;
  try {
    archive.load_from(path);
    at::Tensor count, levels;
    archive.read("count", count);
    archive.read("levels", levels);
    out.count = count.item<int64_t>();
    levels = levels.contiguous();
    out.levels.assign(levels.data_ptr<int64_t>(), levels.data_ptr<int64_t>() + levels.numel());
    for (size_t i = 0; i < out.levels.size(); ++i) {
      at::Tensor root, fold;
      archive.read(fmt::format("root_{}", i), root);
      archive.read(fmt::format("fold_{}", i), fold);
      out.roots.push_back(root);
      out.folds.push_back(fold);
    }
  } catch (const c10::Error& e) {
    MIXLAB_FAIL("scan_counter_load: cannot read counter from '{}': {}", path, e.what_without_backtrace());
  }
  return out;
}

}  // namespace mixlab
