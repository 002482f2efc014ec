#!/usr/bin/env bash
# Runs every case of bench_brl in its own process (peak RSS is per process) and prints one
# markdown table: case, mixer, wall and CPU time (the median of 5 where repeated), peak RSS. With a plot prefix, it also draws the
# time and peak-RSS charts from the same runs (PREFIX_time.png, PREFIX_memory.png).
# Usage: bash bench/bench_brl.sh [build dir] [filter] [plot prefix]
set -euo pipefail
build=${1:-build}
filter=${2:-.}
plot=${3:-}
bin="$build/bench/bench_brl"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| case | mixer | wall time | CPU time | peak RSS (MB) | cache bytes |"
echo "|---|---|---:|---:|---:|---:|"
n=0
"$bin" --benchmark_list_tests --benchmark_filter="$filter" | while read -r name; do
  n=$((n + 1))
  run="$out/$(printf 'case%03d' "$n").json"
  "$bin" --benchmark_filter="^${name}\$" --benchmark_format=json >"$run" 2>/dev/null
  python3 - "$run" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
cv = {b["run_name"]: b["cpu_time"] for b in runs if b.get("aggregate_name") == "cv"}
for b in runs:
    # Repeated cases (fwd+bwd, inference) report aggregates: print the median with its spread.
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    cache = b.get("cache_bytes")
    spread = f" (cv {100 * cv[b['run_name']]:.0f} %)" if b["run_name"] in cv else ""
    print(f"| {b['name']} | {b.get('label','')} | {b['real_time']:.3g} {b['time_unit']} | {b['cpu_time']:.3g} {b['time_unit']}{spread} | "
          f"{b['peak_rss_MB']:.0f} | {'' if cache is None else int(cache)} |")
PY
done
if [ -n "$plot" ]; then "$bin" --plot="$plot" --from="$out"; fi
