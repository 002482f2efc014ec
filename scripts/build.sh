#!/usr/bin/env bash
# Configures and builds mixlab into build/ (Release). Extra args go to the configure step.
# Usage: scripts/build.sh [-DOPTION=VALUE ...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MIXLAB_BUILD_DIR:-$here/build}"
jobs="${MIXLAB_JOBS:-$(nproc)}"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$jobs"
