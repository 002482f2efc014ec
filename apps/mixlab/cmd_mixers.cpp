// `mixlab mixers`: lists every registered mixer family with its spec syntax.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "commands.h"
#include "mixlab/registry/registry.h"

namespace mixlab::cli {

void cmd_mixers_register(CLI::App& app) {
  auto* cmd = app.add_subcommand("mixers", "List the registered token mixers and their spec syntax");
  cmd->callback([] {
    // Usage and description side by side, aligned on the short usages; a usage longer than
    // kColumn (tpsm's and brl's key lists) takes its own line, its description indented below,
    // so that one long spec does not push every description off an 80-column terminal.
    constexpr size_t kColumn = 36;
    size_t width = 0;
    for (const auto& f : mixer_families())
      if (f.usage.size() <= kColumn) width = std::max(width, f.usage.size());
    for (const auto& f : mixer_families()) {
      if (f.usage.size() <= kColumn)
        std::cout << fmt::format("  {:<{}}  {}\n", f.usage, width, f.description);
      else
        std::cout << fmt::format("  {}\n  {:<{}}  {}\n", f.usage, "", width, f.description);
    }
    // A model's mixer may also be one spec per layer (mixlab/registry/layer_specs.h).
    std::cout << "A model takes one spec for every layer, or one per layer (a hybrid stack): 'ssm*3|attention'\n"
                 "('|' between layers, '*N' repeats; a shorter list repeats when it divides the layer count).\n";
  });
}

}  // namespace mixlab::cli
