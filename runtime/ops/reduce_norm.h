// Shared pieces of the reduction and normalization kernels: the registration
// hooks of the reduce_norm*.cpp files and the axis bookkeeping that every
// reduction (Reduce*, ArgMax, normalizations, Softmax) needs.
#pragma once

#include <vector>

#include "runtime/ops/op_util.h"

namespace pcc {

// Registration hooks of the reduce_norm family; registerReduceNormOps calls each.
void registerReductionOps(OpRegistry& r);      // reduce_norm_reduce.cpp: Reduce*, ArgMax/ArgMin
void registerSelectionOps(OpRegistry& r);      // reduce_norm_select.cpp: TopK, Hardmax
void registerNormalizationOps(OpRegistry& r);  // reduce_norm_norms.cpp: Instance/Group/Lp/MVN/RMS, LRN
void registerEinsumOps(OpRegistry& r);         // reduce_norm_einsum.cpp
void registerAttentionOps(OpRegistry& r);      // reduce_norm_attention.cpp: Attention, RotaryEmbedding

namespace ops {

/// Splits `shape` around `axis` into outer * n * inner element counts.
void splitAround(const Dims& shape, int64_t axis, int64_t& outer, int64_t& n, int64_t& inner);



}  // namespace ops
}  // namespace pcc
