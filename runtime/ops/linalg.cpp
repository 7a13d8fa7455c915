// MatMul (numpy semantics) and Gemm. Loops run in i-k-j order so the inner
// loop streams rows of B and of the output.
#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

/// Shapes of a MatMul after promoting 1-D operands to matrices.
struct MatMulShape {
  Dims batch, batchA, batchB;
  int64_t m = 0, k = 0, n = 0;
  Dims out;
};

StatusOr<MatMulShape> matmulShape(const TensorType& a, const TensorType& b) {
  if (a.rank() < 1 || b.rank() < 1)
    return invalidInput("operands must have rank >= 1, got ", a.str(), " and ", b.str());
  Dims sa = a.shape, sb = b.shape;
  bool vecA = sa.size() == 1, vecB = sb.size() == 1;
  if (vecA) sa.insert(sa.begin(), 1);
  if (vecB) sb.push_back(1);
  MatMulShape s;
  s.m = sa[sa.size() - 2];
  s.k = sa.back();
  s.n = sb.back();
  if (sb[sb.size() - 2] != s.k)
    return invalidInput("inner dimensions differ: ", a.str(), " x ", b.str());
  s.batchA.assign(sa.begin(), sa.end() - 2);
  s.batchB.assign(sb.begin(), sb.end() - 2);
  auto bc = broadcastShapes(s.batchA, s.batchB);
  if (!bc.ok())
    return invalidInput("batch dimensions of ", a.str(), " and ", b.str(), " do not broadcast");
  s.batch = *bc;
  s.out = s.batch;
  if (!vecA) s.out.push_back(s.m);
  if (!vecB) s.out.push_back(s.n);
  return s;
}

StatusOr<std::vector<TensorType>> inferMatMul(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "input A"));
  if (a.dtype != b.dtype) return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(MatMulShape s, matmulShape(a, b));
  return std::vector<TensorType>{{a.dtype, s.out}};
}

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
  Tensor r = Tensor::zeros(in[0]->dtype(), s.out);
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
  out.push_back(std::move(r));
  return Status::OK();
}

struct GemmShape {
  int64_t m, k, n;
};

StatusOr<GemmShape> gemmShape(const TensorType& a, const TensorType& b, const AttrMap& attrs) {
  if (a.rank() != 2 || b.rank() != 2)
    return invalidInput("A and B must be 2-D, got ", a.str(), " and ", b.str());
  bool ta = attrs.getInt("transA", 0) != 0, tb = attrs.getInt("transB", 0) != 0;
  GemmShape g;
  g.m = ta ? a.shape[1] : a.shape[0];
  g.k = ta ? a.shape[0] : a.shape[1];
  int64_t kb = tb ? b.shape[1] : b.shape[0];
  g.n = tb ? b.shape[0] : b.shape[1];
  if (kb != g.k)
    return invalidInput("inner dimensions differ: ", a.str(), (ta ? "^T" : ""), " x ", b.str(),
                        (tb ? "^T" : ""));
  return g;
}

StatusOr<std::vector<TensorType>> inferGemm(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  static const AttrMap kNoAttrs;
  const AttrMap& attrs = args.attrs ? *args.attrs : kNoAttrs;
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "input A"));
  if (a.dtype != b.dtype) return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(GemmShape g, gemmShape(a, b, attrs));
  Dims out = {g.m, g.n};
  if (args.has(2)) {
    const TensorType& c = args.inputs[2];
    if (c.dtype != a.dtype) return invalidInput("C type ", c.str(), " differs from A ", a.str());
    auto bc = broadcastShapes(c.shape, out);
    if (!bc.ok() || *bc != out)
      return invalidInput("C ", c.str(), " does not broadcast to ", dimsToString(out));
  }
  return std::vector<TensorType>{{a.dtype, out}};
}

Status computeGemm(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeGemm, in, attrs, out);
  const Tensor &a = *in[0], &b = *in[1];
  const Tensor* c = in.size() > 2 ? in[2] : nullptr;
  ASSIGN_OR_RETURN(GemmShape g, gemmShape(a.type(), b.type(), attrs));
  bool ta = attrs.getInt("transA", 0) != 0, tb = attrs.getInt("transB", 0) != 0;
  float alpha = attrs.getFloat("alpha", 1.0f), beta = attrs.getFloat("beta", 1.0f);
  Tensor r = Tensor::zeros(a.dtype(), {g.m, g.n});
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
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerLinalgOps(OpRegistry& r) {
  r.add({"MatMul", &inferMatMul, &computeMatMul});
  r.add({"Gemm", &inferGemm, &computeGemm});
}

}  // namespace pcc
