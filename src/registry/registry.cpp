// The mixer registry: one row per family. Adding a family = one enum value + one table row; the
// static_assert below breaks the build when the two disagree.
#include "mixlab/registry/registry.h"

#include <iterator>

#include "mixlab/attention/attention.h"
#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/error.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/psm/tpsm.h"
#include "mixlab/resolvent/resolvent_mixer.h"
#include "mixlab/scan/affine_mixer.h"
#include "mixlab/scan/ssm.h"
#include "mixlab/toeplitz/toeplitz_mixer.h"

namespace mixlab {
namespace {

enum class MixerFamily {
  kAttention,
  kLocal,
  kSsm,
  kResolvent,
  kLinearAttn,
  kRetNet,
  kGla,
  kMamba,
  kMlstm,
  kGatedRfa,
  kDeltaNet,
  kGatedDeltaNet,
  kToeplitz,
  kTpsm,
  kBrl,
  kCount  // keep last
};

using Factory = MixerPtr (*)(const std::string& spec, const std::string& args, const MixerDims& dims);

struct FamilyRow {
  MixerFamily family;
  MixerInfo info;
  Factory create;
};

// A family whose one argument is a size ("local:16", "ssm:8"), read through the spec grammar;
// `fallback` when the spec has none.
int64_t size_arg(const std::string& spec, const std::string& args, const char* family, const char* what,
                 int64_t fallback) {
  return SpecArgs(mixer_spec_context(spec), family, args, {}, 1).positional_integer(0, what, fallback, 1, kSpecMaxInt);
}

const FamilyRow kFamilies[] = {
    {MixerFamily::kAttention,
     {"attention", "attention", "causal softmax attention with RoPE; O(n) per token, O(n) cache"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       SpecArgs(mixer_spec_context(spec), "attention", args, {});  // takes no arguments
       return std::make_shared<AttentionMixer>(dims, 0);
     }},
    {MixerFamily::kLocal,
     {"local", "local[:W]", "sliding-window attention over the W previous tokens (default W=8); O(W) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return std::make_shared<AttentionMixer>(dims, size_arg(spec, args, "local", "window W", 8));
     }},
    {MixerFamily::kSsm,
     {"ssm", "ssm[:N]",
      "selective diagonal SSM, one step per channel (S6, Mamba-1's recurrence; seed 000 eq. 21-22), state "
      "expansion N (default 16)"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return std::make_shared<SsmMixer>(dims, size_arg(spec, args, "ssm", "state size N", 16));
     }},
    {MixerFamily::kResolvent,
     {"resolvent", "resolvent:<pattern spec>[:gate=G|spectrum]",
      "Y = (I-B)^-1 A X over a sparsity pattern (seed 000), e.g. resolvent:pow2+cache; gated (initial gate G, "
      "default 0.5, or spectrum: Mamba-2's decay init), RoPE"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       ResolventOptions options;
       const std::string pattern = resolvent_spec_parse(spec, args, options);
       MIXLAB_CHECK(!pattern.empty(), "mixer spec '{}': resolvent needs a pattern, e.g. 'resolvent:pow2+cache'", spec);
       return std::make_shared<ResolventMixer>(pattern, dims, options);
     }},
    {MixerFamily::kLinearAttn,
     {"linear_attn", "linear_attn[:chunk]",
      "linear attention, elu+1 features, normalised (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("linear_attn", spec, args, dims);
     }},
    {MixerFamily::kRetNet,
     {"retnet", "retnet[:chunk]",
      "retention: fixed per-head decay, RMS norm, swish gate (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("retnet", spec, args, dims);
     }},
    {MixerFamily::kGla,
     {"gla", "gla[:chunk]", "gated linear attention: data-dependent per-key decay (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("gla", spec, args, dims);
     }},
    {MixerFamily::kMamba,
     {"mamba", "mamba[:chunk]",
      "seed 004 Table 1's Mamba row: S6 as an affine matrix state with one step per head (Mamba-2's "
      "simplification); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("mamba", spec, args, dims);
     }},
    {MixerFamily::kMlstm,
     {"mlstm", "mlstm[:chunk]", "mLSTM: scalar forget/input gates with normaliser (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("mlstm", spec, args, dims);
     }},
    {MixerFamily::kGatedRfa,
     {"gated_rfa", "gated_rfa[:chunk]", "gated random-feature attention (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("gated_rfa", spec, args, dims);
     }},
    {MixerFamily::kDeltaNet,
     {"deltanet", "deltanet[:chunk]", "DeltaNet delta rule (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("deltanet", spec, args, dims);
     }},
    {MixerFamily::kGatedDeltaNet,
     {"gated_deltanet", "gated_deltanet[:chunk]",
      "gated DeltaNet: decayed delta rule (seed 004 Table 1); O(1) per token"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return affine_mixer_create("gated_deltanet", spec, args, dims);
     }},
    {MixerFamily::kToeplitz,
     {"toeplitz", "toeplitz[:heads=H][:kernel=K]",
      "causal Toeplitz mixing, FFT or materialised by length (seed 003 eq. 1-4); O(n) per token, O(n) cache"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return std::make_shared<ToeplitzMixer>(args, dims);
     }},
    {MixerFamily::kTpsm,
     {"tpsm",
      "tpsm[:c=C][:agg_layers=L][:inf_layers=L][:compress=right_half|linear][:identity=zeros|learned|empty]"
      "[:pos=learned|rope][:init=S][:inf=gpt2|attention][:agg=gpt2|attention][:compress_init=right_half|sum]",
      "Transformer-PSM: Blelloch scan of a transformer Agg over chunks (seed 004 §3.4); O(1) per token, O(log n) "
      "state"},
     [](const std::string& spec, const std::string& args, const MixerDims& dims) -> MixerPtr {
       return std::make_shared<TpsmMixer>(args, dims);
     }},
    {MixerFamily::kBrl,
     {"brl", "brl[:w=W][:m=M][:block=N][:hist=H][:beta=B][:lambda=L][:attn=softmax|laplace|relu2][:diff=0|1]",
      "BRL-Attention: local:W + m evolving compressed tokens, block-causal (seed 001); O(W+m) per token"},
     brl_mixer_create},
};
static_assert(std::size(kFamilies) == static_cast<size_t>(MixerFamily::kCount),
              "every MixerFamily needs exactly one row in kFamilies");

}  // namespace

const std::vector<MixerInfo>& mixer_families() {
  static const std::vector<MixerInfo> infos = [] {
    std::vector<MixerInfo> v;
    for (size_t i = 0; i < std::size(kFamilies); ++i) {
      MIXLAB_ASSERT(static_cast<size_t>(kFamilies[i].family) == i, "registry row {} is out of enum order", i);
      v.push_back(kFamilies[i].info);
    }
    return v;
  }();
  return infos;
}

namespace {

// The one spec grammar: "<family>" or "<family>:<args>" with non-empty args; the family
// decides what its args mean. An empty spec, an empty family, and a ':' with nothing after it
// ("local:", "ssm:") are errors, like "local:8:" is.
const FamilyRow& spec_split(const std::string& spec, std::string& args) {
  MIXLAB_CHECK(!spec.empty(), "mixer spec is empty; `mixlab mixers` lists the families");
  // Specs are printable text; rejecting control bytes first keeps every later message (which
  // quotes the spec) on one line.
  for (size_t i = 0; i < spec.size(); ++i) {
    const auto c = static_cast<unsigned char>(spec[i]);
    MIXLAB_CHECK(c >= 0x20 && c != 0x7F, "mixer spec has a control character (byte {:#04x}) at offset {}", c, i);
  }
  // '|' and '*' belong to a model's per-layer list (layer_specs.h), which no single mixer takes;
  // without this check "ssm|local" would read as an unknown family 'ssm|local'.
  if (const size_t list = spec.find_first_of("|*"); list != std::string::npos) {
    MIXLAB_FAIL(
        "mixer spec '{}': a per-layer list ('|' between layers, '*N' repeats) names a model's mixers; one "
        "mixer takes one spec, e.g. '{}'",
        spec, list > 0 ? spec.substr(0, list) : std::string("ssm"));
  }
  const auto colon = spec.find(':');
  const std::string family = spec.substr(0, colon);
  args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  MIXLAB_CHECK(colon == std::string::npos || !args.empty(),
               "mixer spec '{}': nothing after ':' (write '{}' for the defaults, or '{}:<args>')", spec, family,
               family);
  for (const auto& row : kFamilies) {
    if (row.info.family == family) return row;
  }
  std::vector<std::string> names;
  for (const auto& row : kFamilies) names.push_back(row.info.family);
  MIXLAB_FAIL("mixer spec '{}': unknown family '{}'; known: {}", spec, family, fmt::join(names, ", "));
}

}  // namespace

MixerPtr mixer_create(const std::string& spec, const MixerDims& dims) {
  std::string args;
  const FamilyRow& row = spec_split(spec, args);
  return row.create(spec, args, dims);
}

void check_mixer_spec(const std::string& spec, const MixerDims& dims) {
  // Every family parses its arguments in its constructor, so building one layer at `dims` is the
  // full check (pattern names, numbers, key=value items, dims constraints). With the small
  // default dims this costs a few kilobytes; no model is built.
  std::string args;
  const FamilyRow& row = spec_split(spec, args);
  try {
    (void)row.create(spec, args, dims);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    MIXLAB_FAIL("mixer spec '{}': {}", spec, what.substr(0, what.find('\n')));
  }
}

}  // namespace mixlab
