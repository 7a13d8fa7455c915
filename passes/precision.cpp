#include "passes/precision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "runtime/ops/nbits.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

namespace {

bool convertible(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

std::set<OpKind> opsNamed(std::initializer_list<const char*> names) {
  std::set<OpKind> out;
  for (const char* n : names)
    if (std::optional<OpKind> k = opFromName(n)) out.insert(*k);
  return out;
}

/// Ops that keep their own types: bodies are typed by their own graphs, the
/// quantization ops' scales have fixed types, and the generators' output type
/// is an attribute.
bool keepsOwnTypes(OpKind op) {
  static const std::set<OpKind> kOwn =
      opsNamed({"If", "Loop", "Scan", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul",
                "QLinearConv", "MatMulInteger", "ConvInteger", "RandomNormal", "RandomUniform", "RandomNormalLike",
                "RandomUniformLike", "Multinomial", "Bernoulli", "ConstantOfShape", "EyeLike", "CastLike"});
  return kOwn.count(op) != 0;
}

/// Ops that move or select elements and compute nothing: they run in the
/// type of their data input, so a cast is never put around them.
bool movesData(OpKind op) {
  static const std::set<OpKind> kMore =
      opsNamed({"Expand", "Identity", "TensorScatter", "ScatterElements", "ScatterND", "Where"});
  return opClass(op) == OpClass::kInjective || kMore.count(op) != 0;
}

enum class Mode { kOwn, kF32, kTarget, kFollow };

class Converter {
 public:
  Converter(Graph& g, const PrecisionOptions& o) : g_(g), o_(o) {}

  StatusOr<PrecisionSummary> run() {
    for (const std::string& op : o_.keepOps)
      if (!opFromName(op)) return invalidInput("--keep-fp32: no op named '", op, "'");
    s_.target = o_.target;
    for (const Value* c : g_.constants()) s_.weightBytesBefore += static_cast<int64_t>(c->type().bytes());
    for (const Node* n : g_.nodes())
      for (const Value* v : n->outputs()) orig_[v] = v->type().dtype;
    for (Value* v : g_.inputs()) {
      orig_[v] = v->type().dtype;
      auto it = o_.ioTypes.find(v->name());
      if (it != o_.ioTypes.end() && convertible(v->type().dtype)) v->setType({it->second, v->type().shape});
    }
    for (const Value* c : g_.constants()) orig_[c] = c->type().dtype;
    if (o_.rules) markOutputProducers();
    for (Node* n : g_.nodes()) RETURN_IF_ERROR(convertNode(*n));
    RETURN_IF_ERROR(fixOutputs());
    // Converted constants take their originals' names where nothing reads those any more.
    std::vector<std::pair<std::string, Value*>> renames;
    for (const auto& [key, conv] : constants_) renames.emplace_back(key.first->name(), conv);
    g_.eraseUnusedConstants();
    for (const auto& [name, conv] : renames)
      if (!g_.findValue(name)) g_.renameValue(conv, name);
    for (const Value* c : g_.constants()) s_.weightBytesAfter += static_cast<int64_t>(c->type().bytes());
    return s_;
  }

 private:
  DType orig(const Value* v) const {
    auto it = orig_.find(v);
    return it == orig_.end() ? v->type().dtype : it->second;
  }

  /// The node computing a graph output, looked for through data movement,
  /// computes in float32: the model's final numbers (logits, scores) keep
  /// float32's precision.
  void markOutputProducers() {
    for (const Value* out : g_.outputs()) {
      if (!out || !convertible(out->type().dtype) || o_.ioTypes.count(out->name())) continue;
      Node* n = out->producer();
      while (n && movesData(n->op()) && n->input(0) && n->input(0)->producer()) n = n->input(0)->producer();
      if (n && !movesData(n->op()) && !keepsOwnTypes(n->op()) && n->op() != OpKind::Cast)
        outputRule_.emplace(n, out->name());
    }
  }

  /// \returns the mode of `n` and, for kF32 and kOwn, why.
  Mode modeOf(const Node& n, std::string& why) {
    const std::string op(n.opName());
    if (keepsOwnTypes(n.op())) {
      why = n.numBodies() ? "has bodies" : "keeps its own types";
      return Mode::kOwn;
    }
    if (o_.target == DType::kF32) return movesData(n.op()) ? Mode::kFollow : Mode::kTarget;
    if (o_.keepNodes.count(n.name())) {
      why = "--keep-fp32-node";
      return Mode::kF32;
    }
    if (o_.keepOps.count(op)) {
      why = "--keep-fp32 " + op;
      return Mode::kF32;
    }
    if (o_.rules && defaultKeepOps().count(op)) {
      why = "rule: " + op + " in float32";
      return Mode::kF32;
    }
    if (o_.rules && o_.ranges) {
      const double limit = rangeLimit(o_.target);
      const double tiny = smallestNormal(o_.target);
      auto over = [&](const Value* v) -> bool {
        if (!v || !convertible(orig(v))) return false;
        auto it = o_.ranges->find(v->name());
        if (it == o_.ranges->end()) return false;
        const double m = it->second;
        if (v->producer() && m > 0 && m < tiny) {
          // Every element below the smallest normal number: subnormals keep
          // few significant bits, and the value's precision is lost.
          why = strCat("range: |", v->name(), "| stays below ", m, " (under ", tiny, ", ", precisionName(o_.target),
                       "'s smallest normal number)");
          return true;
        }
        // A constant is what it is: only beyond the type's largest finite
        // value does it overflow. A computed value keeps headroom (limit).
        const double over = v->isConstant() ? largestFinite(o_.target) : limit;
        if (!(m > over)) return false;
        why = strCat("range: |", v->name(), "| reaches ", m, " (over ", over, ")");
        if (v->isConstant() &&
            std::find(s_.overflowingConstants.begin(), s_.overflowingConstants.end(), v->name()) ==
                s_.overflowingConstants.end())
          s_.overflowingConstants.push_back(v->name());
        return true;
      };
      for (const Value* v : n.inputs())
        if (over(v)) return Mode::kF32;
      for (const Value* v : n.outputs())
        if (over(v)) return Mode::kF32;
    }
    if (o_.rules) {
      auto it = outputRule_.find(&n);
      if (it != outputRule_.end()) {
        why = "rule: computes output '" + it->second + "'";
        return Mode::kF32;
      }
    }
    return movesData(n.op()) ? Mode::kFollow : Mode::kTarget;
  }

  /// \returns `v` as type `t`: itself, a converted constant, or the output of
  /// a Cast inserted before `before` (one per value and type).
  Value* as(Value* v, DType t, const Node& before) {
    if (v->type().dtype == t) return v;
    auto key = std::make_pair(v, t);
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    if (auto it = casts_.find(key); it != casts_.end()) return it->second;
    const std::string base = strCat(v->name(), "_", dtypeName(t));
    if (v->isConstant()) {
      Value* c = nullptr;
      if (const TensorBlock* b = v->constantBlock()) {
        TensorBlock nb = *b;
        nb.as = t;
        c = g_.addConstantBlock(g_.uniqueName(base), std::move(nb));
      } else {
        const Tensor& data = v->constantData();
        if (data.isMapped() || data.nbytes() > (size_t{1} << 20)) {
          // Converted when written (or read): planning reads no weight bytes.
          StatusOr<TensorBlock> b = makeBlock(data, Dims(data.shape().size(), 0), data.shape());
          b->as = t;
          c = g_.addConstantBlock(g_.uniqueName(base), std::move(b).value());
        } else {
          c = g_.addConstant(g_.uniqueName(base), convertFloats(data, t));
        }
      }
      constants_[key] = c;
      return c;
    }
    AttrMap a;
    a.set("to", static_cast<int64_t>(t));
    Node* cast = g_.addNode(OpKind::Cast, {v}, {TensorType{t, v->type().shape}}, std::move(a), g_.uniqueName(base),
                            {g_.uniqueName(base)}, g_.indexOf(&before));
    ++s_.casts;
    casts_[key] = cast->output();
    return cast->output();
  }

  Status convertNode(Node& n) {
    std::string why;
    Mode mode = modeOf(n, why);
    if (n.op() == OpKind::Cast) {
      // A cast to a float type casts to the type its node computes in.
      const DType to = static_cast<DType>(n.attrs().getInt("to", 0));
      if (mode == Mode::kOwn || !convertible(to)) return Status::OK();
      const DType now = mode == Mode::kF32 ? DType::kF32 : o_.target;
      n.attrs().set("to", static_cast<int64_t>(now));
      n.output()->setType({now, n.output()->type().shape});
      if (mode == Mode::kF32) s_.kept.push_back({n.name(), "Cast", why});
      return Status::OK();
    }
    // The node's float type, and the inputs that have it (its type variable).
    DType f = DType::kUndefined;
    std::vector<size_t> slots;
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      const Value* v = n.input(i);
      if (!v || isShapeOperand(n.op(), i) || !convertible(orig(v))) continue;
      if (f == DType::kUndefined) f = orig(v);
      if (orig(v) == f) slots.push_back(i);
    }
    if (f == DType::kUndefined) return Status::OK();  // computes on no float data
    DType d = f;
    switch (mode) {
      case Mode::kOwn: d = f; break;
      case Mode::kF32: d = DType::kF32; break;
      case Mode::kTarget: d = o_.target; break;
      case Mode::kFollow: {
        const Value* first = n.input(slots.front());
        d = first->isConstant() ? o_.target : first->type().dtype;
        break;
      }
    }
    Status typed = retype(n, slots, d);
    if (!typed.ok()) {
      if (d == f) return typed.withContext(strCat("precision: ", n.describe()));
      why = "its types do not convert: " + typed.message();
      mode = Mode::kOwn;
      d = f;
      RETURN_IF_ERROR(retype(n, slots, d).withContext(strCat("precision: ", n.describe())));
    }
    if (mode == Mode::kF32 || mode == Mode::kOwn) s_.kept.push_back({n.name(), std::string(n.opName()), why});
    else if (d == o_.target && !movesData(n.op())) ++s_.nodesConverted;
    return Status::OK();
  }

  /// Makes the inputs at `slots` of `n` type `d` and retypes its outputs.
  Status retype(Node& n, const std::vector<size_t>& slots, DType d) {
    std::vector<Value*> ins = n.inputs();
    std::vector<Value*> made = ins;
    for (size_t i : slots)
      if (ins[i]->type().dtype != d) made[i] = as(ins[i], d, n);
    ASSIGN_OR_RETURN(std::vector<TensorType> types, inferOutputTypes(n.op(), made, n.attrs(), n.name()));
    if (types.size() != n.outputs().size()) return internalError("the inference gives ", types.size(), " outputs");
    for (size_t k = 0; k < types.size(); ++k)
      if (types[k].shape != n.output(k)->type().shape)
        return internalError("output ", k, " would change shape: ", n.output(k)->type().str(), " -> ",
                             types[k].str());
    for (size_t i : slots)
      if (made[i] != ins[i]) n.setInput(i, made[i]);
    for (size_t k = 0; k < types.size(); ++k) n.output(k)->setType(types[k]);
    return Status::OK();
  }

  /// Casts each graph output back to the model's type (or its ioTypes entry).
  Status fixOutputs() {
    std::vector<Value*> outs = g_.outputs();
    bool changed = false;
    for (Value*& v : outs) {
      if (!v || !v->producer()) continue;
      const DType was = orig(v);
      if (!convertible(was)) continue;
      auto it = o_.ioTypes.find(v->name());
      const DType want = it != o_.ioTypes.end() ? it->second : was;
      if (v->type().dtype == want) continue;
      const std::string name = v->name();
      if (!g_.renameValue(v, g_.uniqueName(strCat(name, "_", dtypeName(v->type().dtype)))))
        return internalError("precision: cannot rename output '", name, "'");
      AttrMap a;
      a.set("to", static_cast<int64_t>(want));
      Node* cast = g_.addNode(OpKind::Cast, {v}, {TensorType{want, v->type().shape}}, std::move(a),
                              g_.uniqueName(name + "_cast"), {name});
      ++s_.casts;
      v = cast->output();
      changed = true;
    }
    if (changed) g_.setOutputs(outs);
    return Status::OK();
  }

  Graph& g_;
  const PrecisionOptions& o_;
  PrecisionSummary s_;
  std::unordered_map<const Value*, DType> orig_;
  std::unordered_map<const Node*, std::string> outputRule_;
  struct PairHash {
    size_t operator()(const std::pair<Value*, DType>& p) const {
      return std::hash<const void*>()(p.first) * 31 + static_cast<size_t>(p.second);
    }
  };
  std::unordered_map<std::pair<Value*, DType>, Value*, PairHash> constants_, casts_;
};

}  // namespace

const std::set<std::string>& defaultKeepOps() {
  static const std::set<std::string> kOps = [] {
    std::set<std::string> s;
    for (const char* n :
         {"LayerNormalization", "RMSNormalization", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
          "SimplifiedLayerNormalization", "GroupNormalization", "InstanceNormalization", "LpNormalization",
          "MeanVarianceNormalization", "Softmax", "LogSoftmax", "Exp", "Log", "Pow", "ReduceLogSumExp", "ReduceLogSum",
          "ReduceSumSquare", "ReduceL2", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
      if (opFromName(n)) s.insert(n);
    return s;
  }();
  return kOps;
}

double rangeLimit(DType t) {
  return t == DType::kF16 ? 65504.0 / 4 : std::numeric_limits<double>::infinity();
}

double largestFinite(DType t) {
  switch (t) {
    case DType::kF16: return 65504.0;
    case DType::kBF16: return 0x1.fep127;
    default: return std::numeric_limits<float>::max();
  }
}

double smallestNormal(DType t) { return t == DType::kF16 ? 0x1p-14 : 0; }

StatusOr<PrecisionSummary> convertPrecision(Graph& g, const PrecisionOptions& opts) {
  if (!convertible(opts.target)) return invalidInput("--precision: no conversion to ", dtypeName(opts.target));
  return Converter(g, opts).run();
}

namespace {

/// \returns W [K, N] of a MatMul's B, or the transpose of a Gemm's B [N, K], as float32.
std::vector<float> weightAsF32(const Tensor& b, bool transposed) {
  const Tensor f = convertFloats(b, DType::kF32);
  const int64_t r = b.shape()[0], c = b.shape()[1];
  std::vector<float> w(static_cast<size_t>(r * c));
  const float* src = f.data<float>();
  if (!transposed) {
    std::copy(src, src + r * c, w.begin());
  } else {
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) w[static_cast<size_t>(j * r + i)] = src[i * c + j];
  }
  return w;
}

}  // namespace

StatusOr<QuantizeSummary> quantizeWeights(Graph& g, const QuantizeOptions& opts) {
  if (opts.bits != 4 && opts.bits != 8) return invalidInput("--quantize: int8 or int4, got ", opts.bits, " bits");
  QuantizeSummary sum;
  std::vector<Node*> dead;
  std::vector<std::pair<Value*, std::string>> renames;  // each new node's output takes the old one's name
  for (Node* n : g.nodes()) {
    if ((n->op() != OpKind::MatMul && n->op() != OpKind::Gemm) || opts.skipNodes.count(n->name())) continue;
    Value* a = n->input(0);
    Value* b = n->input(1);
    if (!a || !b || !b->isConstant() || b->type().rank() != 2 || a->type().rank() < 1) continue;
    const DType t = a->type().dtype;
    if ((t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) || b->type().dtype != t) continue;
    bool transposed = false;
    Value* bias = nullptr;
    if (n->op() == OpKind::Gemm) {
      const AttrMap& at = n->attrs();
      if (at.getInt("transA", 0) != 0 || at.getFloat("alpha", 1.0f) != 1.0f) continue;
      transposed = at.getInt("transB", 0) != 0;
      if (Value* c = n->input(2)) {
        const int64_t cols = transposed ? b->type().shape[0] : b->type().shape[1];
        if (at.getFloat("beta", 1.0f) != 1.0f || !c->isConstant() || c->type().numel() != cols ||
            c->type().shape.back() != cols)
          continue;
        bias = c;
      }
    } else if (a->type().rank() < 2) {
      continue;  // a vector times a matrix: left to MatMul
    }
    const int64_t k = transposed ? b->type().shape[1] : b->type().shape[0];
    const int64_t cols = transposed ? b->type().shape[0] : b->type().shape[1];
    int64_t block = opts.group > 0 ? std::min(opts.group, k) : k;
    if (opts.bits == 4 && block % 2 != 0) ++block;
    ASSIGN_OR_RETURN(ops::NBitsShape shape, ops::linalg_schema::nbitsShape(k, cols, opts.bits, block));
    const Tensor& data = b->constantData();
    auto key = std::make_tuple(data.raw(), static_cast<int>(t), transposed);
    std::pair<Tensor, Tensor> q;
    if (opts.cache && opts.cache->count(key)) {
      q = opts.cache->at(key);
    } else {
      std::vector<float> w = weightAsF32(data, transposed);
      q = ops::quantizeNBits(shape, w.data());
      q.second = convertFloats(q.second, t);
      if (opts.cache) (*opts.cache)[key] = q;
    }
    Value* qb = g.addConstant(g.uniqueName(b->name() + "_q" + std::to_string(opts.bits)), q.first);
    Value* qs = g.addConstant(g.uniqueName(b->name() + "_scales"), q.second);
    std::vector<Value*> ins = {a, qb, qs};
    if (bias) {
      Tensor flat = bias->constantData().reshaped({cols});
      ins.push_back(nullptr);
      ins.push_back(g.addConstant(g.uniqueName(bias->name() + "_bias"), flat));
    }
    AttrMap at;
    at.set("bits", static_cast<int64_t>(opts.bits));
    at.set("block_size", block);
    ASSIGN_OR_RETURN(std::vector<TensorType> types, inferOutputTypes(OpKind::MatMulNBits, ins, at, n->name()));
    if (types[0] != n->output()->type()) continue;  // (Gemm's C broadcast to more than a bias row)
    Node* m = g.addNode(OpKind::MatMulNBits, ins, types, std::move(at), n->name(), {}, g.indexOf(n));
    const std::string out = n->output()->name();
    g.replaceAllUsesWith(n->output(), m->output());
    dead.push_back(n);
    sum.bytesBefore += static_cast<int64_t>(b->type().bytes());
    sum.bytesAfter += static_cast<int64_t>(q.first.nbytes() + q.second.nbytes());
    ++sum.nodes;
    renames.emplace_back(m->output(), out);
  }
  g.eraseNodes(dead);
  for (const auto& [v, name] : renames) g.renameValue(v, name);
  g.eraseUnusedConstants();
  return sum;
}

std::string precisionName(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    default: return std::string(dtypeName(t));
  }
}

std::optional<DType> precisionFromName(std::string_view name) {
  if (name == "fp32" || name == "f32" || name == "float32") return DType::kF32;
  if (name == "fp16" || name == "f16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  return std::nullopt;
}

}  // namespace pcc
