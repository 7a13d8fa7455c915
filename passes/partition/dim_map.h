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

/// \returns whether `k` maps each output element from the elements at the same
/// (broadcast) position of its inputs only: unary math, binary arithmetic and
/// logic, Where, Clip, Cast...
bool isElementwiseOp(OpKind k);

/// \returns the dimension map of `n`; every input has a links row sized to its rank.
OpDimMap dimMapFor(const Node& n);

/// \returns the links of a reshape from `in` to `out` (row-major, same numel).
std::vector<DimLink> reshapeLinks(const Dims& in, const Dims& out);

}  // namespace pcc
