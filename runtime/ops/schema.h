// Op schemas: what the compiler needs to type a node, apart from the kernels
// that run it. The IR (compiler/ir) includes this header, not registry.h.
// The schemas are still registered by the kernel files of runtime/ops and live
// in the same library as the reference kernels (docs/adding-an-op.md#layering).
#pragma once

#include <string_view>
#include <vector>

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

/// \returns the type inference of op `name`, or nullptr when pcc has none.
InferFn findInferFn(std::string_view name);

}  // namespace pcc
