// mixlab/core/tensor_checks.h — argument checks for tensors at the API boundary.
//
// Shape letters used across mixlab (glossary, defined once here):
//   B batch, T time (sequence length), H heads, D head dim, C model width,
//   W pattern width (slots per row), N state size, Dk/Dv key/value dims of a matrix state.
// Each check throws mixlab::Error naming the argument, the expected shape in letters and the
// actual sizes, e.g. "resolvent_forward: alpha must have shape (B,H,T,W_A) = (2,4,17,5), got [2,4,16,5]".
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace mixlab {

/// Sizes of a tensor as "[a,b,c]".
std::string shape_string(const at::Tensor& t);

/// `t` must be defined.
void check_defined(const char* fn, const char* name, const at::Tensor& t);
/// `t` must have `dim` dimensions; `letters` names them, e.g. "(B,H,T,D)".
void check_dim(const char* fn, const char* name, const at::Tensor& t, int64_t dim, const char* letters);
/// `t` must have exactly `expected` sizes (-1 = any); `letters` names the dims.
void check_shape(const char* fn, const char* name, const at::Tensor& t, const std::vector<int64_t>& expected,
                 const char* letters);
/// `t` must be float32 or float64.
void check_floating(const char* fn, const char* name, const at::Tensor& t);
/// `t` must have the same dtype as `ref` (named `ref_name`).
void check_same_dtype(const char* fn, const char* name, const at::Tensor& t, const char* ref_name,
                      const at::Tensor& ref);
/// `t` must live on the CPU (mixlab's kernels are CPU kernels).
void check_cpu(const char* fn, const char* name, const at::Tensor& t);

}  // namespace mixlab
