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

StatusOr<NBitsShape> nbitsShape(int64_t k, int64_t n, int bits, int64_t blockSize) {
  if (bits != 4 && bits != 8) return invalidInput("bits must be 4 or 8, got ", bits);
  if (blockSize < 2 || blockSize > (int64_t{1} << 31) || (bits == 4 && blockSize % 2 != 0))
    return invalidInput("block_size must be from 2 to 2^31", bits == 4 ? " and even for 4 bits" : "", ", got ",
                        blockSize);
  if (k < 1 || n < 1) return invalidInput("K and N must be positive, got ", k, " and ", n);
  NBitsShape s;
  s.k = k;
  s.n = n;
  s.bits = bits;
  s.blockSize = blockSize;
  s.blocks = (k + blockSize - 1) / blockSize;
  s.blobBytes = blockSize * bits / 8;
  s.zeroBytes = (s.blocks * bits + 7) / 8;
  return s;
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

// MatMulNBits (runtime/ops/nbits.h): A [.., K] float, B uint8 [N, blocks,
// blob], scales [N, blocks] of A's type, zero points uint8 [N, bytes]
// (optional), bias [N] of A's type (optional); attributes bits, block_size.
StatusOr<std::vector<TensorType>> inferMatMulNBits(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 5));
  static const AttrMap kNoAttrs;
  const AttrMap& attrs = args.attrs ? *args.attrs : kNoAttrs;
  const TensorType &a = args.inputs[0], &b = args.inputs[1], &sc = args.inputs[2];
  RETURN_IF_ERROR(checkDType(a, {DType::kF32, DType::kF16, DType::kBF16}, "input A"));
  if (a.rank() < 1) return invalidInput("input A must have rank >= 1, got ", a.str());
  if (b.dtype != DType::kU8 || b.rank() != 3) return invalidInput("input B must be u8[N, blocks, blob], got ", b.str());
  ASSIGN_OR_RETURN(NBitsShape s, nbitsShape(a.shape.back(), b.shape[0],
                                                       static_cast<int>(attrs.getInt("bits", 4)),
                                                       attrs.getInt("block_size", 0)));
  if (b.shape[1] != s.blocks || b.shape[2] != s.blobBytes)
    return invalidInput("input B is ", b.str(), ", K = ", s.k, " in blocks of ", s.blockSize, " at ", s.bits,
                        " bits needs u8[", s.n, ",", s.blocks, ",", s.blobBytes, "]");
  if (sc.dtype != a.dtype || sc.shape != Dims{s.n, s.blocks})
    return invalidInput("scales are ", sc.str(), ", expected ", TensorType{a.dtype, {s.n, s.blocks}}.str());
  if (args.has(3) && (args.inputs[3].dtype != DType::kU8 || args.inputs[3].shape != Dims{s.n, s.zeroBytes}))
    return invalidInput("zero points are ", args.inputs[3].str(), ", expected u8[", s.n, ",", s.zeroBytes, "]");
  if (args.has(4) && (args.inputs[4].dtype != a.dtype || args.inputs[4].shape != Dims{s.n}))
    return invalidInput("bias is ", args.inputs[4].str(), ", expected ", TensorType{a.dtype, {s.n}}.str());
  Dims out = a.shape;
  out.back() = s.n;
  return std::vector<TensorType>{{a.dtype, out}};
}

}  // namespace

void registerLinalgSchemas(SchemaRegistry& r) {
  r.add(OpKind::MatMul, &inferMatMul);
  r.add(OpKind::Gemm, &inferGemm);
  r.add(OpKind::MatMulNBits, &inferMatMulNBits);
}

}  // namespace pcc
