// How each dimension of an op's inputs relates to its output dimensions: the
// one piece of per-op knowledge sharding propagation needs.
#pragma once

#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

/// Input dimension `d` of some input corresponds to output dimension `outDim`
/// (-1: to none; a split of it must be undone before the op). With `factor`,
/// the link is a reshape that splits or merges dims: it holds only when both
/// extents divide evenly by the number of parts.
struct DimLink {
  int outDim = -1;
  bool factor = false;
  /// A split must keep blocks of this many elements whole (an attention
  /// head's width in a [batch, seq, heads * width] input): it holds only when
  /// extent / granule divides by the number of parts.
  int64_t granule = 1;
};

struct OpDimMap {
  /// links[i][d] for input i, dimension d; the same for every output (Split).
  std::vector<std::vector<DimLink>> links;
  /// (inputA, dimA, inputB, dimB): dimensions summed over (MatMul's K). Both
  /// split over one mesh axis make the output a partial sum over that axis.
  struct Contraction { int inA, dimA, inB, dimB; };
  std::vector<Contraction> contractions;
  /// Input added to a contraction's result (Gemm's C): with a partial output,
  /// only one rank of the group may add it.
  int biasInput = -1;
};

/// Fills `m` (its links rows arrive sized, all unlinked) with the dimension map of `n`.
using DimMapRule = void (*)(const Node& n, OpDimMap& m);

/// \returns the rule of `op`, or nullptr when it has none: exactly the ops
/// that Ops.def marks Replicate (tests/unit/ops_table_test.cpp checks it).
DimMapRule dimMapRule(OpKind op);

/// \returns the dimension map of `n`; every input has a links row sized to its
/// rank. An op marked Replicate links nothing: split inputs are gathered.
OpDimMap dimMapFor(const Node& n);

/// \returns the links of a reshape from `in` to `out` (row-major, same numel).
std::vector<DimLink> reshapeLinks(const Dims& in, const Dims& out);

}  // namespace pcc
