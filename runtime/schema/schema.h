// Op schemas: what the compiler needs to type a node, apart from the kernels
// that run it. The IR (compiler/ir) and the kernels (runtime/ops) include this
// header; the schemas are the library pcc_schema, which links no kernel
// (docs/adding-an-op.md#layering).
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "runtime/schema/op_table.h"
#include "runtime/support/attribute.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// What type inference sees of a node.
struct InferArgs {
  /// Type of each input; an absent optional input has dtype kUndefined.
  std::vector<TensorType> inputs;
  /// Value of each input where it is a known constant, else nullptr. Ops whose
  /// output shape depends on an input's value (Reshape, Slice, Expand, ...)
  /// need it and fail with an invalid-input error otherwise.
  std::vector<const Tensor*> constInputs;
  const AttrMap* attrs = nullptr;
  bool has(size_t i) const { return i < inputs.size() && inputs[i].dtype != DType::kUndefined; }
};

/// \returns the output types, or an error naming what is wrong with the inputs.
using InferFn = StatusOr<std::vector<TensorType>> (*)(const InferArgs& args);

/// The type inference of every op, indexed by OpKind.
class SchemaRegistry {
 public:
  /// Registers `infer` as the type inference of `op`. Registering an op twice,
  /// or a null function, is an error kept in status() (the families' register
  /// functions do not check each call; schemaTableStatus() reports it).
  void add(OpKind op, InferFn infer);
  /// \returns the type inference of `op`, or nullptr.
  InferFn get(OpKind op) const { return infer_[static_cast<size_t>(op)]; }
  /// \returns the first error of add, or ok.
  const Status& status() const { return status_; }

 private:
  std::array<InferFn, kNumOpKinds> infer_{};
  Status status_;
};

/// \returns the type inference of `op` (an array lookup), or nullptr when pcc
/// has none (the region ops If, Loop and Scan, typed from their bodies).
InferFn inferFn(OpKind op);

/// \returns the type inference of op `name`, or nullptr: inferFn by name, for
/// tools and tests that hold a name.
InferFn findInferFn(std::string_view name);

/// \returns the status of filling the process's schema table: an error when a
/// family registered an op twice (checked by the op-table unit test).
Status schemaTableStatus();

}  // namespace pcc
