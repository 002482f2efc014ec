// The fuzz targets of the text grammars (tests/fuzz/fuzz_target.h): spec arguments (SpecArgs),
// mixer specs and per-layer lists (check_mixer_layer_specs), pattern specs (Pattern::parse) and
// config files (config_load). Each also checks what an accepted input promises: a canonical
// spec parses back to itself, a row's size is row_size, a config round-trips through its JSON.
#include <string>

#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_file.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/pattern/pattern.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/train/config.h"

namespace mixlab::fuzz {

void fuzz_spec_args(std::string_view bytes) {
  // A family with every kind of argument: integers, an alias, a real, a word, two positionals.
  const std::string args(bytes);
  const SpecArgs a(mixer_spec_context("fuzz:" + args), "fuzz", args, {"w", "c|chunk", "rate", "mode"}, 2);
  (void)a.integer("w", 8, 1, kSpecMaxInt);
  (void)a.integer("c", 4, 1, 64);
  (void)a.real("rate", 0.5, 0.0, 1.0);
  (void)a.choice("mode", {"fast", "exact"}, 0);
  (void)a.positional_integer(0, "size", 4, 1, kSpecMaxInt);
  (void)a.positional_integer(1, "depth", 1, 1, 16);
  // A key that was given has its value (an alias such as chunk counts as c).
  if (a.has("c") && a.text("c").empty()) throw FuzzFinding("spec_args: key 'c' was given with an empty value");
}

void fuzz_mixer_spec(std::string_view bytes) {
  // Four layers at the small dims check_mixer_spec uses by default: the grammar of the list, then
  // every member built once (the full check train/compare run before touching --out).
  check_mixer_layer_specs(std::string(bytes), 4);
}

void fuzz_pattern(std::string_view bytes) {
  const Pattern p = Pattern::parse(std::string(bytes));
  const Pattern again = Pattern::parse(p.spec());
  if (again.spec() != p.spec())
    throw FuzzFinding("pattern: canonical spec '" + p.spec() + "' parses back as '" + again.spec() + "'");
  for (int64_t i : {0, 1, 7, 63}) {
    const auto row = p.row(i);
    if (static_cast<int64_t>(row.size()) != p.row_size(i))
      throw FuzzFinding("pattern '" + p.spec() + "': row " + std::to_string(i) + " has " + std::to_string(row.size()) +
                        " positions, row_size says " + std::to_string(p.row_size(i)));
  }
  (void)p.max_width(64);
}

void fuzz_config(std::string_view bytes) {
  const TrainConfig c = config_load(scratch_file_write(bytes, ".json"));
  const nlohmann::json j = config_to_json(c);
  if (config_to_json(config_from_json(j, "round trip")) != j)
    throw FuzzFinding("config: the resolved config does not round-trip through its JSON: " + j.dump());
}

}  // namespace mixlab::fuzz
