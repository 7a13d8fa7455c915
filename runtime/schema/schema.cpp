// The schema table: the type inference of every op, in an array indexed by
// OpKind, filled once on first use from the families' register functions.
#include "runtime/schema/schema.h"

#include "runtime/schema/families.h"

namespace pcc {

void SchemaRegistry::add(OpKind op, InferFn infer) {
  Status st;
  if (!infer) st = internalError("null type inference registered for ", opName(op));
  else if (infer_[static_cast<size_t>(op)]) st = internalError("type inference of ", opName(op), " registered twice");
  else infer_[static_cast<size_t>(op)] = infer;
  if (!st.ok() && status_.ok()) status_ = st;
}

namespace {
const SchemaRegistry& table() {
  // Function-local static: initialized exactly once, thread-safe.
  static const SchemaRegistry* t = [] {
    auto* r = new SchemaRegistry();
    registerCollectiveSchemas(*r);
    registerConvPoolSchemas(*r);
    registerDataMovementSchemas(*r);
    registerElementwiseSchemas(*r);
    registerLinalgSchemas(*r);
    registerMathActivationSchemas(*r);
    registerMathBinarySchemas(*r);
    registerMathGenerateSchemas(*r);
    registerMathQuantSchemas(*r);
    registerMathUnarySchemas(*r);
    registerNormReduceSchemas(*r);
    registerAttentionSchemas(*r);
    registerEinsumSchemas(*r);
    registerNormalizationSchemas(*r);
    registerReductionSchemas(*r);
    registerSelectionSchemas(*r);
    registerRnnSchemas(*r);
    registerShapeSchemas(*r);
    registerLossSchemas(*r);
    registerSpectralSchemas(*r);
    registerWindowSchemas(*r);
    registerTensorIndexSchemas(*r);
    registerTensorLayoutSchemas(*r);
    registerTensorResizeSchemas(*r);
    registerTextSchemas(*r);
    registerVisionQuantSchemas(*r);
    registerVisionSampleSchemas(*r);
    registerVisionSelectSchemas(*r);
    return r;
  }();
  return *t;
}
}  // namespace

InferFn inferFn(OpKind op) { return static_cast<size_t>(op) < kNumOpKinds ? table().get(op) : nullptr; }

InferFn findInferFn(std::string_view name) {
  std::optional<OpKind> op = opFromName(name);
  return op ? inferFn(*op) : nullptr;
}

Status schemaTableStatus() { return table().status(); }

}  // namespace pcc
