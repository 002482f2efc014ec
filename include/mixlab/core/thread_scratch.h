// mixlab/core/thread_scratch.h — per-thread scratch memory for native kernels, kept between calls.
//
// Why: a kernel that takes fresh memory for its work buffers on every call page-faults it in
// (about 3.8 ms per MiB on the 2-core VM of docs/log/benchmarks-2026-11.md, often more than the kernel's own
// work), and LibTorch's CPU allocator hands large blocks back to the system. One buffer per
// thread (each thread of an at::parallel_for region gets its own) grows to the largest size asked
// and is reused; requests above kThreadScratchKeepBytes get a buffer of their own that is freed
// with the ThreadScratch object, so a single huge call does not pin its memory for the process.
// The memory is 64-byte aligned (vector loads of any width). Not for nested use: two live
// ThreadScratch objects on one thread share the kept buffer.
#pragma once

#include <cstddef>
#include <vector>

namespace mixlab {

constexpr size_t kThreadScratchKeepBytes = size_t{32} << 20;

class ThreadScratch {
 public:
  /// Room for `count` elements of E, 64-byte aligned, valid until the next get() on this thread
  /// or the end of this object. Contents are unspecified.
  template <typename E>
  E* get(size_t count) {
    const size_t lines = (count * sizeof(E) + sizeof(Line) - 1) / sizeof(Line);
    std::vector<Line>& v = lines * sizeof(Line) > kThreadScratchKeepBytes ? own_ : kept();
    if (v.size() < lines) {
      v.clear();
      v.shrink_to_fit();
      v.resize(lines);
    }
    return reinterpret_cast<E*>(v.data());
  }

 private:
  struct alignas(64) Line {
    unsigned char bytes[64];
  };
  static std::vector<Line>& kept() {
    thread_local std::vector<Line> lines;
    return lines;
  }
  std::vector<Line> own_;
};

}  // namespace mixlab
