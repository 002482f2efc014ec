#!/usr/bin/env bash
# The main job (README's first command): installs what is missing, builds, and runs
# `mixlab compare` with its defaults (all Table 1 mixers on copy, recall, multihop).
# Extra arguments are passed to `mixlab compare`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
bash scripts/build.sh
./build/mixlab compare "$@"
