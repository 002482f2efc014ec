// mixlab/train/compare_report.h — what `mixlab compare` prints and writes (see compare.h for the
// columns): the text table, compare.csv, compare.json and compare.png (accuracy per task, drawn
// by mixlab/analysis/chart.h).
#pragma once

#include <string>

#include "mixlab/train/compare.h"

namespace mixlab {

/// The table printed by `mixlab compare`. Unbounded and unmeasured cells read "∞" and "—", the
/// same as in `mixlab analyze` (mixlab/analysis/format.h).
std::string compare_table_text(const CompareReport& report);
/// What `compare --plan` prints (CompareOptions::plan_only): a line per run with its seed, rate,
/// steps done and planned, and its state (train, resume at step N, kept), then the counts and the
/// steps left. `resume` says whether the plan was made with --resume.
std::string compare_plan_text(const CompareReport& report, const std::string& out_dir, bool resume);
/// Writes compare.csv, compare.json, compare.png (accuracy bars; only when a task other than lm
/// ran) and compare_lm.png (lm: perplexity against time/token) into `dir` (created if needed).
void compare_write(const CompareReport& report, const std::string& dir);

}  // namespace mixlab
