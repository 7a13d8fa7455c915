// Importers of the signal op family. Opset differences resolved here:
//   - DFT before opset 20 has `axis` as an attribute (default 1); it becomes
//     the constant input 2 of the canonical form (default -2 there);
//   - SoftmaxCrossEntropyLoss gets `num_outputs`, the count of its ONNX
//     outputs (1: loss, 2: loss and log_prob), so it computes log_prob only
//     when the node names it.
#include "compiler/onnx/import_util.h"

namespace pcc {
namespace {

Status importSce(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* t, c.requiredInput(1));
  AttrMap a = c.keep({"ignore_index", "reduction"});
  int64_t n = c.numOutputs() >= 2 && !c.node().output(1).empty() ? 2 : 1;
  a.set("num_outputs", n);
  return c.emitNode(OpKind::SoftmaxCrossEntropyLoss, {x, t, c.input(2)}, a);
}

Status importDft(C& c) {
  AttrMap a = c.keep({"inverse", "onesided"});
  if (c.opset() >= 20) return c.emitNode(OpKind::DFT, allInputs(c), a);
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  Value* axis = c.constant(Tensor::scalarI64(c.attrs().getInt("axis", 1)), "axis");
  return c.emitNode(OpKind::DFT, {x, c.input(1), axis}, a);
}

}  // namespace

std::vector<ImporterEntry> signalImporters() {
  return {
      {"SoftmaxCrossEntropyLoss", 12, importSce},
      {"DFT", 17, importDft},
  };
}

}  // namespace pcc
