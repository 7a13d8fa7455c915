// Type inference (the op schemas) of MatMul and Gemm. Their reference kernels,
// and what the kernels compute, are runtime/ops/linalg.cpp.
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/linalg.h"

namespace pcc {

namespace ops::linalg_schema {

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

}  // namespace ops::linalg_schema

namespace {
using namespace ops;
using namespace ops::linalg_schema;

StatusOr<std::vector<TensorType>> inferMatMul(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &a = args.inputs[0], &b = args.inputs[1];
  RETURN_IF_ERROR(checkDType(a, kNumericTypes, "input A"));
  if (a.dtype != b.dtype) return invalidInput("input types differ: ", a.str(), " and ", b.str());
  ASSIGN_OR_RETURN(MatMulShape s, matmulShape(a, b));
  return std::vector<TensorType>{{a.dtype, s.out}};
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

}  // namespace

void registerLinalgSchemas(SchemaRegistry& r) {
  r.add(OpKind::MatMul, &inferMatMul);
  r.add(OpKind::Gemm, &inferGemm);
}

}  // namespace pcc
