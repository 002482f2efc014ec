// src/resolvent/static_switch.h — runtime flags to template flags (private).
//
// The resolvent kernels test a few per-call facts in their innermost loops: does A read past
// inputs (W_A > 1), does B read past outputs (W_B > 0), are rows translation-invariant offsets or
// an index, is the solve gated. They hold for a whole call, so each becomes a template flag and
// the loops compile without the tests. bool_switch turns one runtime bool into a
// std::integral_constant argument; nesting them picks one of 2^k instantiations once per call.
#pragma once

#include <type_traits>
#include <utility>

namespace mixlab::detail {

/// Calls f(std::true_type{}) when cond holds, else f(std::false_type{}); returns what f returns.
/// In f, `decltype(flag)::value` is a constant expression.
template <typename F>
decltype(auto) bool_switch(bool cond, F&& f) {
  if (cond) return std::forward<F>(f)(std::true_type{});
  return std::forward<F>(f)(std::false_type{});
}

}  // namespace mixlab::detail
