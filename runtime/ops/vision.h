// Shared pieces of the vision op family (vision*.cpp): sampling, detection,
// quantized convolution and matrix products, and a few odd tensor ops. These
// kernels are reference code that reads every element through double, which
// serves every float and integer dtype (f16/bf16 included) with one path.
#pragma once

#include <vector>

#include "runtime/ops/tensor_util.h"

namespace pcc {

void registerVisionSampleOps(OpRegistry& r);  // vision_sample.cpp: GridSample, AffineGrid, RoiAlign, DeformConv
void registerVisionSelectOps(OpRegistry& r);  // vision_select.cpp: NonMaxSuppression, Unique, CenterCropPad, ...
void registerVisionQuantOps(OpRegistry& r);   // vision_quant.cpp: QLinearMatMul, QLinearConv, ConvInteger

namespace ops {

/// \returns every element of `t` converted to double, in row-major order.
std::vector<double> toDoubles(const Tensor& t);

/// \returns a tensor of dtype `dt` and shape `shape` holding `v` converted
/// with the rules of storeDouble (saturating for integer types).
Tensor fromDoubles(DType dt, const Dims& shape, const std::vector<double>& v);

/// \returns the present input `i` of a kernel call, or nullptr when absent.
inline const Tensor* optionalInput(const std::vector<const Tensor*>& in, size_t i) {
  return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr;
}

/// \returns the message an InferFn gives for an input whose value decides the
/// output shape but is not known at compile time.
Status notConstant(const char* op, const char* what);

}  // namespace ops
}  // namespace pcc
