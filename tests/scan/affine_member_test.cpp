// The affine member table and what each member registers. Every row of the table (kMembers,
// src/scan/affine_mixer.cpp) points at its member's file, src/scan/affine_member_<name>.cpp.
// Parameter and buffer names, shapes and order are the contract of saved checkpoints (and of the
// RNG draws of the init), so they are pinned here per member, as the code registered them before
// the members moved to one file each (issue 36).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

// Private (src/scan): the member files' interface, AffineMemberDef, which the table's rows point at.
#include "../../src/scan/affine_member.h"
#include "mixlab/scan/affine_mixer.h"

namespace mixlab {
namespace affine_member_test {
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

// Each row points at an implementation from the file named by the row's member.
TEST(AffineMemberTable, EveryRowPointsAtItsMembersFile) {
  // In AffineMember order: the files a newcomer finds by the member's name.
  const char* files[] = {"affine_member_linear_attn.cpp", "affine_member_retnet.cpp",
                         "affine_member_gla.cpp",         "affine_member_mamba.cpp",
                         "affine_member_mlstm.cpp",       "affine_member_gated_rfa.cpp",
                         "affine_member_deltanet.cpp",    "affine_member_gated_deltanet.cpp"};
  ASSERT_EQ(std::size(files), affine_members().size());
  for (const auto& row : affine_members()) {
    SCOPED_TRACE(row.name);
    ASSERT_NE(row.impl, nullptr);
    EXPECT_STREQ(row.impl->name, row.name);
    const std::string file = row.impl->file, want = std::string("affine_member_") + row.name + ".cpp";
    EXPECT_EQ(want, files[static_cast<size_t>(row.member)]);
    ASSERT_GE(file.size(), want.size());
    EXPECT_EQ(file.substr(file.size() - want.size()), want);
    EXPECT_TRUE(file.size() == want.size() || file[file.size() - want.size() - 1] == '/') << file;
    EXPECT_NE(row.impl->build, nullptr);
    EXPECT_EQ(row.impl->state_dk, row.member == AffineMember::kMamba ? 16 : 0);
  }
}

// A row's implementation alone, on a bare module: the member's own parameters and buffers, the
// expected list without the mixer's shared q/k/v/o projections.
TEST(AffineMemberTable, EveryImplementationRegistersItsOwnParameters) {
  for (const auto& want : expected_registered()) {
    const auto& row = affine_member_info(want.member);
    SCOPED_TRACE(row.name);
    const int64_t C = 12, H = 3, dv = C / H, dk = row.impl->state_dk > 0 ? row.impl->state_dk : dv;
    torch::nn::Module bare;
    torch::NoGradGuard no_grad;
    auto impl = row.impl->build(bare, {C, H, dk, dv});
    ASSERT_NE(impl, nullptr);
    std::vector<std::string> own;
    for (const auto& name : want.names)
      if (name.rfind("q_proj.", 0) != 0 && name.rfind("k_proj.", 0) != 0 && name.rfind("v_proj.", 0) != 0 &&
          name.rfind("o_proj.", 0) != 0)
        own.push_back(name);
    EXPECT_EQ(registered(bare), own);
    EXPECT_EQ(impl->sizes.dk, dk);
    // The projections the decode step stacks after q, k, v are registered ones.
    for (auto* proj : {&impl->gate_proj, &impl->decay_proj, &impl->aux_proj}) {
      if (!*proj) continue;
      bool found = false;
      for (const auto& child : bare.named_children()) found |= child.value().get() == proj->ptr().get();
      EXPECT_TRUE(found);
    }
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

// RetNet's decays as the paper (Sun et al. 2023) and fla define them: gamma_h = 1 - 2^(-5 - h).
TEST(AffineMemberRetNet, DecaysAreThePapers) {
  for (int64_t H : {1, 3, 4, 8}) {
    AffineMixer mixer(AffineMember::kRetNet, MixerDims{8 * H, H, 64});
    // named_buffers() returns a dict by value: keep it alive while the pointer into it is used.
    const auto buffers = mixer.named_buffers();
    const torch::Tensor* log_gamma = buffers.find("log_gamma");
    ASSERT_NE(log_gamma, nullptr);
    ASSERT_EQ(log_gamma->numel(), H);
    for (int64_t h = 0; h < H; ++h)
      EXPECT_NEAR(std::exp(log_gamma->index({h}).item<double>()), 1.0 - std::pow(2.0, -5.0 - double(h)), 1e-7)
          << "H = " << H << ", h = " << h;
  }
  // Saved decays win: a weight file written with another schedule loads its own (the buffer).
  auto old = std::make_shared<AffineMixer>(AffineMember::kRetNet, MixerDims{24, 3, 64});
  torch::NoGradGuard no_grad;
  old->named_buffers()["log_gamma"].copy_(torch::log1p(-torch::pow(2.0, torch::tensor({-5.0, -7.0, -9.0}))));
  std::stringstream archive;
  torch::save(old, archive);
  auto loaded = std::make_shared<AffineMixer>(AffineMember::kRetNet, MixerDims{24, 3, 64});
  torch::load(loaded, archive);
  EXPECT_NEAR(std::exp(loaded->named_buffers()["log_gamma"].index({2}).item<double>()), 1.0 - 1.0 / 512, 1e-7);
}

// Mamba's and gated DeltaNet's Δ start as their authors initialise them (mamba's Mamba2, fla's
// GatedDeltaNet): softplus(dt_bias) log-uniform in [1e-3, 1e-1]; gated DeltaNet's A from U(0, 16).
// (Gated DeltaNet's dt_bias was 0 until 2026-11-29: Δ = ln 2 for every head, and at MAD's model it
// did not learn induction or compression.)
TEST(AffineMemberGates, DeltaBiasAndDecayRatesStartAsTheirAuthorsSet) {
  for (auto member : {AffineMember::kMamba, AffineMember::kGatedDeltaNet}) {
    SCOPED_TRACE(affine_member_info(member).name);
    torch::manual_seed(3);
    AffineMixer mixer(member, MixerDims{256, 64, 64});
    const auto params = mixer.named_parameters();
    const auto delta = torch::softplus(*params.find("dt_bias"));
    ASSERT_EQ(delta.numel(), 64);
    EXPECT_GE(delta.min().item<double>(), 1e-3 * (1 - 1e-5));
    EXPECT_LE(delta.max().item<double>(), 1e-1 * (1 + 1e-5));
    // Log-uniform: the heads spread over both decades, not all at one end.
    EXPECT_LT(delta.min().item<double>(), 1e-2);
    EXPECT_GT(delta.max().item<double>(), 1e-2);
    if (member == AffineMember::kGatedDeltaNet) {
      const auto a = params.find("A_log")->exp();
      EXPECT_GE(a.min().item<double>(), 0.0);
      EXPECT_LE(a.max().item<double>(), 16.0);
      EXPECT_LT(a.min().item<double>(), 1.0);  // U(0, 16), not U(1, 16)
    }
  }
}

}  // namespace
}  // namespace affine_member_test
}  // namespace mixlab
