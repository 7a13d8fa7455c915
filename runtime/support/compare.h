// Element-wise comparison of tensors with a mixed absolute/relative tolerance.
#pragma once

#include <string>

#include "runtime/support/tensor.h"

namespace pcc {

/// What fraction of the expected tensor's largest magnitude a blind atol is
/// lowered to (see compareTensors).
inline constexpr double kBlindAtolFraction = 1e-3;

/// The outcome of compareTensors().
struct Diff {
  double maxAbs = 0;   ///< largest |got - want|
  double maxRel = 0;   ///< largest |got - want| / |want| (over elements with want != 0)
  bool ok = true;      ///< every element within tolerance, and types equal
  std::string where;   ///< when !ok: the type mismatch, or the worst element and its values
  double atol = 0;     ///< the absolute tolerance applied: the one asked for, or that scaled down
  bool atolScaled = false;  ///< the atol asked for was blind on `want` and was scaled down
  double magnitude = 0;  ///< largest finite |want| or |got|: the scale of the values compared
};

/// \returns the largest finite |element| of `t` (0 when it has none): the
/// scale of its values, infinities and NaNs left out.
double maxFiniteMagnitude(const Tensor& t);

/// Compares element-wise: ok iff |got - want| <= atol + rtol * |want| for every
/// element (NaN matches only NaN). A dtype or shape mismatch is not ok.
///
/// The tolerance must be able to fail. Let M be the largest finite magnitude
/// in `got` and `want`. When M > 0 and M <= atol + rtol * M, the tolerance
/// cannot tell these values from zero (an all-zero answer would pass against
/// `want`, and `got` would pass against an all-zero `want`): atol is lowered
/// to kBlindAtolFraction * M for this comparison (Diff::atol and
/// Diff::atolScaled say so). Should even that accept zeros (rtol near 1 or
/// more), the comparison is not ok and `where` says the tolerance is blind.
/// \returns the differences and, when not ok, where it fails.
Diff compareTensors(const Tensor& got, const Tensor& want, double rtol, double atol);

/// \returns "rtol R, atol A", and when the atol was scaled down, what it was
/// scaled from and why: the tolerance `d` was compared at, for a report line.
std::string toleranceUsed(const Diff& d, double rtol, double atolAsked);

}  // namespace pcc
