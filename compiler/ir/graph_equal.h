// Whether two graphs are the same program: what lets the driver build the
// programs of ranks that differ only in their peers once (docs/partitioning.md).
#pragma once

#include <functional>

#include "compiler/ir/ir.h"

namespace pcc {

/// Compares two nodes' attributes (the default: AttrMap's equality).
using AttrsMatch = std::function<bool(const Node& a, const Node& b)>;

/// \returns whether `a` and `b` are the same program: the same inputs,
/// constants, nodes and outputs in the same order, with the same names,
/// value ids, types, shardings, stages and bodies, each node reading the
/// counterparts of what the other reads, attributes equal as `attrsMatch`
/// says, and each constant holding the same data (the same block of the same
/// source tensor, the same buffer, or equal bytes when neither lies in a
/// mapped file: no weight byte is read). Every deterministic rewrite then
/// makes the same program of both. Costs one walk of each graph.
bool graphsIdentical(const Graph& a, const Graph& b, const AttrsMatch& attrsMatch = {});

/// \returns whether two attribute maps are equal (tensor attributes by value).
bool attrsEqual(const AttrMap& a, const AttrMap& b, const char* except = nullptr);

}  // namespace pcc
