#!/usr/bin/env bash
# T-PSM on MQAR at T = 256 with c = 64 (four chunks; issue 12's target: >= 95 % with 8 pairs), in
# two stages (docs/log/results-2026-11.md "Four chunks: start from the two-chunk model"):
#   1. S = 128 from scratch: two chunks, every query of chunk 1 answers through Agg(e, x_0);
#   2. S = 256 from stage 1's weights (`train --init-from`), a fresh optimiser and schedule.
# Trained from scratch at 256, or with the length curriculum, the same model stays on the
# plateau (12 %) for 8000+ steps; stage 2 starts where stage 1's state already reads pairs.
# Outputs: runs/psm_mqar/s128/ and runs/psm_mqar/t256/ (metrics.jsonl, result.json,
# checkpoint.pt). Assumes a built tree (scripts/build.sh). MIXLAB_PSM_STEPS="6000 6000" sets the
# two stages' steps, MIXLAB_THREADS=N the threads; extra arguments go to both `mixlab train` calls.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out=${MIXLAB_PSM_MQAR_OUT:-runs/psm_mqar}
read -r steps1 steps2 <<<"${MIXLAB_PSM_STEPS:-6000 6000}"
spec=tpsm:c=64:compress=linear:identity=empty:inf=attention:pos=rope:init=0.08:agg=attention:compress_init=sum
common=(--task recall --mixer "$spec" --set vocab=32 --set pairs=8 --set d_model=64 --set layers=2
  --set heads=4 --set mlp_ratio=4 --set batch=32 --set lr=0.001 --set warmup=300 --set curriculum=false
  --set eval_every=500 --set eval_batches=4 --set eval_batch=64 --set log_every=100)
./build/mixlab train "${common[@]}" --set length=128 --steps "$steps1" --out "$out/s128" "$@"
./build/mixlab train "${common[@]}" --set length=256 --steps "$steps2" --init-from "$out/s128/checkpoint.pt" \
  --out "$out/t256" "$@"
