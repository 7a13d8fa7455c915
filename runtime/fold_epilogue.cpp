// appendEpilogue.
//
//   LAUNCH: the plan's Kernel.epilogue, whose chain input must be the
//   candidate's chainInput; where it is not, a first step that is commutative
//   and whose operand is the chain input is read with the two swapped (the
//   compiler picks operand 0 when both are inputs of the output's type).
//   KERNEL: Relu, LeakyRelu, Sigmoid, Tanh, Gelu, Abs, Sqrt, Exp, Log, Neg,
//   Add/Sub/Mul/Div/Max/Min of two operands (a one-element constant operand
//   becomes a scalar), Clip with constant bounds (max then min).
#include "runtime/fold_epilogue.h"

#include <limits>

#include "runtime/plan_io.h"

namespace pcc {

namespace {

/// \returns the value of a one-element float32 constant, or nullopt.
std::optional<float> scalarOf(const Tensor* t) {
  if (!t || t->dtype() != DType::kF32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

bool fromKernel(const FoldCandidate& c, int firstOperand, std::vector<EpilogueStep>* out) {
  const KernelDesc& d = c.desc;
  const std::string& op = d.op;
  auto unary = [&](EpilogueOp e, float alpha = 0) {
    if (d.inputs.size() != 1) return false;
    out->push_back({e, -1, alpha, false});
    return true;
  };
  if (op == "Relu") return unary(EpilogueOp::kRelu);
  if (op == "LeakyRelu") return d.attrs && unary(EpilogueOp::kLeakyRelu, d.attrs->getFloat("alpha", 0.01f));
  if (op == "Sigmoid") return unary(EpilogueOp::kSigmoid);
  if (op == "Tanh") return unary(EpilogueOp::kTanh);
  if (op == "Abs") return unary(EpilogueOp::kAbs);
  if (op == "Sqrt") return unary(EpilogueOp::kSqrt);
  if (op == "Exp") return unary(EpilogueOp::kExp);
  if (op == "Log") return unary(EpilogueOp::kLog);
  if (op == "Neg") return unary(EpilogueOp::kNeg);
  if (op == "Gelu") {
    if (!d.attrs) return false;
    std::string approx = d.attrs->getString("approximate", "none");
    if (approx == "none") return unary(EpilogueOp::kGeluErf);
    if (approx == "tanh") return unary(EpilogueOp::kGeluTanh);
    return false;
  }
  if (op == "Clip") {  // min(max(x, lo), hi): bounds are constant inputs (or attributes before opset 11)
    if (c.chainInput != 0 || !d.attrs) return false;
    float lo = d.attrs->getFloat("min", -std::numeric_limits<float>::infinity());
    float hi = d.attrs->getFloat("max", std::numeric_limits<float>::infinity());
    for (size_t k = 1; k < d.inputs.size() && k < 3; ++k) {
      if (d.inputs[k].dtype == DType::kUndefined) continue;
      std::optional<float> v = k < d.constInputs.size() ? scalarOf(d.constInputs[k]) : std::nullopt;
      if (!v) return false;
      (k == 1 ? lo : hi) = *v;
    }
    if (d.inputs.size() > 3) return false;
    out->push_back({EpilogueOp::kMax, -1, lo, false});
    out->push_back({EpilogueOp::kMin, -1, hi, false});
    return true;
  }
  static const std::pair<const char*, EpilogueOp> kBinary[] = {
      {"Add", EpilogueOp::kAdd}, {"Sub", EpilogueOp::kSub}, {"Mul", EpilogueOp::kMul},
      {"Div", EpilogueOp::kDiv}, {"Max", EpilogueOp::kMax}, {"Min", EpilogueOp::kMin},
  };
  for (const auto& [name, e] : kBinary) {
    if (op != name) continue;
    if (d.inputs.size() != 2 || c.chainInput > 1) return false;
    const size_t other = 1 - c.chainInput;
    if (d.inputs[other].dtype != DType::kF32) return false;
    EpilogueStep st{e, -1, 0, c.chainInput == 1};
    if (std::optional<float> v = other < d.constInputs.size() ? scalarOf(d.constInputs[other]) : std::nullopt)
      st.scalar = *v;
    else
      st.operand = firstOperand;  // the candidate's only other input
    out->push_back(st);
    return true;
  }
  return false;
}

bool fromLaunch(const FoldCandidate& c, int firstOperand, std::vector<EpilogueStep>* out) {
  const KernelDesc& d = c.desc;
  if (!d.plan || d.kernelIndex < 0 || d.kernelIndex >= d.plan->plan.kernels_size()) return false;
  const plan::Kernel& k = d.plan->plan.kernels(d.kernelIndex);
  if (k.epilogue_size() == 0) return false;
  const int chain = static_cast<int>(c.chainInput);
  const int n = static_cast<int>(d.inputs.size());
  int x = k.epilogue_input();
  if (x < 0 || x >= n) return false;
  std::vector<EpilogueStep> steps;
  for (const plan::EpilogueStep& p : k.epilogue()) {
    std::optional<EpilogueOp> op = epilogueOpFromName(p.op());
    if (!op || p.operand() < -1 || p.operand() >= n) return false;
    steps.push_back({*op, p.operand(), static_cast<float>(p.scalar()), p.chain_second()});
  }
  if (x != chain) {  // x op chain, with op commutative: read as chain op x
    EpilogueStep& first = steps[0];
    if (!isBinary(first.op) || !isCommutative(first.op) || first.operand != chain) return false;
    first.operand = x;
    first.chainSecond = false;
  }
  for (EpilogueStep& st : steps) {
    if (st.operand == chain) return false;  // the chain value read again
    const size_t at = static_cast<size_t>(st.operand);
    if (st.operand >= 0 && at < d.constInputs.size())
      if (std::optional<float> v = scalarOf(d.constInputs[at])) {  // a one-element weight: a scalar step
        st.operand = -1;
        st.scalar = *v;
      }
    if (st.operand >= 0) {
      if (d.inputs[static_cast<size_t>(st.operand)].dtype != DType::kF32) return false;
      st.operand = firstOperand + (st.operand < chain ? st.operand : st.operand - 1);
    }
  }
  out->insert(out->end(), steps.begin(), steps.end());
  return true;
}

}  // namespace

bool appendEpilogue(const FoldCandidate& c, int firstOperand, Epilogue* e) {
  const KernelDesc& d = c.desc;
  if (d.outputs.size() != 1 || c.chainInput >= d.inputs.size() || d.outputs[0] != d.inputs[c.chainInput] ||
      d.outputs[0].dtype != DType::kF32)
    return false;
  std::vector<EpilogueStep> steps;
  bool ok = d.cpuEntry || d.kernelIndex >= 0 ? fromLaunch(c, firstOperand, &steps) : fromKernel(c, firstOperand, &steps);
  // A chain longer than a oneDNN primitive takes post-ops is not folded (an
  // edited plan's kernel table may describe thousands of steps).
  if (!ok || e->steps.size() + steps.size() > kMaxEpilogueSteps) return false;
  e->steps.insert(e->steps.end(), steps.begin(), steps.end());
  return true;
}

std::string epilogueSummary(const Epilogue& e) {
  std::string s;
  for (const EpilogueStep& st : e.steps) {
    if (!s.empty()) s += '+';
    s += epilogueOpName(st.op);
  }
  return s;
}

}  // namespace pcc
