// The importer table: the rows of the ops Ops.def marks OnnxDirect, made from
// that column (directRows), and one import function per other ONNX op
// (kImporters at the end, and the families' tables).
//
// Each function maps an ONNX node of any opset from 1 to 24 to the canonical
// IR ops of Ops.def, which have the newest opset's semantics. What changed
// between opsets is resolved here and nowhere else:
//   - attributes that later became inputs (Squeeze/Unsqueeze/Split axes and
//     split < 13, ReduceMean axes < 18, Slice starts/ends/axes < 10) become
//     constant inputs;
//   - Reshape < 5 takes the shape as an attribute; Concat < 4 defaults to
//     axis 1; legacy broadcasting (< 7) is rewritten before (importer.cpp);
//   - Softmax < 13 normalizes over the input coerced to 2-D; unless the axis is
//     the last one, that is Flatten -> Softmax(-1) -> Reshape;
//   - attributes without meaning for inference (BatchNormalization spatial,
//     is_test, consumed_inputs, momentum; Gemm broadcast; Dropout ratio) are
//     dropped; training-only outputs are rejected when something reads them,
//     except LayerNormalization's Mean and InvStdDev, computed when read.
// (Dropout is imported with the tensor family, import_tensor.cpp.)
#include "compiler/onnx/op_importers.h"

#include "compiler/onnx/import_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <map>
#include <unordered_map>

namespace pcc {

namespace {

/// The Import column of Ops.def, by OpKind: for OnnxDirect ops the opset that
/// introduced the op and the attributes the IR node keeps.
struct DirectSpec {
  int since = 0;  ///< 0: not OnnxDirect
  std::vector<std::string_view> keep;
};
#define OnnxDirect(Since, ...) DirectSpec{Since, {__VA_ARGS__}}
#define OnnxCustom DirectSpec{}
#define NotOnnx DirectSpec{}
#define PCC_OP(Name, MinIn, MaxIn, NumOut, Kind, ShapeOperands, Shard, Import) Import,
const DirectSpec kDirectSpecs[] = {
#include "runtime/schema/Ops.def"
};
#undef PCC_OP
#undef OnnxDirect
#undef OnnxCustom
#undef NotOnnx
static_assert(std::size(kDirectSpecs) == kNumOpKinds);

/// The import function of every OnnxDirect row: one node of the op named by
/// the node's op_type, the attributes of its Ops.def row kept.
Status importDirect(C& c) {
  std::optional<OpKind> op = opFromName(c.node().op_type());
  if (!op || opInfo(*op).onnx != OnnxImport::kDirect)
    return internalError("no OnnxDirect row in Ops.def for '", c.node().op_type(), "'");
  return direct(c, *op, kDirectSpecs[static_cast<size_t>(*op)].keep);
}


/// Identity: an alias of a constant input, else an Identity node.
Status importIdentityLike(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  if (x->isConstant() && !c.isGraphOutput(0)) {
    c.setOutput(0, x);
    return Status::OK();
  }
  return c.emitNode(OpKind::Identity, {x}, {});
}

Status importIdentity(C& c) { return importIdentityLike(c); }

Status importConstant(C& c) {
  const AttrMap& a = c.attrs();
  // Exactly one value, as the ONNX checker requires: with two, which one wins
  // would be a guess.
  std::string given;
  int values = 0;
  for (const auto& attr : c.node().attribute())
    if (attr.name().rfind("value", 0) == 0 || attr.name() == "sparse_value") {
      given += strCat(values++ ? ", " : "", attr.name());
    }
  if (values > 1) return c.invalid("has ", values, " value attributes (", given, "); a Constant takes exactly one");
  if (const Tensor* t = a.getTensor("value")) return c.constantOutput(0, *t);
  if (a.has("value_float")) return c.constantOutput(0, Tensor::scalarF32(a.getFloat("value_float", 0)));
  if (a.has("value_int")) return c.constantOutput(0, Tensor::scalarI64(a.getInt("value_int", 0)));
  if (a.has("value_floats")) {
    std::vector<float> v = a.getFloats("value_floats");
    return c.constantOutput(0, Tensor::fromVector<float>(DType::kF32, {static_cast<int64_t>(v.size())}, v));
  }
  if (a.has("value_ints")) {
    std::vector<int64_t> v = a.getInts("value_ints");
    return c.constantOutput(0, Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v));
  }
  std::string names;
  for (const auto& [name, attr] : a.all()) names += strCat(names.empty() ? "" : ", ", name);
  return c.unsupportedHere("no supported value attribute (has: ", names.empty() ? "none" : names,
                           "; pcc supports value, value_float(s), value_int(s))");
}

Status importShape(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  // Every shape is static after import, so Shape is always a constant.
  const Dims& dims = x->type().shape;
  int64_t r = static_cast<int64_t>(dims.size());
  auto clampIndex = [r](int64_t i) { return std::clamp(i < 0 ? i + r : i, int64_t(0), r); };
  int64_t start = clampIndex(c.attrs().getInt("start", 0)), end = clampIndex(c.attrs().getInt("end", r));
  std::vector<int64_t> v;
  for (int64_t i = start; i < end; ++i) v.push_back(dims[i]);
  return c.constantOutput(0, Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v));
}

Status importCast(C& c) {
  if (!c.attrs().has("to")) return c.invalid("attribute 'to' is required");
  int64_t to = c.attrs().getInt("to", 0);
  if (!dtypeFromOnnx(static_cast<int32_t>(to)))
    return c.unsupportedHere("cast to ONNX data type ", to, " (pcc has no such element type)");
  return c.emitNode(OpKind::Cast, allInputs(c), c.keep({"to", "saturate", "round_mode"}));
}

Status importSoftmax(C& c) { return importSoftmaxLike(c, OpKind::Softmax); }

/// \returns `v` cast to `to` (itself when it has that type already).
StatusOr<Value*> castTo(C& c, Value* v, DType to, std::string_view tag) {
  if (v->type().dtype == to) return v;
  AttrMap a;
  a.set("to", static_cast<int64_t>(to));
  ASSIGN_OR_RETURN(std::vector<Value*> out, c.emit(OpKind::Cast, {v}, a, {}, tag));
  return out[0];
}

/// LayerNormalization; its optional Mean and InvStdDev outputs (of the stash
/// type, reduced dims kept as 1) are computed by ReduceMean, Sub, Mul, Add,
/// Sqrt and Div when something reads them.
Status importLayerNorm(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  std::vector<std::string> names(c.numOutputs() > 0 ? 1 : 0, c.node().output(0));
  ASSIGN_OR_RETURN(std::vector<Value*> y, c.emit(OpKind::LayerNormalization, allInputs(c),
                                                  c.keep({"axis", "epsilon"}), names));
  c.setOutput(0, y[0]);
  if (!c.outputUsed(1) && !c.outputUsed(2)) return Status::OK();

  int64_t r = x->type().rank();
  int64_t axis = c.attrs().getInt("axis", -1);
  if (axis < -r || axis >= r) return c.invalid("axis ", axis, " is out of range for rank ", r);
  if (axis < 0) axis += r;
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < r; ++i) axes.push_back(i);
  DType stash = c.attrs().getInt("stash_type", 1) == 1 ? DType::kF32 : x->type().dtype;
  auto out = [&](size_t i) { return i < c.numOutputs() ? c.node().output(static_cast<int>(i)) : std::string(); };

  ASSIGN_OR_RETURN(Value* xs, castTo(c, x, stash, "stash"));
  Value* axesV = c.constI64(axes, "axes");
  ASSIGN_OR_RETURN(std::vector<Value*> mean, c.emit(OpKind::ReduceMean, {xs, axesV}, {}, {out(1)}, "mean"));
  c.setOutput(1, mean[0]);
  if (!c.outputUsed(2)) return Status::OK();
  ASSIGN_OR_RETURN(std::vector<Value*> d, c.emit(OpKind::Sub, {xs, mean[0]}, {}, {}, "centered"));
  ASSIGN_OR_RETURN(std::vector<Value*> sq, c.emit(OpKind::Mul, {d[0], d[0]}, {}, {}, "squared"));
  ASSIGN_OR_RETURN(std::vector<Value*> var, c.emit(OpKind::ReduceMean, {sq[0], axesV}, {}, {}, "variance"));
  ASSIGN_OR_RETURN(Value* eps, castTo(c, c.constant(Tensor::scalarF32(c.attrs().getFloat("epsilon", 1e-5f)), "eps"),
                                      stash, "eps"));
  ASSIGN_OR_RETURN(Value* one, castTo(c, c.constant(Tensor::scalarF32(1.0f), "one"), stash, "one"));
  ASSIGN_OR_RETURN(std::vector<Value*> ve, c.emit(OpKind::Add, {var[0], eps}, {}, {}, "var_eps"));
  ASSIGN_OR_RETURN(std::vector<Value*> sd, c.emit(OpKind::Sqrt, {ve[0]}, {}, {}, "stddev"));
  ASSIGN_OR_RETURN(std::vector<Value*> inv, c.emit(OpKind::Div, {one, sd[0]}, {}, {out(2)}, "inv_stddev"));
  c.setOutput(2, inv[0]);
  return Status::OK();
}

/// BatchNormalization with training_mode = 1 (opset 14+): Y is normalized by
/// the batch's own statistics (mean and population variance over every axis
/// but 1), and the running statistics are updated by `momentum`:
///   running_mean = input_mean * momentum + batch_mean * (1 - momentum)
/// (the same for the variance). Built from ReduceMean, Sub, Mul, Add and the
/// inference-form BatchNormalization fed with the batch statistics.
Status importBatchNormTraining(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  ASSIGN_OR_RETURN(Value* scale, c.requiredInput(1));
  ASSIGN_OR_RETURN(Value* bias, c.requiredInput(2));
  ASSIGN_OR_RETURN(Value* inMean, c.requiredInput(3));
  ASSIGN_OR_RETURN(Value* inVar, c.requiredInput(4));
  int64_t r = x->type().rank();
  if (r < 2) return c.invalid("input X must be [N,C,...], got ", x->type().str());
  DType dt = x->type().dtype;
  std::vector<int64_t> axes = {0};
  for (int64_t i = 2; i < r; ++i) axes.push_back(i);
  auto out = [&](size_t i) { return i < c.numOutputs() ? c.node().output(static_cast<int>(i)) : std::string(); };
  Value* axesV = c.constI64(axes, "axes");
  AttrMap keep, drop;
  keep.set("keepdims", int64_t{1});
  drop.set("keepdims", int64_t{0});
  ASSIGN_OR_RETURN(std::vector<Value*> meanK, c.emit(OpKind::ReduceMean, {x, axesV}, keep, {}, "batch_mean_b"));
  ASSIGN_OR_RETURN(std::vector<Value*> mean, c.emit(OpKind::ReduceMean, {x, axesV}, drop, {}, "batch_mean"));
  ASSIGN_OR_RETURN(std::vector<Value*> d, c.emit(OpKind::Sub, {x, meanK[0]}, {}, {}, "centered"));
  ASSIGN_OR_RETURN(std::vector<Value*> sq, c.emit(OpKind::Mul, {d[0], d[0]}, {}, {}, "squared"));
  ASSIGN_OR_RETURN(std::vector<Value*> var, c.emit(OpKind::ReduceMean, {sq[0], axesV}, drop, {}, "batch_var"));
  ASSIGN_OR_RETURN(std::vector<Value*> y, c.emit(OpKind::BatchNormalization, {x, scale, bias, mean[0], var[0]},
                                                  c.keep({"epsilon"}), {out(0)}, "y"));
  c.setOutput(0, y[0]);
  float momentum = c.attrs().getFloat("momentum", 0.9f);
  ASSIGN_OR_RETURN(Value* m, castTo(c, c.constant(Tensor::scalarF32(momentum), "momentum"), dt, "momentum"));
  ASSIGN_OR_RETURN(Value* m1, castTo(c, c.constant(Tensor::scalarF32(1.0f - momentum), "one_minus_momentum"), dt,
                                     "one_minus_momentum"));
  const char* tags[] = {"running_mean", "running_var"};
  Value* given[] = {inMean, inVar};
  Value* batch[] = {mean[0], var[0]};
  for (size_t k = 0; k < 2; ++k) {
    if (!c.outputUsed(k + 1)) continue;
    ASSIGN_OR_RETURN(std::vector<Value*> a, c.emit(OpKind::Mul, {given[k], m}, {}, {}, tags[k]));
    ASSIGN_OR_RETURN(std::vector<Value*> b, c.emit(OpKind::Mul, {batch[k], m1}, {}, {}, tags[k]));
    ASSIGN_OR_RETURN(std::vector<Value*> sum, c.emit(OpKind::Add, {a[0], b[0]}, {}, {out(k + 1)}, tags[k]));
    c.setOutput(k + 1, sum[0]);
  }
  return Status::OK();
}

Status importBatchNorm(C& c) {
  if (c.attrs().getInt("training_mode", 0) != 0) {
    if (c.opset() < 14) return c.invalid("training_mode is an attribute of opset 14 and later");
    return importBatchNormTraining(c);
  }
  RETURN_IF_ERROR(c.onlyFirstOutputsUsed(1, "running statistics are outputs of training_mode = 1 only"));
  if (c.opset() < 9 && c.attrs().getInt("spatial", 1) == 0)
    return c.unsupportedHere("spatial = 0 (per-activation statistics)");
  return c.emitNode(OpKind::BatchNormalization, allInputs(c), c.keep({"epsilon"}));
}

/// MaxPool computes its Indices output (num_outputs = 2, with storage_order)
/// only when something reads it.
Status importMaxPool(C& c) {
  AttrMap a = c.keep({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"});
  if (!c.outputUsed(1)) return c.emitNode(OpKind::MaxPool, allInputs(c), a);
  a.set("num_outputs", int64_t{2});
  a.set("storage_order", c.attrs().getInt("storage_order", 0));
  return c.emitNode(OpKind::MaxPool, allInputs(c), a);
}

Status importReduceMean(C& c) { return importReduce(c, OpKind::ReduceMean, 18); }

Status importReshape(C& c) {
  if (c.opset() >= 5) return c.emitNode(OpKind::Reshape, allInputs(c), c.keep({"allowzero"}));
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  Value* shape = intsAttrAsInput(c, "shape");
  if (!shape) return c.invalid("attribute 'shape' is required before opset 5");
  return c.emitNode(OpKind::Reshape, {x, shape}, {});
}

Status importConcat(C& c) {
  AttrMap a;
  if (!c.attrs().has("axis") && c.opset() >= 4) return c.invalid("attribute 'axis' is required");
  a.set("axis", c.attrs().getInt("axis", 1));
  return c.emitNode(OpKind::Concat, allInputs(c), a);
}

Status importSqueeze(C& c) {
  if (c.opset() >= 13) return c.emitNode(OpKind::Squeeze, allInputs(c), {});
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  return c.emitNode(OpKind::Squeeze, {x, intsAttrAsInput(c, "axes")}, {});
}

Status importUnsqueeze(C& c) {
  if (c.opset() >= 13) return c.emitNode(OpKind::Unsqueeze, allInputs(c), {});
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  Value* axes = intsAttrAsInput(c, "axes");
  if (!axes) return c.invalid("attribute 'axes' is required before opset 13");
  return c.emitNode(OpKind::Unsqueeze, {x, axes}, {});
}

Status importSplit(C& c) {
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  Value* split = c.opset() >= 13 ? c.input(1) : intsAttrAsInput(c, "split");
  AttrMap a = c.keep({"axis"});
  int64_t n = static_cast<int64_t>(c.numOutputs());
  if (c.attrs().has("num_outputs") && c.attrs().getInt("num_outputs", 0) != n)
    return c.invalid("num_outputs = ", c.attrs().getInt("num_outputs", 0), " but the node has ", n, " outputs");
  if (!split) a.set("num_outputs", n);
  return c.emitNode(OpKind::Split, {x, split}, a);
}

Status importSlice(C& c) {
  if (c.opset() >= 10) return c.emitNode(OpKind::Slice, allInputs(c), {});
  ASSIGN_OR_RETURN(Value* x, c.requiredInput(0));
  Value* starts = intsAttrAsInput(c, "starts");
  Value* ends = intsAttrAsInput(c, "ends");
  if (!starts || !ends) return c.invalid("attributes 'starts' and 'ends' are required before opset 10");
  return c.emitNode(OpKind::Slice, {x, starts, ends, intsAttrAsInput(c, "axes")}, {});
}

const ImporterEntry kImporters[] = {
    {"Cast", 7, importCast},
    {"Identity", 7, importIdentity},
    {"Constant", 7, importConstant},
    {"Softmax", 7, importSoftmax},
    {"LayerNormalization", 17, importLayerNorm},
    {"BatchNormalization", 7, importBatchNorm},
    {"ReduceMean", 7, importReduceMean},
    {"MaxPool", 7, importMaxPool},
    {"Reshape", 7, importReshape},
    {"Squeeze", 7, importSqueeze},
    {"Unsqueeze", 7, importUnsqueeze},
    {"Concat", 7, importConcat},
    {"Split", 7, importSplit},
    {"Slice", 7, importSlice},
    {"Shape", 7, importShape},
};

}  // namespace

const std::vector<ImporterEntry>& importerRows() {
  static const std::vector<ImporterEntry> all = [] {
    std::vector<ImporterEntry> rows(std::begin(kImporters), std::end(kImporters));
    for (size_t i = 0; i < kNumOpKinds; ++i) {
      OpKind op = static_cast<OpKind>(i);
      // opName is the row's name literal (Ops.def), so data() ends with a NUL.
      if (opInfo(op).onnx == OnnxImport::kDirect) rows.push_back({opName(op).data(), kDirectSpecs[i].since, &importDirect});
    }
    for (auto family : {mathImporters, reduceNormImporters, tensorImporters, signalImporters, rnnImporters,
                        visionImporters})
      for (const ImporterEntry& e : family()) rows.push_back(e);
    return rows;
  }();
  return all;
}

std::vector<std::string> duplicateImporterRows() {
  std::map<std::string_view, int> count;
  for (const ImporterEntry& e : importerRows()) ++count[e.opType];
  std::vector<std::string> dups;
  for (const auto& [op, n] : count)
    if (n > 1) dups.emplace_back(op);
  return dups;
}

ImportFn findImporter(std::string_view opType, int64_t opset) {
  static const auto* table = [] {
    // Two rows for one op_type would leave one of them dead depending on the
    // order of the tables: a programming error, refused on first use.
    std::vector<std::string> dups = duplicateImporterRows();
    if (!dups.empty()) {
      std::string names;
      for (const std::string& d : dups) names += " " + d;
      std::fprintf(stderr, "internal error: the importer tables have more than one row for:%s\n", names.c_str());
      std::abort();
    }
    auto* m = new std::unordered_map<std::string_view, const ImporterEntry*>();
    for (const ImporterEntry& e : importerRows()) (*m)[e.opType] = &e;
    return m;
  }();
  // A row with minOpset 7 or less covers every opset from 1: what changed
  // before 7 is handled by its import function (or the importer).
  auto it = table->find(opType);
  if (it == table->end() || (it->second->minOpset > 7 && opset < it->second->minOpset)) return nullptr;
  return it->second->fn;
}

}  // namespace pcc
