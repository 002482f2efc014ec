// mixlab/core/cpu_block_cache.h — a CPU allocator for LibTorch that reuses large blocks.
//
// Why: LibTorch 1.13's CPU allocator hands every tensor of more than glibc's mmap threshold (at
// most 32 MiB, adapting from 128 KiB) fresh pages from the kernel and returns them on free, so a
// loop that allocates the same big tensors every step page-faults them in again every step. On
// this project's machines a first touch costs ~3.8 ms per MiB (a fresh 64 MiB tensor filled:
// 245 ms, its reused block: 2.75 ms; docs/log/benchmarks-2026-11.md, "The resolvent layer"): at T = 65536 the
// resolvent op spent more time faulting in its output than computing it. This allocator keeps freed blocks of >= 1 MiB
// (2 MiB-aligned, marked for transparent huge pages) in a cache keyed by size, up to a byte budget, and serves the next
// request of the same size class from it. Smaller blocks go to c10's alloc_cpu / free_cpu as before.
//
// Those smaller blocks page-faulted too: a training step at the main job's sizes (batch 32, T 64,
// d_model 64) allocates hundreds of 128 KiB - 1 MiB tensors, and glibc gave their pages back
// (its heap trimmed above a threshold that adapts to ~2x the largest freed block, its per-thread
// heaps unmapped when empty), so every step faulted ~400 of them in again. Installing the cache
// therefore also sets glibc's mmap threshold to 2 MiB (every block under 1 MiB comes from the heap)
// and its trim threshold to 64 MiB (up to 64 MiB of free heap top is kept per arena): page faults
// of a 4-run recall compare fell from ~530k to ~60k and its steps took ~20 % less time
// (docs/log/benchmarks-2026-11.md, "Small blocks: glibc's thresholds"). Skipped when the user set
// glibc's malloc tunables (GLIBC_TUNABLES with glibc.malloc., MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_), and on a C library other than glibc.
//
// Installed by the programs (the CLI, the benchmarks) before their first tensor, never by the
// library itself; Python users call mixlab.use_cpu_block_cache(). Tensors allocated before
// installation keep their own deleters. Thread-safe (one mutex around the cache).
// Budget: MIXLAB_CPU_CACHE_MB (default 2048; 0 leaves LibTorch's allocator in place).
// Not supported: GPU memory; returning cached blocks to the OS before exit (release_cached
// frees them on request).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mixlab {

struct CpuBlockCacheStats {
  int64_t hits = 0;          // large requests served from the cache
  int64_t misses = 0;        // large requests that asked the OS
  int64_t cached_bytes = 0;  // bytes held in the cache now (free blocks)
  int64_t budget_bytes = 0;  // most bytes the cache holds
  bool installed = false;
  bool malloc_tuned = false;  // glibc's mmap and trim thresholds set at installation
};

/// Makes the block cache LibTorch's CPU allocator (idempotent). budget_bytes < 0: read
/// MIXLAB_CPU_CACHE_MB (default 2048 MiB); a budget of 0 installs nothing (and tunes nothing).
/// Installing also tunes glibc's thresholds (above) unless the user set them. Returns whether it
/// is installed. Throws mixlab::Error for a malformed MIXLAB_CPU_CACHE_MB.
bool install_cpu_block_cache(int64_t budget_bytes = -1);

CpuBlockCacheStats cpu_block_cache_stats();

/// Frees every cached block (live tensors are untouched).
void cpu_block_cache_release();

}  // namespace mixlab
