// Importers of the math op family. Most ops are canonical at every opset pcc
// reads; the differences resolved here:
//   - Clip < 11 takes min/max as float attributes: they become scalar
//     constant inputs of x's type;
#include "compiler/onnx/import_util.h"

namespace pcc {

namespace {

/// \returns a scalar constant of dtype `t` holding `v`, or nullptr when pcc
/// cannot hold a Clip bound of that type.
Value* scalarOfType(C& c, DType t, float v, std::string_view tag) {
  switch (t) {
    case DType::kF32: return c.constant(Tensor::scalarF32(v), tag);
    case DType::kF64: return c.constant(Tensor::fromVector<double>(t, {}, {v}), tag);
    case DType::kF16: return c.constant(Tensor::fromVector<uint16_t>(t, {}, {floatToHalf(v)}), tag);
    case DType::kBF16: return c.constant(Tensor::fromVector<uint16_t>(t, {}, {floatToBf16(v)}), tag);
    default: return nullptr;
  }
}

Status importClip(C& c) {
  if (c.opset() >= 11) return c.emitNode(OpKind::Clip, allInputs(c), {});
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  DType t = x->type().dtype;
  std::vector<Value*> ins = {x, nullptr, nullptr};
  const char* names[] = {"min", "max"};
  for (size_t i = 0; i < 2; ++i) {
    if (!c.attrs().has(names[i])) continue;
    ins[i + 1] = scalarOfType(c, t, c.attrs().getFloat(names[i], 0.f), names[i]);
    if (!ins[i + 1]) return c.invalid("Clip before opset 11 is defined on float types, got ", dtypeName(t));
  }
  // Trailing absent inputs are dropped so the node has the arity it needs.
  while (ins.size() > 1 && !ins.back()) ins.pop_back();
  return c.emitNode(OpKind::Clip, ins, {});
}

}  // namespace

std::vector<ImporterEntry> mathImporters() {
  // The other math ops import one-to-one: their rows come from the Import
  // column of Ops.def (directImporterRows).
  return {
      {"Clip", 7, importClip},
  };
}

}  // namespace pcc
