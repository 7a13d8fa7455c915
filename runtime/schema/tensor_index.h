// Helpers of the type inference of runtime/schema/tensor_index.cpp that the reference
// kernels of runtime/ops/tensor_index.cpp use too (the functions are defined in
// runtime/schema/tensor_index.cpp).
#pragma once

#include <algorithm>
#include <cstring>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::tensor_index_schema {

// ---- Scatter writes (shared) -----------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> reductionOf(const AttrMap& attrs);

// ---- GatherElements / ScatterElements ------------------------------------------------

/// Checks the shared shape rules of GatherElements and ScatterElements: indices
/// of the data's rank, no larger than the data outside `axis`.
StatusOr<int64_t> elementsAxis(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferScatterElements(const InferArgs& args);

/// Shape checks shared by GatherND and ScatterND. \returns k, the tuple length.
StatusOr<int64_t> ndTupleLength(const TensorType& x, const TensorType& idx, int64_t batchDims);

/// \returns the output shape of GatherND: indices.shape[:-1] + data.shape[b+k:].
Dims gatherNdShape(const TensorType& x, const TensorType& idx, int64_t b, int64_t k);

StatusOr<std::vector<TensorType>> inferGatherND(const InferArgs& args);

StatusOr<std::vector<TensorType>> inferScatterND(const InferArgs& args);

}  // namespace pcc::ops::tensor_index_schema
