// mixlab/train/compare_run_record.h — what one finished compare run leaves on disk, so that
// `mixlab compare --resume` keeps it instead of training it again.
//
// Every compare run writes, under <out>/runs/ and beside its metrics (<base>.jsonl):
//   <base>.pt           the trainer's checkpoint (at the run's end; with checkpoint_every also
//                       during it), so an interrupted run resumes from its last one;
//   <base>.result.json  this record, written after the run's last evaluation: the run's config,
//                       its TrainResult and the held-out evaluations its cells report.
// A record carries a format name, a version and a checksum of its body; reading one checks all
// three and that its config equals the run's (a record of other settings is an error naming the
// first key that differs, not a silent retrain or a silent reuse). Doubles are written with
// max_digits10 digits (nlohmann::json), so a kept run's cells equal the uninterrupted ones bit
// for bit.
#pragma once

#include <optional>
#include <string>

#include "mixlab/train/config.h"
#include "mixlab/train/trainer.h"

namespace mixlab {

struct CompareRunRecord {
  TrainConfig config;  // the run's config (its seed offset applied)
  TrainResult result;  // result.eval is the evaluation the run ended with
  EvalResult valid;    // with an lr sweep: the validation split's evaluation (else unused)
  EvalResult test;     // the split the cells report
  int64_t parameters = 0;
  // What the figures belong to besides the code (CompareReport's fields of the same names): a
  // record of other kernels is not kept, its cells would not be this machine's bit for bit.
  std::string native_kernels, blas;
};

/// The file name base of a run under <out>/runs: "<mixer>_<task>[_seed<S>][_lr<R>]" with the
/// mixer spec made file-safe (':' '|' '*' and other punctuation become '_') and the rate in its
/// shortest exact form (two distinct rates never share a name).
std::string compare_run_base(const std::string& mixer_spec, const std::string& task, uint64_t seed, bool seed_suffix,
                             double lr, bool lr_suffix);

/// The first key whose value differs between two configs, as "'key': A there, B now" (quoted
/// on one line); "" when every key is equal.
std::string compare_config_difference(const TrainConfig& there, const TrainConfig& now);

/// Writes `record` to `path` atomically (write, fsync, rename). Throws mixlab::IoError.
void compare_run_record_write(const std::string& path, const CompareRunRecord& record);

/// Reads the record at `path` and checks it against `expected` (the run's config now). Throws
/// mixlab::Error naming the file and the reason: unreadable or not JSON, another format or
/// version, nesting deeper than a record's, a checksum that does not match its body, a missing or
/// mistyped field, or a config that differs from `expected` (the first differing key, with both
/// values). A number written as null (a non-finite value) reads as NaN.
CompareRunRecord compare_run_record_read(const std::string& path, const TrainConfig& expected);

}  // namespace mixlab
