// The one seeded generator of test data: the parser's elided constants, the
// evaluator's random inputs and pcc-run's --check inputs all come from here,
// so one seed means the same tensors everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/support/tensor.h"

namespace pcc {

/// \returns deterministic pseudo-random data of type `type` (splitmix64 from
/// `seed`): floats uniform in [-1, 1), integers in [0, 4), bools 0/1.
Tensor pseudoRandomTensor(const TensorType& type, uint64_t seed);

/// \returns one tensor per entry of `types`, tensor i seeded from `seed` and i
/// (the random inputs of a graph or a plan).
std::vector<Tensor> pseudoRandomTensors(const std::vector<TensorType>& types, uint64_t seed);

}  // namespace pcc
