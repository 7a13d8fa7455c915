// Collectives inserted by the partitioner. Only their types live here: they
// run in the runtime's executor, which owns the communicators.
#include "runtime/ops/op_util.h"

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

Status computeCollective(const std::vector<const Tensor*>&, const AttrMap&, std::vector<Tensor>&) {
  return internalError("collective ops run only in the runtime's executor");
}

}  // namespace

void registerCollectiveOps(OpRegistry& r) {
  r.add({"AllReduce", &inferCollective<Collective::kAllReduce>, &computeCollective});
  r.add({"AllGather", &inferCollective<Collective::kAllGather>, &computeCollective});
  r.add({"ReduceScatter", &inferCollective<Collective::kReduceScatter>, &computeCollective});
}

}  // namespace pcc
