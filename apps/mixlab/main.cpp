// mixlab — command-line entry point. Parses global flags, sets the thread count, dispatches to a
// subcommand (commands.h), and turns every exception into one message and a non-zero exit.
#include <iostream>

#include "commands.h"
#include "mixlab/core/error.h"
#include "mixlab/core/threads.h"
#include "mixlab/version.h"

int main(int argc, char** argv) {
  CLI::App app{"mixlab: design, analyse, train, decode and benchmark causal token mixers"};
  app.set_version_flag("--version", std::string("mixlab ") + MIXLAB_VERSION_STRING);
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "Intra-op threads (default: $MIXLAB_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  app.parse_complete_callback([&] { mixlab::threads_configure(threads); });

  mixlab::cli::cmd_analyze_register(app);
  mixlab::cli::cmd_mixers_register(app);
  mixlab::cli::cmd_toeplitz_index_register(app);
  mixlab::cli::cmd_train_register(app);
  mixlab::cli::cmd_eval_register(app);
  mixlab::cli::cmd_compare_register(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mixlab::Error& e) {
    std::cerr << "mixlab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "mixlab: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
