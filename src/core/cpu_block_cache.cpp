#include "mixlab/core/cpu_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"

namespace mixlab {

namespace {

constexpr size_t kLargeBytes = size_t(1) << 20;  // below: c10's alloc_cpu / free_cpu
constexpr size_t kHugePage = size_t(2) << 20;    // class granularity and alignment of large blocks

// Large blocks are 2 MiB multiples: a block serves every request of its class, and transparent
// huge pages back it whole.
size_t size_class(size_t n) { return (n + kHugePage - 1) / kHugePage * kHugePage; }

class BlockCache final : public c10::Allocator {
 public:
  explicit BlockCache(size_t budget) : budget_(budget) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n < kLargeBytes) {
      void* p = n == 0 ? nullptr : c10::alloc_cpu(n);
      return {p, p, &c10::free_cpu, c10::Device(c10::DeviceType::CPU)};
    }
    const size_t bytes = size_class(n);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        p = it->second;
        free_.erase(it);
        cached_ -= bytes;
        ++hits_;
      } else {
        ++misses_;
      }
    }
    if (!p) {
      MIXLAB_CHECK(posix_memalign(&p, kHugePage, bytes) == 0 && p != nullptr,
                   "cpu block cache: out of memory allocating {} bytes", bytes);
      madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure only costs the huge pages
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[p] = bytes;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // The deleter of every large block, and raw_deallocate's for any block of this allocator.
  static void release(void* p) {
    if (!p) return;
    auto& self = *instance();
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      auto it = self.live_.find(p);
      if (it != self.live_.end()) {
        bytes = it->second;
        self.live_.erase(it);
        if (self.cached_ + bytes <= self.budget_) {
          self.free_.emplace(bytes, p);
          self.cached_ += bytes;
          return;
        }
      }
    }
    if (bytes > 0)
      std::free(p);
    else
      c10::free_cpu(p);  // a small block handed out through raw_allocate
  }

  CpuBlockCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuBlockCacheStats s;
    s.hits = hits_;
    s.misses = misses_;
    s.cached_bytes = static_cast<int64_t>(cached_);
    s.budget_bytes = static_cast<int64_t>(budget_);
    s.installed = true;
    return s;
  }

  void release_cached() {
    std::multimap<size_t, void*> drop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drop.swap(free_);
      cached_ = 0;
    }
    for (auto& kv : drop) std::free(kv.second);
  }

  static BlockCache*& instance() {
    static BlockCache* cache = nullptr;  // never destroyed: tensors may outlive static destructors
    return cache;
  }

 private:
  const size_t budget_;
  mutable std::mutex mutex_;
  mutable std::multimap<size_t, void*> free_;       // size class → free block
  mutable std::unordered_map<void*, size_t> live_;  // handed-out large block → size class
  mutable size_t cached_ = 0;
  mutable int64_t hits_ = 0, misses_ = 0;
};

std::mutex install_mutex;
bool malloc_tuned = false;  // under install_mutex

// glibc keeps freed blocks under 1 MiB in its heaps instead of returning their pages (header).
// The user's own malloc tunables win.
bool tune_glibc_malloc() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return false;
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})
    if (std::getenv(name)) return false;
  constexpr int kMmapThreshold = 2 << 20;  // above kLargeBytes plus malloc's alignment slack
  constexpr int kTrimThreshold = 64 << 20;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace

bool install_cpu_block_cache(int64_t budget_bytes) {
  std::lock_guard<std::mutex> lock(install_mutex);
  if (BlockCache::instance()) return true;
  if (budget_bytes < 0) {
    budget_bytes = int64_t(2048) << 20;
    if (const char* env = std::getenv("MIXLAB_CPU_CACHE_MB"); env && *env) {
      const int64_t mb = parse_int(env, "MIXLAB_CPU_CACHE_MB");
      MIXLAB_CHECK(mb >= 0, "MIXLAB_CPU_CACHE_MB must be a number of MiB >= 0, got '{}'", env);
      budget_bytes = mb << 20;
    }
  }
  if (budget_bytes == 0) return false;
  malloc_tuned = tune_glibc_malloc();
  BlockCache::instance() = new BlockCache(static_cast<size_t>(budget_bytes));
  // Priority above the default CPU allocator's (0), so a later default registration keeps ours.
  c10::SetAllocator(c10::DeviceType::CPU, BlockCache::instance(), /*priority=*/1);
  return true;
}

CpuBlockCacheStats cpu_block_cache_stats() {
  std::lock_guard<std::mutex> lock(install_mutex);
  if (!BlockCache::instance()) return {};
  CpuBlockCacheStats s = BlockCache::instance()->stats();
  s.malloc_tuned = malloc_tuned;
  return s;
}

void cpu_block_cache_release() {
  std::lock_guard<std::mutex> lock(install_mutex);
  if (BlockCache::instance()) BlockCache::instance()->release_cached();
}

}  // namespace mixlab
