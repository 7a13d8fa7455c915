// Element-wise comparison of tensors with a mixed absolute/relative tolerance.
#pragma once

#include <string>

#include "runtime/support/tensor.h"

namespace pcc {

/// The outcome of compareTensors().
struct Diff {
  double maxAbs = 0;   ///< largest |got - want|
  double maxRel = 0;   ///< largest |got - want| / |want| (over elements with want != 0)
  bool ok = true;      ///< every element within tolerance, and types equal
  std::string where;   ///< when !ok: the type mismatch, or the worst element and its values
};

/// Compares element-wise: ok iff |got - want| <= atol + rtol * |want| for every
/// element (NaN matches only NaN). A dtype or shape mismatch is not ok.
/// \returns the differences and, when not ok, where it fails.
Diff compareTensors(const Tensor& got, const Tensor& want, double rtol, double atol);

}  // namespace pcc
