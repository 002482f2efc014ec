#!/usr/bin/env bash
# The main job (README's first command): installs what is missing, builds, and runs
# `mixlab compare` with its defaults (all Table 1 mixers on copy and recall; multihop is in
# `--preset table1`).
# Extra arguments are passed to `mixlab compare`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
bash scripts/build.sh
./build/mixlab compare "$@"
