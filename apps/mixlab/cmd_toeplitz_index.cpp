// `mixlab toeplitz-index --checkpoint FILE`: the Fredholm index (seed 003 §7.2) of every Toeplitz
// head in a trained model, from the winding number of each lag vector's symbol.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixlab/core/error.h"
#include "mixlab/toeplitz/index.h"
#include "mixlab/train/trainer.h"

namespace mixlab::cli {
namespace {

struct ToeplitzIndexArgs {
  std::string checkpoint;
  bool json = false;
};

void run_toeplitz_index(const ToeplitzIndexArgs& args) {
  const LoadedCheckpoint ckpt = checkpoint_read(args.checkpoint);  // read once, verified
  Trainer trainer(ckpt.config);
  trainer.checkpoint_load(ckpt);
  auto entries = toeplitz_model_index(trainer.model());
  MIXLAB_CHECK(!entries.empty(), "toeplitz-index: checkpoint '{}' (mixer '{}') has no Toeplitz layer", args.checkpoint,
               trainer.config().mixer);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : entries) {
      out.push_back({{"module", e.module},
                     {"head", e.head},
                     {"kernel", e.kernel},
                     {"winding", e.result.winding},
                     {"index", e.result.index},
                     {"degenerate", e.result.degenerate},
                     {"min_abs", e.result.min_abs},
                     {"reason", e.result.reason}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "Fredholm index = -(winding number of the symbol sum_k t_k e^{ik theta}) (seed 003 §7.2)\n";
  std::cout << fmt::format("{:<28} {:>4} {:>6} {:>8} {:>7} {:>11}  {}\n", "module", "head", "kernel", "winding",
                           "index", "min |s|", "note");
  for (const auto& e : entries) {
    std::cout << fmt::format("{:<28} {:>4} {:>6} {:>8} {:>7} {:>11.3e}  {}\n", e.module, e.head, e.kernel,
                             e.result.degenerate ? std::string("-") : std::to_string(e.result.winding),
                             e.result.degenerate ? std::string("-") : std::to_string(e.result.index), e.result.min_abs,
                             e.result.degenerate ? "degenerate: " + e.result.reason : "");
  }
}

}  // namespace

void cmd_toeplitz_index_register(CLI::App& app) {
  auto args = std::make_shared<ToeplitzIndexArgs>();
  auto* sub = app.add_subcommand("toeplitz-index", "Fredholm index of every Toeplitz head in a checkpoint");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint written by `mixlab train`")->required();
  sub->add_flag("--json", args->json, "Print JSON");
  sub->callback([args] { run_toeplitz_index(*args); });
}

}  // namespace mixlab::cli
