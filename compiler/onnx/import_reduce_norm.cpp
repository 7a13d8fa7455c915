// Importers of the reduce_norm op family. Opset differences resolved here:
//   - Reduce* `axes` attribute (before opset 13 for ReduceSum, 18 for the
//     others) and TopK `k` attribute (before opset 10) become constant inputs;
//   - LogSoftmax and Hardmax before opset 13 work on the input coerced to 2-D
//     (as Softmax, see importSoftmaxLike);
//   - GroupNormalization 18 takes scale and bias per group; the canonical
//     (opset-21) form takes them per channel, so each is repeated C/G times
//     (folded at import when constant);
//   - stash_type and softmax_precision (computation precision) are dropped:
//     the kernels accumulate in double;
//   - Attention gets `num_outputs`, the count of its ONNX outputs (1 to 4).
#include "compiler/onnx/import_util.h"

namespace pcc {
namespace {

template <OpKind kOp, int kAxesInputOpset>
Status importReduceOp(C& c) {
  return importReduce(c, kOp, kAxesInputOpset);
}

template <OpKind kOp>
Status importSoftmaxOp(C& c) {
  return importSoftmaxLike(c, kOp);
}

Status importTopK(C& c) {
  RETURN_IF_ERROR(c.onlyFirstOutputsUsed(2, "TopK has"));
  if (c.opset() >= 10) return c.emitNode(OpKind::TopK, allInputs(c), c.keep({"axis", "largest", "sorted"}));
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  if (!c.attrs().has("k")) return c.invalid("attribute 'k' is required before opset 10");
  return c.emitNode(OpKind::TopK, {x, c.constI64({c.attrs().getInt("k", 0)}, "k")}, c.keep({"axis"}));
}

/// \returns `v` ([G]) with each element repeated `perGroup` times ([G * perGroup]).
StatusOr<Value*> repeatPerChannel(C& c, Value* v, int64_t groups, int64_t perGroup, std::string_view tag) {
  ASSIGN_OR_RETURN(std::vector<Value*> u, c.emit(OpKind::Unsqueeze, {v, c.constI64({1}, "axes")}, {}, {}, tag));
  ASSIGN_OR_RETURN(std::vector<Value*> e,
                   c.emit(OpKind::Expand, {u[0], c.constI64({groups, perGroup}, "shape")}, {}, {}, tag));
  ASSIGN_OR_RETURN(std::vector<Value*> r,
                   c.emit(OpKind::Reshape, {e[0], c.constI64({groups * perGroup}, "shape")}, {}, {}, tag));
  return r[0];
}

Status importGroupNorm(C& c) {
  AttrMap a = c.keep({"epsilon", "num_groups"});
  if (c.opset() >= 21) return c.emitNode(OpKind::GroupNormalization, allInputs(c), a);
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* scale, c.requiredInput(1));
  ASSIGN_OR_RETURN(Value* bias, c.requiredInput(2));
  int64_t groups = c.attrs().getInt("num_groups", 0);
  const TensorType& xt = x->type();
  if (xt.rank() < 2 || groups <= 0 || xt.shape[1] % groups != 0)
    return c.invalid("num_groups ", groups, " must be positive and divide the channels of X ", xt.str());
  for (Value* v : {scale, bias})
    if (v->type().shape != Dims{groups})
      return c.invalid("scale and bias must be [num_groups] = [", groups, "] at opset ", c.opset(), ", got ",
                       v->type().str());
  int64_t perGroup = xt.shape[1] / groups;
  ASSIGN_OR_RETURN(Value* s, repeatPerChannel(c, scale, groups, perGroup, "scale"));
  ASSIGN_OR_RETURN(Value* b, repeatPerChannel(c, bias, groups, perGroup, "bias"));
  return c.emitNode(OpKind::GroupNormalization, {x, s, b}, a);
}

/// Attention's outputs beyond Y are optional; the canonical node carries their
/// count in `num_outputs` so that it computes only what the ONNX node names.
Status importAttention(C& c) {
  std::vector<Value*> ins = allInputs(c);
  ins.resize(std::min<size_t>(ins.size(), 7));
  AttrMap a = c.keep({"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap"});
  a.set("num_outputs", static_cast<int64_t>(std::max<size_t>(c.numOutputs(), 1)));
  return c.emitNode(OpKind::Attention, ins, a);
}

}  // namespace

std::vector<ImporterEntry> reduceNormImporters() {
  return {
      {"ReduceSum", 7, importReduceOp<OpKind::ReduceSum, 13>},
      {"ReduceMax", 7, importReduceOp<OpKind::ReduceMax, 18>},
      {"ReduceMin", 7, importReduceOp<OpKind::ReduceMin, 18>},
      {"ReduceProd", 7, importReduceOp<OpKind::ReduceProd, 18>},
      {"ReduceL1", 7, importReduceOp<OpKind::ReduceL1, 18>},
      {"ReduceL2", 7, importReduceOp<OpKind::ReduceL2, 18>},
      {"ReduceLogSum", 7, importReduceOp<OpKind::ReduceLogSum, 18>},
      {"ReduceLogSumExp", 7, importReduceOp<OpKind::ReduceLogSumExp, 18>},
      {"ReduceSumSquare", 7, importReduceOp<OpKind::ReduceSumSquare, 18>},
      {"LogSoftmax", 7, importSoftmaxOp<OpKind::LogSoftmax>},
      {"Hardmax", 7, importSoftmaxOp<OpKind::Hardmax>},
      {"GroupNormalization", 18, importGroupNorm},
      {"TopK", 7, importTopK},
      {"Attention", 23, importAttention},
  };
}

}  // namespace pcc
