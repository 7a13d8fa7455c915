// Helpers of the type inference of runtime/schema/signal_loss.cpp that the reference
// kernels of runtime/ops/signal_loss.cpp use too (the functions are defined in
// runtime/schema/signal_loss.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::signal_loss_schema {

enum class Reduction { kNone, kSum, kMean };

StatusOr<Reduction> reductionOf(const AttrMap& attrs);

/// \returns the number of outputs a SoftmaxCrossEntropyLoss node computes: 1
/// (loss) or 2 (loss, log_prob), from its `num_outputs` attribute.
StatusOr<int64_t> sceOutputs(const AttrMap& attrs);

/// Type inference shared by both losses; `sce` adds the log_prob output when
/// the node asks for it.
StatusOr<std::vector<TensorType>> inferLoss(const InferArgs& args, bool sce);

}  // namespace pcc::ops::signal_loss_schema
