// What the fuse pass (passes/fuse.cpp) and the fusion report count.
#pragma once

#include <cstdint>

#include "compiler/ir/ir.h"

namespace pcc {

/// \returns whether `op` only changes the view of its input (Reshape, Squeeze,
/// Unsqueeze, Flatten, Identity): such a node is not a kernel.
bool isViewOp(OpKind op);

/// \returns the kernels of `g`: its nodes that compute. A Fused node counts 1
/// (its body becomes one kernel), a view op (isViewOp) 0, a collective 0
/// (communication, counted apart in the report); every other node 1. Bodies
/// are not looked into.
int64_t countKernels(const Graph& g);

}  // namespace pcc
