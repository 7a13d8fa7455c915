// Conversions between the runtime's in-memory types (TensorType, Attribute)
// and their plan-format messages (plan::TensorDesc, plan::Attr). The compiler
// writes plans through these, the executor reads them back: one mapping, used
// on both sides, so the two cannot drift apart.
#pragma once

#include <string>

#include "runtime/plan.pb.h"
#include "runtime/support/attribute.h"
#include "runtime/support/dtype.h"
#include "runtime/support/status.h"

namespace pcc {

/// \returns the plan descriptor of `t` (dtype as its ONNX code, shape).
plan::TensorDesc toDesc(const TensorType& t);

/// \returns the type described by `d`. An unknown dtype code becomes
/// DType::kUndefined; validate with dtypeFromOnnx() where that matters.
TensorType fromDesc(const plan::TensorDesc& d);

/// Fills `out` with attribute `a` named `name`. Tensors are inlined
/// (little-endian, row-major bytes).
void toAttrProto(const std::string& name, const Attribute& a, plan::Attr* out);

/// \returns the attributes, or an invalid-input error naming the attribute when
/// one has no value, an unknown tensor dtype, or tensor bytes that do not
/// match its shape.
StatusOr<AttrMap> fromAttrProtos(const google::protobuf::RepeatedPtrField<plan::Attr>& attrs);

/// \returns "kernel", "all_reduce", "all_gather", "reduce_scatter", "send",
/// "recv", "free", "region" (the names of pcc-run --profile-json and
/// pcc-report --format costs), or "unknown".
const char* instructionKindName(plan::Instruction::Kind k);

}  // namespace pcc
