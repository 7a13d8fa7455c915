// An epilogue (runtime/support/epilogue.h) as oneDNN post-ops, for the
// MatMul, Gemm and Conv kernels folded with the instructions after them
// (Backend::prepareFolded on the cpu backend). Internal to runtime/cpu.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <vector>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/support/epilogue.h"

namespace pcc::cpu {

/// What a kernel with an epilogue adds to its primitive: the post-ops and
/// the binary operands they read.
class EpiloguePostOps {
 public:
  /// Appends `e` to `po` for a primitive whose destination has dims `dst`, the
  /// op's output of shape `out` with runs of its dims merged (a Conv's output
  /// as is, a MatMul's batch and rows as one). `inputs` are the shapes of the
  /// folded kernel's inputs, which binary steps name: each must broadcast to
  /// `out` the same way over every merged run of dims.
  /// \returns false when a step has no post-op form here.
  bool append(const Epilogue& e, const std::vector<Dims>& inputs, const Dims& out, const dnnl::memory::dims& dst,
              dnnl::post_ops& po);
  /// Binds the binary operands' memories to `p` (after it is made).
  void bind(BoundPrimitive& p) const;
  /// Points them at this call's inputs.
  void set(BoundPrimitive& p, const std::vector<const Tensor*>& in) const;

 private:
  struct Binary {
    int arg;    ///< DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1
    int input;  ///< the folded kernel's input, or -1: scalars_[scalar]
    int scalar;
    dnnl::memory::desc desc;
  };
  std::vector<Binary> binaries_;
  std::shared_ptr<std::vector<float>> scalars_ = std::make_shared<std::vector<float>>();
};

/// A folded kernel's epilogue and the types of all its inputs: the op's own
/// `own` inputs, then the operands the steps name.
struct EpilogueInputs {
  EpilogueInputs() = default;
  EpilogueInputs(const Epilogue& e, const std::vector<TensorType>& types, size_t ownInputs)
      : epilogue(e), own(ownInputs) {
    for (const TensorType& t : types) {
      shapes.push_back(t.shape);
      present.push_back(t.dtype != DType::kUndefined);
    }
  }
  Epilogue epilogue;
  std::vector<Dims> shapes;   ///< every input's, the op's own first
  std::vector<bool> present;  ///< false: an absent optional input
  size_t own = 0;
  bool any() const { return !epilogue.steps.empty(); }
};

/// \returns whether oneDNN chose its reference implementation for a
/// primitive (`impl`: impl_info_str()): far slower than running the epilogue
/// on its own, so a fold declines it.
bool isReferenceImpl(const char* impl);

}  // namespace pcc::cpu
