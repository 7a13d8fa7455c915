// describeEpilogue: walks the output's expression down its chain.
//
//   1. From the output Expr, each step is matched as one of: a unary op of
//      the chain (relu, sigmoid, ...); LeakyRelu's select(x < 0, alpha * x, x)
//      and Swish's x * sigmoid(alpha * x) (x * sigmoid(x)), whose x is the
//      chain; a binary op whose one operand is a leaf (an input or a constant)
//      and the other the chain. When both operands are leaves, operand 0 is
//      the chain when its type is the output's, else operand 1 (a backend may
//      swap a commutative first step: runtime/fold_epilogue.h).
//   2. The walk ends at an input: the chain's X. X must have the output's type
//      and appear nowhere else; every other operand must be a float32 input.
#include "codegen/epilogue.h"

#include <algorithm>

#include "runtime/support/epilogue.h"

namespace pcc {

namespace {

struct Walk {
  const KernelSpec& s;
  std::vector<EpilogueStep> steps;  // from the output down (reversed at the end)

  const Expr& at(int e) const { return s.exprs[static_cast<size_t>(e)]; }
  bool isConst(int e) const { return at(e).op == ScalarOp::kConst; }
  bool isInput(int e) const { return at(e).op == ScalarOp::kInput; }
  bool isLeaf(int e) const { return isConst(e) || isInput(e); }

  /// `e` is c * x or x * c with c constant: \returns x (and c), else -1.
  int scaled(int e, double* c) const {
    const Expr& m = at(e);
    if (m.op != ScalarOp::kMul || m.args.size() != 2) return -1;
    for (int k = 0; k < 2; ++k)
      if (isConst(m.args[k])) {
        *c = at(m.args[k]).value;
        return m.args[1 - k];
      }
    return -1;
  }

  /// Matches one step at `e`: \returns the chain's Expr below it, or -1.
  int step(int e) {
    const Expr& x = at(e);
    if (x.dtype != DType::kF32) return -1;
    auto unary = [&](EpilogueOp op, float alpha = 0) {
      steps.push_back({op, -1, alpha, false});
      return x.args[0];
    };
    switch (x.op) {
      case ScalarOp::kRelu: return unary(EpilogueOp::kRelu);
      case ScalarOp::kSigmoid: return unary(EpilogueOp::kSigmoid);
      case ScalarOp::kTanh: return unary(EpilogueOp::kTanh);
      case ScalarOp::kGeluErf: return unary(EpilogueOp::kGeluErf);
      case ScalarOp::kGeluTanh: return unary(EpilogueOp::kGeluTanh);
      case ScalarOp::kAbs: return unary(EpilogueOp::kAbs);
      case ScalarOp::kSqrt: return unary(EpilogueOp::kSqrt);
      case ScalarOp::kExp: return unary(EpilogueOp::kExp);
      case ScalarOp::kLog: return unary(EpilogueOp::kLog);
      case ScalarOp::kNeg: return unary(EpilogueOp::kNeg);
      case ScalarOp::kSelect: {  // LeakyRelu: select(x < 0, alpha * x, x)
        if (x.args.size() != 3) return -1;
        const Expr& cond = at(x.args[0]);
        int chain = x.args[2];
        double alpha = 0;
        if (cond.op != ScalarOp::kLess || cond.args.size() != 2 || cond.args[0] != chain || !isConst(cond.args[1]) ||
            at(cond.args[1]).value != 0 || scaled(x.args[1], &alpha) != chain)
          return -1;
        steps.push_back({EpilogueOp::kLeakyRelu, -1, static_cast<float>(alpha), false});
        return chain;
      }
      case ScalarOp::kAdd: case ScalarOp::kSub: case ScalarOp::kMul: case ScalarOp::kDiv: case ScalarOp::kMax:
      case ScalarOp::kMin: {
        if (x.args.size() != 2) return -1;
        if (x.op == ScalarOp::kMul) {  // Swish: x * sigmoid(alpha * x), either order
          for (int k = 0; k < 2; ++k) {
            int chain = x.args[k];
            const Expr& sg = at(x.args[1 - k]);
            if (sg.op != ScalarOp::kSigmoid || sg.args.size() != 1) continue;
            double alpha = 1;
            if (sg.args[0] == chain || scaled(sg.args[0], &alpha) == chain) {
              steps.push_back({EpilogueOp::kSwish, -1, static_cast<float>(alpha), false});
              return chain;
            }
          }
        }
        int a = x.args[0], b = x.args[1];
        int chain;
        if (isLeaf(a) && isLeaf(b)) {
          chain = isInput(a) && s.inputs[static_cast<size_t>(at(a).input)].type == s.outputs[0].type ? a : b;
        } else if (isLeaf(b)) {
          chain = a;
        } else if (isLeaf(a)) {
          chain = b;
        } else {
          return -1;  // a tree, not a chain
        }
        int leaf = chain == a ? b : a;
        EpilogueStep st;
        switch (x.op) {
          case ScalarOp::kAdd: st.op = EpilogueOp::kAdd; break;
          case ScalarOp::kSub: st.op = EpilogueOp::kSub; break;
          case ScalarOp::kMul: st.op = EpilogueOp::kMul; break;
          case ScalarOp::kDiv: st.op = EpilogueOp::kDiv; break;
          case ScalarOp::kMax: st.op = EpilogueOp::kMax; break;
          default: st.op = EpilogueOp::kMin; break;
        }
        st.chainSecond = chain == b;
        if (isConst(leaf)) {
          st.scalar = static_cast<float>(at(leaf).value);
        } else {
          st.operand = at(leaf).input;
          if (s.inputs[static_cast<size_t>(st.operand)].type.dtype != DType::kF32) return -1;
        }
        steps.push_back(st);
        return chain;
      }
      default: return -1;
    }
  }
};

}  // namespace

bool describeEpilogue(const KernelSpec& spec, plan::Kernel* k) {
  if (spec.attention || spec.reduces || spec.outputs.size() != 1 || spec.outputs[0].perRow) return false;
  const TensorType& out = spec.outputs[0].type;
  if (out.dtype != DType::kF32 || spec.outputs[0].expr < 0) return false;
  Walk w{spec, {}};
  int e = spec.outputs[0].expr;
  while (!w.isInput(e)) {
    if (w.steps.size() > 16) return false;
    e = w.step(e);
    if (e < 0) return false;
  }
  const int x = w.at(e).input;
  if (w.steps.empty() || spec.inputs[static_cast<size_t>(x)].type != out) return false;
  for (const EpilogueStep& st : w.steps)
    if (st.operand == x) return false;
  std::reverse(w.steps.begin(), w.steps.end());
  k->set_epilogue_input(x);
  for (const EpilogueStep& st : w.steps) {
    plan::EpilogueStep* p = k->add_epilogue();
    p->set_op(std::string(epilogueOpName(st.op)));
    p->set_operand(st.operand);
    p->set_scalar(st.scalar);
    p->set_chain_second(st.chainSecond);
  }
  return true;
}

}  // namespace pcc
