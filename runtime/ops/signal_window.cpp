// Generators of constant signal-processing tensors: the Blackman, Hann and
// Hamming windows and the mel filter bank (MelWeightMatrix). Their output
// shapes depend on input values, so type inference needs those inputs as
// constants; the values are computed in double and converted to
// `output_datatype` (integer types truncate, as a cast does).
// Their type inference is runtime/schema/signal_window.cpp.
#include <cmath>
#include <numbers>

#include "runtime/ops/signal.h"
#include "runtime/ops/tensor_util.h"
#include "runtime/schema/signal_window.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::signal_window_schema;

/// \returns a tensor of dtype `dt` and shape `shape` holding `v` converted.
Tensor fromDoubleValues(DType dt, const Dims& shape, const std::vector<double>& v) {
  Tensor t = Tensor::zeros(dt, shape);
  bool isFloat = dt == DType::kF32 || dt == DType::kF64 || isHalf(dt);
  for (size_t i = 0; i < v.size(); ++i) storeDouble(t, static_cast<int64_t>(i), isFloat ? v[i] : std::trunc(v[i]));
  return t;
}

// ---- Windows ---------------------------------------------------------------------

/// The generalized cosine window a0 - a1 cos(2 pi n / M) + a2 cos(4 pi n / M),
/// where M is the size (periodic) or the size - 1 (symmetric).
struct CosineWindow {
  double a0, a1, a2;
};

/// \returns the window of `size` samples with coefficients `w`.
std::vector<double> cosineWindow(int64_t size, bool periodic, CosineWindow w) {
  std::vector<double> v(static_cast<size_t>(size));
  // A symmetric window of one sample would divide by zero; it is the peak, 1.
  if (size == 1 && !periodic) return {1.0};
  double m = static_cast<double>(periodic ? size : size - 1);
  for (int64_t n = 0; n < size; ++n) {
    double phase = 2 * std::numbers::pi * static_cast<double>(n) / m;
    v[static_cast<size_t>(n)] = w.a0 - w.a1 * std::cos(phase) + w.a2 * std::cos(2 * phase);
  }
  return v;
}

template <int kWhich>
Status computeWindow(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  // Blackman; Hann (sin^2(pi n / M) = 0.5 - 0.5 cos(2 pi n / M)); Hamming with
  // alpha = 25/46 as ONNX and torch define it.
  static constexpr CosineWindow kCoeffs[] = {{0.42, 0.5, 0.08}, {0.5, 0.5, 0.0}, {25.0 / 46.0, 21.0 / 46.0, 0.0}};
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferWindow(argsFromTensors(in, attrs)));
  bool periodic = attrs.getInt("periodic", 1) != 0;
  int64_t size = types[0].shape[0];
  out.push_back(fromDoubleValues(types[0].dtype, types[0].shape, cosineWindow(size, periodic, kCoeffs[kWhich])));
  return Status::OK();
}

/// \returns the mel-scale value of `hz` computed in the precision of the edge
/// inputs (`F`), so the bin edges round as a float32 computation would.
template <typename F>
double hzToMel(double hz) {
  return static_cast<double>(F(2595) * std::log10(F(1) + static_cast<F>(hz) / F(700)));
}

Status computeMel(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferMel(argsFromTensors(in, attrs)));
  int64_t specBins = types[0].shape[0], bins = types[0].shape[1];
  int64_t dftLength = in[1]->getInt(0), sampleRate = in[2]->getInt(0);
  if (sampleRate <= 0) return invalidInput("sample_rate must be positive, got ", sampleRate);
  double lowHz = in[3]->getDouble(0), highHz = in[4]->getDouble(0);
  bool wide = in[3]->dtype() == DType::kF64;
  double lowMel = wide ? hzToMel<double>(lowHz) : hzToMel<float>(lowHz);
  double highMel = wide ? hzToMel<double>(highHz) : hzToMel<float>(highHz);
  // bins + 2 points evenly spaced on the mel scale, mapped back to hertz, then
  // to the index of the DFT bin holding them. The step divides the range by
  // the number of points (not the number of gaps), as ONNX's definition does.
  double step = (highMel - lowMel) / static_cast<double>(bins + 2);
  if (!wide) step = static_cast<float>(step);
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    double mel = static_cast<double>(i) * step + lowMel;
    double hz = 700 * (std::pow(10.0, mel / 2595) - 1);
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(dftLength + 1) * hz /
                                                                    static_cast<double>(sampleRate)));
  }
  std::vector<double> w(static_cast<size_t>(specBins * bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> StatusOr<double*> {
    if (j < 0 || j >= specBins)
      return invalidInput("mel band ", i, " reaches DFT bin ", j, ", outside [0, ", specBins,
                          "): upper_edge_hertz is above the Nyquist frequency of sample_rate");
    return &w[static_cast<size_t>(j * bins + i)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    int64_t lo = edge[i], mid = edge[i + 1], hi = edge[i + 2];
    if (mid == lo) {
      ASSIGN_OR_RETURN(double* p, at(mid, i));
      *p = 1;
    }
    for (int64_t j = lo; j <= mid && mid > lo; ++j) {  // rising slope, 0 at lo to 1 at mid
      ASSIGN_OR_RETURN(double* p, at(j, i));
      *p = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    }
    for (int64_t j = mid; j < hi; ++j) {  // falling slope, 1 at mid towards 0 at hi
      ASSIGN_OR_RETURN(double* p, at(j, i));
      *p = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
    }
  }
  out.push_back(fromDoubleValues(types[0].dtype, types[0].shape, w));
  return Status::OK();
}

}  // namespace

void registerWindowOps(OpRegistry& r) {
  r.add(OpKind::BlackmanWindow, &computeWindow<0>);
  r.add(OpKind::HannWindow, &computeWindow<1>);
  r.add(OpKind::HammingWindow, &computeWindow<2>);
  r.add(OpKind::MelWeightMatrix, &computeMel);
}

}  // namespace pcc
