// Helpers of the runtime/cpu kernel tests: seeded inputs and the comparison of
// a fast kernel with the reference kernel of the same op.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/fast_kernels.h"
#include "runtime/ops/registry.h"

namespace pcc {

inline Tensor randomF32(const Dims& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutableData<float>()[i] = u(rng);
  return t;
}

inline Tensor absOf(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.mutableData<float>()[i] = std::fabs(r.mutableData<float>()[i]);
  return r;
}

struct Outcome {
  bool ran = false;      ///< the fast kernel computed it (did not decline)
  double worst = 0;      ///< max over elements of |fast - ref| / bound
  std::string error;
};

/// Runs the fast kernel of `op` `calls` times on `in` into `out` and checks
/// its single output has the reference's type. \returns false (with
/// o.error set, or o.ran false when the kernel declined) when there is
/// nothing to compare.
inline bool runFast(const std::string& op, const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    const std::vector<bool>& constant, int calls, const Tensor& ref, Outcome& o,
                    std::vector<Tensor>& out) {
  std::unique_ptr<KernelOverride> fast = cpu::makeFastKernel(*opFromName(op), attrs, constant);
  if (!fast) {
    o.error = "no fast kernel for " + op;
    return false;
  }
  for (int c = 0; c < calls; ++c) {
    out.clear();
    auto ran = fast->run(in, out);
    if (!ran.ok()) {
      o.error = "fast: " + ran.status().message();
      return false;
    }
    o.ran = *ran;
    if (!o.ran) return false;
  }
  if (out.size() != 1 || out[0].type() != ref.type()) {
    o.error = "fast kernel output " + (out.empty() ? std::string("missing") : out[0].type().str()) +
              ", reference " + ref.type().str();
    return false;
  }
  return true;
}

/// Runs `op` on the fast kernel and on the reference kernel and compares them
/// element by element against the bound above, `k` being the length of the
/// reduction. `magAttrs` are the attributes of the |A||B| run (Gemm: |alpha|, |beta|).
inline Outcome compareWithReference(const std::string& op, const std::vector<const Tensor*>& in,
                             const AttrMap& attrs, int64_t k, const std::vector<bool>& constant = {},
                             const AttrMap* magAttrs = nullptr, int calls = 1) {
  Outcome o;
  auto ref = runOp(op, in, attrs);
  if (!ref.ok()) {
    o.error = "reference: " + ref.status().message();
    return o;
  }
  std::vector<Tensor> absIn;
  for (const Tensor* t : in) absIn.push_back(t ? absOf(*t) : Tensor());
  std::vector<const Tensor*> absPtr;
  for (size_t i = 0; i < in.size(); ++i) absPtr.push_back(in[i] ? &absIn[i] : nullptr);
  auto mag = runOp(op, absPtr, magAttrs ? *magAttrs : attrs);
  if (!mag.ok()) {
    o.error = "magnitude: " + mag.status().message();
    return o;
  }
  std::vector<Tensor> out;
  if (!runFast(op, in, attrs, constant, calls, (*ref)[0], o, out)) return o;
  const float* f = out[0].data<float>();
  const float* r = (*ref)[0].data<float>();
  const float* m = (*mag)[0].data<float>();
  const double u = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    double bound = 4.0 * static_cast<double>(k + 2) * u * m[i] + 1e-30;
    o.worst = std::max(o.worst, std::fabs(static_cast<double>(f[i]) - r[i]) / bound);
    if (!std::isfinite(f[i])) o.worst = INFINITY;
  }
  return o;
}

/// Runs `op` on the fast kernel and on the reference kernel; for ops that round
/// once per element, \returns the largest difference in units of `ulps` ulps
/// (relative 2^-23 |ref|; NaN must meet NaN, infinities must be equal).
inline Outcome compareExact(const std::string& op, const std::vector<const Tensor*>& in,
                            const AttrMap& attrs, double ulps = 1) {
  Outcome o;
  auto ref = runOp(op, in, attrs);
  if (!ref.ok()) {
    o.error = "reference: " + ref.status().message();
    return o;
  }
  std::vector<Tensor> out;
  if (!runFast(op, in, attrs, {}, 1, (*ref)[0], o, out)) return o;
  const float* f = out[0].data<float>();
  const float* r = (*ref)[0].data<float>();
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    if (std::isnan(r[i]) || std::isnan(f[i])) {
      if (std::isnan(r[i]) != std::isnan(f[i])) o.worst = INFINITY;
      continue;
    }
    if (std::isinf(r[i]) || std::isinf(f[i])) {
      if (r[i] != f[i]) o.worst = INFINITY;
      continue;
    }
    double bound = ulps * std::ldexp(1.0, -23) * std::fabs(r[i]) + 1e-38;
    o.worst = std::max(o.worst, std::fabs(static_cast<double>(f[i]) - r[i]) / bound);
  }
  return o;
}

}  // namespace pcc
