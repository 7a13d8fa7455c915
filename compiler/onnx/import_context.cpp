#include "compiler/onnx/import_context.h"

#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "runtime/ops/kernel_call.h"
#include "runtime/ops/registry.h"

namespace pcc {

namespace {

/// \returns the attribute's kind; old models leave `type` unset, so it is then
/// deduced from the field that holds a value.
onnx::AttributeProto::AttributeType attrKind(const onnx::AttributeProto& a) {
  using A = onnx::AttributeProto;
  if (a.type() != A::UNDEFINED) return a.type();
  if (a.has_f()) return A::FLOAT;
  if (a.has_i()) return A::INT;
  if (a.has_s()) return A::STRING;
  if (a.has_t()) return A::TENSOR;
  if (a.floats_size()) return A::FLOATS;
  if (a.ints_size()) return A::INTS;
  if (a.strings_size()) return A::STRINGS;
  return A::UNDEFINED;
}

/// The kind every attribute pcc reads must have, as the ONNX operator schemas
/// declare it (the same for every op and opset that has the attribute), so
/// that a wrong kind is refused as the ONNX checker does instead of the
/// kernel's default silently taking its place. `value` differs between ops
/// and is looked up with the op (expectedKind).
const std::unordered_map<std::string_view, onnx::AttributeProto::AttributeType>& attrKinds() {
  using A = onnx::AttributeProto;
  static const std::unordered_map<std::string_view, A::AttributeType> kinds = [] {
    std::unordered_map<std::string_view, A::AttributeType> m;
    for (std::string_view n :
         {"align_corners", "allowzero", "antialias", "axis", "batch_axis", "batch_dims", "block_size", "blocksize",
          "ceil_mode", "center_point_box", "count_include_pad", "detect_negative", "detect_positive", "dtype",
          "end", "exclude_outside", "exclusive", "fmod", "group", "hidden_size", "ignore_index", "input_forget",
          "interleaved", "inverse", "is_causal", "k", "keepdims", "kv_num_heads", "largest", "layout",
          "linear_before_reset", "max_gram_length", "max_skip_count", "min_gram_length", "noop_with_empty_axes",
          "num_groups", "num_heads", "num_outputs", "num_scan_inputs", "offset_group", "onesided",
          "output_datatype", "output_height", "output_width", "periodic", "q_num_heads", "qk_matmul_output_mode",
          "reverse", "rotary_embedding_dim", "sampling_ratio", "saturate", "select_last_index", "size", "sorted",
          "spatial", "start", "stash_type", "storage_order", "time_axis", "to", "training_mode", "transA",
          "transB", "upper", "value_int"})
      m[n] = A::INT;
    for (std::string_view n : {"alpha", "beta", "bias", "clip", "cubic_coeff_a", "epsilon", "extrapolation_value",
                               "gamma", "lambd", "max", "min", "momentum", "scale", "softcap", "spatial_scale",
                               "value_float"})
      m[n] = A::FLOAT;
    for (std::string_view n : {"approximate", "auto_pad", "coordinate_transformation_mode", "direction",
                               "equation", "keep_aspect_ratio_policy", "mode", "nearest_mode", "padding_mode",
                               "reduction", "round_mode", "value_string"})
      m[n] = A::STRING;
    for (std::string_view n : {"axes", "dilations", "ends", "kernel_shape", "ngram_counts", "ngram_indexes",
                               "output_padding", "output_shape", "pads", "perm", "pool_int64s", "split", "starts",
                               "strides", "value_ints"})
      m[n] = A::INTS;
    for (std::string_view n : {"activation_alpha", "activation_beta", "scales", "value_floats", "weights"})
      m[n] = A::FLOATS;
    for (std::string_view n : {"activations", "value_strings"}) m[n] = A::STRINGS;
    return m;
  }();
  return kinds;
}

/// \returns the kind attribute `name` of op `op` must have, or UNDEFINED when
/// pcc does not read it.
onnx::AttributeProto::AttributeType expectedKind(const std::string& op, const std::string& name) {
  using A = onnx::AttributeProto;
  if (name == "value") {
    if (op == "Pad") return A::FLOAT;
    if (op == "Constant" || op == "ConstantOfShape") return A::TENSOR;
    return A::UNDEFINED;
  }
  if (op == "Clip" && (name == "min" || name == "max")) return A::FLOAT;
  if (name == "min" || name == "max") return A::UNDEFINED;
  auto it = attrKinds().find(name);
  return it == attrKinds().end() ? A::UNDEFINED : it->second;
}

}  // namespace

ImportContext::ImportContext(Graph& g, std::string file, int64_t opset, std::string baseDir,
                             ExternalDataFiles& files, std::unordered_set<std::string> graphOutputs,
                             std::unordered_set<std::string> consumed, std::unordered_set<std::string> reserved)
    : graph_(g),
      file_(std::move(file)),
      opset_(opset),
      baseDir_(std::move(baseDir)),
      files_(files),
      graphOutputs_(std::move(graphOutputs)),
      consumed_(std::move(consumed)),
      reserved_(std::move(reserved)) {}

Value* ImportContext::lookup(const std::string& name) const {
  for (const ImportContext* c = this; c; c = c->enclosing_) {
    auto it = c->values_.find(name);
    if (it != c->values_.end()) return it->second;
  }
  return nullptr;
}

ImportContext ImportContext::child(Graph& target, const onnx::GraphProto& body, bool seesEnclosing,
                                   std::string prefix) const {
  // A body's outputs are read by the node that owns it, never as graph
  // outputs, so everything in it may fold.
  std::unordered_set<std::string> consumed, reserved;  // this context's names; freshName also asks the enclosing ones
  for (const auto& n : body.node()) {
    for (const std::string& s : n.input())
      if (!s.empty()) consumed.insert(s);
    for (const std::string& s : n.output()) reserved.insert(s);
  }
  for (const auto& o : body.output()) consumed.insert(o.name());
  for (const auto& in : body.input()) reserved.insert(in.name());
  for (const auto& t : body.initializer()) reserved.insert(t.name());
  ImportContext c(target, file_, opset_, baseDir_, files_, {}, std::move(consumed), std::move(reserved));
  c.enclosing_ = seesEnclosing ? this : nullptr;
  c.reservedBy_ = this;
  c.namePrefix_ = std::move(prefix);  // node and value names: region bodies use it for node names only
  c.keepControlFlow_ = keepControlFlow_;
  c.untypedAttributes_ = untypedAttributes_;
  c.unrolled_ = unrolled_;
  return c;
}

Status ImportContext::beginNode(const onnx::NodeProto& n, std::string name) {
  node_ = &n;
  nodeName_ = std::move(name);
  attrs_ = AttrMap();
  using A = onnx::AttributeProto;
  std::unordered_set<std::string_view> seen;
  for (const auto& a : n.attribute()) {
    // As the ONNX checker: a name given twice (which would silently take one
    // of the values), a reference to a function's attribute outside a
    // function, and (from IR version 2) an attribute without a type are refused.
    if (!seen.insert(a.name()).second) return invalid("attribute '", a.name(), "' is given twice");
    if (!a.ref_attr_name().empty())
      return invalid("attribute '", a.name(), "' refers to '", a.ref_attr_name(),
                     "' (ref_attr_name), which only a function body may do");
    if (a.type() == A::UNDEFINED && !untypedAttributes_)
      return invalid("attribute '", a.name(), "' has no type (UNDEFINED); IR version 2 and later require one");
    // Graph attributes (If's branches, Loop's and Scan's body) are read from
    // the node by the control-flow importers.
    if (a.type() == A::GRAPH || a.type() == A::GRAPHS || a.has_g() || a.graphs_size() > 0) continue;
    A::AttributeType want = expectedKind(n.op_type(), a.name());
    if (want != A::UNDEFINED && attrKind(a) != want)
      return invalid("attribute '", a.name(), "' is of type ", A::AttributeType_Name(attrKind(a)), ", ",
                     n.op_type(), " expects ", A::AttributeType_Name(want));
    switch (attrKind(a)) {
      case A::FLOAT: attrs_.set(a.name(), a.f()); break;
      case A::INT: attrs_.set(a.name(), static_cast<int64_t>(a.i())); break;
      case A::STRING: attrs_.set(a.name(), a.s()); break;
      case A::FLOATS: attrs_.set(a.name(), std::vector<float>(a.floats().begin(), a.floats().end())); break;
      case A::INTS: attrs_.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end())); break;
      case A::STRINGS:
        attrs_.set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end()));
        break;
      case A::TENSOR: {
        auto t = tensorFromProto(a.t(), baseDir_, &files_);
        if (!t.ok()) return invalid("attribute '", a.name(), "': ", t.status().message());
        attrs_.set(a.name(), std::move(t).value());
        break;
      }
      default:
        return unsupportedHere("attribute '", a.name(), "' has a kind pcc does not support (",
                               A::AttributeType_Name(attrKind(a)), ")");
    }
  }
  return Status::OK();
}

Value* ImportContext::input(size_t i) const {
  if (i >= numInputs() || node_->input(static_cast<int>(i)).empty()) return nullptr;
  return lookup(node_->input(static_cast<int>(i)));
}

StatusOr<Value*> ImportContext::requiredInput(size_t i) const {
  if (Value* v = input(i)) return v;
  return invalid("input ", i, " is required");
}

bool ImportContext::outputUsed(size_t i) const {
  if (i >= numOutputs()) return false;
  const std::string& n = node_->output(static_cast<int>(i));
  return !n.empty() && (consumed_.count(n) || graphOutputs_.count(n));
}

bool ImportContext::isGraphOutput(size_t i) const {
  return i < numOutputs() && graphOutputs_.count(node_->output(static_cast<int>(i))) != 0;
}

Status ImportContext::onlyFirstOutputsUsed(size_t n, std::string_view what) const {
  for (size_t i = n; i < numOutputs(); ++i)
    if (outputUsed(i))
      return unsupportedHere("output ", i, " ('", node_->output(static_cast<int>(i)), "') is used; ", what);
  return Status::OK();
}

AttrMap ImportContext::keep(std::initializer_list<std::string_view> names) const {
  return keep(std::vector<std::string_view>(names));
}

AttrMap ImportContext::keep(const std::vector<std::string_view>& names) const {
  AttrMap out;
  for (std::string_view n : names) {
    auto it = attrs_.all().find(std::string(n));
    if (it != attrs_.all().end()) out.set(it->first, it->second);
  }
  return out;
}

std::string ImportContext::freshName(const std::string& base) const {
  auto taken = [&](const std::string& s) {
    if (graph_.findValue(s)) return true;
    for (const ImportContext* c = this; c; c = c->reservedBy_)
      if (c->reserved_.count(s)) return true;
    return false;
  };
  if (!taken(base)) return base;
  for (int i = 1;; ++i) {
    std::string s = base + "_" + std::to_string(i);
    if (!taken(s)) return s;
  }
}

Value* ImportContext::constant(Tensor t, std::string_view tag) {
  return graph_.addConstant(freshName(strCat(nodeName_, "_", tag)), std::move(t));
}

Value* ImportContext::constI64(const std::vector<int64_t>& v, std::string_view tag) {
  return constant(Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v), tag);
}

Status ImportContext::constantOutput(size_t i, Tensor t) {
  if (i >= numOutputs()) return Status::OK();
  const std::string& name = node_->output(static_cast<int>(i));
  if (isGraphOutput(i)) {
    Value* c = constant(std::move(t), "value");
    ASSIGN_OR_RETURN(std::vector<Value*> outs, emit(OpKind::Identity, {c}, {}, {name}));
    setOutput(i, outs[0]);
    return Status::OK();
  }
  std::string vname = name.empty() ? freshName(strCat(nodeName_, "_value")) : namePrefix_ + name;
  setOutput(i, graph_.addConstant(vname, std::move(t)));
  return Status::OK();
}

void ImportContext::setOutput(size_t i, Value* v) {
  if (i < numOutputs() && !node_->output(static_cast<int>(i)).empty()) define(node_->output(static_cast<int>(i)), v);
}

StatusOr<std::vector<Value*>> ImportContext::emit(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                                                  std::vector<std::string> names, std::string_view tag) {
  const OpInfo& info = opInfo(op);
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();  // trailing absent optionals
  if (static_cast<int>(inputs.size()) < info.minInputs ||
      (info.maxInputs >= 0 && static_cast<int>(inputs.size()) > info.maxInputs))
    return invalid(info.name, " takes ", info.minInputs, " to ", info.maxInputs, " inputs, got ", inputs.size());

  // Type inference: the schema's InferFn (what inferOutputTypes calls), invoked
  // directly so the message can take the importer's node-error form.
  InferFn infer = inferFn(op);
  if (!infer) return unsupportedHere("no type inference for ", info.name);
  InferArgs args;
  args.attrs = &attrs;
  for (Value* v : inputs) {
    args.inputs.push_back(v ? v->type() : TensorType{});
    args.constInputs.push_back(v && v->isConstant() ? &v->constantData() : nullptr);
  }
  auto inferred = inferCheckedTypes(infer, args);
  if (!inferred.ok()) {
    const Status& s = inferred.status();
    return error(s.code(), info.name == node_->op_type() ? s.message() : strCat(info.name, ": ", s.message()));
  }
  std::vector<TensorType> types = std::move(inferred).value();
  names.resize(types.size());
  // Values of an inlined body carry its prefix ("loop/3/"), so that each
  // unrolled iteration names its values apart without probing for free names.
  for (std::string& n : names)
    if (!n.empty() && !graphOutputs_.count(n)) n = namePrefix_ + n;
  bool feedsGraphOutput = false;
  for (const std::string& n : names) feedsGraphOutput |= !n.empty() && graphOutputs_.count(n);
  std::string base = strCat(nodeName_, "_", tag.empty() ? info.name : tag);

  std::vector<Value*> outs;
  if (!feedsGraphOutput && referenceKernel(op) && shouldFold(inputs, types)) {
    std::vector<const Tensor*> ins;
    for (Value* v : inputs) ins.push_back(v ? &v->constantData() : nullptr);
    auto r = runKernel(op, ins, attrs);  // the kernel entry the evaluator and runtime share
    if (!r.ok()) return error(r.status().code(), strCat("constant folding failed: ", r.status().message()));
    for (size_t i = 0; i < r->size(); ++i)
      outs.push_back(graph_.addConstant(names[i].empty() ? freshName(base) : names[i], std::move((*r)[i])));
    return outs;
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) names[i] = freshName(types.size() == 1 ? base : strCat(base, "_", i));
  Node* n = graph_.addNode(op, std::move(inputs), std::move(types), std::move(attrs),
                           tag.empty() ? nodeName_ : strCat(nodeName_, "/", tag), std::move(names));
  return n->outputs();
}

Status ImportContext::emitNode(OpKind op, std::vector<Value*> inputs, AttrMap attrs) {
  std::vector<std::string> names(node_->output().begin(), node_->output().end());
  ASSIGN_OR_RETURN(std::vector<Value*> outs, emit(op, std::move(inputs), std::move(attrs), std::move(names)));
  for (size_t i = 0; i < outs.size(); ++i) setOutput(i, outs[i]);
  return Status::OK();
}

Status ImportContext::error(StatusCode code, const std::string& problem) const {
  // Before its first node (a body's initializers) a context has no node to name.
  if (!node_) return Status(code, strCat(file_, ": ", problem));
  std::string shapes;
  for (int i = 0; i < node_->input_size(); ++i) {
    const Value* v = node_->input(i).empty() ? nullptr : lookup(node_->input(i));
    shapes += strCat(i ? ", " : "", v ? v->type().str() : std::string("none"));
  }
  // Every refusal of valid input says "unsupported", so that tools (and the
  // conformance runner) tell it from a bad model without parsing the prose.
  bool marked = problem.find("unsupported") != std::string::npos || problem.find("not supported") != std::string::npos;
  // An op of another domain (com.microsoft's) is named with its domain; the
  // opset given is the default domain's, which the model imports.
  const bool otherDomain = !node_->domain().empty() && node_->domain() != "ai.onnx";
  std::string msg = strCat(file_, ": node '", nodeName_, "' (", otherDomain ? node_->domain() + "." : std::string(),
                           node_->op_type(), ", opset ", opset_, "): ",
                           code == StatusCode::kUnsupported && !marked ? "unsupported: " : "", problem);
  if (node_->input_size() > 0) msg += strCat(" [input shapes ", shapes, "]");
  return Status(code, msg);
}

}  // namespace pcc
