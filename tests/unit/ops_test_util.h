// Helpers for the op kernel tests: tensor builders, running an op, comparing.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/ops/registry.h"

namespace pcc::testing {

inline Tensor f32(Dims shape, std::vector<float> v) {
  return Tensor::fromVector(DType::kF32, std::move(shape), v);
}
inline Tensor f64(Dims shape, std::vector<double> v) {
  return Tensor::fromVector(DType::kF64, std::move(shape), v);
}
inline Tensor i64(Dims shape, std::vector<int64_t> v) {
  return Tensor::fromVector(DType::kI64, std::move(shape), v);
}
inline Tensor i32(Dims shape, std::vector<int32_t> v) {
  return Tensor::fromVector(DType::kI32, std::move(shape), v);
}
inline Tensor boolean(Dims shape, std::vector<uint8_t> v) {
  return Tensor::fromVector(DType::kBool, std::move(shape), v);
}
/// \returns a 1-D i64 tensor, the usual form of shape/axes inputs.
inline Tensor ints(std::vector<int64_t> v) {
  Dims d = {static_cast<int64_t>(v.size())};
  return i64(d, v);
}
/// \returns f32 tensor of `shape` holding 0, 1, 2, ...
inline Tensor iota(Dims shape, float start = 0, float step = 1) {
  std::vector<float> v(numElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i);
  return f32(std::move(shape), v);
}

/// Runs `op` and \returns its outputs, failing the test on error.
inline std::vector<Tensor> run(const std::string& op, const std::vector<const Tensor*>& in,
                               const AttrMap& attrs = {}) {
  auto r = runOp(op, in, attrs);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status().message();
  if (!r.ok()) return {};
  return std::move(r).value();
}
/// Runs a single-output op; returns an undefined tensor on error.
inline Tensor run1(const std::string& op, const std::vector<const Tensor*>& in,
                   const AttrMap& attrs = {}) {
  std::vector<Tensor> r = run(op, in, attrs);
  EXPECT_EQ(r.size(), 1u) << op;
  return r.empty() ? Tensor() : r[0];
}
/// \returns the error message of running `op`, or "" when it succeeds.
inline std::string runError(const std::string& op, const std::vector<const Tensor*>& in,
                            const AttrMap& attrs = {}) {
  auto r = runOp(op, in, attrs);
  return r.ok() ? std::string() : r.status().message();
}

/// Infers types of `op` with the given input types; constant values where non-null.
inline StatusOr<std::vector<TensorType>> infer(const std::string& op,
                                               std::vector<TensorType> types,
                                               std::vector<const Tensor*> consts = {},
                                               const AttrMap& attrs = {}) {
  InferFn f = findInferFn(op);
  if (!f) return internalError("no op ", op);
  InferArgs a;
  a.inputs = std::move(types);
  consts.resize(a.inputs.size(), nullptr);
  a.constInputs = std::move(consts);
  a.attrs = &attrs;
  return f(a);
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.getDouble(i);
  return v;
}

/// Expects `t` to have `dtype`, `shape` and values within `tol` of `want`.
inline void expectTensor(const Tensor& t, DType dtype, const Dims& shape,
                         const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(t.dtype(), dtype) << t.str();
  ASSERT_EQ(t.shape(), shape) << t.str();
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size()) << t.str();
  for (size_t i = 0; i < want.size(); ++i) {
    double got = t.getDouble(static_cast<int64_t>(i));
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << " of " << t.str();
    } else {
      EXPECT_NEAR(got, want[i], tol * std::max(1.0, std::fabs(want[i])))
          << "element " << i << " of " << t.str(100);
    }
  }
}

inline AttrMap attrs(std::initializer_list<std::pair<std::string, Attribute>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}
/// Attribute helpers: plain literals would pick the wrong variant alternative.
inline Attribute I(int64_t v) { return v; }
inline Attribute F(float v) { return v; }
inline Attribute Is(std::vector<int64_t> v) { return v; }
inline Attribute S(std::string v) { return v; }

}  // namespace pcc::testing
