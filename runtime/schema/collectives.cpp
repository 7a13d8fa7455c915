// Type inference (the op schemas) of AllReduce, AllGather, ReduceScatter,
// AllToAll, and of the pipeline transfers Send and Recv.
// Uneven pieces follow the chunk rule (the first extent % n ranks hold one
// more): `gathered_size` is the whole extent a gather produces and
// `piece_size` this rank's extent of a scattered dimension.
// Their reference kernels, and what the kernels compute, are
// runtime/ops/collectives.cpp.
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"

namespace pcc {
namespace {
using namespace ops;

enum class Collective { kAllReduce, kAllGather, kReduceScatter };

/// \returns the extent of this rank's piece of `extent` split `n` ways:
/// attribute `piece_size` when set (one of the two chunk sizes), else the
/// even share (an error when `extent` does not divide).
StatusOr<int64_t> pieceOf(const AttrMap& attrs, int64_t extent, int64_t n, int64_t dim, const TensorType& t) {
  int64_t piece = attrs.getInt("piece_size", -1);
  if (piece >= 0) {
    if (piece != extent / n && piece != (extent + n - 1) / n)
      return invalidInput("piece_size ", piece, " is not a piece of ", extent, " split ", n, " ways");
    return piece;
  }
  if (extent % n != 0) return invalidInput("dim ", dim, " of ", t.str(), " is not divisible by group_size ", n);
  return extent / n;
}

/// \returns the whole extent of `n` pieces of about `piece`: attribute
/// `gathered_size` when set, else n * piece.
StatusOr<int64_t> gatheredOf(const AttrMap& attrs, int64_t piece, int64_t n) {
  int64_t whole = attrs.getInt("gathered_size", -1);
  if (whole < 0) return piece * n;
  if (whole < piece || whole > piece * n + n)
    return invalidInput("gathered_size ", whole, " cannot be ", n, " pieces of about ", piece);
  return whole;
}

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
    ASSIGN_OR_RETURN(t.shape[dim], gatheredOf(*args.attrs, t.shape[dim], n));
  } else {
    RETURN_IF_ERROR(checkDType(t, kNumericTypes, "input"));
    ASSIGN_OR_RETURN(t.shape[dim], pieceOf(*args.attrs, t.shape[dim], n, dim, t));
  }
  return std::vector<TensorType>{t};
}

// AllToAll: `dim` is split into this rank's piece, `concat_dim` gathered.
StatusOr<std::vector<TensorType>> inferAllToAll(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  TensorType t = args.inputs[0];
  if (!args.attrs || !args.attrs->has("dim") || !args.attrs->has("concat_dim") || !args.attrs->has("group_size"))
    return invalidInput("needs attributes 'dim', 'concat_dim' and 'group_size'");
  int64_t n = args.attrs->getInt("group_size", 0);
  if (n <= 0) return invalidInput("group_size ", n, " must be positive");
  ASSIGN_OR_RETURN(int64_t dim, normalizeAxis(args.attrs->getInt("dim", 0), t.rank(), "dim"));
  ASSIGN_OR_RETURN(int64_t concat, normalizeAxis(args.attrs->getInt("concat_dim", 0), t.rank(), "concat_dim"));
  if (dim == concat) return invalidInput("dim and concat_dim are both ", dim);
  ASSIGN_OR_RETURN(int64_t piece, pieceOf(*args.attrs, t.shape[dim], n, dim, t));
  ASSIGN_OR_RETURN(t.shape[concat], gatheredOf(*args.attrs, t.shape[concat], n));
  t.shape[dim] = piece;
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
  r.add(OpKind::AllToAll, &inferAllToAll);
  r.add(OpKind::Send, &inferSend);
  r.add(OpKind::Recv, &inferRecv);
}

}  // namespace pcc
