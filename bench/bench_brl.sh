#!/usr/bin/env bash
# Runs every case of bench_brl in its own process (peak RSS is per process) and prints one
# markdown table: case, mixer, wall and CPU time, peak RSS. Usage: bash bench/bench_brl.sh [build dir] [filter]
set -euo pipefail
build=${1:-build}
filter=${2:-.}
bin="$build/bench/bench_brl"
out=$(mktemp -d)
echo "| case | mixer | wall time | CPU time | peak RSS (MB) | cache bytes |"
echo "|---|---|---:|---:|---:|---:|"
"$bin" --benchmark_list_tests --benchmark_filter="$filter" | while read -r name; do
  "$bin" --benchmark_filter="^${name}\$" --benchmark_format=json >"$out/run.json" 2>/dev/null
  python3 - "$out/run.json" <<'PY'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    cache = b.get("cache_bytes")
    print(f"| {b['name']} | {b.get('label','')} | {b['real_time']:.3g} {b['time_unit']} | {b['cpu_time']:.3g} {b['time_unit']} | "
          f"{b['peak_rss_MB']:.0f} | {'' if cache is None else int(cache)} |")
PY
done
rm -rf "$out"
