// When a node whose inputs are all constants is evaluated at compile time: one
// policy for the importer (which folds while it builds the graph) and the
// fold-constants pass, so both make the same plan weights.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

struct FoldLimits {
  /// A node is folded when its outputs, together, have at most this many
  /// elements, so large weights are never duplicated by folding a transpose or
  /// a cast of them.
  int64_t maxElements = 65536;
  /// A node whose constant inputs are all small (at most maxElements each) but
  /// whose outputs are larger (ConstantOfShape, Expand, Tile, Range) is folded
  /// up to this many output elements: weights a model generates become plan
  /// weights when reasonable, and stay run-time nodes beyond (hundreds of MiB
  /// of folded constants would be written to every plan).
  int64_t maxExpandElements = int64_t{1} << 24;
};

/// \returns whether a node reading `inputs` (nullptr: absent) and producing
/// `outputs` is to be folded: every present input constant, at least one
/// present, and the sizes within `limits`.
bool shouldFold(const std::vector<Value*>& inputs, const std::vector<TensorType>& outputs,
                const FoldLimits& limits = {});

}  // namespace pcc
