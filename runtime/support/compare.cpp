#include "runtime/support/compare.h"

#include <algorithm>
#include <cmath>

#include "runtime/support/status.h"

namespace pcc {

namespace {
/// \returns "[i,j,k]", the multi-index of flat element `flat` in `shape`.
std::string indexString(int64_t flat, const Dims& shape) {
  Dims idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return dimsToString(idx);
}
}  // namespace

Diff compareTensors(const Tensor& got, const Tensor& want, double rtol, double atol) {
  Diff diff;
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    diff.ok = false;
    diff.where = strCat("type mismatch: got ", got.type().str(), ", want ", want.type().str());
    return diff;
  }
  int64_t worst = -1;
  double worstExcess = 0;  // how far the worst element is beyond its tolerance
  auto note = [&](int64_t i, double excess) {
    if (excess > 0 && (worst < 0 || excess > worstExcess)) {
      worst = i;
      worstExcess = excess;
    }
  };
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.getDouble(i), w = want.getDouble(i);
    bool gNan = std::isnan(g), wNan = std::isnan(w);
    if (gNan || wNan || std::isinf(g) || std::isinf(w)) {
      // Tolerances mean nothing for NaN and infinity: only the same special value matches.
      if ((gNan && wNan) || g == w) continue;
      diff.maxAbs = INFINITY;
      note(i, INFINITY);
      continue;
    }
    double abs = std::fabs(g - w);
    diff.maxAbs = std::max(diff.maxAbs, abs);
    if (w != 0) diff.maxRel = std::max(diff.maxRel, abs / std::fabs(w));
    note(i, abs - (atol + rtol * std::fabs(w)));
  }
  if (worst >= 0) {
    diff.ok = false;
    diff.where = strCat("element ", worst, " ", indexString(worst, got.shape()), ": got ", got.getDouble(worst),
                        ", want ", want.getDouble(worst), " (rtol ", rtol, ", atol ", atol, ")");
  }
  return diff;
}

}  // namespace pcc
