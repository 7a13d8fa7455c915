// Importers of the rnn op family: RNN, GRU and LSTM.
//
// The canonical node keeps the newest-opset attributes and inputs; the opset
// versions differ only in attributes:
//   - opset 1 has `output_sequence` (whether Y is produced); Y is produced
//     whenever the node names it, so the attribute is dropped;
//   - GRU before opset 3 has no `linear_before_reset` (its default 0 holds);
//   - `layout` exists from opset 14 (its default 0 holds before).
// The outputs Y, Y_h (and Y_c) are optional: the canonical node carries the
// ONNX node's output count in `num_outputs`, and unnamed outputs among them get
// fresh names and stay unread.
#include "compiler/onnx/import_util.h"

namespace pcc {
namespace {

/// Imports RNN, GRU or LSTM (`maxOutputs` 2, 2, 3).
Status importRecurrent(C& c, OpKind op, size_t maxOutputs) {
  if (c.numOutputs() > maxOutputs)
    return c.invalid(opName(op), " has at most ", maxOutputs, " outputs, got ", c.numOutputs());
  AttrMap a = c.keep({"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                      "layout", "linear_before_reset", "input_forget"});
  // Only the outputs up to the last named one are computed.
  size_t n = c.numOutputs();
  while (n > 1 && c.node().output(static_cast<int>(n - 1)).empty()) --n;
  a.set("num_outputs", static_cast<int64_t>(std::max<size_t>(n, 1)));
  std::vector<Value*> ins = allInputs(c);
  return c.emitNode(op, ins, a);
}

}  // namespace

std::vector<ImporterEntry> rnnImporters() {
  return {
      {"RNN", 7, [](C& c) { return importRecurrent(c, OpKind::RNN, 2); }},
      {"GRU", 7, [](C& c) { return importRecurrent(c, OpKind::GRU, 2); }},
      {"LSTM", 7, [](C& c) { return importRecurrent(c, OpKind::LSTM, 3); }},
  };
}

}  // namespace pcc
