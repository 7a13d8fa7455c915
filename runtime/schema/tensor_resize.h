// Helpers of the type inference of runtime/schema/tensor_resize.cpp that the reference
// kernels of runtime/ops/tensor_resize.cpp use too (the functions are defined in
// runtime/schema/tensor_resize.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::tensor_resize_schema {

struct ResizePlan {
  Dims outShape;
  std::vector<double> scale;            ///< per axis; 1 on axes not resized
  std::vector<double> width;            ///< target length in * scale (may be fractional)
  std::vector<double> roiStart, roiEnd; ///< per axis, in normalized coordinates
  std::vector<bool> resized;
  std::string mode, ctm, nearestMode;
  double cubicA = -0.75, extrapolation = 0;
  bool excludeOutside = false, antialias = false;
};

/// \returns the values of optional input `i` as doubles: empty when the input is
/// absent or has no elements, an error when it has elements but is not constant.
StatusOr<std::vector<double>> optionalConstValues(const InferArgs& args, size_t i, const char* name);

bool oneOf(const std::string& s, std::initializer_list<const char*> options);

StatusOr<ResizePlan> resizePlan(const InferArgs& args);

}  // namespace pcc::ops::tensor_resize_schema
