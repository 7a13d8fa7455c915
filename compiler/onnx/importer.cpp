// Model-level import. The steps:
//   1. parse the file with protobuf and check what protobuf cannot: a graph,
//      an ir_version up to kMaxIrVersion, a default-domain opset in 1..24,
//      every value defined once and before it is read (a truncated file can
//      still parse);
//   2. list every unsupported op of the model in one error: ops the table
//      lacks and ops of other domains (also in a model that imports no default
//      opset at all), in the graph and in the bodies of If, Loop and Scan;
//   3. initializers become constants (external data mmapped, never copied);
//   4. inputs get static shapes from --shape, --batch and the sizes the model
//      carries (symbols bound by name; input_dims.h);
//   5. nodes are imported in order through the op table (op_importers.cpp),
//      folding constant subgraphs as they appear (If, Loop and Scan are
//      folded, unrolled or kept as region nodes: import_control.h); before opset 7, binary
//      ops with broadcast = 1 (and PRelu's per-channel slope) are first
//      rewritten to numpy broadcasting;
//   6. graph outputs keep the ONNX order; one that is an input or a constant
//      is produced by an inserted Identity node. Unused constants are dropped.
#include "compiler/onnx/importer.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <unordered_set>

#include "compiler/onnx/import_context.h"
#include "compiler/onnx/import_control.h"
#include "compiler/onnx/input_dims.h"
#include "compiler/onnx/op_importers.h"
#include "runtime/support/mapped_file.h"

namespace pcc {

namespace {

// The newest opset and IR version of ONNX 1.19; opsets 22-24 changed the
// ops pcc imports only by admitting new element types, which the kernels'
// type inference accepts or rejects. Opsets below 7 differ in broadcasting
// (see legacyBroadcast) and in a few attributes handled by the op importers.
constexpr int64_t kMinOpset = 1, kMaxOpset = 24;
constexpr int64_t kMaxIrVersion = 12;

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

std::string nodeLabel(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? strCat(n.op_type(), "_", index) : n.name();
}

template <typename... A>
Status notValid(const std::string& file, const A&... why) {
  return invalidInput(file, ": not a valid ONNX model (", strCat(why...), ")");
}

Status checkSupported(const onnx::GraphProto& g, const std::string& file, std::optional<int64_t> opset);

/// Step 1: what a parsed model must satisfy before import. \returns the
/// default-domain opset.
StatusOr<int64_t> checkModel(const onnx::ModelProto& m, const std::string& file) {
  if (!m.has_graph()) return notValid(file, "no graph");
  if (m.ir_version() <= 0) return notValid(file, "no ir_version");
  if (m.ir_version() > kMaxIrVersion)
    return unsupported(file, ": IR version ", m.ir_version(), " is not supported (pcc reads IR versions up to ",
                       kMaxIrVersion, ")");
  std::optional<int64_t> opset;
  for (const auto& o : m.opset_import())
    if (isDefaultDomain(o.domain())) opset = o.version();
  if (!opset) {
    // A model of another domain only (ai.onnx.ml, com.microsoft, ...) is valid
    // ONNX whose operators pcc does not have: say so, naming them.
    const auto& nodes = m.graph().node();
    bool allForeign = !nodes.empty() && std::all_of(nodes.begin(), nodes.end(), [](const onnx::NodeProto& n) {
      return !isDefaultDomain(n.domain());
    });
    if (allForeign) return checkSupported(m.graph(), file, std::nullopt);
    return notValid(file, "no opset_import for the default domain");
  }
  if (*opset < kMinOpset || *opset > kMaxOpset)
    return unsupported(file, ": opset ", *opset, " of the default domain is not supported (pcc imports opsets ",
                       kMinOpset, " to ", kMaxOpset, ")");

  const onnx::GraphProto& g = m.graph();
  std::unordered_set<std::string> defined;
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) return notValid(file, "an initializer has no name");
    if (!defined.insert(t.name()).second) return notValid(file, "initializer '", t.name(), "' is defined twice");
  }
  // An input may carry an initializer's name (the initializer is its default;
  // IR < 4 lists every initializer as an input), but never another input's.
  std::unordered_set<std::string> inputs;
  for (const auto& in : g.input()) {
    if (in.name().empty()) return notValid(file, "a graph input has no name");
    if (!inputs.insert(in.name()).second) return notValid(file, "graph input '", in.name(), "' is declared twice");
    defined.insert(in.name());
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type().empty()) return notValid(file, "node ", i, " has no op_type");
    for (const std::string& in : n.input())
      if (!in.empty() && !defined.count(in))
        return notValid(file, "node '", nodeLabel(n, i), "' (", n.op_type(), ") reads '", in,
                        "', which is not a graph input, an initializer or an output of an earlier node");
    for (const std::string& out : n.output())
      if (!out.empty() && !defined.insert(out).second)
        return notValid(file, "value '", out, "' is defined twice (node '", nodeLabel(n, i), "')");
  }
  if (g.output_size() == 0) return notValid(file, "the graph has no outputs");
  for (const auto& out : g.output())
    if (!defined.count(out.name())) return notValid(file, "graph output '", out.name(), "' is never defined");
  return *opset;
}

/// \returns true when an attribute of `n` holds a graph (If, Loop, Scan).
bool hasGraphAttribute(const onnx::NodeProto& n) {
  using A = onnx::AttributeProto;
  return std::any_of(n.attribute().begin(), n.attribute().end(), [](const A& a) {
    return a.type() == A::GRAPH || a.type() == A::GRAPHS || a.has_g() || a.graphs_size() > 0;
  });
}

/// Collects, for checkSupported, the ops of `g` and of the bodies of its
/// If / Loop / Scan nodes that the importer has no function for.
void collectUnsupported(const onnx::GraphProto& g, std::optional<int64_t> opset, std::vector<std::string>& order,
                        std::map<std::string, std::vector<std::string>>& nodesOf) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    bool known = opset && isDefaultDomain(n.domain());
    if (known && isControlFlowOp(n.op_type())) {
      known = n.op_type() != "Scan" || *opset >= 8;
      if (known) {
        for (const auto& a : n.attribute()) {
          if (a.has_g()) collectUnsupported(a.g(), opset, order, nodesOf);
          for (const auto& sub : a.graphs()) collectUnsupported(sub, opset, order, nodesOf);
        }
        continue;
      }
    } else if (known) {
      known = !hasGraphAttribute(n) && findImporter(n.op_type(), *opset);
    }
    if (!known && !hasGraphAttribute(n)) known = findContribImporter(n.domain(), n.op_type()) != nullptr;
    if (known) continue;
    std::string op = isDefaultDomain(n.domain()) ? n.op_type() : strCat(n.domain(), ".", n.op_type());
    if (!nodesOf.count(op)) order.push_back(op);
    nodesOf[op].push_back(nodeLabel(n, i));
  }
}

/// Step 2: \returns one error listing every op the importer has no function
/// for, in the graph and in the bodies of its If, Loop and Scan nodes.
/// `opset` is absent when the model imports no default-domain opset.
Status checkSupported(const onnx::GraphProto& g, const std::string& file, std::optional<int64_t> opset) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> nodesOf;
  collectUnsupported(g, opset, order, nodesOf);
  if (order.empty()) return Status::OK();
  constexpr size_t kMaxNames = 3;
  std::string list;
  for (const std::string& op : order) {
    const auto& names = nodesOf[op];
    list += strCat(list.empty() ? "" : ", ", op, names.size() == 1 ? " (node " : " (nodes ");
    for (size_t i = 0; i < names.size() && i < kMaxNames; ++i) list += strCat(i ? ", '" : "'", names[i], "'");
    if (names.size() > kMaxNames) list += strCat(" and ", names.size() - kMaxNames, " more");
    list += ")";
  }
  std::string where = opset ? strCat("opset ", *opset) : std::string("no default-domain opset");
  return unsupported(file, ": unsupported operators (", where, "): ", list);
}

/// Binary ops that, before opset 7, broadcast only with attribute broadcast = 1.
bool hasLegacyBroadcast(const std::string& op) {
  static const char* const kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return op == o; });
}

/// Before opset 7, `A op B` with broadcast = 1 matches B's dims with A's dims
/// from `axis` on (default: A's trailing dims). Rewrites node `n` (already a
/// copy the context imports) to numpy broadcasting: B gets trailing 1-dims.
Status legacyBroadcast(ImportContext& ctx, onnx::NodeProto& n, int64_t axisAttr, bool hasAxis) {
  Value* a = ctx.input(0);
  Value* b = ctx.input(1);
  if (!a || !b || b->type().rank() >= a->type().rank()) return Status::OK();
  int64_t ra = a->type().rank(), rb = b->type().rank();
  int64_t axis = hasAxis ? axisAttr : ra - rb;
  if (axis < 0) axis += ra;
  bool fits = axis >= 0 && axis + rb <= ra;
  for (int64_t j = 0; fits && j < rb; ++j) {
    int64_t db = b->type().shape[j], da = a->type().shape[axis + j];
    fits = db == da || db == 1;
  }
  if (!fits)
    return ctx.invalid("broadcast axis ", axisAttr, " does not fit ", b->type().str(), " into ", a->type().str());
  if (axis + rb == ra) return Status::OK();  // trailing alignment is numpy's
  Dims shape = b->type().shape;
  shape.resize(static_cast<size_t>(ra - axis), 1);
  ASSIGN_OR_RETURN(std::vector<Value*> r,
                   ctx.emit(OpKind::Reshape, {b, ctx.constI64(shape, "broadcast_shape")}, {}, {}, "broadcast"));
  ctx.define(r[0]->name(), r[0]);
  n.set_input(1, r[0]->name());
  return Status::OK();
}

/// \returns an error unless `t` fits the declaration of input `d`.
Status checkGivenValue(const InputDecl& d, const Tensor& t, const ImportOptions& opts, const std::string& file) {
  if (opts.shapes.count(d.name))
    return invalidInput(file, ": input '", d.name, "' has both a --shape and a value");
  bool fits = t.dtype() == d.dtype && (!d.hasShape || t.rank() == static_cast<int64_t>(d.dims.size()));
  for (size_t i = 0; fits && d.hasShape && i < d.dims.size(); ++i) fits = !d.dims[i] || *d.dims[i] == t.shape()[i];
  if (!fits) return invalidInput(file, ": the value given for input '", d.name, "' is ", t.type().str(),
                                 ", which does not fit its declaration");
  return Status::OK();
}

}  // namespace

Status importOnnxNode(ImportContext& ctx, const onnx::NodeProto& n, int i) {
  onnx::NodeProto legacy;  // the node rewritten to opset-7 broadcasting
  if (ctx.opset() < 7 && hasLegacyBroadcast(n.op_type())) {
    legacy = n;
    int64_t broadcast = 0, axis = 0;
    bool hasAxis = false;
    auto* attrs = legacy.mutable_attribute();
    for (int k = attrs->size() - 1; k >= 0; --k) {
      const onnx::AttributeProto& a = attrs->Get(k);
      if (a.name() != "broadcast" && a.name() != "axis") continue;
      (a.name() == "broadcast" ? broadcast : axis) = a.i();
      hasAxis |= a.name() == "axis";
      attrs->DeleteSubrange(k, 1);
    }
    RETURN_IF_ERROR(ctx.beginNode(legacy, ctx.namePrefix() + nodeLabel(n, i)));
    if (broadcast != 0) RETURN_IF_ERROR(legacyBroadcast(ctx, legacy, axis, hasAxis));
  } else if (ctx.opset() < 7 && n.op_type() == "PRelu" && n.input_size() == 2) {
    // PRelu before 7: a 1-D slope of C values is per channel (dim 1).
    legacy = n;
    RETURN_IF_ERROR(ctx.beginNode(legacy, ctx.namePrefix() + nodeLabel(n, i)));
    Value* x = ctx.input(0);
    Value* slope = ctx.input(1);
    if (x && slope && x->type().rank() > 2 && slope->type().rank() == 1 && slope->type().shape[0] != 1)
      RETURN_IF_ERROR(legacyBroadcast(ctx, legacy, 1, true));
  } else {
    RETURN_IF_ERROR(ctx.beginNode(n, ctx.namePrefix() + nodeLabel(n, i)));
  }
  if (isControlFlowOp(n.op_type())) {
    RETURN_IF_ERROR(importControlFlow(ctx));
  } else {
    ImportFn fn = isDefaultDomain(n.domain()) ? findImporter(n.op_type(), ctx.opset()) : nullptr;
    if (!fn) fn = findContribImporter(n.domain(), n.op_type());
    if (!fn) return internalError(ctx.file(), ": no importer for ", n.op_type(), " after the support check");
    RETURN_IF_ERROR(fn(ctx));
  }
  for (size_t k = 0; k < ctx.numOutputs(); ++k)
    if (ctx.outputUsed(k) && !ctx.lookup(n.output(static_cast<int>(k))))
      return ctx.error(StatusCode::kInternal, strCat("the importer did not define output ", k));
  return Status::OK();
}

StatusOr<std::unique_ptr<Graph>> importOnnxModel(const onnx::ModelProto& m, const std::string& baseDir,
                                                 const std::string& displayName, const ImportOptions& opts) {
  const std::string& file = displayName;
  ASSIGN_OR_RETURN(int64_t opset, checkModel(m, file));
  const onnx::GraphProto& gp = m.graph();
  RETURN_IF_ERROR(checkSupported(gp, file, opset));

  std::unordered_set<std::string> graphOutputs, consumed, reserved, initNames;
  for (const auto& o : gp.output()) graphOutputs.insert(o.name());
  for (const auto& t : gp.initializer()) reserved.insert(t.name()), initNames.insert(t.name());
  for (const auto& in : gp.input()) reserved.insert(in.name());
  for (const auto& n : gp.node()) {
    for (const std::string& s : n.input())
      if (!s.empty()) consumed.insert(s);
    for (const std::string& s : n.output()) reserved.insert(s);
    for (const auto& a : n.attribute())  // outer values read by bodies
      if (a.has_g())
        for (const std::string& s : freeNames(a.g())) consumed.insert(s);
  }

  auto g = std::make_unique<Graph>();
  ExternalDataFiles files;
  ImportContext ctx(*g, file, opset, baseDir, files, graphOutputs, consumed, reserved);
  ctx.setKeepControlFlow(opts.keepControlFlow);
  ctx.setUntypedAttributes(m.ir_version() < 2);

  // Step 4 first, so inputs come before constants in the graph's value order.
  std::vector<InputDecl> decls;
  std::vector<std::pair<std::string, Tensor>> givenValues;
  size_t valuesFound = 0;
  for (const auto& in : gp.input()) {
    if (initNames.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
    ASSIGN_OR_RETURN(InputDecl d, declOf(in, file));
    auto given = opts.inputValues.find(d.name);
    if (given == opts.inputValues.end()) {
      decls.push_back(std::move(d));
      continue;
    }
    ++valuesFound;
    RETURN_IF_ERROR(checkGivenValue(d, given->second, opts, file));
    givenValues.emplace_back(d.name, given->second);
  }
  if (valuesFound != opts.inputValues.size())
    for (const auto& entry : opts.inputValues) {
      const std::string& name = entry.first;
      if (!std::any_of(gp.input().begin(), gp.input().end(), [&](const auto& in) { return in.name() == name; }) ||
          initNames.count(name))
        return invalidInput(file, ": a value is given for '", name, "', which is not an input of the model");
    }
  ASSIGN_OR_RETURN(InputBinding binding, bindInputShapes(decls, opts, m, file, /*batchPending=*/false));
  const std::vector<Dims>& shapes = binding.shapes;
  for (size_t k = 0; k < decls.size(); ++k)
    RETURN_IF_ERROR(checkTensorSize(TensorType{decls[k].dtype, shapes[k]})
                        .withContext(strCat(file, ": graph input '", decls[k].name, "'")));
  for (size_t k = 0; k < decls.size(); ++k)
    ctx.define(decls[k].name, g->addInput(decls[k].name, TensorType{decls[k].dtype, shapes[k]}));

  // Step 3 (with the inputs whose values are given).
  for (auto& [name, t] : givenValues) ctx.define(name, g->addConstant(name, std::move(t)));
  for (const auto& t : gp.initializer()) {
    if (opts.initializers) {
      auto known = opts.initializers->find(t.name());
      if (known != opts.initializers->end()) {
        ctx.define(t.name(), g->addConstant(t.name(), known->second));
        continue;
      }
    }
    auto tensor = tensorFromProto(t, baseDir, &files);
    if (!tensor.ok()) return tensor.status().withContext(strCat(file, ": initializer"));
    if (opts.initializers) opts.initializers->emplace(t.name(), *tensor);
    ctx.define(t.name(), g->addConstant(t.name(), std::move(tensor).value()));
  }

  // Step 5.
  for (int i = 0; i < gp.node_size(); ++i) RETURN_IF_ERROR(importOnnxNode(ctx, gp.node(i), i));

  // Step 6.
  std::vector<Value*> outs;
  for (const auto& o : gp.output()) {
    Value* v = ctx.lookup(o.name());
    if (!v) return internalError(file, ": graph output '", o.name(), "' has no value");
    if (v->isConstant() || !v->producer()) {
      v = g->addNode(OpKind::Identity, {v}, {v->type()}, {}, strCat("output_", o.name()),
                     {ctx.freshName(o.name())})
              ->output();
    }
    int32_t declared = o.type().tensor_type().elem_type();
    if (declared != 0 && static_cast<int32_t>(v->type().dtype) != declared)
      return invalidInput(file, ": graph output '", o.name(), "' is declared with ONNX element type ", declared,
                          " but computes ", v->type().str());
    outs.push_back(v);
  }
  g->setOutputs(std::move(outs));
  g->eraseUnusedConstants();
  return g;
}

StatusOr<InputDimsInfo> inspectInputDims(const onnx::ModelProto& m, const std::string& displayName,
                                         const ImportOptions& opts) {
  const std::string& file = displayName;
  ASSIGN_OR_RETURN(int64_t opset, checkModel(m, file));
  RETURN_IF_ERROR(checkSupported(m.graph(), file, opset));
  std::unordered_set<std::string> initNames;
  for (const auto& t : m.graph().initializer()) initNames.insert(t.name());
  std::vector<InputDecl> decls;
  for (const auto& in : m.graph().input()) {
    if (initNames.count(in.name()) || opts.inputValues.count(in.name())) continue;
    ASSIGN_OR_RETURN(InputDecl d, declOf(in, file));
    decls.push_back(std::move(d));
  }
  ASSIGN_OR_RETURN(InputBinding binding, bindInputShapes(decls, opts, m, file, /*batchPending=*/true));
  InputDimsInfo info;
  info.batchInputs = std::move(binding.batchInputs);
  if (!info.batchInputs.empty()) info.batchSymbols = std::move(binding.batchSymbols);
  info.fromModel = std::move(binding.fromModel);
  return info;
}

StatusOr<onnx::ModelProto> readOnnxModel(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> f, MappedFile::open(path));
  if (f->size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return invalidInput(path, ": not a valid ONNX model (over 2 GiB; store the weights as external data)");
  onnx::ModelProto m;
  if (!m.ParseFromArray(f->data(), static_cast<int>(f->size())))
    return notValid(path, "protobuf parsing failed: not ONNX, or truncated");
  return m;
}

StatusOr<std::unique_ptr<Graph>> importOnnxModel(const std::string& path, const ImportOptions& opts) {
  ASSIGN_OR_RETURN(onnx::ModelProto m, readOnnxModel(path));
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  return importOnnxModel(m, baseDir, path, opts);
}

}  // namespace pcc
