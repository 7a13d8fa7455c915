// Softmax, LogSoftmax, Hardmax and the normalizations on 3-D and 4-D tensors
// along middle axes, where a kernel that confuses the axis with the last one,
// or the inner stride with the outer, gives wrong answers that 2-D tests miss.
// Expected values come from a plain double-precision reference in this file
// that walks each group of elements sharing every coordinate outside the
// normalized axes; inputs are irregular so that no two groups are alike.
#include <cmath>
#include <algorithm>
#include <functional>
#include <map>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

/// \returns irregular values for a tensor of `shape` (no symmetry between groups).
Tensor irregular(const Dims& shape, double scale = 3.0) {
  std::vector<float> v(numElements(shape));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(scale * std::sin(1.7 * static_cast<double>(i) + 0.3) + 0.1 * static_cast<double>(i % 7));
  return f32(shape, v);
}

/// \returns the groups of flat indices that share every coordinate outside `axes`.
std::vector<std::vector<int64_t>> groups(const Dims& shape, const std::vector<int>& axes) {
  int rank = static_cast<int>(shape.size());
  std::vector<bool> in(rank, false);
  for (int a : axes) in[a] = true;
  std::map<std::vector<int64_t>, std::vector<int64_t>> by_key;
  int64_t n = numElements(shape);
  for (int64_t flat = 0; flat < n; ++flat) {
    std::vector<int64_t> key;
    int64_t rest = flat;
    std::vector<int64_t> coord(rank);
    for (int d = rank - 1; d >= 0; --d) {
      coord[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (int d = 0; d < rank; ++d)
      if (!in[d]) key.push_back(coord[d]);
    by_key[key].push_back(flat);
  }
  std::vector<std::vector<int64_t>> out;
  for (auto& [k, g] : by_key) out.push_back(g);
  return out;
}

/// Applies `f` (values of one group -> results) to every group of `x` over `axes`.
std::vector<double> perGroup(const Tensor& x, const std::vector<int>& axes,
                             const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  std::vector<double> out(x.numel());
  for (const auto& g : groups(x.shape(), axes)) {
    std::vector<double> v;
    for (int64_t i : g) v.push_back(x.getDouble(i));
    std::vector<double> r = f(v);
    for (size_t k = 0; k < g.size(); ++k) out[g[k]] = r[k];
  }
  return out;
}

std::vector<double> softmax(const std::vector<double>& v) {
  double m = *std::max_element(v.begin(), v.end()), s = 0;
  for (double x : v) s += std::exp(x - m);
  std::vector<double> r;
  for (double x : v) r.push_back(std::exp(x - m) / s);
  return r;
}

std::vector<double> logSoftmax(const std::vector<double>& v) {
  std::vector<double> r = softmax(v);
  for (double& x : r) x = std::log(x);
  return r;
}

std::vector<double> hardmax(const std::vector<double>& v) {
  std::vector<double> r(v.size(), 0.0);
  r[std::max_element(v.begin(), v.end()) - v.begin()] = 1.0;  // the first maximum wins
  return r;
}

/// (x - mean) / sqrt(var + eps), or x / sqrt(mean(x^2) + eps) when `rms`.
std::vector<double> normalize(const std::vector<double>& v, double eps, bool rms) {
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean = rms ? 0.0 : mean / v.size();
  for (double x : v) sq += (x - mean) * (x - mean);
  double d = std::sqrt(sq / v.size() + eps);
  std::vector<double> r;
  for (double x : v) r.push_back((x - mean) / d);
  return r;
}

std::vector<double> lpNormalize(const std::vector<double>& v, int p) {
  double n = 0;
  for (double x : v) n += p == 1 ? std::fabs(x) : x * x;
  if (p == 2) n = std::sqrt(n);
  std::vector<double> r;
  for (double x : v) r.push_back(x / n);
  return r;
}

struct AxisCase {
  Dims shape;
  int axis;  // as given to the op (may be negative)
};

std::vector<AxisCase> middleAxes() {
  return {{{2, 3, 4}, 1}, {{2, 3, 4}, -2}, {{2, 3, 4, 5}, 1}, {{2, 3, 4, 5}, 2}, {{2, 3, 4, 5}, -3},
          {{3, 1, 4, 2}, 2}, {{2, 3, 4, 5}, 0}};
}

int positive(int axis, size_t rank) { return axis < 0 ? axis + static_cast<int>(rank) : axis; }

TEST(OpsAxes, SoftmaxFamilyAlongMiddleAxes) {
  for (const AxisCase& c : middleAxes()) {
    SCOPED_TRACE(::testing::Message() << "shape rank " << c.shape.size() << " axis " << c.axis);
    Tensor x = irregular(c.shape);
    std::vector<int> axes = {positive(c.axis, c.shape.size())};
    AttrMap a = attrs({{"axis", I(c.axis)}});
    expectTensor(run1("Softmax", {&x}, a), DType::kF32, c.shape, perGroup(x, axes, softmax));
    expectTensor(run1("LogSoftmax", {&x}, a), DType::kF32, c.shape, perGroup(x, axes, logSoftmax));
    expectTensor(run1("Hardmax", {&x}, a), DType::kF32, c.shape, perGroup(x, axes, hardmax));
  }
}

TEST(OpsAxes, LayerAndRmsNormFromMiddleAxis) {
  // Both normalize over [axis, rank); the scale (and bias) have the shape of those dims.
  for (const AxisCase& c : middleAxes()) {
    SCOPED_TRACE(::testing::Message() << "shape rank " << c.shape.size() << " axis " << c.axis);
    int axis = positive(c.axis, c.shape.size());
    Dims tail(c.shape.begin() + axis, c.shape.end());
    std::vector<int> axes;
    for (int d = axis; d < static_cast<int>(c.shape.size()); ++d) axes.push_back(d);
    Tensor x = irregular(c.shape);
    Tensor scale = irregular(tail, 0.5), bias = irregular(tail, 0.25);
    const float eps = 1e-3f;
    AttrMap a = attrs({{"axis", I(c.axis)}, {"epsilon", F(eps)}});
    // The reference's groups walk the tail dims in row-major order, as the scale is laid out.
    auto affine = [&](bool rms, bool withBias) {
      std::vector<double> n = perGroup(x, axes, [&](const std::vector<double>& v) { return normalize(v, eps, rms); });
      int64_t inner = numElements(tail);
      for (size_t i = 0; i < n.size(); ++i) {
        int64_t j = static_cast<int64_t>(i) % inner;
        n[i] = n[i] * scale.getDouble(j) + (withBias ? bias.getDouble(j) : 0.0);
      }
      return n;
    };
    expectTensor(run1("LayerNormalization", {&x, &scale, &bias}, a), DType::kF32, c.shape, affine(false, true), 1e-4);
    expectTensor(run1("RMSNormalization", {&x, &scale}, a), DType::kF32, c.shape, affine(true, false), 1e-4);
  }
}

TEST(OpsAxes, LpNormalizationAlongMiddleAxes) {
  for (const AxisCase& c : middleAxes()) {
    for (int p : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "shape rank " << c.shape.size() << " axis " << c.axis << " p " << p);
      Tensor x = irregular(c.shape);
      std::vector<int> axes = {positive(c.axis, c.shape.size())};
      expectTensor(run1("LpNormalization", {&x}, attrs({{"axis", I(c.axis)}, {"p", I(p)}})), DType::kF32, c.shape,
                   perGroup(x, axes, [&](const std::vector<double>& v) { return lpNormalize(v, p); }));
    }
  }
}

TEST(OpsAxes, InstanceAndMeanVarianceNormOn4D) {
  Dims shape = {2, 3, 4, 5};
  Tensor x = irregular(shape);
  const float eps = 1e-3f;
  // InstanceNormalization: per (n, c) over the spatial dims, then per-channel scale and bias.
  Tensor scale = f32({3}, {0.5f, -1.0f, 2.0f}), bias = f32({3}, {0.25f, 0.0f, -1.0f});
  std::vector<double> want = perGroup(x, {2, 3}, [&](const std::vector<double>& v) { return normalize(v, eps, false); });
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t ch = (static_cast<int64_t>(i) / 20) % 3;
    want[i] = want[i] * scale.getDouble(ch) + bias.getDouble(ch);
  }
  expectTensor(run1("InstanceNormalization", {&x, &scale, &bias}, attrs({{"epsilon", F(eps)}})), DType::kF32, shape,
               want, 1e-4);
  // MeanVarianceNormalization over {0, 2}: a middle axis left out, epsilon 1e-9 fixed by the spec.
  expectTensor(run1("MeanVarianceNormalization", {&x}, attrs({{"axes", Is({0, 2})}})), DType::kF32, shape,
               perGroup(x, {0, 2}, [&](const std::vector<double>& v) { return normalize(v, 1e-9, false); }), 1e-4);
}

}  // namespace
}  // namespace pcc::testing
