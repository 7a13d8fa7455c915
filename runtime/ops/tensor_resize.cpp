// Resize: nearest, n-D linear and cubic interpolation with every coordinate
// transformation mode of opset 19, antialiasing, axes and the aspect-ratio
// policies. Upsample and the opset-10/11 forms are mapped onto it at import.
//
// Algorithm:
//   1. Work out per axis the output size, the scale and the (fractional) target
//      width from `scales` or `sizes`, `axes` and keep_aspect_ratio_policy.
//   2. For every output position on every resized axis, map it to a source
//      coordinate with the coordinate transformation mode, and turn that into a
//      list of taps (source index, weight); indices past either end read the
//      edge element, or get weight 0 under exclude_outside.
//   3. Interpolation is separable: nearest copies elements through one index
//      table per axis (exact for every dtype); linear and cubic apply the taps
//      one axis at a time on a double buffer and round once at the end.
//   4. tf_crop_and_resize positions whose source coordinate falls outside the
//      input on any axis take extrapolation_value.
// Their type inference is runtime/schema/tensor_resize.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/ops/tensor_util.h"
#include "runtime/schema/tensor_resize.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::tensor_resize_schema;

/// \returns the source coordinate of output position `x` on axis `d` of input
/// length `in`; sets `outside` for tf_crop_and_resize positions off the input.
double sourceCoord(const ResizePlan& p, int64_t d, int64_t x, int64_t in, bool& outside) {
  double s = p.scale[d], w = p.width[d], xd = static_cast<double>(x);
  outside = false;
  if (p.ctm == "half_pixel") return (xd + 0.5) / s - 0.5;
  if (p.ctm == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(p.outShape[d]) / w;
    double offset = in / 2.0 * (1 - adjustment);
    return offset + (xd + 0.5) / s - 0.5;
  }
  if (p.ctm == "pytorch_half_pixel") return p.outShape[d] > 1 ? (xd + 0.5) / s - 0.5 : 0.0;
  if (p.ctm == "align_corners") return w == 1 ? 0.0 : xd * (in - 1) / (w - 1);
  if (p.ctm == "asymmetric") return xd / s;
  if (p.ctm == "tf_half_pixel_for_nn") return (xd + 0.5) / s;
  // tf_crop_and_resize
  double lo = p.roiStart[d], hi = p.roiEnd[d];
  double c = w == 1 ? (hi - lo) * (in - 1) / 2.0 : xd * (hi - lo) * (in - 1) / (w - 1);
  c += lo * (in - 1);
  outside = c < 0 || c > in - 1;
  return c;
}

/// \returns the nearest input index of source coordinate `c` under `mode`.
int64_t nearestIndex(double c, const std::string& mode) {
  double f = std::floor(c);
  if (c == f) return static_cast<int64_t>(f);
  double frac = c - f;
  bool up = mode == "ceil" || (mode == "round_prefer_floor" && frac > 0.5) ||
            (mode == "round_prefer_ceil" && frac >= 0.5);
  return static_cast<int64_t>(f) + (up ? 1 : 0);
}

/// Cubic convolution kernel with parameter A at distance `t`.
double cubicKernel(double t, double A) {
  t = std::fabs(t);
  if (t <= 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

struct Tap {
  int64_t index;
  double weight;
};

/// \returns the taps of source coordinate `c` on an axis of length `in` and
/// scale `scale`, for linear or cubic mode.
std::vector<Tap> interpolationTaps(const ResizePlan& p, double c, int64_t in, double scale) {
  // `base` is the last index strictly left of c, so ratio is in (0, 1]; the
  // taps are the n indices nearest to c, n/2 on each side.
  int64_t base = static_cast<int64_t>(std::ceil(c)) - 1;
  double ratio = c - static_cast<double>(base);
  bool cubic = p.mode == "cubic";
  // Antialiasing widens the kernel by 1/scale when downsampling.
  double s = p.antialias ? std::min(scale, 1.0) : 1.0;
  int64_t first = cubic ? static_cast<int64_t>(std::floor(-2 / s)) + 1
                        : static_cast<int64_t>(std::floor(-1 / s)) + 1;
  int64_t count = 2 - 2 * first;
  std::vector<Tap> taps;
  double sum = 0;
  for (int64_t j = 0; j < count; ++j) {
    double t = (static_cast<double>(first + j) - ratio) * s;
    double w = cubic ? cubicKernel(t, p.cubicA) : std::max(0.0, 1 - std::fabs(t));
    int64_t idx = base + first + j;
    if (p.excludeOutside && (idx < 0 || idx >= in)) w = 0;
    taps.push_back({std::clamp<int64_t>(idx, 0, in - 1), w});
    sum += w;
  }
  // The kernels sum to 1 unless antialiased or cut by exclude_outside.
  if ((p.antialias || p.excludeOutside) && sum != 0)
    for (Tap& t : taps) t.weight /= sum;
  return taps;
}

/// Applies per-output-position taps along axis `d` of the row-major buffer
/// `buf` of shape `shape`; updates both.
void applyAxis(std::vector<double>& buf, Dims& shape, size_t d, const std::vector<std::vector<Tap>>& taps) {
  int64_t outer = 1, inner = 1, in = shape[d], out = static_cast<int64_t>(taps.size());
  for (size_t i = 0; i < d; ++i) outer *= shape[i];
  for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<double> next(outer * out * inner, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t x = 0; x < out; ++x) {
      double* dst = next.data() + (o * out + x) * inner;
      for (const Tap& t : taps[x]) {
        const double* src = buf.data() + (o * in + t.index) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += t.weight * src[i];
      }
    }
  buf.swap(next);
  shape[d] = out;
}

Status computeResize(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(ResizePlan p, resizePlan(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  int64_t rank = x.rank();
  // Per axis: positions that extrapolate (tf_crop_and_resize only).
  std::vector<std::vector<bool>> outside(rank);
  bool anyOutside = false;
  for (int64_t d = 0; d < rank; ++d) {
    outside[d].assign(p.outShape[d], false);
    if (!p.resized[d]) continue;
    for (int64_t o = 0; o < p.outShape[d]; ++o) {
      bool off = false;
      sourceCoord(p, d, o, x.shape()[d], off);
      outside[d][o] = off;
      anyOutside |= off;
    }
  }

  if (p.mode == "nearest") {
    std::vector<std::vector<int64_t>> maps(rank);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t len = x.shape()[d];
      for (int64_t o = 0; o < p.outShape[d]; ++o) {
        bool off = false;
        int64_t i = p.resized[d] ? nearestIndex(sourceCoord(p, d, o, len, off), p.nearestMode) : o;
        maps[d].push_back(off ? -1 : std::clamp<int64_t>(i, 0, len - 1));
      }
    }
    out.push_back(gatherAxisMaps(x, maps, scalarOf(x.dtype(), p.extrapolation)));
    return Status::OK();
  }

  std::vector<double> buf(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) buf[i] = x.getDouble(i);
  Dims shape = x.shape();
  for (int64_t d = 0; d < rank; ++d) {
    if (!p.resized[d]) continue;
    std::vector<std::vector<Tap>> taps(p.outShape[d]);
    for (int64_t o = 0; o < p.outShape[d]; ++o) {
      bool off = false;
      double c = sourceCoord(p, d, o, x.shape()[d], off);
      if (!off) taps[o] = interpolationTaps(p, c, x.shape()[d], p.scale[d]);
    }
    applyAxis(buf, shape, d, taps);
  }
  Tensor r = Tensor::zeros(x.dtype(), p.outShape);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < r.numel(); ++i) {
    bool off = false;
    for (int64_t d = 0; anyOutside && d < rank; ++d) off |= outside[d][idx[d]];
    storeDouble(r, i, off ? p.extrapolation : buf[i]);
    for (int64_t d = rank; d-- > 0;) {
      if (++idx[d] < p.outShape[d]) break;
      idx[d] = 0;
    }
  }
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

namespace ops {
void registerTensorResizeOps(OpRegistry& r) {
  r.add(OpKind::Resize, &computeResize);
}
}  // namespace ops

}  // namespace pcc
