// Sliding-window ops: Conv, ConvTranspose, MaxPool, AveragePool, LpPool,
// GlobalAveragePool and GlobalMaxPool, over 1 to 3 spatial dims. Every geometry is widened to 3-D (leading spatial dims
// of size 1, kernel 1, no padding) so one set of direct loops serves all ranks.
// Their type inference is runtime/schema/conv_pool.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "runtime/ops/op_util.h"
#include "runtime/schema/conv_pool.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::conv_pool_schema;

/// A WindowGeometry widened to exactly 3 spatial dims.
struct Geo3 {
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, s{1, 1, 1}, d{1, 1, 1},
      pb{0, 0, 0}, pe{0, 0, 0};
  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
  int64_t kSize() const { return k[0] * k[1] * k[2]; }
};

Geo3 widen(const WindowGeometry& g) {
  Geo3 r;
  int64_t off = 3 - g.spatial;
  for (int64_t i = 0; i < g.spatial; ++i) {
    r.in[off + i] = g.in[i];
    r.k[off + i] = g.kernel[i];
    r.out[off + i] = g.out[i];
    r.s[off + i] = g.strides[i];
    r.d[off + i] = g.dilations[i];
    r.pb[off + i] = g.padBegin[i];
    r.pe[off + i] = g.padEnd[i];
  }
  return r;
}

/// Visits every window position of output element (od, oh, ow): calls
/// f(inputSpatialOffset, kernelOffset) for taps inside the input, and counts
/// the taps that fall inside the (explicitly) padded input in `inPadded`.
template <typename F>
void forEachTap(const Geo3& g, int64_t od, int64_t oh, int64_t ow, int64_t& inPadded, F f) {
  inPadded = 0;
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
    bool padD = id >= -g.pb[0] && id < g.in[0] + g.pe[0];
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
      bool padH = ih >= -g.pb[1] && ih < g.in[1] + g.pe[1];
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
        bool padW = iw >= -g.pb[2] && iw < g.in[2] + g.pe[2];
        if (padD && padH && padW) ++inPadded;
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
        f((id * g.in[1] + ih) * g.in[2] + iw, (kd * g.k[1] + kh) * g.k[2] + kw);
      }
    }
  }
}

Status computeConv(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeConv, in, attrs, out);
  const Tensor &x = *in[0], &w = *in[1];
  const Tensor* bias = in.size() > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
  ASSIGN_OR_RETURN(WindowGeometry wg, convGeometry(x.type(), w.type(), attrs));
  Geo3 g = widen(wg);
  int64_t n = x.shape()[0], c = x.shape()[1], m = w.shape()[0];
  int64_t group = attrs.getInt("group", 1), cg = c / group, mg = m / group;
  Dims outShape = {n, m};
  outShape.insert(outShape.end(), wg.out.begin(), wg.out.end());
  Tensor r = Tensor::zeros(x.dtype(), outShape);
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* py = r.mutableData<T>();
    int64_t inSize = g.inSize(), outSize = g.outSize(), kSize = g.kSize();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < m; ++oc) {
        int64_t gi = oc / mg;
        T* y = py + (b * m + oc) * outSize;
        T b0 = bias ? bias->data<T>()[oc] : T(0);
        for (int64_t od = 0, o = 0; od < g.out[0]; ++od)
          for (int64_t oh = 0; oh < g.out[1]; ++oh)
            for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
              T acc = b0;
              int64_t unused;
              for (int64_t ci = 0; ci < cg; ++ci) {
                const T* xc = px + (b * c + gi * cg + ci) * inSize;
                const T* wc = pw + (oc * cg + ci) * kSize;
                forEachTap(g, od, oh, ow, unused,
                           [&](int64_t xi, int64_t ki) { acc += xc[xi] * wc[ki]; });
              }
              y[o] = acc;
            }
      }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeConvTranspose(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                            std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeConvTranspose, in, attrs, out);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferConvTranspose(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &w = *in[1];
  const Tensor* bias = in.size() > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
  ASSIGN_OR_RETURN(WindowGeometry wg, convTransposeGeometry(x.type(), w.type(), attrs));
  Geo3 g = widen(wg);
  int64_t n = x.shape()[0], c = x.shape()[1], m = types[0].shape[1];
  int64_t group = attrs.getInt("group", 1), cg = c / group, mg = m / group;
  Tensor r = Tensor::zeros(types[0]);
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* py = r.mutableData<T>();
    // Here g.out is X's spatial extent and g.in the output's (see above).
    int64_t xSize = g.outSize(), ySize = g.inSize(), kSize = g.kSize();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < m; ++oc) {
        T* y = py + (b * m + oc) * ySize;
        if (bias)
          for (int64_t i = 0; i < ySize; ++i) y[i] = bias->data<T>()[oc];
        int64_t gi = oc / mg, ocl = oc % mg;
        for (int64_t ci = 0; ci < cg; ++ci) {
          int64_t ic = gi * cg + ci;
          const T* xc = px + (b * c + ic) * xSize;
          const T* wc = pw + (ic * mg + ocl) * kSize;
          int64_t unused;
          for (int64_t id = 0, i = 0; id < g.out[0]; ++id)
            for (int64_t ih = 0; ih < g.out[1]; ++ih)
              for (int64_t iw = 0; iw < g.out[2]; ++iw, ++i) {
                T v = xc[i];
                forEachTap(g, id, ih, iw, unused, [&](int64_t yi, int64_t ki) { y[yi] += v * wc[ki]; });
              }
        }
      }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

enum class Pool { kMax, kAverage, kLp };

template <Pool kPool>
Status computePool(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computePool<kPool>, in, attrs, out);
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(WindowGeometry wg, poolGeometry(x.type(), attrs));
  Geo3 g = widen(wg);
  bool includePad = attrs.getInt("count_include_pad", 0) != 0;
  [[maybe_unused]] double norm = static_cast<double>(attrs.getInt("p", 2));  // LpPool
  int64_t planes = x.shape()[0] * x.shape()[1];
  Dims outShape = {x.shape()[0], x.shape()[1]};
  outShape.insert(outShape.end(), wg.out.begin(), wg.out.end());
  Tensor r = Tensor::zeros(x.dtype(), outShape);
  // MaxPool's Indices: the first maximum of each window, as a flat position in
  // X, row-major (storage_order 0) or with the spatial dims column-major (1).
  bool withIndices = kPool == Pool::kMax && attrs.getInt("num_outputs", 1) == 2;
  bool columnMajor = attrs.getInt("storage_order", 0) == 1;
  Tensor indices = withIndices ? Tensor::zeros(DType::kI64, outShape) : Tensor();
  RETURN_IF_ERROR(visitNumeric(x.dtype(), [&]<typename T>() -> Status {
    int64_t inSize = g.inSize(), outSize = g.outSize();
    for (int64_t p = 0; p < planes; ++p) {
      const T* xp = x.data<T>() + p * inSize;
      T* y = r.mutableData<T>() + p * outSize;
      for (int64_t od = 0, o = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
            int64_t inPadded = 0, taps = 0;
            if constexpr (kPool == Pool::kMax) {
              T best = std::numeric_limits<T>::lowest();
              int64_t at = -1;
              // NaN never wins (as std::max(best, x) has it); the first of equal
              // maxima gives the index.
              forEachTap(g, od, oh, ow, inPadded, [&](int64_t xi, int64_t) {
                if (best < xp[xi] || (at < 0 && xp[xi] == best)) {
                  best = xp[xi];
                  at = xi;
                }
              });
              y[o] = best;
              if (withIndices) {
                int64_t pos = at;
                if (columnMajor && at >= 0) {  // (d, h, w) -> d + h * D + w * D * H
                  int64_t d = at / (g.in[1] * g.in[2]), h = at / g.in[2] % g.in[1], w = at % g.in[2];
                  pos = d + h * g.in[0] + w * g.in[0] * g.in[1];
                }
                indices.mutableData<int64_t>()[p * outSize + o] = at < 0 ? -1 : p * inSize + pos;
              }
            } else if constexpr (kPool == Pool::kLp) {
              // Padding contributes zeros, which add nothing to the p-norm.
              double sum = 0;
              forEachTap(g, od, oh, ow, inPadded, [&](int64_t xi, int64_t) {
                sum += std::pow(std::fabs(static_cast<double>(xp[xi])), norm);
              });
              y[o] = static_cast<T>(std::pow(sum, 1.0 / norm));
            } else {
              double sum = 0;
              forEachTap(g, od, oh, ow, inPadded, [&](int64_t xi, int64_t) {
                sum += xp[xi];
                ++taps;
              });
              int64_t count = includePad ? inPadded : taps;
              y[o] = static_cast<T>(count ? sum / count : 0.0);
            }
          }
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  if (withIndices) out.push_back(std::move(indices));
  return Status::OK();
}

/// GlobalAveragePool (kMax false) or GlobalMaxPool over all spatial positions.
template <bool kMax>
Status computeGlobalPool(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                         std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeGlobalPool<kMax>, in, attrs, out);
  const Tensor& x = *in[0];
  Dims outShape = x.shape();
  std::fill(outShape.begin() + 2, outShape.end(), 1);
  Tensor r = output(out, 0, x.dtype(), outShape);
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t inner = planes ? x.numel() / planes : 0;
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    for (int64_t p = 0; p < planes; ++p) {
      const T* xp = x.data<T>() + p * inner;
      double acc = kMax ? -INFINITY : 0.0;
      for (int64_t i = 0; i < inner; ++i) acc = kMax ? std::max<double>(acc, xp[i]) : acc + xp[i];
      r.mutableData<T>()[p] = static_cast<T>(kMax ? acc : inner ? acc / inner : 0.0);
    }
    return Status::OK();
  }));
  return Status::OK();
}

}  // namespace

void registerConvPoolOps(OpRegistry& r) {
  r.add(OpKind::Conv, &computeConv);
  r.add(OpKind::MaxPool, &computePool<Pool::kMax>);
  r.add(OpKind::AveragePool, &computePool<Pool::kAverage>);
  r.add(OpKind::LpPool, &computePool<Pool::kLp>);
  r.add(OpKind::GlobalAveragePool, &computeGlobalPool<false>, kWritesOutputs);
  r.add(OpKind::GlobalMaxPool, &computeGlobalPool<true>, kWritesOutputs);
  r.add(OpKind::ConvTranspose, &computeConvTranspose);
}

}  // namespace pcc
