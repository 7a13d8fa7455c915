// The IR verifier: the invariants every pass must keep.
#pragma once

#include "compiler/ir/ir.h"

namespace pcc {

/// Checks that `g` is well formed:
///  - nodes are in topological order: every input is a graph input, a
///    constant, or an output of an earlier node; required inputs are present;
///  - input and output counts are within Ops.def's bounds;
///  - each output type equals what inferOutputTypes() gives (AllGather,
///    ReduceScatter and AllToAll only when they carry their `dim` and `group_size`
///    attributes);
///  - value names are unique and non-empty; graph outputs are defined;
///  - constants' types match their data; shardings have the rank of their
///    tensors; stages are non-negative;
///  - region nodes (If, Loop, Scan) have their op's number of bodies, other
///    nodes none; each body verifies as a graph of its own (it reads only its
///    parameters, constants and nodes: an outer value must be captured), no
///    value of a body is read outside it, and the node's inputs, outputs and
///    attributes fit its bodies (checkRegionNode in regions.h).
/// \returns OK, or an invalid-input error naming the node or value at fault.
Status verifyGraph(const Graph& g);

}  // namespace pcc
