// apps/mixlab/commands.h — every CLI subcommand registers itself on the root app through one
// function declared here and called from main.cpp. Each command lives in cmd_<name>.cpp.
//
// Contract: a command's callback throws mixlab::Error (or std::exception) on failure; main()
// prints one line "mixlab: error: <message>" and exits with one of the codes below (documented
// in README.md and docs/RELIABILITY.md). Commands never call exit().
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace mixlab::cli {

constexpr int kExitInternal = 1;  // a mixlab bug or an unexpected library failure
constexpr int kExitUser = 2;      // bad flag, config, spec or checkpoint (mixlab::Error)
constexpr int kExitIo = 3;        // file unreadable/unwritable, disk full, run dir locked (IoError)
constexpr int kExitDiverged = 4;  // non-finite loss or gradient during training (NonFiniteError)

void cmd_analyze_register(CLI::App& app);
void cmd_mixers_register(CLI::App& app);
void cmd_toeplitz_index_register(CLI::App& app);
void cmd_train_register(CLI::App& app);
void cmd_eval_register(CLI::App& app);
void cmd_compare_register(CLI::App& app);

}  // namespace mixlab::cli
