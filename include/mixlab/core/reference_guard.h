// mixlab/core/reference_guard.h — the one switch from a native kernel to its plain reference.
//
// Every native kernel keeps a plain reference beside it (a LibTorch composition or plain loops)
// that tests compare it with and benchmarks time in the same run. While a ReferenceGuard<Op> is
// alive on a thread, the op `Op` (a tag type its header names) runs its reference on that thread:
//
//   using ComposedAttentionGuard = ReferenceGuard<struct CausalAttentionOp>;
//   { ComposedAttentionGuard g; auto y_ref = causal_attention(q, k, v); }
//   if (ReferenceGuard<CausalAttentionOp>::active()) return composed(...);   // inside the op
//
// Guards nest; each op has its own per-thread count. Not a configuration switch for users: it
// changes the path, never the result beyond float rounding.
#pragma once

namespace mixlab {

template <typename Op>
class ReferenceGuard {
 public:
  ReferenceGuard() { ++depth(); }
  ~ReferenceGuard() { --depth(); }
  ReferenceGuard(const ReferenceGuard&) = delete;
  ReferenceGuard& operator=(const ReferenceGuard&) = delete;

  /// Whether a guard of this op is alive on the calling thread.
  static bool active() { return depth() > 0; }

 private:
  static int& depth() {
    thread_local int d = 0;  // one per op and thread (an inline function's static: one in the program)
    return d;
  }
};

}  // namespace mixlab
