#!/usr/bin/env bash
# Seed 004's side-by-side on this CPU (issue 12; docs/log/results-2026-11.md "Transformer-PSM beside the
# baselines"): T-PSM, attention, a sliding-window transformer and mamba, trained with identical
# settings (`mixlab compare --preset psm`) on
#   s5      the state-tracking task, trained on lengths 4..18, error swept to 180 (Fig. 3);
#   recall  MQAR with 8 pairs and uniform queries, trained up to S = 256, swept in distribution
#           (Fig. 4).
# Each task has its own T-PSM chunk and window, as in the paper (c = 1 on S5; c = 64 and a window
# of 64 on MQAR). Outputs: runs/psm/<task>/ (compare.csv/json, by_length.csv, by_length_<task>.png).
# Assumes a built tree (scripts/build.sh). Extra arguments go to both `mixlab compare` calls.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out=${MIXLAB_PSM_OUT:-runs/psm}
./build/mixlab compare --preset psm --tasks s5 --mixers tpsm:c=1,attention,local:8,mamba --out "$out/s5" "$@"
./build/mixlab compare --preset psm --tasks recall --mixers tpsm:c=64:compress=linear,attention,local:64,mamba \
  --out "$out/recall" "$@"
