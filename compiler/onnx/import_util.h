// Helpers shared by the import functions of every op family.
#pragma once

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

/// The op maps one-to-one; `keep` is its canonical attribute set.
inline Status direct(ImportContext& c, OpKind op, std::initializer_list<std::string_view> keep) {
  int n = opInfo(op).numOutputs;
  if (n > 0) RETURN_IF_ERROR(c.onlyFirstOutputsUsed(static_cast<size_t>(n), "pcc supports only the first"));
  return c.emitNode(op, allInputs(c), c.keep(keep));
}

/// \returns the int list attribute `name` as a 1-D i64 constant, or nullptr when absent.
inline Value* intsAttrAsInput(ImportContext& c, const std::string& name) {
  if (!c.attrs().has(name)) return nullptr;
  return c.constI64(c.attrs().getInts(name), name);
}


/// An importer for an op that maps one-to-one, keeping the listed attributes.
#define PCC_DIRECT(Op, ...) \
  [](::pcc::ImportContext& c) { return ::pcc::direct(c, ::pcc::OpKind::Op, {__VA_ARGS__}); }

}  // namespace pcc
