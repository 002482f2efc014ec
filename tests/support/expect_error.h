// tests/support/expect_error.h — the one helper every area's error-path tests use.
//
// Our errors must name the argument, what was expected and what came (CONTRIBUTING rule for bad
// input); tests check that by looking for fragments of the message.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "mixlab/core/error.h"

/// Runs `f` and expects a mixlab::Error whose message contains every fragment.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a mixlab::Error containing '" << (fragments.empty() ? "" : fragments.front()) << "'";
  } catch (const mixlab::Error& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << frag;
  }
}
inline void expect_error(const std::function<void()>& f, std::initializer_list<std::string> fragments) {
  expect_error(f, std::vector<std::string>(fragments));
}
inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  expect_error(f, std::vector<std::string>{fragment});
}
