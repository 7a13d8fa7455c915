// Importers of the tensor op family: indexing, padding, resizing.
//
// Opset differences resolved here:
//   - Pad < 11 takes pads and value as attributes: they become constant inputs;
//   - Resize 10 is (X, scales) with asymmetric coordinates; Upsample 7-9 (scales
//     an attribute before 9, an input from 9) is the same op: both become
//     Resize(X, -, scales) with coordinate_transformation_mode = asymmetric and
//     nearest_mode = floor, which is what they compute;
//   - Scatter (9-10, deprecated) is ScatterElements without reduction;
//   - Size is a constant, since every shape is static after import;
//   - Dropout in inference is an identity whose mask output is all ones.
#include <optional>

#include "compiler/onnx/import_util.h"
#include "runtime/ops/tensor_util.h"

namespace pcc {

namespace {

Status importPad(C& c) {
  if (c.opset() >= 11) return c.emitNode(OpKind::Pad, allInputs(c), c.keep({"mode"}));
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  Value* pads = intsAttrAsInput(c, "pads");
  if (!pads) return c.invalid("attribute 'pads' is required before opset 11");
  Value* value = c.constant(ops::scalarOf(x->type().dtype, c.attrs().getFloat("value", 0.f)), "constant_value");
  return c.emitNode(OpKind::Pad, {x, pads, value}, c.keep({"mode"}));
}

/// Resize 10 and Upsample: nearest or (multi)linear in asymmetric coordinates.
Status importLegacyResize(C& c, Value* x, Value* scales) {
  std::string mode = c.attrs().getString("mode", "nearest");
  if (mode == "bilinear") mode = "linear";  // opset-7 Upsample spelling
  if (mode != "nearest" && mode != "linear")
    return c.invalid("unknown mode '", mode, "' (expected nearest or linear)");
  AttrMap a;
  a.set("mode", mode);
  a.set("coordinate_transformation_mode", std::string("asymmetric"));
  a.set("nearest_mode", std::string("floor"));
  return c.emitNode(OpKind::Resize, {x, nullptr, scales}, a);
}

Status importResize(C& c) {
  if (c.opset() >= 11)
    return c.emitNode(OpKind::Resize, allInputs(c),
                      c.keep({"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                              "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode",
                              "nearest_mode"}));
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* scales, c.requiredInput(1));
  return importLegacyResize(c, x, scales);
}

Status importUpsample(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  if (c.opset() >= 9) {
    ASSIGN_OR_RETURN(Value* scales, c.requiredInput(1));
    return importLegacyResize(c, x, scales);
  }
  if (!c.attrs().has("scales")) return c.invalid("attribute 'scales' is required before opset 9");
  std::vector<float> s = c.attrs().getFloats("scales");
  Tensor t = Tensor::fromVector<float>(DType::kF32, {static_cast<int64_t>(s.size())}, s);
  return importLegacyResize(c, x, c.constant(std::move(t), "scales"));
}

Status importScatter(C& c) {
  return c.emitNode(OpKind::ScatterElements, allInputs(c), c.keep({"axis"}));
}

Status importSize(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  return c.constantOutput(0, Tensor::scalarI64(x->type().numel()));
}

/// \returns a tensor of `t` filled with ones (true for bool).
Tensor onesOf(const TensorType& t) {
  Tensor r = Tensor::zeros(t);
  for (int64_t i = 0; i < r.numel(); ++i) ops::storeDouble(r, i, 1.0);
  return r;
}

/// \returns the value of a scalar constant input, or nullopt when absent or not constant.
std::optional<double> constScalar(const C& c, size_t i) {
  Value* v = c.input(i);
  if (!v || !v->isConstant() || v->constantData().numel() != 1) return std::nullopt;
  return v->constantData().getDouble(0);
}

/// Dropout in inference: output = input, mask (opset >= 10: bool; before: the
/// input's type) = all ones. Training with ratio 0 is the same; any other
/// training run is random and not compiled.
Status importDropout(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  if (Value* training = c.input(2)) {  // opset >= 12
    if (!training->isConstant())
      return c.unsupportedHere("training_mode is computed at run time (pcc compiles inference only)");
    bool train = training->constantData().numel() == 1 && training->constantData().getInt(0) != 0;
    // An absent ratio is 0.5; a ratio computed at run time counts as non-zero.
    double ratio = constScalar(c, 1).value_or(c.input(1) ? -1.0 : 0.5);
    if (train && ratio != 0)
      return c.unsupportedHere("training_mode = true with a non-zero ratio (random; pcc compiles inference)");
  }
  if (c.outputUsed(1)) {
    DType maskType = c.opset() >= 10 ? DType::kBool : x->type().dtype;
    RETURN_IF_ERROR(c.constantOutput(1, onesOf({maskType, x->type().shape})));
  }
  if (x->isConstant() && !c.isGraphOutput(0)) {
    c.setOutput(0, x);
    return Status::OK();
  }
  return c.emitNode(OpKind::Identity, {x}, {});
}

}  // namespace

std::vector<ImporterEntry> tensorImporters() {
  return {
      {"Pad", 7, importPad},
      {"Resize", 10, importResize},
      {"Upsample", 7, importUpsample},
      {"Scatter", 9, importScatter},
      {"Size", 7, importSize},
      {"Dropout", 7, importDropout},
  };
}

}  // namespace pcc
