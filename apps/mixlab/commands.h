// apps/mixlab/commands.h — every CLI subcommand registers itself on the root app through one
// function declared here and called from main.cpp. Each command lives in cmd_<name>.cpp.
//
// Contract: a command's callback throws mixlab::Error (or std::exception) on failure; main()
// prints "mixlab: error: <message>" and exits 1. Commands never call exit().
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace mixlab::cli {

void cmd_analyze_register(CLI::App& app);
void cmd_mixers_register(CLI::App& app);
void cmd_toeplitz_index_register(CLI::App& app);
void cmd_train_register(CLI::App& app);
void cmd_eval_register(CLI::App& app);
void cmd_compare_register(CLI::App& app);
void cmd_generate_register(CLI::App& app);

}  // namespace mixlab::cli
