// Sliding-window ops: Conv, ConvTranspose, MaxPool, AveragePool, LpPool,
// GlobalAveragePool and GlobalMaxPool, over 1 to 3 spatial dims. Every geometry is widened to 3-D (leading spatial dims
// of size 1, kernel 1, no padding) so one set of direct loops serves all ranks.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

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

Status checkSpatialInput(const TensorType& x, const char* what) {
  if (x.rank() < 3 || x.rank() > 5)
    return unsupported(what, " must be [N,C,D1..Dn] with 1 to 3 spatial dims, got ", x.str());
  return Status::OK();
}

Dims spatialOf(const Dims& shape) { return Dims(shape.begin() + 2, shape.end()); }

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

// ---- Conv ------------------------------------------------------------------

StatusOr<WindowGeometry> convGeometry(const TensorType& x, const TensorType& w,
                                      const AttrMap& attrs) {
  RETURN_IF_ERROR(checkSpatialInput(x, "input X"));
  if (w.rank() != x.rank())
    return invalidInput("weight ", w.str(), " must have the rank of input ", x.str());
  int64_t group = attrs.getInt("group", 1);
  int64_t c = x.shape[1], m = w.shape[0];
  if (group <= 0 || c % group != 0 || m % group != 0)
    return invalidInput("group ", group, " must divide input channels ", c,
                        " and output channels ", m);
  if (w.shape[1] * group != c)
    return invalidInput("weight ", w.str(), " expects ", w.shape[1] * group,
                        " input channels, input is ", x.str(), " with group ", group);
  Dims kernel = spatialOf(w.shape);
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != kernel)
    return invalidInput("kernel_shape ", dimsToString(attrs.getInts("kernel_shape")),
                        " differs from weight ", w.str());
  return windowGeometry(spatialOf(x.shape), kernel, attrs, false);
}

StatusOr<std::vector<TensorType>> inferConv(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const TensorType &x = args.inputs[0], &w = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (w.dtype != x.dtype) return invalidInput("weight type ", w.str(), " differs from X ", x.str());
  static const AttrMap kNoAttrs;
  ASSIGN_OR_RETURN(WindowGeometry g, convGeometry(x, w, args.attrs ? *args.attrs : kNoAttrs));
  if (args.has(2)) {
    const TensorType& b = args.inputs[2];
    if (b.dtype != x.dtype || b.shape != Dims{w.shape[0]})
      return invalidInput("bias ", b.str(), " must be ", dtypeName(x.dtype), "[", w.shape[0], "]");
  }
  Dims out = {x.shape[0], w.shape[0]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return std::vector<TensorType>{{x.dtype, out}};
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

// ---- ConvTranspose -----------------------------------------------------------

/// The geometry of a transposed convolution, phrased as the convolution it is
/// the transpose of: `in` holds the ConvTranspose output sizes and `out` the
/// input sizes, so that forEachTap maps an input position and a kernel tap to
/// the output position it adds into.
StatusOr<WindowGeometry> convTransposeGeometry(const TensorType& x, const TensorType& w,
                                               const AttrMap& attrs) {
  RETURN_IF_ERROR(checkSpatialInput(x, "input X"));
  if (w.rank() != x.rank())
    return invalidInput("weight ", w.str(), " must have the rank of input ", x.str());
  int64_t group = attrs.getInt("group", 1);
  if (group <= 0 || x.shape[1] % group != 0 || w.shape[0] != x.shape[1])
    return invalidInput("weight ", w.str(), " must be [C, M/group, k...] for input ", x.str(),
                        " and group ", group);
  int64_t n = x.rank() - 2;
  WindowGeometry g;
  g.spatial = n;
  g.out = spatialOf(x.shape);
  g.kernel = spatialOf(w.shape);
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != g.kernel)
    return invalidInput("kernel_shape ", dimsToString(attrs.getInts("kernel_shape")),
                        " differs from weight ", w.str());
  g.strides = attrs.getInts("strides", Dims(n, 1));
  g.dilations = attrs.getInts("dilations", Dims(n, 1));
  Dims pads = attrs.getInts("pads", Dims(2 * n, 0));
  Dims outPad = attrs.getInts("output_padding", Dims(n, 0));
  Dims outShape = attrs.getInts("output_shape", {});
  if (outShape.size() == static_cast<size_t>(n + 2)) outShape.erase(outShape.begin(), outShape.begin() + 2);
  if (static_cast<int64_t>(g.strides.size()) != n || static_cast<int64_t>(g.dilations.size()) != n ||
      static_cast<int64_t>(pads.size()) != 2 * n || static_cast<int64_t>(outPad.size()) != n ||
      (!outShape.empty() && static_cast<int64_t>(outShape.size()) != n))
    return invalidInput("strides, dilations, output_padding, output_shape need ", n, " values and pads ",
                        2 * n, " for ", n, " spatial dims");
  std::string autoPad = attrs.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return invalidInput("unknown auto_pad '", autoPad, "'");
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  g.in.resize(n);
  g.padBegin.resize(n);
  g.padEnd.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = g.strides[i], d = g.dilations[i], k = g.kernel[i];
    if (s <= 0 || d <= 0 || k <= 0)
      return invalidInput("kernel ", k, ", stride ", s, " and dilation ", d, " must be positive");
    // Output size before padding is removed.
    int64_t full = s * (g.out[i] - 1) + outPad[i] + (k - 1) * d + 1;
    if (!outShape.empty() || same) {
      // The output size is given (or in * stride); the padding making it up is
      // split evenly, the odd unit at the end for SAME_UPPER, else at the start.
      g.in[i] = outShape.empty() ? g.out[i] * s : outShape[i];
      int64_t total = full - g.in[i];
      // Halves round down, also for a negative total (output larger than full).
      int64_t halfDown = total >= 0 ? total / 2 : -((1 - total) / 2);
      g.padBegin[i] = autoPad == "SAME_UPPER" ? halfDown : total - halfDown;
      g.padEnd[i] = total - g.padBegin[i];
    } else {
      bool valid = autoPad == "VALID";
      g.padBegin[i] = valid ? 0 : pads[i];
      g.padEnd[i] = valid ? 0 : pads[i + n];
      g.in[i] = full - g.padBegin[i] - g.padEnd[i];
    }
    if (g.in[i] < 0) return invalidInput("output size ", g.in[i], " in spatial dim ", i, " is negative");
  }
  return g;
}

StatusOr<std::vector<TensorType>> inferConvTranspose(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const TensorType &x = args.inputs[0], &w = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (w.dtype != x.dtype) return invalidInput("weight type ", w.str(), " differs from X ", x.str());
  static const AttrMap kNoAttrs;
  const AttrMap& attrs = args.attrs ? *args.attrs : kNoAttrs;
  ASSIGN_OR_RETURN(WindowGeometry g, convTransposeGeometry(x, w, attrs));
  int64_t m = w.shape[1] * attrs.getInt("group", 1);
  if (args.has(2)) {
    const TensorType& b = args.inputs[2];
    if (b.dtype != x.dtype || b.shape != Dims{m})
      return invalidInput("bias ", b.str(), " must be ", dtypeName(x.dtype), "[", m, "]");
  }
  Dims out = {x.shape[0], m};
  out.insert(out.end(), g.in.begin(), g.in.end());
  return std::vector<TensorType>{{x.dtype, out}};
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

// ---- pooling ---------------------------------------------------------------

StatusOr<WindowGeometry> poolGeometry(const TensorType& x, const AttrMap& attrs) {
  RETURN_IF_ERROR(checkSpatialInput(x, "input X"));
  if (!attrs.has("kernel_shape")) return invalidInput("missing attribute 'kernel_shape'");
  return windowGeometry(spatialOf(x.shape), attrs.getInts("kernel_shape"), attrs, true);
}

StatusOr<std::vector<TensorType>> inferPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  static const AttrMap kNoAttrs;
  ASSIGN_OR_RETURN(WindowGeometry g, poolGeometry(x, args.attrs ? *args.attrs : kNoAttrs));
  Dims out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return std::vector<TensorType>{{x.dtype, out}};
}

/// MaxPool's node carries num_outputs (1, or 2 when the importer saw Indices
/// used): Indices are int64 flat positions in X, over the whole tensor.
StatusOr<std::vector<TensorType>> inferMaxPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0],
                             {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                              DType::kU8, DType::kI32, DType::kI64},
                             "input X"));
  const AttrMap& a = attrsOf(args);
  int64_t outputs = a.getInt("num_outputs", 1), order = a.getInt("storage_order", 0);
  if (outputs != 1 && outputs != 2) return invalidInput("num_outputs must be 1 or 2, got ", outputs);
  if (order != 0 && order != 1) return invalidInput("storage_order must be 0 or 1, got ", order);
  ASSIGN_OR_RETURN(std::vector<TensorType> t, inferPool(args));
  if (outputs == 2) t.push_back({DType::kI64, t[0].shape});
  return t;
}

StatusOr<std::vector<TensorType>> inferAveragePool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input X"));
  return inferPool(args);
}

StatusOr<std::vector<TensorType>> inferLpPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input X"));
  if (args.attrs && args.attrs->getInt("p", 2) <= 0)
    return invalidInput("p must be positive, got ", args.attrs->getInt("p", 2));
  return inferPool(args);
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

StatusOr<std::vector<TensorType>> inferGlobalPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (x.rank() < 3) return invalidInput("input X must be [N,C,D1..Dn], got ", x.str());
  Dims out = x.shape;
  std::fill(out.begin() + 2, out.end(), 1);
  return std::vector<TensorType>{{x.dtype, out}};
}

/// GlobalAveragePool (kMax false) or GlobalMaxPool over all spatial positions.
template <bool kMax>
Status computeGlobalPool(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                         std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeGlobalPool<kMax>, in, attrs, out);
  const Tensor& x = *in[0];
  Dims outShape = x.shape();
  std::fill(outShape.begin() + 2, outShape.end(), 1);
  Tensor r = Tensor::zeros(x.dtype(), outShape);
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
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerConvPoolOps(OpRegistry& r) {
  r.add({"Conv", &inferConv, &computeConv});
  r.add({"MaxPool", &inferMaxPool, &computePool<Pool::kMax>});
  r.add({"AveragePool", &inferAveragePool, &computePool<Pool::kAverage>});
  r.add({"LpPool", &inferLpPool, &computePool<Pool::kLp>});
  r.add({"GlobalAveragePool", &inferGlobalPool, &computeGlobalPool<false>});
  r.add({"GlobalMaxPool", &inferGlobalPool, &computeGlobalPool<true>});
  r.add({"ConvTranspose", &inferConvTranspose, &computeConvTranspose});
}

}  // namespace pcc
