// Helpers shared by the kernel files of the tensor op family (tensor*.cpp):
// indexing, padding and resizing ops. Most of these ops move whole elements,
// so they work on raw bytes and serve every dtype with one code path.
#pragma once

#include <vector>

#include "runtime/ops/op_util.h"

namespace pcc::ops {

// Registration hooks of the family's files; registerTensorOps calls each once.
void registerTensorLayoutOps(OpRegistry& r);  // tensor_layout.cpp
void registerTensorIndexOps(OpRegistry& r);   // tensor_index.cpp
void registerTensorResizeOps(OpRegistry& r);  // tensor_resize.cpp




/// \returns a 0-d tensor of dtype `t` holding `v` (rounded and saturated for
/// integer types, v != 0 for bool).
Tensor scalarOf(DType t, double v);

/// Stores `v` into element `i` of `t` with the conversion rules of scalarOf.
void storeDouble(Tensor& t, int64_t i, double v);

/// Gathers `x` through one index table per axis: the result has shape
/// (maps[0].size(), ..., maps[r-1].size()) and holds, at (o_0, ..., o_r-1),
/// x[maps[0][o_0], ..., maps[r-1][o_r-1]]; where any table entry is -1 it holds
/// the single element of `fill` (same dtype as `x`). Pad, Tile and nearest
/// Resize are all this one copy with different tables.
Tensor gatherAxisMaps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps,
                      const Tensor& fill);

}  // namespace pcc::ops
