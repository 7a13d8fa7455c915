// MatMul (numpy semantics) and Gemm. Loops run in i-k-j order so the inner
// loop streams rows of B and of the output.
// Their type inference is runtime/schema/linalg.cpp.
#include <cstring>
#include <vector>

#include "runtime/ops/nbits.h"
#include "runtime/ops/op_util.h"
#include "runtime/schema/linalg.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::linalg_schema;

/// c[m,n] (+)= a[m,k] * b[k,n] for one matrix, row-major, accumulating in T.
template <typename T>
void matmulKernel(const T* a, const T* b, T* c, int64_t m, int64_t k, int64_t n, int64_t lda,
                  int64_t sak, int64_t ldb, int64_t sbn) {
  // a(i,p) = a[i*lda + p*sak], b(p,j) = b[p*ldb + j*sbn]: strides allow transposes.
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      T av = a[i * lda + p * sak];
      const T* brow = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j * sbn];
    }
  }
}

Status computeMatMul(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeMatMul, in, attrs, out);
  ASSIGN_OR_RETURN(MatMulShape s, matmulShape(in[0]->type(), in[1]->type()));
  // The kernel accumulates: a planned output (contents undefined) starts at zero.
  Tensor r = output(out, 0, in[0]->dtype(), s.out);
  if (r.nbytes()) std::memset(r.mutableData(), 0, r.nbytes());
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    const T* a = in[0]->data<T>();
    const T* b = in[1]->data<T>();
    T* c = r.mutableData<T>();
    int64_t batches = numElements(s.batch);
    BroadcastWalker w(s.batch, {s.batchA, s.batchB});
    for (int64_t bi = 0; bi < batches; ++bi, w.next())
      matmulKernel<T>(a + w.offset(0) * s.m * s.k, b + w.offset(1) * s.k * s.n,
                      c + bi * s.m * s.n, s.m, s.k, s.n, s.k, 1, s.n, 1);
    return Status::OK();
  }));
  return Status::OK();
}

Status computeGemm(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeGemm, in, attrs, out);
  const Tensor &a = *in[0], &b = *in[1];
  const Tensor* c = in.size() > 2 ? in[2] : nullptr;
  ASSIGN_OR_RETURN(GemmShape g, gemmShape(a.type(), b.type(), attrs));
  bool ta = attrs.getInt("transA", 0) != 0, tb = attrs.getInt("transB", 0) != 0;
  float alpha = attrs.getFloat("alpha", 1.0f), beta = attrs.getFloat("beta", 1.0f);
  Tensor r = output(out, 0, a.dtype(), {g.m, g.n});
  if (r.nbytes()) std::memset(r.mutableData(), 0, r.nbytes());
  RETURN_IF_ERROR(visitNumeric(a.dtype(), [&]<typename T>() -> Status {
    T* y = r.mutableData<T>();
    // A stored [M,K] (lda=K, sak=1) or [K,M] (lda=1, sak=M); same for B.
    matmulKernel<T>(a.data<T>(), b.data<T>(), y, g.m, g.k, g.n, ta ? 1 : g.k, ta ? g.m : 1,
                    tb ? 1 : g.n, tb ? g.k : 1);
    for (int64_t i = 0; i < g.m * g.n; ++i) y[i] = static_cast<T>(alpha * y[i]);
    if (c && c->defined()) {
      const T* pc = c->data<T>();
      BroadcastWalker w({g.m, g.n}, {c->shape()});
      for (int64_t i = 0; i < g.m * g.n; ++i, w.next())
        y[i] = static_cast<T>(y[i] + beta * pc[w.offset(0)]);
    }
    return Status::OK();
  }));
  return Status::OK();
}

// MatMulNBits: W [K, N] dequantized to float32 (runtime/ops/nbits.h), then
// A x W (+ bias) accumulated in float32, and the result in A's type.
Status computeMatMulNBits(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  const Tensor& a = *in[0];
  ASSIGN_OR_RETURN(NBitsShape s, nbitsShape(a.shape().back(), in[1]->shape()[0],
                                             static_cast<int>(attrs.getInt("bits", 4)), attrs.getInt("block_size", 0)));
  std::vector<float> w(static_cast<size_t>(s.k * s.n));
  const Tensor* zeros = in.size() > 3 && in[3] && in[3]->defined() ? in[3] : nullptr;
  dequantizeNBits(s, *in[1], *in[2], zeros, w.data());
  const Tensor* bias = in.size() > 4 && in[4] && in[4]->defined() ? in[4] : nullptr;
  const int64_t rows = a.numel() / s.k;
  Dims shape = a.shape();
  shape.back() = s.n;
  std::vector<float> x(static_cast<size_t>(a.numel())), y(static_cast<size_t>(rows * s.n), 0.0f);
  for (int64_t i = 0; i < a.numel(); ++i) x[static_cast<size_t>(i)] = static_cast<float>(a.getDouble(i));
  matmulKernel<float>(x.data(), w.data(), y.data(), rows, s.k, s.n, s.k, 1, s.n, 1);
  Tensor r = output(out, 0, a.dtype(), shape);
  for (int64_t i = 0; i < rows * s.n; ++i) {
    const double b = bias ? bias->getDouble(i % s.n) : 0.0;
    r.setDouble(i, static_cast<double>(y[static_cast<size_t>(i)]) + b);
  }
  return Status::OK();
}

}  // namespace

void registerLinalgOps(OpRegistry& r) {
  r.add(OpKind::MatMul, &computeMatMul, kWritesOutputs);
  r.add(OpKind::Gemm, &computeGemm, kWritesOutputs);
  r.add(OpKind::MatMulNBits, &computeMatMulNBits, kWritesOutputs);
}

}  // namespace pcc
