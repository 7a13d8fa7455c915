// Spectral transforms: DFT (opset-20 form: dft_length and axis are inputs)
// and STFT. Signals hold real ([..., 1]) or complex ([..., 2]) samples in the
// last dim; results are always complex ([..., 2]).
//
// The transform of length n along an axis of length L reads the first min(n, L)
// samples and treats the rest as zero (as numpy's fft with `n`); onesided
// keeps the first n/2 + 1 frequencies. Each output is a direct O(n^2) sum in
// double with a table of twiddle factors: a reference kernel, not an FFT.
// Their type inference is runtime/schema/signal_spectral.cpp.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/ops/reduce_norm.h"
#include "runtime/ops/signal.h"
#include "runtime/schema/signal_spectral.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::signal_spectral_schema;

/// The parameters of one 1-D transform.
struct DftPlan {
  int64_t n = 0;         ///< transform length
  int64_t inLen = 0;     ///< samples available along the axis
  int64_t outLen = 0;    ///< frequencies kept (n, or n/2 + 1 when onesided)
  int64_t inComps = 1;   ///< 1 (real) or 2 (complex)
  bool inverse = false;  ///< e^{+i...} and a 1/n scale
};

/// Computes one transform: `in` points at sample 0, samples `inStride`
/// elements apart, each `p.inComps` values; `out` at frequency 0, frequencies
/// `outStride` apart, each a [re, im] pair. `weights`, when given, scales
/// sample j first (the STFT window).
template <typename T>
void dft1d(const DftPlan& p, const std::vector<double>& cosT, const std::vector<double>& sinT, const T* in,
           int64_t inStride, const T* weights, T* out, int64_t outStride) {
  int64_t used = std::min(p.n, p.inLen);
  double sign = p.inverse ? 1.0 : -1.0;
  double scale = p.inverse ? 1.0 / static_cast<double>(p.n) : 1.0;
  for (int64_t k = 0; k < p.outLen; ++k) {
    double re = 0, im = 0;
    for (int64_t j = 0; j < used; ++j) {
      const T* s = in + j * inStride;
      double w = weights ? static_cast<double>(weights[j]) : 1.0;
      double xr = static_cast<double>(s[0]) * w;
      double xi = p.inComps == 2 ? static_cast<double>(s[1]) * w : 0.0;
      int64_t t = (k * j) % p.n;  // e^{sign * 2 pi i k j / n}
      double c = cosT[static_cast<size_t>(t)], sn = sign * sinT[static_cast<size_t>(t)];
      re += xr * c - xi * sn;
      im += xr * sn + xi * c;
    }
    out[k * outStride] = static_cast<T>(re * scale);
    out[k * outStride + 1] = static_cast<T>(im * scale);
  }
}

/// Fills the cos/sin tables of 2 pi t / n for t in [0, n).
void twiddles(int64_t n, std::vector<double>& cosT, std::vector<double>& sinT) {
  cosT.resize(static_cast<size_t>(n));
  sinT.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    double a = 2 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(n);
    cosT[static_cast<size_t>(t)] = std::cos(a);
    sinT[static_cast<size_t>(t)] = std::sin(a);
  }
}

Status computeDft(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeDft, in, attrs, out);
  ASSIGN_OR_RETURN(DftShape s, dftShape(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  DftPlan p;
  p.n = s.n;
  p.inLen = x.shape()[s.axis];
  p.outLen = s.out.shape[s.axis];
  p.inComps = x.shape().back();
  p.inverse = attrs.getInt("inverse", 0) != 0;
  int64_t outer, len, inner;
  splitAround(x.shape(), s.axis, outer, len, inner);
  inner /= p.inComps;  // samples between successive positions on the axis
  std::vector<double> cosT, sinT;
  twiddles(p.n, cosT, sinT);
  Tensor y = Tensor::zeros(s.out);
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    T* py = y.mutableData<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        dft1d<T>(p, cosT, sinT, px + (o * len * inner + i) * p.inComps, inner * p.inComps, nullptr,
                 py + (o * p.outLen * inner + i) * 2, inner * 2);
    return Status::OK();
  }));
  out.push_back(std::move(y));
  return Status::OK();
}

Status computeStft(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeStft, in, attrs, out);
  ASSIGN_OR_RETURN(StftShape s, stftShape(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  const Tensor* window = in.size() > 2 ? in[2] : nullptr;
  int64_t batch = x.shape()[0], length = x.shape()[1];
  DftPlan p;
  p.n = s.frameLength;
  p.inLen = s.frameLength;  // every frame lies inside the signal (frames is floored)
  p.outLen = s.out.shape[2];
  p.inComps = x.shape()[2];
  std::vector<double> cosT, sinT;
  twiddles(p.n, cosT, sinT);
  Tensor y = Tensor::zeros(s.out);
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    const T* pw = window ? window->data<T>() : nullptr;
    T* py = y.mutableData<T>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t f = 0; f < s.frames; ++f)
        dft1d<T>(p, cosT, sinT, px + (b * length + f * s.step) * p.inComps, p.inComps, pw,
                 py + (b * s.frames + f) * p.outLen * 2, 2);
    return Status::OK();
  }));
  out.push_back(std::move(y));
  return Status::OK();
}

}  // namespace

void registerSpectralOps(OpRegistry& r) {
  r.add(OpKind::DFT, &computeDft);
  r.add(OpKind::STFT, &computeStft);
}

}  // namespace pcc
