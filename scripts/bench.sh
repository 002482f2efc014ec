#!/usr/bin/env bash
# Runs mixlab's benchmark suite (issue 17 item 6): every bench binary, each kernel beside the
# baseline it is compared with in the same binary and run, on an idle machine.
#
#   bash scripts/bench.sh [--quick] [--filter RE] [--out DIR] [--force] [--docs] [--takes N]
#
#   --quick      small sizes and one repetition per case (177 s on the 2-core machine, 2026-11-26);
#                without it every case runs 3 repetitions of at least 0.2 s each (medians; 1416 s)
#   --filter RE  only binaries whose name matches RE (e.g. 'resolvent|scan')
#   --out DIR    where results go (default runs/bench-<UTC time>)
#   --force      run even when the 1-minute load average is above 0.5 (the load is recorded)
#   --docs       then write the tables into docs/BENCHMARKS.md (scripts/bench_docs.py: the block
#                between its two marker lines); refused with --filter, --force or a failed binary,
#                so the file only ever holds a whole suite run on an idle machine
#   --takes N    run the whole suite N times, one take after the other, each into DIR/take-<k>/;
#                DIR then holds per case its median take (the faster middle one for an even N)
#                with the range (time_min, time_max), and the baselines per row by their median
#                take's ratio with its range and a per-kernel summary (scripts/bench_takes.py).
#                On these VMs one take can differ from the next by 30-100 %, which one run's
#                repetitions do not show.
#
# Writes DIR/machine.json (CPU model, cores, BLAS, LibTorch version, commit, load before and
# after), DIR/<binary>.json (Google Benchmark JSON, or the binary's own table for
# bench_psm_decode), DIR/baselines.{md,json} (bench/baselines/run.py: mixlab against plain
# PyTorch through the Python module; filter name `baselines`), DIR/threads.{md,json}
# (bench/thread_scaling.py: every fast row of bench_kernels and the LM training step at 1 and at 2
# threads; filter name `threads`) and DIR/tables.md (one markdown table per binary: time, CPU time
# and the counters each case reports; then baselines.md and threads.md).
# docs/BENCHMARKS.md quotes these tables with their commands.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=0
filter=.
out=""
force=0
docs=0
takes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --filter) filter="${2:?--filter needs a regular expression}"; shift ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --force) force=1 ;;
    --docs) docs=1 ;;
    --takes)
      takes="${2:-}"
      if ! [[ "$takes" =~ ^[1-9][0-9]?$ ]]; then
        echo "bench.sh: --takes needs a whole number of takes from 1 to 99, got '$takes'" >&2
        exit 2
      fi
      shift ;;
    *) echo "bench.sh: unknown argument '$1' (expected --quick, --filter RE, --out DIR, --force, --docs, --takes N)" >&2; exit 2 ;;
  esac
  shift
done
out="${out:-$here/runs/bench-$(date -u +%Y%m%dT%H%M%SZ)}"
if [ "$docs" = 1 ] && { [ "$filter" != . ] || [ "$force" = 1 ]; }; then
  echo "bench.sh: --docs writes docs/BENCHMARKS.md from a whole suite run on an idle machine: it cannot be" \
    "combined with --filter or --force" >&2
  exit 2
fi

# A forced BLAS kernel set (this project's Zen 5 VM exports OPENBLAS_CORETYPE=Haswell) changes every
# row that leans on sgemm by up to 2x; docs/BENCHMARKS.md's generated tables since 2026-11-30 ran on
# OpenBLAS's own choice. The machine line records the kernels either way; say it before an hour's run.
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  echo "bench.sh: note: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE forces OpenBLAS's kernels; docs/BENCHMARKS.md's tables" \
    "ran on OpenBLAS's own choice (env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bash scripts/bench.sh ...)" >&2
fi
load_now() { cut -d' ' -f1 /proc/loadavg; }
load_before=$(load_now)
if awk -v l="$load_before" 'BEGIN { exit !(l > 0.5) }'; then
  if [ "$force" = 1 ]; then
    echo "bench.sh: warning: 1-minute load average is $load_before (> 0.5); timings will be noisy" >&2
  else
    echo "bench.sh: 1-minute load average is $load_before (> 0.5): the machine is not idle, refusing to" \
      "benchmark (wait, or pass --force to run anyway and record the load)" >&2
    exit 1
  fi
fi

build="${MIXLAB_BUILD_DIR:-$here/build}"
MIXLAB_BUILD_DIR="$build" MIXLAB_TARGETS="mixlab bench_resolvent bench_scan bench_selective_scan bench_toeplitz bench_attention bench_decode bench_psm_decode bench_brl bench_data bench_kernels" \
  bash "$here/scripts/build.sh" -DMIXLAB_BUILD_BENCH=ON >/dev/null
# The build just loaded the machine: let the load settle before the first timing.
if [ "$force" = 0 ]; then
  for _ in $(seq 60); do
    awk -v l="$(load_now)" 'BEGIN { exit !(l > 0.5) }' || break
    sleep 5
  done
fi
mkdir -p "$out"

# Per binary: the cases and repetitions of a full and of a quick run. Quick keeps one size
# where a kernel meets its baseline; full runs everything with 3 repetitions (medians).
declare -A quick_filter=(
  [bench_resolvent]='BM_(Op|Ref)Forward(Backward)?(Rows)?/(dense|causal|pow2|pow2\+cache)/1024/|BM_Decode/pow2\+cache/8192|BM_MemoryCopy'
  [bench_scan]='BM_Kernel/./(0/1024/./64|1/1024/./0)/|BM_Decode/|BM_SoftmaxAttention/1024/'
  [bench_selective_scan]='BM_Scan/(fused|order1)/.*/1024$|BM_Scan/loop/fwd/1024$|BM_Scan/loop/fwd\+bwd/64$'
  [bench_toeplitz]='/(1024|4096)(/|$)'
  [bench_attention]='BM_Layer/1024/'
  [bench_brl]='BM_(FwdBwd|Inference)/./1024/|BM_DecodeAt/./1024/'
  [bench_data]='.'
)
# Full runs skip what would take hours: the plain-LibTorch selective scan's backward through a
# T-step autograd loop (133 s per call at T = 256; its T = 64 case stays as the baseline).
declare -A full_filter=(
  [bench_selective_scan]='BM_Scan/(fused|order1)/|BM_Scan/loop/fwd/|BM_Scan/loop/fwd\+bwd/64$'
)
declare -A quick_args=(
  [bench_decode]='--max_context=4096 --paths=fast'
  [bench_psm_decode]='--max 4096 --window 64'
)
declare -A full_args=(
  [bench_decode]=''
  [bench_psm_decode]=''
)

export MIXLAB_THREADS="${MIXLAB_THREADS:-2}"
run_bin() {  # runs one binary; its output goes to $2/<bin>.json (or .md)
  local bin=$1 dest=$2 exe="$build/bench/$1" args
  case "$bin" in
    bench_psm_decode)
      # Not a Google Benchmark binary: it prints its own markdown table.
      args=${full_args[$bin]}
      [ "$quick" = 1 ] && args=${quick_args[$bin]}
      # shellcheck disable=SC2086
      "$exe" $args >"$dest/$bin.md" ;;
    bench_decode)
      args=${full_args[$bin]}
      [ "$quick" = 1 ] && args=${quick_args[$bin]}
      # shellcheck disable=SC2086
      "$exe" $args --benchmark_out="$dest/$bin.json" --benchmark_out_format=json >/dev/null ;;
    *)
      if [ "$quick" = 1 ]; then
        "$exe" --benchmark_filter="${quick_filter[$bin]}" --benchmark_out="$dest/$bin.json" \
          --benchmark_out_format=json >/dev/null
      else
        "$exe" --benchmark_filter="${full_filter[$bin]:-.}" --benchmark_repetitions=3 \
          --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
          --benchmark_out="$dest/$bin.json" --benchmark_out_format=json >/dev/null
      fi ;;
  esac
}
failed=()
start=$(date +%s)
take_dirs=()
for take in $(seq "$takes"); do
  dest="$out"
  if [ "$takes" -gt 1 ]; then
    dest="$out/take-$take"
    echo "== take $take of $takes" >&2
  fi
  mkdir -p "$dest"
  take_dirs+=("$dest")
  for bin in bench_resolvent bench_scan bench_selective_scan bench_toeplitz bench_attention bench_brl bench_data bench_decode bench_psm_decode; do
    [[ "$bin" =~ $filter ]] || continue
    echo "== $bin" >&2
    t0=$(date +%s)
    # One failing binary (e.g. bench_data without the Brown corpus) does not stop the others.
    if ! run_bin "$bin" "$dest"; then
      echo "bench.sh: $bin failed; its results are missing from tables.md" >&2
      failed+=("$bin")
      rm -f "$dest/$bin.json" "$dest/$bin.md"
    fi
    echo "   $(( $(date +%s) - t0 )) s" >&2
  done
  # mixlab against the plain-PyTorch code a user would write instead (bench/baselines/run.py),
  # through the Python module, when the build has it.
  if [[ "baselines" =~ $filter ]]; then
    echo "== baselines (bench/baselines/run.py)" >&2
    t0=$(date +%s)
    baseline_args=(--json "$dest/baselines.json")
    [ "$quick" = 1 ] && baseline_args+=(--quick)
    if ! MIXLAB_BUILD_DIR="$build" MIXLAB_TARGETS="mixlab_python" bash "$here/scripts/build.sh" >/dev/null 2>&1; then
      echo "bench.sh: the Python module did not build (python3-dev, pybind11-dev?); baselines skipped" >&2
      failed+=(baselines)
    elif ! PYTHONPATH="$build/python" /usr/bin/python3 "$here/bench/baselines/run.py" "${baseline_args[@]}" \
        >"$dest/baselines.md"; then
      echo "bench.sh: bench/baselines/run.py failed; its results are missing from tables.md" >&2
      failed+=(baselines)
      rm -f "$dest/baselines.json" "$dest/baselines.md"
    fi
    echo "   $(( $(date +%s) - t0 )) s" >&2
  fi
  # How one run scales from 1 to 2 threads (issue 38 item 4): about 45 s a take. It sets each
  # run's thread count itself, whatever MIXLAB_THREADS says.
  if [[ "threads" =~ $filter ]]; then
    echo "== threads (bench/thread_scaling.py)" >&2
    t0=$(date +%s)
    thread_args=(--build "$build" --json "$dest/threads.json")
    [ "$quick" = 1 ] && thread_args+=(--min-time 0.1 --steps 15)
    if ! /usr/bin/python3 "$here/bench/thread_scaling.py" "${thread_args[@]}" >"$dest/threads.md"; then
      echo "bench.sh: bench/thread_scaling.py failed; its results are missing from tables.md" >&2
      failed+=(threads)
      rm -f "$dest/threads.json" "$dest/threads.md"
    fi
    echo "   $(( $(date +%s) - t0 )) s" >&2
  fi
done
# Several takes: per case its median take and the range, in $out (bench_takes.py).
if [ "$takes" -gt 1 ] && ! /usr/bin/python3 "$here/scripts/bench_takes.py" "$out" "${take_dirs[@]}"; then
  failed+=(takes)
fi
seconds=$(( $(date +%s) - start ))

blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
torch_version=$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo unknown)
# The instruction set the native kernels ran, as mixlab picks it (MIXLAB_CPU_ISA included): the
# same CPU model name has come with and without AVX-512 on these VMs.
version_line=$("$build/mixlab" --version 2>/dev/null || true)
isa=$(sed -n 's/.*(native kernels: \([a-z0-9]*\)).*/\1/p' <<<"$version_line")
# ...and the BLAS kernels LibTorch's matmuls ran (OpenBLAS picks them per CPU unless
# OPENBLAS_CORETYPE forces others; mixlab/core/blas_info.h).
blas_kernels=$(sed -n 's/.*), BLAS: \(.*\)$/\1/p' <<<"$version_line")
/usr/bin/python3 - "$out" "$load_before" "$(load_now)" "$seconds" "$quick" "$blas" "$torch_version" \
  "$(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)" "${isa:-unknown}" "${blas_kernels:-unknown}" "$takes" <<'PY'
import glob, json, os, platform, re, sys
out, load_before, load_after, seconds, quick, blas, torch_version, commit, isa, blas_kernels, takes = sys.argv[1:12]
cpu = "unknown"
# The threads each binary ran with, as it recorded them (bench/bench_setup.h): the Google Benchmark
# binaries in their JSON context, bench_psm_decode on its table's first line. Read back, not
# written here by hand: a hand-written table said bench_resolvent ran at 1 thread when it ran at 2.
threads = {}
for path in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
    context = json.load(open(path)).get("context", {})
    threads[os.path.basename(path)[:-5]] = int(context["threads"]) if "threads" in context else "unknown"
if os.path.exists(os.path.join(out, "bench_psm_decode.md")):
    first = re.search(r"^Threads (\d+)", open(os.path.join(out, "bench_psm_decode.md")).read(), re.M)
    threads["bench_psm_decode"] = int(first.group(1)) if first else "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
machine = {
    "cpu": cpu, "isa": isa, "cores": os.cpu_count(), "blas": blas, "blas_kernels": blas_kernels,
    "libtorch": torch_version,
    "kernel": platform.release(), "commit": commit, "quick": quick == "1",
    "threads": threads, "takes": int(takes),
    "load_before": float(load_before), "load_after": float(load_after), "seconds": int(seconds),
}
with open(os.path.join(out, "machine.json"), "w") as f:
    json.dump(machine, f, indent=2)
skip = {"iterations", "real_time", "cpu_time", "time_unit", "name", "run_name", "run_type", "repetitions",
        "repetition_index", "threads", "family_index", "per_family_instance_index", "aggregate_name",
        "aggregate_unit", "label"}
lines = [f"# mixlab benchmarks ({'quick' if machine['quick'] else 'full'} run)", "",
         f"{cpu} (kernels: {isa}), {machine['cores']} cores, BLAS {blas} ({blas_kernels}), LibTorch {torch_version}, "
         f"commit {commit[:10]}, load {load_before} before / {load_after} after, {seconds} s"
         + (f", {takes} whole-suite takes: each figure is the case's median take, time_min and time_max the range"
            if int(takes) > 1 else "") + ".", ""]
if threads:  # none when --filter kept only the baselines or the thread table
    lines += ["Threads: " + "; ".join(
        ", ".join(b for b in threads if threads[b] == n) + f": {n}"
        for n in sorted(set(threads.values()), key=str)) + ".", ""]
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)[:-5]
    if name in ("machine", "baselines", "threads"):  # baselines.md, threads.md: the tables of their JSON
        continue
    runs = [b for b in json.load(open(path)).get("benchmarks", [])
            if b.get("run_type") != "aggregate" or b.get("aggregate_name") == "median"]
    counters = sorted({k for b in runs for k in b if k not in skip})
    lines += [f"## {name}", "", "| case | label | time | CPU time | " + " | ".join(counters) + " |",
              "|---|---|---:|---:|" + "---:|" * len(counters)]
    for b in runs:
        unit = b.get("time_unit", "")
        # time_min / time_max (several takes) are times: in the case's unit, like its time.
        cells = [f"{b[k]:.4g}" + (f" {unit}" if k in ("time_min", "time_max") else "")
                 if isinstance(b.get(k), (int, float)) else "" for k in counters]
        lines.append(f"| {b['name']} | {b.get('label', '')} | {b['real_time']:.4g} {unit} | "
                     f"{b['cpu_time']:.4g} {unit} | " + " | ".join(cells) + " |")
    lines.append("")
for path in sorted(glob.glob(os.path.join(out, "*.md"))):
    if os.path.basename(path) == "tables.md":
        continue
    lines += [f"## {os.path.basename(path)[:-3]}", "", open(path).read().strip(), ""]
tmp = os.path.join(out, "tables.md.tmp")
with open(tmp, "w") as f:  # whole or absent: written, flushed to disk, then renamed
    f.write("\n".join(lines))
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, os.path.join(out, "tables.md"))
print(os.path.join(out, "tables.md"))
PY
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench.sh: failed: ${failed[*]}" >&2
  [ "$docs" = 1 ] && echo "bench.sh: docs/BENCHMARKS.md left as it was (a binary failed)" >&2
  exit 1
fi
if [ "$docs" = 1 ]; then
  /usr/bin/python3 "$here/scripts/bench_docs.py" "$out" "$here/docs/BENCHMARKS.md"
fi
