#!/usr/bin/env bash
# Builds (when needed) and runs the libFuzzer targets of tests/fuzz/ (issue 37 item 2).
# Usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]
#   TARGET: one of the folders of tests/fuzz/corpus/ (spec_args, mixer_spec, pattern, config,
#   checkpoint, decode_state, lm_cache, npy, token_bin); `all` runs each for SECONDS.
# Each run starts from a copy of the target's seed corpus (the repository's seeds are never
# changed) and prints the number of inputs it executed. A finding (crash, sanitizer report,
# leaked exception, timeout, out-of-memory) is saved under <fuzz build>/findings/<target>/ and
# makes the script exit 1 once every target has run; make it a regression test (tests/fuzz/
# fuzz_corpus_test.cpp says how).
# Build: the parsers and targets are compiled with clang (-fsanitize=fuzzer,address,undefined)
# into MIXLAB_FUZZ_BUILD_DIR (default build-fuzz/); the rest of mixlab is linked from the normal
# GCC build in MIXLAB_BUILD_DIR (default build/), whose area libraries are built first
# (tests/fuzz/CMakeLists.txt says why). MIXLAB_JOBS as in scripts/build.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
target="$1"
seconds="$2"
shift 2
corpus_root="$here/tests/fuzz/corpus"
all_targets="$(cd "$corpus_root" && ls -d -- */ | tr -d /)"
if [ "$target" = "all" ]; then
  targets="$all_targets"
elif [ -d "$corpus_root/$target" ]; then
  targets="$target"
else
  echo "scripts/fuzz.sh: unknown target '$target'; expected all or one of:" $all_targets >&2
  exit 2
fi
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "scripts/fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi

gcc_build="${MIXLAB_BUILD_DIR:-$here/build}"
fuzz_build="${MIXLAB_FUZZ_BUILD_DIR:-$here/build-fuzz}"
jobs="${MIXLAB_JOBS:-$(nproc)}"
start=$(date +%s)
areas="core mixer pattern analysis resolvent toeplitz data dist scan attention psm brl registry model train"
libs=""
for a in $areas; do libs="$libs mixlab_$a"; done
MIXLAB_BUILD_DIR="$gcc_build" MIXLAB_TARGETS="$libs" bash "$here/scripts/build.sh" >/dev/null

launcher=()
if command -v ccache >/dev/null 2>&1 && [ "${MIXLAB_CCACHE:-1}" = "1" ]; then
  export CCACHE_BASEDIR="$here" CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$here/tests/fuzz" -B "$fuzz_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMIXLAB_GCC_BUILD_DIR="$gcc_build" "${launcher[@]}" >/dev/null
build_targets=()
for t in $targets; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$fuzz_build" -j "$jobs" "${build_targets[@]}" | grep -v '^\[' || true
[ -x "$fuzz_build/fuzz_$(echo $targets | cut -d' ' -f1)" ] || { echo "scripts/fuzz.sh: the build failed" >&2; exit 1; }
echo "fuzz: built in $(( $(date +%s) - start )) s"

failed=""
for t in $targets; do
  work="$(mktemp -d)"
  cp "$corpus_root/$t"/* "$work/"
  findings="$fuzz_build/findings/$t"
  mkdir -p "$findings"
  log="$fuzz_build/fuzz_$t.log"
  # LibTorch is not instrumented: leak checks would report its one-time allocations. One thread:
  # a fuzzer measures the parser, not LibTorch's thread pool.
  status=0
  t0=$(date +%s)
  OMP_NUM_THREADS=1 MIXLAB_THREADS=1 ASAN_OPTIONS=detect_leaks=0:detect_container_overflow=0 \
    UBSAN_OPTIONS=print_stacktrace=1 "$fuzz_build/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
    -artifact_prefix="$findings/" -print_final_stats=1 "$@" "$work" >"$log" 2>&1 || status=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  if [ "$status" -eq 0 ]; then
    echo "fuzz: $t: ${runs:-?} executions in $(( $(date +%s) - t0 )) s, no finding"
  else
    echo "fuzz: $t: FINDING after ${runs:-?} executions (exit $status); input saved in $findings/; log $log:"
    grep -E "ERROR|FuzzFinding|what\(\)|SUMMARY|Test unit written|deadly|out-of-memory|timeout" "$log" | head -20
    failed="$failed $t"
  fi
  rm -rf "$work"
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed" >&2
  exit 1
fi
