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
  int64_t n = out.numel();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {  // no broadcast: one flat loop
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  BroadcastWalker w(out.shape(), {a.shape(), b.shape()});
  for (int64_t i = 0; i < n; ++i, w.next()) po[i] = f(pa[w.offset(0)], pb[w.offset(1)]);
}

/// Dtypes of the integer (and bitwise) ops pcc supports.
inline constexpr std::initializer_list<DType> kIntTypes = {
    DType::kI8, DType::kU8, DType::kI16, DType::kU16, DType::kI32, DType::kU32, DType::kI64, DType::kU64};
/// Every dtype pcc has, the narrow storage types included: ops that only move
/// or convert elements accept all of them.
inline constexpr std::initializer_list<DType> kAllTypes = {
    DType::kF32,        DType::kF64,     DType::kF16,    DType::kBF16,      DType::kI8,
    DType::kU8,         DType::kI16,     DType::kU16,    DType::kI32,       DType::kU32,
    DType::kI64,        DType::kU64,     DType::kBool,   DType::kF8E4M3FN,  DType::kF8E4M3FNUZ,
    DType::kF8E5M2,     DType::kF8E5M2FNUZ, DType::kF8E8M0, DType::kF4E2M1, DType::kI4,
    DType::kU4};

/// \returns an error unless every present input has the dtype of input 0.
Status checkSameDType(const InferArgs& args);

}  // namespace ops
}  // namespace pcc
