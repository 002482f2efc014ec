// tests/support/aten_ops.h — counts the ATen ops a piece of code dispatches, by name, through a
// thread-local RecordFunction callback: the tests of raw-row decode steps use it to tell which
// path a step took (the raw path never calls the reference path's linear, matmul, softmax, ...).
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mixlab::testing {

namespace aten_ops_detail {
inline std::vector<std::string>& watched() {
  thread_local std::vector<std::string> names;
  return names;
}
inline int64_t& hits() {
  thread_local int64_t n = 0;
  return n;
}
inline std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  for (const auto& name : watched())
    if (name == fn.name()) ++hits();
  return nullptr;
}
}  // namespace aten_ops_detail

/// How many calls of the ATen ops `names` (e.g. "aten::linear") `fn()` dispatched on this thread.
template <typename F>
int64_t count_aten_ops(std::vector<std::string> names, F&& fn) {
  aten_ops_detail::watched() = std::move(names);
  aten_ops_detail::hits() = 0;
  struct Remove {
    at::CallbackHandle handle;
    ~Remove() { at::removeCallback(handle); }
  } remove{at::addThreadLocalCallback(at::RecordFunctionCallback(&aten_ops_detail::on_start))};
  fn();
  return aten_ops_detail::hits();
}

}  // namespace mixlab::testing
