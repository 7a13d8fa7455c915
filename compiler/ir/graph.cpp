#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/ir.h"
#include "runtime/schema/schema.h"

namespace pcc {


std::string_view meshAxisName(MeshAxis a) {
  switch (a) {
    case MeshAxis::kDP: return "dp";
    case MeshAxis::kTP: return "tp";
    case MeshAxis::kPP: return "pp";
    case MeshAxis::kNone: return "-";
  }
  return "-";
}

std::optional<MeshAxis> meshAxisFromName(std::string_view s) {
  for (MeshAxis a : {MeshAxis::kDP, MeshAxis::kTP, MeshAxis::kPP, MeshAxis::kNone})
    if (meshAxisName(a) == s) return a;
  return std::nullopt;
}

bool Sharding::isReplicated() const {
  if (partial != MeshAxis::kNone) return false;
  return std::all_of(dims.begin(), dims.end(), [](MeshAxis a) { return a == MeshAxis::kNone; });
}

int Sharding::dimSplitOver(MeshAxis axis) const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] == axis) return static_cast<int>(i);
  return -1;
}

std::string Sharding::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += meshAxisName(dims[i]);
  }
  s += "]";
  if (partial != MeshAxis::kNone) s += strCat(" partial(", meshAxisName(partial), ")");
  return s;
}

// --- Use lists
void Value::removeUse(Node* n) {
  auto it = std::find(uses_.begin(), uses_.end(), n);
  if (it != uses_.end()) uses_.erase(it);
}

void Node::setInput(size_t i, Value* v) {
  Value*& slot = inputs_.at(i);
  if (slot) slot->removeUse(this);
  slot = v;
  if (v) v->addUse(this);
}
// --- end use lists

// --- Regions: node bodies ------------------------------------------------------
Node::Node() = default;
Node::~Node() = default;

Graph* Node::addBody(std::unique_ptr<Graph> body) {
  bodies_.push_back(std::move(body));
  return bodies_.back().get();
}
// --- End of regions --------------------------------------------------------------

std::string Node::describe() const {
  return strCat("node '", name_, "' (", pcc::opName(op_), ")");
}

Value* Graph::newValue(std::string name, TensorType type) {
  auto v = std::make_unique<Value>();
  v->id_ = nextId_++;
  if (name.empty() || byName_.count(name)) name = uniqueName(name.empty() ? std::to_string(v->id_) : name);
  v->name_ = std::move(name);
  v->type_ = std::move(type);
  byName_[v->name_] = v.get();
  values_.push_back(std::move(v));
  return values_.back().get();
}

bool Graph::renameValue(Value* v, const std::string& name) {
  if (v->name_ == name) return true;
  if (name.empty() || byName_.count(name)) return false;
  byName_.erase(v->name_);
  v->name_ = name;
  byName_[name] = v;
  return true;
}

std::string Graph::uniqueName(const std::string& base) const {
  if (!byName_.count(base)) return base;
  auto name = [&](int64_t i) { return base + "_" + std::to_string(i); };
  auto taken = [&](int64_t i) { return byName_.count(name(i)) > 0; };
  // The first free of base_1 ... base_64, as people expect.
  constexpr int64_t kLinear = 64;
  for (int64_t i = 1; i <= kLinear; ++i)
    if (!taken(i)) return name(i);
  // Past that (an unrolled loop naming each iteration's copy of one value),
  // probing one by one is quadratic over the copies: double until a free
  // suffix, then bisect between the last taken one and it. The result is
  // free, though not always the smallest free suffix.
  int64_t lo = kLinear, hi = 2 * kLinear;
  while (taken(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    (taken(mid) ? lo : hi) = mid;
  }
  return name(hi);
}

Value* Graph::addInput(std::string name, TensorType type) {
  Value* v = newValue(std::move(name), std::move(type));
  inputs_.push_back(v);
  return v;
}

Value* Graph::addConstant(std::string name, Tensor data) {
  Value* v = newValue(std::move(name), data.type());
  v->constant_ = std::move(data);
  return v;
}

Value* Graph::addConstantBlock(std::string name, TensorBlock block) {
  Value* v = newValue(std::move(name), block.type());
  v->block_ = std::move(block);
  return v;
}

const Tensor& Value::constantData() const {
  if (!constant_ && block_) {
    // makeBlock checked that the block lies inside its source, so the read cannot fail.
    constant_ = readBlock(*block_);
  }
  return *constant_;
}

Node* Graph::addNode(OpKind op, std::vector<Value*> inputs, std::vector<TensorType> outputTypes,
                     AttrMap attrs, std::string name, std::vector<std::string> outputNames,
                     std::optional<size_t> pos) {
  auto n = std::make_unique<Node>();
  n->op_ = op;
  n->name_ = std::move(name);
  n->inputs_ = std::move(inputs);
  for (Value* in : n->inputs_)
    if (in) in->addUse(n.get());
  n->attrs_ = std::move(attrs);
  for (size_t i = 0; i < outputTypes.size(); ++i) {
    std::string oname = i < outputNames.size() ? outputNames[i] : std::string();
    Value* v = newValue(std::move(oname), std::move(outputTypes[i]));
    v->producer_ = n.get();
    n->outputs_.push_back(v);
  }
  Node* raw = n.get();
  size_t at = pos ? std::min(*pos, nodes_.size()) : nodes_.size();
  nodes_.insert(nodes_.begin() + static_cast<std::ptrdiff_t>(at), std::move(n));
  return raw;
}

std::vector<Value*> Graph::constants() const {
  std::vector<Value*> out;
  for (auto& v : values_)
    if (v->isConstant()) out.push_back(v.get());
  return out;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (auto& n : nodes_) out.push_back(n.get());
  return out;
}

size_t Graph::indexOf(const Node* n) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == n) return i;
  return nodes_.size();
}

bool Graph::reorderNodes(const std::vector<Node*>& order) {
  if (order.size() != nodes_.size()) return false;
  std::unordered_map<const Node*, size_t> at;
  for (size_t i = 0; i < nodes_.size(); ++i) at[nodes_[i].get()] = i;
  std::unordered_set<const Node*> placed;
  for (Node* n : order) {
    if (!at.count(n) || placed.count(n)) return false;
    for (const Value* v : n->inputs_)
      if (v && v->producer_ && !placed.count(v->producer_)) return false;
    placed.insert(n);
  }
  std::vector<std::unique_ptr<Node>> moved(nodes_.size());
  for (size_t i = 0; i < order.size(); ++i) moved[i] = std::move(nodes_[at.at(order[i])]);
  nodes_ = std::move(moved);
  return true;
}

std::vector<Node*> Graph::users(const Value* v) const {
  std::vector<Node*> out;
  for (Node* n : v->uses_)
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

std::unordered_map<const Value*, int> Graph::useCounts() const {
  std::unordered_map<const Value*, int> counts;
  for (auto& n : nodes_)
    for (Value* v : n->inputs_)
      if (v) ++counts[v];
  for (Value* v : outputs_) ++counts[v];
  return counts;
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Node*> readers = std::move(from->uses_);
  from->uses_.clear();
  // A node reading `from` twice is listed twice; its second visit finds no
  // slot left to rewrite.
  for (Node* n : readers)
    for (Value*& v : n->inputs_)
      if (v == from) {
        v = to;
        if (to) to->addUse(n);
      }
  for (Value*& v : outputs_)
    if (v == from) v = to;
}

void Graph::eraseNodes(const std::vector<Node*>& dead) {
  std::unordered_set<const Node*> deadSet(dead.begin(), dead.end());
  std::unordered_set<const Value*> deadValues;
  for (const Node* n : dead)
    for (Value* v : n->outputs_) deadValues.insert(v);
  std::unordered_set<Value*> read;
  for (Node* n : dead)
    for (Value* v : n->inputs_)
      if (v && !deadValues.count(v)) read.insert(v);
  for (Value* v : read)
    v->uses_.erase(std::remove_if(v->uses_.begin(), v->uses_.end(), [&](Node* u) { return deadSet.count(u) != 0; }),
                   v->uses_.end());
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(),
                              [&](const std::unique_ptr<Node>& n) { return deadSet.count(n.get()) != 0; }),
               nodes_.end());
  for (const Value* v : deadValues) byName_.erase(v->name_);
  values_.erase(std::remove_if(values_.begin(), values_.end(),
                               [&](const std::unique_ptr<Value>& v) { return deadValues.count(v.get()) != 0; }),
                values_.end());
}

void Graph::eraseUnusedConstants() {
  auto counts = useCounts();
  std::unordered_set<const Value*> dead;
  for (auto& v : values_)
    if (v->isConstant() && !counts.count(v.get())) dead.insert(v.get());
  for (const Value* v : dead) byName_.erase(v->name_);
  values_.erase(std::remove_if(values_.begin(), values_.end(),
                               [&](const std::unique_ptr<Value>& v) { return dead.count(v.get()) != 0; }),
                values_.end());
}

Value* Graph::findValue(std::string_view name) const {
  auto it = byName_.find(std::string(name));
  return it == byName_.end() ? nullptr : it->second;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  g->name_ = name_;
  std::unordered_map<const Value*, Value*> map;
  for (auto& v : values_) {
    if (v->producer_) continue;
    Value* nv = v->constantBlock()  ? g->addConstantBlock(v->name_, *v->constantBlock())
                : v->isConstant() ? g->addConstant(v->name_, *v->constant_)
                                  : g->newValue(v->name_, v->type_);
    nv->sharding_ = v->sharding_;
    map[v.get()] = nv;
  }
  for (Value* in : inputs_) g->inputs_.push_back(map.at(in));
  for (auto& n : nodes_) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs_) ins.push_back(v ? map.at(v) : nullptr);
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (Value* o : n->outputs_) {
      types.push_back(o->type_);
      names.push_back(o->name_);
    }
    Node* nn = g->addNode(n->op_, ins, types, n->attrs_, n->name_, names);
    nn->stage_ = n->stage_;
    // Bodies read nothing of the enclosing graph, so each copies on its own.
    for (const auto& b : n->bodies_) nn->bodies_.push_back(b->clone());
    for (size_t i = 0; i < n->outputs_.size(); ++i) {
      nn->outputs_[i]->sharding_ = n->outputs_[i]->sharding_;
      map[n->outputs_[i]] = nn->outputs_[i];
    }
  }
  for (Value* o : outputs_) g->outputs_.push_back(map.at(o));
  return g;
}

StatusOr<std::vector<TensorType>> inferOutputTypes(OpKind op, const std::vector<Value*>& inputs,
                                                   const AttrMap& attrs, const std::string& nodeName) {
  auto describe = [&] {
    std::string s = strCat("node '", nodeName, "' (", opName(op), ") with inputs (");
    for (size_t i = 0; i < inputs.size(); ++i)
      s += strCat(i ? ", " : "", inputs[i] ? inputs[i]->type().str() : std::string("none"));
    return s + ")";
  };
  InferFn infer = inferFn(op);
  if (!infer) return unsupported(describe(), ": no type inference for this op");
  InferArgs args;
  args.attrs = &attrs;
  for (Value* v : inputs) {
    args.inputs.push_back(v ? v->type() : TensorType{});
    // A block not yet read (a rank's piece of a large weight) is typed, not
    // read: no inference needs a weight's values.
    bool data = v && v->isConstant() && !v->constantBlock();
    args.constInputs.push_back(data ? &v->constantData() : nullptr);
  }
  auto r = inferCheckedTypes(infer, args);
  if (!r.ok()) return r.status().withContext(describe());
  return r;
}

StatusOr<std::vector<TensorType>> inferCheckedTypes(InferFn infer, const InferArgs& args) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, infer(args));
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i].dtype != DType::kUndefined)
      RETURN_IF_ERROR(checkTensorSize(types[i]).withContext(strCat("output ", i)));
  return types;
}

}  // namespace pcc
