// Ops that sample an image at computed, fractional positions: GridSample
// (opset-20 semantics, any number of spatial dims), AffineGrid, RoiAlign and
// DeformConv. Positions and weights are computed in double.
// Their type inference is runtime/schema/vision_sample.cpp.
#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/ops/vision.h"
#include "runtime/schema/vision_sample.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::vision_sample_schema;

// ---- GridSample ----------------------------------------------------------------

/// Folds `x` back into [lo, hi] by mirroring at the borders, as often as needed.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    auto n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    auto n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

/// Keys' cubic convolution weights (a = -0.75) of the 4 taps around a point at
/// fraction `t` in [0, 1) past the second tap.
void cubicWeights(double t, double w[4]) {
  constexpr double a = -0.75;
  double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  w[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1;
  w[3] = ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a;
}

Status computeGridSample(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferGridSample(argsFromTensors(in, attrs)));
  ASSIGN_OR_RETURN(GridSampleParams p, gridSampleParams(attrs));
  const Tensor &x = *in[0], &grid = *in[1];
  std::vector<double> xv = toDoubles(x), gv = toDoubles(grid);
  int64_t r = x.rank() - 2, batch = x.shape()[0], channels = x.shape()[1];
  Dims dims(x.shape().begin() + 2, x.shape().end());
  std::vector<int64_t> strides = stridesOf(dims);
  int64_t inSize = numElements(dims);
  int64_t outSize = numElements(Dims(grid.shape().begin() + 1, grid.shape().end() - 1));
  std::vector<double> y(static_cast<size_t>(numElements(types[0].shape)), 0.0);
  int64_t taps = p.interp == Interp::kNearest ? 1 : p.interp == Interp::kLinear ? 2 : 4;

  // Per dim: the taps' indices (-1 when outside and padding is zeros) and weights.
  std::vector<std::vector<int64_t>> idx(static_cast<size_t>(r), std::vector<int64_t>(4));
  std::vector<std::vector<double>> wt(static_cast<size_t>(r), std::vector<double>(4));
  std::vector<std::pair<int64_t, double>> samples;  // (input offset, weight)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < outSize; ++o) {
      const double* g = gv.data() + (n * outSize + o) * r;
      for (int64_t i = 0; i < r; ++i) {
        auto d = static_cast<double>(dims[i]);
        double lo = p.alignCorners ? 0.0 : -0.5, hi = p.alignCorners ? d - 1 : d - 0.5;
        // The grid's last axis lists coordinates innermost dim first (x, y, z).
        double c = g[r - 1 - i];
        double pos = p.alignCorners ? (c + 1) / 2 * (d - 1) : ((c + 1) * d - 1) / 2;
        if (p.interp == Interp::kNearest) pos = std::nearbyint(pos);  // half to even
        if (pos < lo || pos > hi) {
          if (p.padding == Padding::kBorder) pos = std::clamp(pos, 0.0, d - 1);
          else if (p.padding == Padding::kReflection) pos = reflect(pos, lo, hi);
        }
        auto base = static_cast<int64_t>(std::floor(pos));
        auto& ix = idx[static_cast<size_t>(i)];
        auto& w = wt[static_cast<size_t>(i)];
        if (p.interp == Interp::kNearest) {
          ix[0] = static_cast<int64_t>(pos);  // truncation, after the rounding above
          w[0] = 1;
        } else if (p.interp == Interp::kLinear) {
          ix[0] = base;
          ix[1] = base + 1;
          w[1] = pos - static_cast<double>(base);
          w[0] = 1 - w[1];
        } else {
          for (int64_t k = 0; k < 4; ++k) ix[k] = base - 1 + k;
          cubicWeights(pos - static_cast<double>(base), w.data());
        }
        for (int64_t k = 0; k < taps; ++k) {
          int64_t& t = ix[k];
          if (t >= 0 && t < dims[i]) continue;
          if (p.padding == Padding::kZeros) t = -1;
          else if (p.padding == Padding::kBorder) t = std::clamp<int64_t>(t, 0, dims[i] - 1);
          else t = static_cast<int64_t>(reflect(static_cast<double>(t), lo, hi));
        }
      }
      // Every combination of one tap per dim.
      samples.clear();
      std::vector<int64_t> k(static_cast<size_t>(r), 0);
      while (true) {
        double w = 1;
        int64_t off = 0;
        bool inside = true;
        for (int64_t i = 0; i < r; ++i) {
          int64_t t = idx[static_cast<size_t>(i)][k[i]];
          if (t < 0) inside = false;
          w *= wt[static_cast<size_t>(i)][k[i]];
          off += t * strides[i];
        }
        if (inside) samples.emplace_back(off, w);
        int64_t i = r - 1;
        while (i >= 0 && ++k[i] == taps) k[i--] = 0;
        if (i < 0) break;
      }
      for (int64_t c = 0; c < channels; ++c) {
        const double* plane = xv.data() + (n * channels + c) * inSize;
        double acc = 0;
        for (const auto& [off, w] : samples) acc += w * plane[off];
        y[static_cast<size_t>((n * channels + c) * outSize + o)] = acc;
      }
    }
  out.push_back(fromDoubles(x.dtype(), types[0].shape, y));
  return Status::OK();
}

Status computeAffineGrid(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferAffineGrid(argsFromTensors(in, attrs)));
  bool align = attrs.getInt("align_corners", 0) != 0;
  std::vector<double> theta = toDoubles(*in[0]);
  const Dims& shape = types[0].shape;
  int64_t r = shape.back(), batch = shape[0];
  Dims spatial(shape.begin() + 1, shape.end() - 1);
  int64_t points = numElements(spatial);
  // The normalized coordinate of position i of a dim of n positions.
  auto coord = [&](int64_t i, int64_t n) {
    auto fi = static_cast<double>(i), fn = static_cast<double>(n);
    if (align) return n > 1 ? -1 + 2 * fi / (fn - 1) : -1.0;
    return -1 + (2 * fi + 1) / fn;
  };
  std::vector<double> y(static_cast<size_t>(numElements(shape)));
  std::vector<double> h(static_cast<size_t>(r + 1));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t pt = 0; pt < points; ++pt) {
      // Homogeneous point (x, y[, z], 1): x runs along the innermost dim.
      int64_t rem = pt;
      for (int64_t i = r - 1; i >= 0; --i) {
        h[static_cast<size_t>(r - 1 - i)] = coord(rem % spatial[i], spatial[i]);
        rem /= spatial[i];
      }
      h[static_cast<size_t>(r)] = 1;
      const double* t = theta.data() + n * r * (r + 1);
      for (int64_t a = 0; a < r; ++a) {
        double acc = 0;
        for (int64_t b = 0; b <= r; ++b) acc += t[a * (r + 1) + b] * h[static_cast<size_t>(b)];
        y[static_cast<size_t>((n * points + pt) * r + a)] = acc;
      }
    }
  out.push_back(fromDoubles(types[0].dtype, shape, y));
  return Status::OK();
}

Status computeRoiAlign(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferRoiAlign(argsFromTensors(in, attrs)));
  std::vector<double> x = toDoubles(*in[0]), rois = toDoubles(*in[1]);
  int64_t batch = in[0]->shape()[0], channels = in[0]->shape()[1];
  int64_t height = in[0]->shape()[2], width = in[0]->shape()[3];
  int64_t numRois = types[0].shape[0], oh = types[0].shape[2], ow = types[0].shape[3];
  bool isMax = attrs.getString("mode", "avg") == "max";
  bool halfPixel = attrs.getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  int64_t ratio = attrs.getInt("sampling_ratio", 0);
  double scale = attrs.getFloat("spatial_scale", 1.0f);
  std::vector<double> y(static_cast<size_t>(numElements(types[0].shape)), 0.0);

  struct Sample {
    int64_t pos[4];
    double w[4];
  };
  for (int64_t ri = 0; ri < numRois; ++ri) {
    int64_t b = in[2]->getInt(ri);
    if (b < 0 || b >= batch) return invalidInput("RoiAlign: batch index ", b, " out of range [0, ", batch, ")");
    double off = halfPixel ? 0.5 : 0.0;
    const double* roi = rois.data() + ri * 4;
    double x0 = roi[0] * scale - off, y0 = roi[1] * scale - off;
    double rw = roi[2] * scale - off - x0, rh = roi[3] * scale - off - y0;
    if (!halfPixel) {  // the legacy mode makes malformed boxes 1x1
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double binH = rh / static_cast<double>(oh), binW = rw / static_cast<double>(ow);
    int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
    int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
    double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    // Bilinear samples of each bin, shared by all channels.
    std::vector<Sample> samples;
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            double sy = y0 + static_cast<double>(ph) * binH + (static_cast<double>(iy) + 0.5) * binH / static_cast<double>(gh);
            double sx = x0 + static_cast<double>(pw) * binW + (static_cast<double>(ix) + 0.5) * binW / static_cast<double>(gw);
            Sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (!(sy < -1.0 || sy > static_cast<double>(height) || sx < -1.0 || sx > static_cast<double>(width))) {
              sy = std::max(sy, 0.0);
              sx = std::max(sx, 0.0);
              auto yl = static_cast<int64_t>(sy), xl = static_cast<int64_t>(sx);
              int64_t yh = yl + 1, xh = xl + 1;
              if (yl >= height - 1) yh = yl = height - 1, sy = static_cast<double>(yl);
              if (xl >= width - 1) xh = xl = width - 1, sx = static_cast<double>(xl);
              double ly = sy - static_cast<double>(yl), lx = sx - static_cast<double>(xl);
              s = {{yl * width + xl, yl * width + xh, yh * width + xl, yh * width + xh},
                   {(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx}};
            }
            samples.push_back(s);
          }
    for (int64_t c = 0; c < channels; ++c) {
      const double* plane = x.data() + (b * channels + c) * height * width;
      size_t si = 0;
      for (int64_t bin = 0; bin < oh * ow; ++bin) {
        double acc = 0;
        for (int64_t k = 0; k < gh * gw; ++k, ++si) {
          const Sample& s = samples[si];
          if (isMax) {
            // The maximum of the weighted corners, as the reference defines it.
            double v = std::max(std::max(s.w[0] * plane[s.pos[0]], s.w[1] * plane[s.pos[1]]),
                                std::max(s.w[2] * plane[s.pos[2]], s.w[3] * plane[s.pos[3]]));
            acc = k == 0 ? v : std::max(acc, v);
          } else {
            for (int q = 0; q < 4; ++q) acc += s.w[q] * plane[s.pos[q]];
          }
        }
        y[static_cast<size_t>((ri * channels + c) * oh * ow + bin)] = isMax ? acc : acc / count;
      }
    }
  }
  out.push_back(fromDoubles(types[0].dtype, types[0].shape, y));
  return Status::OK();
}

Status computeDeformConv(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferDeformConv(args));
  ASSIGN_OR_RETURN(DeformGeometry d, deformGeometry(args));
  const WindowGeometry& g = d.g;
  std::vector<double> x = toDoubles(*in[0]), w = toDoubles(*in[1]), off = toDoubles(*in[2]);
  const Tensor *bias = optionalInput(in, 3), *mask = optionalInput(in, 4);
  std::vector<double> maskV = mask ? toDoubles(*mask) : std::vector<double>();
  int64_t batch = in[0]->shape()[0], c = in[0]->shape()[1], m = in[1]->shape()[0];
  int64_t ih = g.in[0], iw = g.in[1], kh = g.kernel[0], kw = g.kernel[1], oh = g.out[0], ow = g.out[1];
  int64_t taps = kh * kw, cg = c / d.group, mg = m / d.group, cPerOff = c / d.offsetGroup;
  // Bilinear sample of one input plane at (py, px); taps outside read zero.
  auto sample = [&](const double* plane, double py, double px) {
    if (py <= -1 || py >= static_cast<double>(ih) || px <= -1 || px >= static_cast<double>(iw)) return 0.0;
    auto y0 = static_cast<int64_t>(std::floor(py)), x0 = static_cast<int64_t>(std::floor(px));
    double ly = py - static_cast<double>(y0), lx = px - static_cast<double>(x0), acc = 0;
    for (int64_t dy = 0; dy < 2; ++dy)
      for (int64_t dx = 0; dx < 2; ++dx) {
        int64_t yy = y0 + dy, xx = x0 + dx;
        if (yy < 0 || yy >= ih || xx < 0 || xx >= iw) continue;
        acc += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * plane[yy * iw + xx];
      }
    return acc;
  };
  std::vector<double> y(static_cast<size_t>(numElements(types[0].shape)), 0.0);
  // cols[ci][tap] of one output position: the deformed, masked input samples.
  std::vector<double> cols(static_cast<size_t>(c * taps));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        for (int64_t ci = 0; ci < c; ++ci) {
          int64_t og = ci / cPerOff;
          const double* plane = x.data() + (n * c + ci) * ih * iw;
          for (int64_t t = 0; t < taps; ++t) {
            int64_t ky = t / kw, kx = t % kw;
            int64_t offC = (og * taps + t) * 2;
            double dy = off[static_cast<size_t>(((n * d.offsetGroup * 2 * taps + offC) * oh + oy) * ow + ox)];
            double dx = off[static_cast<size_t>(((n * d.offsetGroup * 2 * taps + offC + 1) * oh + oy) * ow + ox)];
            double py = static_cast<double>(oy * g.strides[0] - g.padBegin[0] + ky * g.dilations[0]) + dy;
            double px = static_cast<double>(ox * g.strides[1] - g.padBegin[1] + kx * g.dilations[1]) + dx;
            double v = sample(plane, py, px);
            if (mask) v *= maskV[static_cast<size_t>(((n * d.offsetGroup * taps + og * taps + t) * oh + oy) * ow + ox)];
            cols[static_cast<size_t>(ci * taps + t)] = v;
          }
        }
        for (int64_t oc = 0; oc < m; ++oc) {
          int64_t gi = oc / mg;
          double acc = bias ? bias->getDouble(oc) : 0.0;
          for (int64_t cl = 0; cl < cg; ++cl)
            for (int64_t t = 0; t < taps; ++t)
              acc += w[static_cast<size_t>((oc * cg + cl) * taps + t)] *
                     cols[static_cast<size_t>((gi * cg + cl) * taps + t)];
          y[static_cast<size_t>(((n * m + oc) * oh + oy) * ow + ox)] = acc;
        }
      }
  out.push_back(fromDoubles(types[0].dtype, types[0].shape, y));
  return Status::OK();
}

}  // namespace

void registerVisionSampleOps(OpRegistry& r) {
  r.add(OpKind::GridSample, &computeGridSample);
  r.add(OpKind::AffineGrid, &computeAffineGrid);
  r.add(OpKind::RoiAlign, &computeRoiAlign);
  r.add(OpKind::DeformConv, &computeDeformConv);
}

}  // namespace pcc
