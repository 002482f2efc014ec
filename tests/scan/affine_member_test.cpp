// The affine member table and what each member registers. Parameter and buffer names, shapes and
// order are the contract of saved checkpoints (and of the RNG draws of the init), so they are
// pinned here per member, as the code registered them before the members moved to one file each
// (issue 36).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <vector>

#include "mixlab/scan/affine_mixer.h"

namespace mixlab {
namespace {

// What an AffineMixer with C = 12, H = 3 (Dv = 4; mamba Dk = 16) registers, in the order of
// named_parameters() (the module's own parameters, then its submodules' in registration order)
// and then named_buffers(): "name [shape]".
struct Registered {
  AffineMember member;
  std::vector<std::string> names;
};

const std::vector<Registered>& expected_registered() {
  static const std::vector<Registered> rows = {
      {AffineMember::kLinearAttn,
       {"q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]", "o_proj.weight [12, 12]"}},
      {AffineMember::kRetNet,
       {"q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]", "o_proj.weight [12, 12]",
        "gate_proj.weight [12, 12]", "buffer log_gamma [3]"}},
      {AffineMember::kGla,
       {"q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]", "o_proj.weight [12, 12]",
        "gate_proj.weight [12, 12]", "decay_proj1.weight [16, 12]", "decay_proj2.weight [12, 16]",
        "decay_proj2.bias [12]"}},
      {AffineMember::kMamba,
       {"A_log [3, 16]", "D [3, 4]", "dt_bias [3]", "q_proj.weight [48, 12]", "k_proj.weight [48, 12]",
        "v_proj.weight [12, 12]", "o_proj.weight [12, 12]", "gate_proj.weight [12, 12]", "dt_proj.weight [3, 12]"}},
      {AffineMember::kMlstm,
       {"q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]", "o_proj.weight [12, 12]",
        "out_gate_proj.weight [12, 12]", "forget_proj.weight [3, 12]", "forget_proj.bias [3]",
        "input_proj.weight [3, 12]", "input_proj.bias [3]"}},
      {AffineMember::kGatedRfa,
       {"q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]", "o_proj.weight [12, 12]",
        "gate_proj.weight [3, 12]", "gate_proj.bias [3]", "buffer random_features [3, 4, 4]"}},
      {AffineMember::kDeltaNet,
       {"q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]", "o_proj.weight [12, 12]",
        "beta_proj.weight [3, 12]", "beta_proj.bias [3]"}},
      {AffineMember::kGatedDeltaNet,
       {"A_log [3]", "dt_bias [3]", "q_proj.weight [12, 12]", "k_proj.weight [12, 12]", "v_proj.weight [12, 12]",
        "o_proj.weight [12, 12]", "gate_proj.weight [12, 12]", "alpha_proj.weight [3, 12]", "beta_proj.weight [3, 12]",
        "beta_proj.bias [3]"}},
  };
  return rows;
}

std::vector<std::string> registered(const torch::nn::Module& m) {
  std::vector<std::string> out;
  auto entry = [](const std::string& prefix, const std::string& name, const at::Tensor& t) {
    std::ostringstream s;
    s << prefix << name << " " << t.sizes();
    return s.str();
  };
  for (const auto& p : m.named_parameters()) out.push_back(entry("", p.key(), p.value()));
  for (const auto& b : m.named_buffers()) out.push_back(entry("buffer ", b.key(), b.value()));
  return out;
}

MixerDims dims_12_3() {
  MixerDims dims;
  dims.d_model = 12;
  dims.n_heads = 3;
  return dims;
}

TEST(AffineMemberTable, OneRowPerMemberInEnumOrder) {
  const auto& rows = affine_members();
  ASSERT_EQ(rows.size(), static_cast<size_t>(AffineMember::kCount));
  ASSERT_EQ(expected_registered().size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(rows[i].member), i);
    EXPECT_EQ(&affine_member_info(rows[i].member), &rows[i]);
    EXPECT_EQ(expected_registered()[i].member, rows[i].member);
  }
}

// The whole mixer: the shared q/k/v/o projections and the member's own, as a checkpoint sees them.
TEST(AffineMemberTable, MixerRegistersTheExpectedParameters) {
  for (const auto& want : expected_registered()) {
    torch::manual_seed(0);
    AffineMixer mixer(want.member, dims_12_3());
    EXPECT_EQ(registered(mixer), want.names) << affine_member_info(want.member).name;
  }
}

}  // namespace
}  // namespace mixlab
