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
  // Otherwise row by row along the last dim, where each operand either runs
  // (its last dim is the output's) or stays (a last dim of 1): the walker
  // only steps over the rows (a causal mask's [S, 1] against [T]).
  const Dims& os = out.shape();
  const int64_t inner = os.back(), la = a.rank() ? a.shape().back() : 1, lb = b.rank() ? b.shape().back() : 1;
  auto outerOf = [](const Dims& d) { return d.empty() ? d : Dims(d.begin(), d.end() - 1); };
  const Dims outer = outerOf(os);
  const int64_t rows = numElements(outer), sa = la == 1 ? 0 : 1, sb = lb == 1 ? 0 : 1;
  BroadcastWalker w(outer, {outerOf(a.shape()), outerOf(b.shape())});
  for (int64_t r = 0; r < rows; ++r, w.next()) {
    const TA* ra = pa + w.offset(0) * la;
    const TB* rb = pb + w.offset(1) * lb;
    TO* ro = po + r * inner;
    for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j * sa], rb[j * sb]);
  }
}



}  // namespace ops
}  // namespace pcc
