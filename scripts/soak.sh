#!/usr/bin/env bash
# scripts/soak.sh — the kill-and-resume soak (issue 37 item 5): SIGKILL training at random
# moments, resume it each time, and require the final weights of an uninterrupted run, bit for bit.
#
# Usage: scripts/soak.sh MINUTES [KILLS_MIN]     e.g. scripts/soak.sh 10 50; CTest: soak.sh 0 10
#
# A tiny model (copy task, d_model 16) trains SOAK_STEPS steps with a checkpoint and a metrics
# line at every step and an evaluation every 5 steps. First one uninterrupted reference run; then
# rounds: a round starts the run in a fresh directory and kills it, starts it again with --resume
# <dir>/checkpoint.pt while a checkpoint exists, and so on until a run exits 0. Each start draws
# how it dies:
#   - at a random time: sleep a random time in [0, half the reference's wall time), then SIGKILL
#     (only the PID this script started);
#   - at a random file operation (every other start, when the kill shim is there): the run is
#     started with LD_PRELOAD=tests/cli/kill_shim.cpp's library and MIXLAB_KILL_AT_FILE_OP=N, N
#     drawn in [1, 3 x steps] (a run makes about 6.5 per step), and SIGKILLs itself in the middle of its N-th write, before its
#     N-th fsync or after its N-th rename. A timed kill rarely lands inside a write (they are a
#     small part of a run); this one always does.
# After every kill:
#   - the run directory's lock is free (the kernel drops the flock of a killed holder): flock -n;
#   - the checkpoint is absent or intact (scripts/soak_checkpoint.py check: header, size, FNV-1a
#     checksum, zip CRCs, entries) and its step never goes back.
# After every round: the final checkpoint equals the reference's entry by entry (weights, Adam's
# moments and step counts, the RNG state, step, config: soak_checkpoint.py compare), and
# metrics.jsonl equals the reference's line by line except wall-clock fields (each step once, the
# same losses). Rounds go on until MINUTES have passed and KILLS_MIN kills were made; the round
# under way then finishes without a kill. If three kills in a row find no progress (a loaded
# machine starting slowly), the longest delay doubles.
#
# Environment: MIXLAB_CLI (the mixlab binary; default build/mixlab), SOAK_KILL_SHIM (the shim's
# library; default libmixlab_kill_shim.so next to the binary; without it every kill is timed),
# SOAK_SEED (the seed of the
# delays; default from the clock, printed), SOAK_STEPS (default 200), SOAK_DIR (work folder;
# default a new /tmp/mixlab-soak.*, removed after a pass, kept after a failure).
# Prints "soak: K kills, bit-exact (...)" and exits 0, or names what failed and exits 1.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]] || ! [[ "${2:-50}" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/soak.sh MINUTES [KILLS_MIN]  (MINUTES a number >= 0, KILLS_MIN an integer; got '$*')" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
minutes="$1"
kills_min="${2:-50}"
cli="${MIXLAB_CLI:-$here/build/mixlab}"
steps="${SOAK_STEPS:-200}"
seed="${SOAK_SEED:-$(($(date +%s) % 32768))}"
checker=(python3 "$here/scripts/soak_checkpoint.py")
shim="${SOAK_KILL_SHIM:-$(dirname "$cli")/libmixlab_kill_shim.so}"
[ -f "$shim" ] || { echo "soak: no kill shim at '$shim' (SOAK_KILL_SHIM): every kill is timed" >&2; shim=""; }
[ -x "$cli" ] || { echo "soak: MIXLAB_CLI '$cli' is not an executable (build mixlab_cli first)" >&2; exit 2; }
if ! [[ "$steps" =~ ^[0-9]+$ ]] || [ "$steps" -lt 10 ]; then
  echo "soak: SOAK_STEPS must be an integer >= 10, got '$steps'" >&2
  exit 2
fi
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "soak: SOAK_SEED must be a non-negative integer, got '$seed'" >&2; exit 2; }
work="${SOAK_DIR:-$(mktemp -d /tmp/mixlab-soak.XXXXXX)}"
mkdir -p "$work"
RANDOM=$seed  # bash's generator: the same seed draws the same delays

export MIXLAB_THREADS=1 OMP_NUM_THREADS=1  # one thread: the same arithmetic in every process
train=(train --threads 1 --task copy --mixer attention --set vocab=12 --set length=8 --set d_model=16
  --set heads=2 --set mlp_ratio=2 --set batch=4 --set eval_batches=1 --set warmup=2 --set checkpoint_every=1
  --set log_every=1 --set eval_every=5 --steps "$steps" --quiet)

child=""
cleanup() { if [ -n "$child" ]; then kill -KILL "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi; }
trap cleanup EXIT
fail() {
  echo "soak: FAILED: $*" >&2
  echo "soak: seed $seed; the run directories are kept in $work" >&2
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# A uniform draw in [0, n) from two 15-bit draws of $RANDOM.
draw() { echo $(((RANDOM * 32768 + RANDOM) % $1)); }
# metrics.jsonl without the wall-clock fields, one JSON object per line, keys sorted.
metrics_without_clock() {
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    for k in ("seconds", "tokens_per_s"):
        j.pop(k, None)
    print(json.dumps(j, sort_keys=True))' "$1"
}

echo "soak: seed $seed (SOAK_SEED=$seed repeats the delays), $steps steps a round, until $minutes min and" \
  ">= $kills_min kills; $cli; in $work"

# The reference, uninterrupted; half its wall time bounds the random delays (a bound this low
# makes most starts end in a kill; the doubling below keeps every round moving).
t0=$(now_ms)
"$cli" "${train[@]}" --out "$work/reference" >"$work/reference.log" 2>&1 || fail "the reference run failed: $(tail -3 "$work/reference.log")"
ref_ms=$(($(now_ms) - t0))
ref="$work/reference/checkpoint.pt"
"${checker[@]}" check "$ref" >/dev/null || fail "the reference checkpoint does not pass the check"
metrics_without_clock "$work/reference/metrics.jsonl" >"$work/reference.metrics"
# The checker must be able to fail: one flipped byte of the reference is refused.
cp "$ref" "$work/flipped.pt"
printf '\x55' | dd of="$work/flipped.pt" bs=1 seek=$(($(stat -c %s "$ref") / 2)) conv=notrunc status=none
if "${checker[@]}" check "$work/flipped.pt" 2>/dev/null; then fail "the checker accepted a checkpoint with a flipped byte"; fi
echo "soak: reference: $steps steps in $((ref_ms / 1000)).$(printf %03d $((ref_ms % 1000))) s"

start=$(now_ms)
deadline=$((start + $(python3 -c "print(int(float('$minutes') * 60000))")))
kills=0 timed_kills=0 op_kills=0 mid_write=0 rounds=0 compared_unequal=0
declare -A torn_targets=() landed=()
while :; do
  rounds=$((rounds + 1))
  run="$work/round$rounds"
  mkdir -p "$run"
  max_delay=$((ref_ms / 2)) last_step=-1 stalls=0 round_kills=0 attempt=0
  while :; do
    resume=()
    [ -f "$run/checkpoint.pt" ] && resume=(--resume "$run/checkpoint.pt")
    finishing=0
    if [ "$(now_ms)" -ge "$deadline" ] && [ "$kills" -ge "$kills_min" ]; then finishing=1; fi
    attempt=$((attempt + 1))
    log="$run/attempt$attempt.log"
    mode="timed"
    [ "$finishing" = 0 ] && [ -n "$shim" ] && [ $((RANDOM % 2)) = 1 ] && mode=file_op
    if [ "$mode" = file_op ]; then
      op=$(($(draw $((3 * steps))) + 1))
      what="at file operation $op"
      LD_PRELOAD="$shim" MIXLAB_KILL_AT_FILE_OP=$op "$cli" "${train[@]}" --out "$run" "${resume[@]}" >"$log" 2>&1 &
      child=$!
    else
      "$cli" "${train[@]}" --out "$run" "${resume[@]}" >"$log" 2>&1 &
      child=$!
      if [ "$finishing" = 0 ]; then
        delay=$(draw "$max_delay")
        what="after $delay ms"
        sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
        # Our child, not yet waited for: its PID cannot have been reused, even if it has exited.
        kill -KILL "$child" 2>/dev/null || true
      fi
    fi
    rc=0
    { wait "$child" || rc=$?; } 2>/dev/null  # without bash's "Killed" line
    child=""
    [ "$rc" = 0 ] && break
    [ "$rc" = 137 ] || fail "round $rounds: the run exited with $rc, not by the kill: $(tail -3 "$log")"
    kills=$((kills + 1)) round_kills=$((round_kills + 1))
    if [ "$mode" = file_op ]; then
      op_kills=$((op_kills + 1))
      # Where it landed, from the shim's note: "<op> <file>" with the temporary suffix kept short.
      note=$(grep '^kill_shim: ' "$log" | tail -1)
      [ -n "$note" ] || fail "round $rounds: the kill $what left no note from the shim in $log"
      where=$(sed -E 's/^kill_shim: SIGKILL in ([a-z]+) of .*\/([^/]+)$/\1 \2/; s/\.tmp\.[0-9]+\.[0-9]+$/.tmp/;
        s/ round[0-9]+$/ (the run directory)/' <<<"$note")
      landed[$where]=$((${landed[$where]:-0} + 1))
    else
      timed_kills=$((timed_kills + 1))
    fi
    # The killed holder's lock is free.
    if [ -f "$run/.lock" ] && ! flock -n "$run/.lock" true; then
      fail "round $rounds: $run/.lock is still locked after its holder (pid $(cat "$run/.lock")) was killed"
    fi
    # A temporary file left behind: the kill landed inside an atomic write (between the open of
    # <name>.tmp.<pid>.<n> and its rename). Count it and clear it.
    shopt -s nullglob
    torn=("$run"/*.tmp.* "$run"/.*.tmp.*)
    shopt -u nullglob
    if [ ${#torn[@]} -gt 0 ]; then
      mid_write=$((mid_write + 1))
      for t in "${torn[@]}"; do
        name=$(basename "$t")
        name=${name%%.tmp.*}
        torn_targets[$name]=$((${torn_targets[$name]:-0} + 1))
        rm -f "$t"
      done
    fi
    if [ -f "$run/checkpoint.pt" ]; then
      step=$("${checker[@]}" check "$run/checkpoint.pt" 2>&1) ||
        fail "round $rounds, kill $kills ($what): the checkpoint is not intact: $step"
      step=${step#step }
      [ "$step" -ge "$last_step" ] || fail "round $rounds: the checkpoint went back from step $last_step to $step"
      if [ "$compared_unequal" = 0 ] && [ "$step" -lt "$steps" ]; then
        # The comparison must be able to fail: an earlier step's checkpoint differs from the reference.
        if "${checker[@]}" compare "$ref" "$run/checkpoint.pt" >/dev/null 2>&1; then
          fail "the comparison found the step-$step checkpoint equal to the reference's step $steps"
        fi
        compared_unequal=1
      fi
      if [ "$step" -gt "$last_step" ]; then stalls=0; else stalls=$((stalls + 1)); fi
      last_step=$step
    else
      stalls=$((stalls + 1))
    fi
    if [ "$stalls" -ge 3 ]; then
      max_delay=$((max_delay * 2)) stalls=0
    fi
  done
  out=$("${checker[@]}" compare "$ref" "$run/checkpoint.pt" 2>&1) ||
    fail "round $rounds ($round_kills kills): the final checkpoint is not the reference's: $out"
  metrics_without_clock "$run/metrics.jsonl" >"$run/metrics.compared"
  if ! diff -q "$work/reference.metrics" "$run/metrics.compared" >/dev/null; then
    fail "round $rounds: metrics.jsonl differs from the reference's (beyond seconds and tokens_per_s): $(diff "$work/reference.metrics" "$run/metrics.compared" | head -4)"
  fi
  echo "soak: round $rounds: $round_kills kills, bit-exact (total $kills kills)"
  if [ "$(now_ms)" -ge "$deadline" ] && [ "$kills" -ge "$kills_min" ]; then break; fi
done
wall_ms=$(($(now_ms) - start))
written=""
for name in "${!torn_targets[@]}"; do written+=" $name x${torn_targets[$name]}"; done
echo "soak: where the file-operation kills landed:"
for where in "${!landed[@]}"; do echo "  ${landed[$where]} x $where"; done | sort -k3

[ "$compared_unequal" = 1 ] || fail "no kill left an intermediate checkpoint to show that the comparison can fail"
echo "soak: $kills kills, bit-exact ($timed_kills at a random time, $op_kills at a random file operation;" \
  "$mid_write left a temporary file:${written:- none}; $rounds rounds of $steps steps; $((wall_ms / 1000)) s;" \
  "seed $seed)"
rm -rf "$work"
