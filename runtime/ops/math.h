// Shared pieces of the math op family (math.cpp, math_*.cpp): the register
// functions of each file and the broadcasting loop the binary kernels share.
#pragma once

#include <vector>

#include "runtime/ops/op_util.h"

namespace pcc {

void registerMathUnaryOps(OpRegistry& r);       // math_unary.cpp
void registerMathActivationOps(OpRegistry& r);  // math_activation.cpp
void registerMathBinaryOps(OpRegistry& r);      // math_binary.cpp
void registerMathGenerateOps(OpRegistry& r);    // math_generate.cpp
void registerMathQuantOps(OpRegistry& r);       // math_quant.cpp

namespace ops {

/// Applies `f(a[i], b[j])` over the numpy broadcast of the shapes of `a` and
/// `b`, writing into `out` (already of the broadcast shape and of dtype TO).
template <typename TA, typename TB, typename TO, typename F>
void broadcastMap(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* po = out.mutableData<TO>();
  // An operand with the output's element count has its element i at output
  // element i (a broadcast can only have added dims of 1 to it); one of a
  // single element is that element everywhere: flat loops, no walker.
  const int64_t n = out.numel(), na = a.numel(), nb = b.numel();
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  if (na == n && nb == 1) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[0]);
    return;
  }
  if (na == 1 && nb == n) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[0], pb[i]);
    return;
  }
  BroadcastWalker w(out.shape(), {a.shape(), b.shape()});
  for (int64_t i = 0; i < n; ++i, w.next()) po[i] = f(pa[w.offset(0)], pb[w.offset(1)]);
}



}  // namespace ops
}  // namespace pcc
