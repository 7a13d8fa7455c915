// Type inference (the op schemas) of AllReduce, AllGather, ReduceScatter,
// and of the pipeline transfers Send and Recv.
// Their reference kernels, and what the kernels compute, are
// runtime/ops/collectives.cpp.
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"

namespace pcc {
namespace {
using namespace ops;

enum class Collective { kAllReduce, kAllGather, kReduceScatter };

template <Collective kOp>
StatusOr<std::vector<TensorType>> inferCollective(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  TensorType t = args.inputs[0];
  if (kOp == Collective::kAllReduce) {
    RETURN_IF_ERROR(checkDType(t, kNumericTypes, "input"));
    return std::vector<TensorType>{t};
  }
  if (!args.attrs || !args.attrs->has("dim") || !args.attrs->has("group_size"))
    return invalidInput("needs attributes 'dim' and 'group_size'");
  int64_t n = args.attrs->getInt("group_size", 0);
  if (n <= 0) return invalidInput("group_size ", n, " must be positive");
  ASSIGN_OR_RETURN(int64_t dim, normalizeAxis(args.attrs->getInt("dim", 0), t.rank(), "dim"));
  if (kOp == Collective::kAllGather) {
    // Uneven pieces: `gathered_size` is the whole extent (the pieces' sum).
    int64_t whole = args.attrs->getInt("gathered_size", -1);
    if (whole >= 0 && (whole < t.shape[dim] || whole > t.shape[dim] * n + n))
      return invalidInput("gathered_size ", whole, " cannot be ", n, " pieces of about ", t.shape[dim]);
    t.shape[dim] = whole >= 0 ? whole : t.shape[dim] * n;
  } else {
    RETURN_IF_ERROR(checkDType(t, kNumericTypes, "input"));
    if (t.shape[dim] % n != 0)
      return invalidInput("dim ", dim, " of ", t.str(), " is not divisible by group_size ", n);
    t.shape[dim] /= n;
  }
  return std::vector<TensorType>{t};
}

StatusOr<std::vector<TensorType>> inferSend(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  if (!args.attrs || !args.attrs->has("peer")) return invalidInput("needs attribute 'peer'");
  return std::vector<TensorType>{};
}

StatusOr<std::vector<TensorType>> inferRecv(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 0, 0));
  if (!args.attrs || !args.attrs->has("peer") || !args.attrs->has("dtype") || !args.attrs->has("shape"))
    return invalidInput("needs attributes 'peer', 'dtype' and 'shape'");
  auto dtype = dtypeFromOnnx(static_cast<int>(args.attrs->getInt("dtype", 0)));
  if (!dtype) return invalidInput("dtype ", args.attrs->getInt("dtype", 0), " is not a known data type");
  Dims shape = args.attrs->getInts("shape", {});
  for (int64_t d : shape)
    if (d < 0) return invalidInput("shape ", dimsToString(shape), " has a negative extent");
  return std::vector<TensorType>{TensorType{*dtype, shape}};
}

}  // namespace

void registerCollectiveSchemas(SchemaRegistry& r) {
  r.add(OpKind::AllReduce, &inferCollective<Collective::kAllReduce>);
  r.add(OpKind::AllGather, &inferCollective<Collective::kAllGather>);
  r.add(OpKind::ReduceScatter, &inferCollective<Collective::kReduceScatter>);
  r.add(OpKind::Send, &inferSend);
  r.add(OpKind::Recv, &inferRecv);
}

}  // namespace pcc
