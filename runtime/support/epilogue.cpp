#include "runtime/support/epilogue.h"

namespace pcc {

namespace {
constexpr EpilogueOp kAll[] = {
    EpilogueOp::kRelu, EpilogueOp::kLeakyRelu, EpilogueOp::kSigmoid, EpilogueOp::kTanh, EpilogueOp::kGeluErf,
    EpilogueOp::kGeluTanh, EpilogueOp::kAbs, EpilogueOp::kSqrt, EpilogueOp::kExp, EpilogueOp::kLog,
    EpilogueOp::kNeg, EpilogueOp::kSwish, EpilogueOp::kAdd, EpilogueOp::kSub, EpilogueOp::kMul,
    EpilogueOp::kDiv, EpilogueOp::kMax, EpilogueOp::kMin,
};
}  // namespace

std::string_view epilogueOpName(EpilogueOp op) {
  switch (op) {
    case EpilogueOp::kRelu: return "relu";
    case EpilogueOp::kLeakyRelu: return "leaky_relu";
    case EpilogueOp::kSigmoid: return "sigmoid";
    case EpilogueOp::kTanh: return "tanh";
    case EpilogueOp::kGeluErf: return "gelu_erf";
    case EpilogueOp::kGeluTanh: return "gelu_tanh";
    case EpilogueOp::kAbs: return "abs";
    case EpilogueOp::kSqrt: return "sqrt";
    case EpilogueOp::kExp: return "exp";
    case EpilogueOp::kLog: return "log";
    case EpilogueOp::kNeg: return "neg";
    case EpilogueOp::kSwish: return "swish";
    case EpilogueOp::kAdd: return "add";
    case EpilogueOp::kSub: return "sub";
    case EpilogueOp::kMul: return "mul";
    case EpilogueOp::kDiv: return "div";
    case EpilogueOp::kMax: return "max";
    case EpilogueOp::kMin: return "min";
  }
  return "?";
}

std::optional<EpilogueOp> epilogueOpFromName(std::string_view name) {
  for (EpilogueOp op : kAll)
    if (epilogueOpName(op) == name) return op;
  return std::nullopt;
}

}  // namespace pcc
