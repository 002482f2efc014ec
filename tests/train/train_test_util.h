// Helpers shared by the train tests: the golden multihop batch and error-message assertions
// (the tiny test mixer is in support/test_mixer.h).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "mixlab/core/error.h"
#include "mixlab/model/model.h"
#include "mixlab/train/tasks.h"
#include "support/expect_error.h"
#include "support/test_mixer.h"

namespace mixlab {

/// The golden multihop batch (tasks_test.cpp spells out its tokens): vocabulary 14 (keys 4..8,
/// values 9..13), S = 20, 4 pairs, links with probability 0.6, seed 11. Two queries (positions
/// 15 and 19, both for key 4) follow a link; position 10 is that link's label.
inline Batch golden_multihop_batch() {
  TaskSpec s;
  s.name = "multihop";
  s.vocab = 14;
  s.length = 20;
  s.pairs = 4;
  s.hop_prob = 0.6;
  return task_generate(s, 1, 20, 4, 11);
}

/// The shared helper under the name the train tests use.
inline void expect_error_contains(const std::function<void()>& f, std::initializer_list<std::string> fragments) {
  ::expect_error(f, fragments);
}
inline void expect_error_contains(const std::function<void()>& f, const std::string& fragment) {
  ::expect_error(f, fragment);
}

}  // namespace mixlab
