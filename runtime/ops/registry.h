// Operator semantics in one place: for each op, a type-inference function and a
// simple, obviously correct CPU reference kernel. The IR infers shapes with the
// former; the reference evaluator, the constant folder and the CPU runtime
// backend run the latter. Ops are in canonical (newest-opset) form: every
// opset difference is removed by the importer before an op reaches here.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/ops/schema.h"
#include "runtime/support/attribute.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// Runs the op. `inputs[i]` is nullptr for an absent optional input; `outputs`
/// arrives empty and the kernel appends one owning tensor per output.
using ComputeFn = Status (*)(const std::vector<const Tensor*>& inputs, const AttrMap& attrs,
                             std::vector<Tensor>& outputs);

struct OpSchema {
  std::string name;
  InferFn infer = nullptr;
  ComputeFn compute = nullptr;
  /// Output 0 is input 0's bytes under the inferred shape (Reshape, Flatten,
  /// Squeeze, Unsqueeze, Identity): the memory plan may place it over input 0
  /// (with the op table's Elementwise ops, codegen/plan_emitter.cpp), and a
  /// backend then has nothing to compute.
  bool viewOfInput0 = false;
};

/// \returns the schema of op `name`, or nullptr if pcc has no kernel for it.
const OpSchema* findOpSchema(std::string_view name);
/// \returns the names of every op with a kernel, sorted.
std::vector<std::string> registeredOps();

/// Runs the kernel of `op` and checks its outputs against inferred types:
/// runKernel (runtime/ops/kernel_call.h, the one kernel entry) with no context.
/// \returns the outputs, or an error naming op and input shapes.
StatusOr<std::vector<Tensor>> runOp(std::string_view op, const std::vector<const Tensor*>& inputs,
                                    const AttrMap& attrs);

/// A faster kernel for one instruction, tried before the reference kernel (the
/// CPU runtime's oneDNN kernels in runtime/cpu are the implementations). It
/// sees only inputs that type inference has accepted, so it may assume valid
/// shapes; it may keep state between calls (primitives, reordered weights) and
/// is used by one thread at a time.
class KernelOverride {
 public:
  virtual ~KernelOverride() = default;
  /// Runs the op on `inputs` (validated by the op's inference). `outputs`
  /// arrives empty.
  /// \returns true with the outputs appended; false, with `outputs` left
  /// empty, to leave this call to the reference kernel (a dtype, shape or
  /// attribute the fast path does not handle); or an error.
  virtual StatusOr<bool> run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs) = 0;
};

/// runOp with `fast` tried first; nullptr `fast` is runOp. The outputs are
/// checked against the inferred types whichever kernel made them.
StatusOr<std::vector<Tensor>> runOp(std::string_view op, const std::vector<const Tensor*>& inputs,
                                    const AttrMap& attrs, KernelOverride* fast);

/// Registration hooks, one per kernel file (called once by the registry).
class OpRegistry {
 public:
  void add(OpSchema s);
};

}  // namespace pcc
