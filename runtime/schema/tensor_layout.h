// Helpers of the type inference of runtime/schema/tensor_layout.cpp that the reference
// kernels of runtime/ops/tensor_layout.cpp use too (the functions are defined in
// runtime/schema/tensor_layout.cpp).
#pragma once

#include <algorithm>
#include <cstring>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::tensor_layout_schema {

// ---- Pad ---------------------------------------------------------------------

/// Per-axis begin/end pads of all `rank` axes (zero on axes not listed).
struct PadPlan {
  Dims begin, end;
  std::string mode;
};

StatusOr<PadPlan> padPlan(const InferArgs& args);

// ---- Tile --------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferTile(const InferArgs& args);

// ---- DepthToSpace / SpaceToDepth ---------------------------------------------------

StatusOr<int64_t> blockSize(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferDepthToSpace(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferSpaceToDepth(const InferArgs& args);

// ---- ReverseSequence -------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferReverseSequence(const InferArgs& args);

// ---- Compress / NonZero ------------------------------------------------------------

/// The error for ops whose output size depends on the values of a run-time input.
Status dataDependentSize(const char* op, const char* input);

StatusOr<std::vector<TensorType>> inferCompress(const InferArgs& args);

/// \returns the count of non-zero elements of `x` (any dtype; -0.0 is zero).
int64_t countNonZero(const Tensor& x);

StatusOr<std::vector<TensorType>> inferNonZero(const InferArgs& args);

}  // namespace pcc::ops::tensor_layout_schema
