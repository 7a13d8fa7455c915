// Helpers of the type inference of runtime/schema/conv_pool.cpp that the reference
// kernels of runtime/ops/conv_pool.cpp use too (the functions are defined in
// runtime/schema/conv_pool.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::conv_pool_schema {

Status checkSpatialInput(const TensorType& x, const char* what);

Dims spatialOf(const Dims& shape);

// ---- Conv ------------------------------------------------------------------

StatusOr<WindowGeometry> convGeometry(const TensorType& x, const TensorType& w,
                                      const AttrMap& attrs);

// ---- ConvTranspose -----------------------------------------------------------

/// The geometry of a transposed convolution, phrased as the convolution it is
/// the transpose of: `in` holds the ConvTranspose output sizes and `out` the
/// input sizes, so that forEachTap maps an input position and a kernel tap to
/// the output position it adds into.
StatusOr<WindowGeometry> convTransposeGeometry(const TensorType& x, const TensorType& w,
                                               const AttrMap& attrs);

StatusOr<std::vector<TensorType>> inferConvTranspose(const InferArgs& args);

// ---- pooling ---------------------------------------------------------------

StatusOr<WindowGeometry> poolGeometry(const TensorType& x, const AttrMap& attrs);

}  // namespace pcc::ops::conv_pool_schema
