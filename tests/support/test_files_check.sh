#!/usr/bin/env bash
# CTest support.test_files: every test process keeps its files in a private folder under
# TempDir() and removes it when its tests passed (tests/support/test_main.cpp).
#   test_files_check.sh PROBE [AREA_EXECUTABLE FILTER]
# PROBE is test_files_probe; AREA_EXECUTABLE FILTER a real suite that writes files (its run shows
# that the area tests' own helpers follow TEST_TMPDIR), left out when that area is not built.
set -euo pipefail
probe="$1" area="${2:-}" filter="${3:-}"
base="$(mktemp -d)"
log="$(mktemp)"
trap 'rm -rf "$base" "$log"' EXIT

fail() {
  echo "test_files_check: $*" >&2
  echo "--- the last run's output:" >&2
  cat "$log" >&2
  echo "--- left under $base:" >&2
  find "$base" >&2
  exit 1
}
# The folders a run left in $base.
left() { find "$base" -mindepth 1 -maxdepth 1 | sort; }
reset() { rm -rf "${base:?}"/* "${base:?}"/.[!.]* 2>/dev/null || true; }

# 1. Passing: nothing is left.
TEST_TMPDIR="$base" "$probe" >"$log" 2>&1 || fail "the probe failed without being asked to"
[ -z "$(left)" ] || fail "a passing process left files"

# 2. Failing: the folder is kept, with the test's file, and its path is printed.
reset
if MIXLAB_PROBE_FAIL=1 TEST_TMPDIR="$base" "$probe" >"$log" 2>&1; then fail "the probe passed when asked to fail"; fi
kept="$(left)"
[ "$(echo "$kept" | wc -l)" = 1 ] && [[ "$(basename "$kept")" == mixlab-test-* ]] || fail "expected one mixlab-test-* folder, got: $kept"
[ -f "$kept/probe/written.txt" ] || fail "the kept folder lacks the test's file (TempDir())"
[ -f "$kept/probe_std/written.txt" ] || fail "the kept folder lacks the test's file (temp_directory_path())"
grep -qF "kept in $kept" "$log" || fail "the kept folder's path was not printed"

# 3. MIXLAB_KEEP_TEST_FILES=1 keeps a passing process's files; 0 does not.
reset
MIXLAB_KEEP_TEST_FILES=1 TEST_TMPDIR="$base" "$probe" >"$log" 2>&1 || fail "the probe failed (keep run)"
[ -f "$(left)/probe/written.txt" ] || fail "MIXLAB_KEEP_TEST_FILES=1 did not keep the files"
reset
MIXLAB_KEEP_TEST_FILES=0 TEST_TMPDIR="$base" "$probe" >"$log" 2>&1 || fail "the probe failed (keep=0 run)"
[ -z "$(left)" ] || fail "MIXLAB_KEEP_TEST_FILES=0 kept files"

# 4. A real area's tests: with the keep switch their files are in the private folder (so the
# suite does write files, and there); without it nothing is left.
if [ -z "$area" ]; then
  echo "test_files_check: the probe's checks passed (no area suite given)"
  exit 0
fi
reset
MIXLAB_KEEP_TEST_FILES=1 TEST_TMPDIR="$base" "$area" --gtest_filter="$filter" >"$log" 2>&1 || fail "$filter failed"
kept="$(left)"
[[ "$(basename "$kept")" == mixlab-test-* ]] && [ -n "$(find "$kept" -type f)" ] ||
  fail "$filter wrote no file into its private folder"
reset
TEST_TMPDIR="$base" "$area" --gtest_filter="$filter" >"$log" 2>&1 || fail "$filter failed"
[ -z "$(left)" ] || fail "$filter left files"
echo "test_files_check: passing processes leave nothing; a failing one keeps its files in one folder"
