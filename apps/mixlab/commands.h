// apps/mixlab/commands.h — every CLI subcommand registers itself on the root app through one
// function declared here and called from main.cpp. Each command lives in cmd_<name>.cpp.
//
// Contract: a command's callback throws mixlab::Error (or std::exception) on failure; main()
// prints "mixlab: error: <message>" and exits 1. Commands never call exit().
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace mixlab::cli {

/// Thrown by a command that has already reported its outcome and must end the process with
/// `code` (e.g. the --nproc launcher passing on a worker's failure); main() returns it as is.
struct CommandExit {
  int code = 0;
};

/// The process's arguments (argv[1..]), for commands that re-run themselves (--nproc).
const std::vector<std::string>& command_line_args();

void cmd_analyze_register(CLI::App& app);
void cmd_design_register(CLI::App& app);
void cmd_mixers_register(CLI::App& app);
void cmd_toeplitz_index_register(CLI::App& app);
void cmd_train_register(CLI::App& app);
void cmd_eval_register(CLI::App& app);
void cmd_compare_register(CLI::App& app);
void cmd_generate_register(CLI::App& app);
void cmd_plot_register(CLI::App& app);

}  // namespace mixlab::cli
