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


/// \returns a tensor of dtype `dt` and shape `shape` holding `v` converted
/// with the rules of storeDouble (saturating for integer types).
Tensor fromDoubles(DType dt, const Dims& shape, const std::vector<double>& v);



}  // namespace ops
}  // namespace pcc
