// mixlab — command-line entry point. Parses global flags, sets the thread count, dispatches to a
// subcommand (commands.h), and turns every exception into one `mixlab: error: ...` line and a
// documented exit code (docs/RELIABILITY.md):
//   0 success, 1 internal error (a mixlab bug or an unexpected library failure), 2 user error
//   (bad flag, config, spec, checkpoint), 3 I/O error (cannot read/write a file, disk full, run
//   directory locked), 4 training diverged (non-finite loss or gradient).
#include <c10/util/Exception.h>

#include <iostream>

#include "commands.h"
#include "mixlab/core/blas_info.h"
#include "mixlab/core/cpu_block_cache.h"
#include "mixlab/core/cpu_isa.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/core/threads.h"
#include "mixlab/version.h"

namespace mixlab::cli {
namespace {
std::vector<std::string> g_args;
}
const std::vector<std::string>& command_line_args() { return g_args; }
}  // namespace mixlab::cli

namespace {

using mixlab::kExitDiverged;
using mixlab::kExitInternal;
using mixlab::kExitIo;
using mixlab::kExitUser;

// One line: a multi-line message (CLI11's, a c10 backtrace) is folded at its first newline.
int fail(const std::string& message, int code) {
  std::string line = message.substr(0, message.find('\n'));
  if (line.empty()) line = "(no message)";
  std::cerr << "mixlab: error: " << line << "\n";
  return code;
}

// An empty value (`--steps ""`) is refused for every option that takes a value, in every
// subcommand, instead of silently keeping the option's default (docs/RELIABILITY.md). The one
// exception is text whose empty value is meaningful: generate's --prompt "" starts from nothing.
void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag takes no value
    if (option->get_name() == "--prompt") continue;
    option->check(CLI::Validator(
        [](std::string& value) {
          return value.empty() ? std::string("empty value (give a value, or leave the option out for its default)")
                               : std::string();
        },
        "", "NONEMPTY"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_values(*sub);
}

}  // namespace

int main(int argc, char** argv) {
  mixlab::cli::g_args.assign(argv + 1, argv + argc);
  CLI::App app{"mixlab: design, analyse, train, decode and benchmark causal token mixers"};
  // The version with the instruction set the native kernels run (mixlab/core/cpu_isa.h) and the BLAS
  // kernels LibTorch's matmuls run (mixlab/core/blas_info.h): results and timings differ between
  // both, and bench.sh records them from here.
  std::string kernels;
  try {
    kernels = mixlab::cpu_isa_name(mixlab::cpu_isa());
  } catch (const mixlab::Error& e) {
    kernels = std::string("unknown: ") + e.what();
  }
  app.set_version_flag("--version", std::string("mixlab ") + MIXLAB_VERSION_STRING + " (native kernels: " + kernels +
                                        "), BLAS: " + mixlab::blas_summary());
  app.require_subcommand(1);
  // Global options may also follow the subcommand (`mixlab train --task copy --threads 1`), as
  // users type them: a subcommand hands an option it does not know to this parent. Subcommands
  // copy the setting when they are created, so it is set before they are registered.
  app.fallthrough();
  std::string threads;
  app.add_option("--threads", threads, "Intra-op threads, 1 to 4 x cores (default: $MIXLAB_THREADS or all cores)");
  app.parse_complete_callback([&] {
    // Large tensors reuse freed blocks instead of page-faulting fresh ones every step
    // (mixlab/core/cpu_block_cache.h; MIXLAB_CPU_CACHE_MB=0 turns it off).
    mixlab::install_cpu_block_cache();
    mixlab::threads_configure(
        threads.empty() ? 0 : static_cast<int>(mixlab::parse_int(threads, "--threads", 1, mixlab::threads_max())));
  });

  mixlab::cli::cmd_analyze_register(app);
  mixlab::cli::cmd_design_register(app);
  mixlab::cli::cmd_mixers_register(app);
  mixlab::cli::cmd_toeplitz_index_register(app);
  mixlab::cli::cmd_train_register(app);
  mixlab::cli::cmd_eval_register(app);
  mixlab::cli::cmd_compare_register(app);
  mixlab::cli::cmd_generate_register(app);
  mixlab::cli::cmd_plot_register(app);
  refuse_empty_values(app);

  try {
    // CLI11 reports an unknown command as "A subcommand is required", which does not name it.
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(sub->get_name());
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--threads") {
        ++i;
        continue;
      }
      if (arg.rfind('-', 0) == 0) continue;
      MIXLAB_CHECK(std::find(commands.begin(), commands.end(), arg) != commands.end(),
                   "unknown command '{}' (known: {})", arg, fmt::join(commands, ", "));
      break;
    }
    app.parse(argc, argv);
  } catch (const mixlab::cli::CommandExit& e) {
    return e.code;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + " (run with --help for usage)", kExitUser);
  } catch (const mixlab::NonFiniteError& e) {
    return fail(e.what(), kExitDiverged);
  } catch (const mixlab::IoError& e) {
    return fail(e.what(), kExitIo);
  } catch (const mixlab::Error& e) {
    return fail(e.what(), kExitUser);
  } catch (const c10::Error& e) {
    return fail(e.what_without_backtrace(), kExitInternal);
  } catch (const std::bad_alloc&) {
    return fail("out of memory (try a smaller config or --max-memory)", kExitIo);
  } catch (const std::exception& e) {
    return fail(e.what(), kExitInternal);
  }
  return 0;
}
