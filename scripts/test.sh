#!/usr/bin/env bash
# The test command (README, .ci/run): installs what is missing, builds everything, runs every
# test with CTest; then, when MIXLAB_SANITIZE_TESTS=1 (CI sets it), rebuilds the unit tests of
# the kernel areas (the code with raw-pointer loops) with ASan+UBSan in build-asan/ and runs them
# again, and runs each libFuzzer target of tests/fuzz/ for a few seconds (scripts/fuzz.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
export MIXLAB_THREADS="${MIXLAB_THREADS:-2}"
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600

if [ "${MIXLAB_SANITIZE_TESTS:-0}" = "1" ]; then
  echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  areas="core pattern analysis resolvent toeplitz data scan attention psm brl"
  targets=""
  for a in $areas; do [ -d "tests/$a" ] && targets="$targets test_$a"; done
  MIXLAB_BUILD_DIR="$here/build-asan" MIXLAB_BUILD_TYPE=RelWithDebInfo MIXLAB_TARGETS="$targets" \
    bash scripts/build.sh -DMIXLAB_SANITIZE=ON -DMIXLAB_BUILD_BENCH=OFF
  # LibTorch itself is not instrumented; leak checks would report its one-time allocations.
  ASAN_OPTIONS=detect_leaks=0:detect_container_overflow=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 900 \
    -L "^($(echo $areas | tr ' ' '|'))\$"
  # 3 s of fuzzing per target (+ about 3 s each to start LibTorch under load): under a minute.
  echo "== fuzz targets, a bounded run (scripts/fuzz.sh: 10 targets x 3 s)"
  bash scripts/fuzz.sh all 3
fi
