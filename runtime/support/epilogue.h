// An epilogue: a chain of elementwise steps applied to the output of a GEMM
// or a convolution as it is written, so that a backend computes them in the
// same pass (oneDNN post-ops on the cpu backend). The compiler describes a
// generated kernel as such a chain when it is one (codegen/epilogue.h, the
// plan's Kernel.epilogue); the executor offers the chain to the backend
// (Backend::prepareFolded), which folds it or runs the kernels as planned.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace pcc {

enum class EpilogueOp {
  // Unary: y = f(x); kLeakyRelu and kSwish take `scalar` as their alpha.
  kRelu, kLeakyRelu, kSigmoid, kTanh, kGeluErf, kGeluTanh, kAbs, kSqrt, kExp, kLog, kNeg, kSwish,
  // Binary: y = x op b (b op x when chainSecond), b an operand or `scalar`.
  kAdd, kSub, kMul, kDiv, kMax, kMin,
};

/// \returns whether `op` is binary (kAdd .. kMin).
inline bool isBinary(EpilogueOp op) { return op >= EpilogueOp::kAdd; }
/// \returns whether `op` is binary and x op b == b op x.
inline bool isCommutative(EpilogueOp op) {
  return op == EpilogueOp::kAdd || op == EpilogueOp::kMul || op == EpilogueOp::kMax || op == EpilogueOp::kMin;
}

/// \returns the name of `op` in plans ("relu", "leaky_relu", "add", ...).
std::string_view epilogueOpName(EpilogueOp op);
/// \returns the op named `name` (epilogueOpName), or nullopt.
std::optional<EpilogueOp> epilogueOpFromName(std::string_view name);

struct EpilogueStep {
  EpilogueOp op = EpilogueOp::kRelu;
  /// Binary: the index of b among the folded kernel's inputs; -1: b is `scalar`.
  int operand = -1;
  /// Binary with operand -1: b; kLeakyRelu, kSwish: alpha.
  float scalar = 0;
  /// Binary: the chain's value is the second operand (b - x, b / x).
  bool chainSecond = false;
};

/// The steps, in the order they apply.
struct Epilogue {
  std::vector<EpilogueStep> steps;
};

}  // namespace pcc
