// Collectives inserted by the partitioner. Only their types live here: they
// run in the runtime's executor, which owns the communicators.
// Their type inference is runtime/schema/collectives.cpp.
#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

Status computeCollective(const std::vector<const Tensor*>&, const AttrMap&, std::vector<Tensor>&) {
  return internalError("collective ops run only in the runtime's executor");
}

}  // namespace

void registerCollectiveOps(OpRegistry& r) {
  r.add(OpKind::AllReduce, &computeCollective);
  r.add(OpKind::AllGather, &computeCollective);
  r.add(OpKind::ReduceScatter, &computeCollective);
  r.add(OpKind::AllToAll, &computeCollective);
  r.add(OpKind::Send, &computeCollective);
  r.add(OpKind::Recv, &computeCollective);
}

}  // namespace pcc
