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

/// Whether the tolerance takes values up to magnitude `m` for zeros:
/// |0 - w| <= atol + rtol |w| holds for every |w| <= m iff it holds at m.
bool zerosPass(double m, double rtol, double atol) { return m > 0 && m <= atol + rtol * m; }
}  // namespace

double maxFiniteMagnitude(const Tensor& t) {
  double m = 0;
  if (t.dtype() == DType::kF32) {  // the common case, without getDouble's dispatch
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::isfinite(p[i])) m = std::max(m, std::fabs(static_cast<double>(p[i])));
    return m;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.getDouble(i);
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  }
  return m;
}

Diff compareTensors(const Tensor& got, const Tensor& want, double rtol, double atol) {
  Diff diff;
  diff.atol = atol;
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    diff.ok = false;
    diff.where = strCat("type mismatch: got ", got.type().str(), ", want ", want.type().str());
    return diff;
  }
  // A tolerance that takes these values for zeros cannot tell a wrong answer
  // from a right one: scale it to the values compared.
  diff.magnitude = std::max(maxFiniteMagnitude(want), maxFiniteMagnitude(got));
  if (zerosPass(diff.magnitude, rtol, atol)) {
    atol = kBlindAtolFraction * diff.magnitude;
    diff.atol = atol;
    diff.atolScaled = true;
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
  } else if (zerosPass(diff.magnitude, rtol, atol)) {
    diff.ok = false;
    diff.where = strCat("the tolerance cannot detect a wrong answer: rtol ", rtol,
                        " takes these values for zeros (they reach ", diff.magnitude, ")");
  }
  return diff;
}

std::string toleranceUsed(const Diff& d, double rtol, double atolAsked) {
  if (!d.atolScaled) return strCat("rtol ", rtol, ", atol ", atolAsked);
  return strCat("rtol ", rtol, ", atol ", d.atol, " (scaled from ", atolAsked, ": the values reach only ",
                d.magnitude, ")");
}

}  // namespace pcc
