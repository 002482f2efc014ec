#!/usr/bin/env bash
# Configures and builds mixlab into build/ (Release). Extra args go to the configure step.
# Usage: scripts/build.sh [-DOPTION=VALUE ...]
# Environment: MIXLAB_BUILD_DIR (default build/), MIXLAB_BUILD_TYPE (Release), MIXLAB_TARGETS (all),
# MIXLAB_JOBS (nproc), MIXLAB_CCACHE=0 to compile without ccache.
# With ccache installed (scripts/setup.sh installs it) every compile goes through it, keyed on
# paths relative to the checkout, so a fresh clone on the same machine (CI runs one) reuses the
# objects of an earlier build instead of compiling ~170 files again on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MIXLAB_BUILD_DIR:-$here/build}"
jobs="${MIXLAB_JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null 2>&1 && [ "${MIXLAB_CCACHE:-1}" = "1" ]; then
  export CCACHE_BASEDIR="$here"
  # The shared precompiled <torch/torch.h> is used through -include: ccache caches such compiles
  # only with these sloppiness flags (ccache manual, "Precompiled headers").
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
  # With -g (the ASan build: RelWithDebInfo, made -O1 -g1 by CMakeLists.txt) ccache hashes the
  # working directory into the key by default, so no other clone could hit those objects; the debug
  # info then names the first clone's build directory, which only changes where a stack trace points.
  export CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${MIXLAB_BUILD_TYPE:-Release}" "${launcher[@]}" "$@" >/dev/null
targets=()
for t in ${MIXLAB_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
