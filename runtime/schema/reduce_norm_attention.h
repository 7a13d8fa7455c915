// Helpers of the type inference of runtime/schema/reduce_norm_attention.cpp that the reference
// kernels of runtime/ops/reduce_norm_attention.cpp use too (the functions are defined in
// runtime/schema/reduce_norm_attention.cpp).
#pragma once

#include <cmath>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::reduce_norm_attention_schema {

/// A 3-D or 4-D tensor seen as [B, H, S, D].
struct HeadView {
  int64_t b = 0, h = 0, s = 0, d = 0;
  bool packed = false;  // 3-D [B, S, H * D]
  /// \returns the element offset of (bi, hi, si, di).
  int64_t at(int64_t bi, int64_t hi, int64_t si, int64_t di) const {
    return packed ? ((bi * s + si) * h + hi) * d + di : ((bi * h + hi) * s + si) * d + di;
  }
};

/// \returns the [B, H, S, D] view of `t`; `heads` is the head count of a 3-D input.
StatusOr<HeadView> headView(const TensorType& t, int64_t heads, const char* what);

struct AttentionShapes {
  HeadView q, k, v;
  int64_t past = 0, total = 0;  // past and total key sequence lengths
  int64_t vd = 0;
  int64_t numOutputs = 1;
  std::vector<TensorType> outputs;
};

StatusOr<AttentionShapes> attentionShapes(const InferArgs& args);

// ---- RotaryEmbedding ----------------------------------------------------------

struct RotaryShapes {
  HeadView x;
  int64_t rot = 0;  // rotated dims of each head
};

StatusOr<RotaryShapes> rotaryShapes(const InferArgs& args);

}  // namespace pcc::ops::reduce_norm_attention_schema
