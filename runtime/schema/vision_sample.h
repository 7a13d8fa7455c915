// Helpers of the type inference of runtime/schema/vision_sample.cpp that the reference
// kernels of runtime/ops/vision_sample.cpp use too (the functions are defined in
// runtime/schema/vision_sample.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::vision_sample_schema {

enum class Interp { kNearest, kLinear, kCubic };

enum class Padding { kZeros, kBorder, kReflection };

struct GridSampleParams {
  Interp interp = Interp::kLinear;
  Padding padding = Padding::kZeros;
  bool alignCorners = false;
};

StatusOr<GridSampleParams> gridSampleParams(const AttrMap& attrs);

StatusOr<std::vector<TensorType>> inferGridSample(const InferArgs& args);

// ---- AffineGrid ----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferAffineGrid(const InferArgs& args);

// ---- RoiAlign ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferRoiAlign(const InferArgs& args);

// ---- DeformConv ----------------------------------------------------------------

struct DeformGeometry {
  WindowGeometry g;
  int64_t group = 1, offsetGroup = 1;
};

StatusOr<DeformGeometry> deformGeometry(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferDeformConv(const InferArgs& args);

}  // namespace pcc::ops::vision_sample_schema
