// Helpers shared by the import functions of every op family.
#pragma once

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/onnx/op_importers.h"

namespace pcc {

using C = ImportContext;

/// \returns every input of the node, absent ones as nullptr.
inline std::vector<Value*> allInputs(const ImportContext& c) {
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.numInputs(); ++i) ins.push_back(c.input(i));
  return ins;
}

/// The op maps one-to-one; `keep` is its canonical attribute set. (The rows of
/// ops marked OnnxDirect in Ops.def call it: op_importers.cpp.)
inline Status direct(ImportContext& c, OpKind op, const std::vector<std::string_view>& keep) {
  int n = opInfo(op).numOutputs;
  if (n > 0) RETURN_IF_ERROR(c.onlyFirstOutputsUsed(static_cast<size_t>(n), "pcc supports only the first"));
  return c.emitNode(op, allInputs(c), c.keep(keep));
}

/// \returns the int list attribute `name` as a 1-D i64 constant, or nullptr when absent.
inline Value* intsAttrAsInput(ImportContext& c, const std::string& name) {
  if (!c.attrs().has(name)) return nullptr;
  return c.constI64(c.attrs().getInts(name), name);
}


/// Imports a Reduce* op whose `axes` attribute became input 1 at `axesInputOpset`
/// (13 for ReduceSum, 18 for the others): older nodes get it as a constant input.
inline Status importReduce(ImportContext& c, OpKind op, int64_t axesInputOpset) {
  if (c.opset() >= axesInputOpset) return c.emitNode(op, allInputs(c), c.keep({"keepdims", "noop_with_empty_axes"}));
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  return c.emitNode(op, {x, intsAttrAsInput(c, "axes")}, c.keep({"keepdims"}));
}

/// Imports Softmax, LogSoftmax or Hardmax. Before opset 13 these normalize the
/// input coerced to 2-D at `axis` (default 1); unless that axis is the last
/// one, that is Flatten -> op(axis -1) -> Reshape.
inline Status importSoftmaxLike(ImportContext& c, OpKind op) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  if (c.opset() >= 13) {
    AttrMap a;
    a.set("axis", c.attrs().getInt("axis", -1));
    return c.emitNode(op, {x}, a);
  }
  int64_t r = x->type().rank();
  int64_t axis = c.attrs().getInt("axis", 1);
  if (axis < -r || axis >= std::max<int64_t>(r, 1)) return c.invalid("axis ", axis, " is out of range for rank ", r);
  if (axis < 0) axis += r;
  AttrMap last;
  last.set("axis", int64_t(-1));
  if (axis == r - 1) return c.emitNode(op, {x}, last);
  AttrMap flat;
  flat.set("axis", axis);
  ASSIGN_OR_RETURN(std::vector<Value*> f, c.emit(OpKind::Flatten, {x}, flat, {}, "flatten"));
  std::string tag(opName(op));
  std::transform(tag.begin(), tag.end(), tag.begin(), [](unsigned char ch) { return std::tolower(ch); });
  ASSIGN_OR_RETURN(std::vector<Value*> s, c.emit(op, {f[0]}, last, {}, tag));
  return c.emitNode(OpKind::Reshape, {s[0], c.constI64(x->type().shape, "shape")}, {});
}

}  // namespace pcc
