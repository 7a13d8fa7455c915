#include "passes/rewrite/pattern.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace pcc {

StatusOr<Node*> PatternRewriter::create(OpKind op, std::vector<Value*> inputs, AttrMap attrs) {
  std::string name = root_->name().empty() ? std::string() : strCat(root_->name(), "/", opName(op));
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferOutputTypes(op, inputs, attrs, name));
  std::vector<std::string> outNames;
  for (size_t i = 0; i < types.size(); ++i)
    outNames.push_back(g_.uniqueName(strCat(root_->output(0)->name(), "_", opName(op))));
  if (outNames.size() > 1)
    for (size_t i = 0; i < outNames.size(); ++i) outNames[i] += strCat("_", i);
  Node* n = g_.addNode(op, std::move(inputs), std::move(types), std::move(attrs), std::move(name),
                       std::move(outNames), g_.indexOf(root_));
  n->setStage(root_->stage());
  touched_.push_back(n);
  return n;
}

Value* PatternRewriter::constant(const std::string& base, Tensor data) {
  return g_.addConstant(g_.uniqueName(base), std::move(data));
}

void PatternRewriter::replace(Value* from, Value* to) {
  if (from == to) return;
  bool output = isGraphOutput(g_, from);
  bool rename = output && to->producer() != nullptr && !isGraphOutput(g_, to);
  for (Node* u : from->uses()) touched_.push_back(u);
  g_.replaceAllUsesWith(from, to);
  replaced_.push_back(from);
  if (!rename) return;
  std::string name = from->name();
  g_.renameValue(from, g_.uniqueName(name + "_replaced"));
  g_.renameValue(to, name);
}

bool PatternRewriter::canReplace(const Value* from, const Value* to) const {
  return !isGraphOutput(g_, from) || (to->producer() != nullptr && !isGraphOutput(g_, to));
}

void PatternRewriter::replaceNode(Node* n, const std::vector<Value*>& with) {
  for (size_t i = 0; i < with.size() && i < n->outputs().size(); ++i) replace(n->output(i), with[i]);
}

std::vector<Node*> PatternRewriter::takeTouched() { return std::exchange(touched_, {}); }
std::vector<Value*> PatternRewriter::takeReplaced() { return std::exchange(replaced_, {}); }

namespace {

/// Step 2: erases the producers of `replaced` that nothing reads any more, and
/// theirs in turn. \returns the number of nodes erased.
size_t eraseDeadProducers(Graph& g, const std::vector<Value*>& replaced) {
  std::unordered_set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  std::unordered_set<Node*> dead;
  std::vector<Node*> stack;
  for (const Value* v : replaced)
    if (v->producer()) stack.push_back(v->producer());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (dead.count(n)) continue;
    bool isDead = true;
    for (const Value* o : n->outputs()) {
      if (outputs.count(o)) isDead = false;
      for (Node* u : o->uses()) isDead &= dead.count(u) != 0;
    }
    if (!isDead) continue;
    dead.insert(n);
    for (const Value* in : n->inputs())
      if (in && in->producer()) stack.push_back(in->producer());
  }
  if (dead.empty()) return 0;
  g.eraseNodes(std::vector<Node*>(dead.begin(), dead.end()));
  return dead.size();
}

bool isDeadNode(const Graph& g, const Node* n) {
  for (const Value* o : n->outputs())
    if (!o->uses().empty() || isGraphOutput(g, o)) return false;
  return true;
}

}  // namespace

namespace {

/// Steps 1-3 on `g` alone.
StatusOr<bool> applyToGraph(Graph& g, const PatternList& patterns, PassContext& ctx, int maxSweeps) {
  std::unordered_map<int, std::vector<const RewritePattern*>> byOp;
  for (const auto& p : patterns) byOp[static_cast<int>(p->rootOp())].push_back(p.get());
  bool changed = false;
  for (int sweep = 0; sweep < maxSweeps; ++sweep) {
    std::vector<Node*> work = g.nodes();
    // A sweep that keeps rewriting past this many rewrites is a cycle.
    const size_t maxRewrites = 4 * work.size() + 64;
    size_t rewrites = 0;
    std::vector<Value*> replaced;
    for (size_t i = 0; i < work.size(); ++i) {
      Node* n = work[i];
      auto it = byOp.find(static_cast<int>(n->op()));
      if (it == byOp.end() || isDeadNode(g, n)) continue;
      for (const RewritePattern* p : it->second) {
        PatternRewriter rw(g, n);
        auto did = p->matchAndRewrite(*n, rw);
        if (!did.ok()) return did.status().withContext(strCat("pattern '", p->name(), "' at ", n->describe()));
        if (!*did) continue;
        if (p->countsAsStat()) ++ctx.stats[std::string(p->name())];
        if (++rewrites > maxRewrites)
          return internalError("patterns did not converge: over ", maxRewrites, " rewrites in one sweep (last '",
                               p->name(), "')");
        for (Node* t : rw.takeTouched()) work.push_back(t);
        for (Value* v : rw.takeReplaced()) replaced.push_back(v);
        break;
      }
    }
    if (rewrites == 0) return changed;
    changed = true;
    eraseDeadProducers(g, replaced);
    g.eraseUnusedConstants();
  }
  return internalError("patterns did not converge in ", maxSweeps, " sweeps");
}

}  // namespace

StatusOr<bool> applyPatterns(Graph& g, const PatternList& patterns, PassContext& ctx, int maxSweeps) {
  ASSIGN_OR_RETURN(bool changed, applyToGraph(g, patterns, ctx, maxSweeps));
  // Step 4: the bodies of If, Loop and Scan (a Fused body is the fuse pass's own).
  for (Node* n : g.nodes()) {
    if (n->op() == OpKind::Fused) continue;
    for (const auto& b : n->bodies()) {
      auto did = applyPatterns(*b, patterns, ctx, maxSweeps);
      if (!did.ok()) return did.status().withContext(strCat("in a body of ", n->describe()));
      changed |= *did;
    }
  }
  return changed;
}

bool isGraphOutput(const Graph& g, const Value* v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

bool hasOneUse(const Graph& g, const Value* v) { return v->uses().size() == 1 && !isGraphOutput(g, v); }

Node* producerOf(const Value* v, OpKind op) {
  return v && v->producer() && v->producer()->op() == op ? v->producer() : nullptr;
}

std::optional<double> splatValue(const Value* v) {
  // Patterns look for scalars and small broadcast constants; a weight (larger
  // than what folding would compute) is never a splat worth matching, and is
  // not read.
  // Nor is a weight read from an external-data file beyond a few elements
  // (planning reads no weight; a block of one is such a weight too).
  constexpr int64_t kMaxSplatElements = 65536, kMaxMappedSplatElements = 1024;
  if (!v || !v->isConstant() || v->type().numel() > kMaxSplatElements) return std::nullopt;
  if (v->type().numel() > kMaxMappedSplatElements &&
      (v->constantBlock() ? v->constantBlock()->source.isMapped() : v->constantData().isMapped()))
    return std::nullopt;
  const Tensor& t = v->constantData();
  if (t.numel() == 0 || (!isFloat(t.dtype()) && !isInteger(t.dtype()))) return std::nullopt;
  double first = t.getDouble(0);
  for (int64_t i = 1; i < t.numel(); ++i)
    if (t.getDouble(i) != first) return std::nullopt;
  return first;
}

bool isSplat(const Value* v, double want, double tol) {
  auto s = splatValue(v);
  return s && std::abs(*s - want) <= tol * std::max(1.0, std::abs(want));
}

bool isFloatValue(const Value* v) { return v && isFloat(v->type().dtype); }

Value* operandBesides(const Node* n, double c) {
  if (!n || n->inputs().size() != 2) return nullptr;
  if (isSplat(n->input(1), c, kMatchTolerance)) return n->input(0);
  if (isSplat(n->input(0), c, kMatchTolerance)) return n->input(1);
  return nullptr;
}

bool keepsType(const Node* n) {
  return n->inputs().size() == 2 && n->input(0) && n->input(1) &&
         (n->output()->type() == n->input(0)->type() || n->output()->type() == n->input(1)->type());
}

Value* otherInput(const Node* n, const Value* v) {
  if (n->inputs().size() != 2) return nullptr;
  if (n->input(0) == v) return n->input(1);
  if (n->input(1) == v) return n->input(0);
  return nullptr;
}

}  // namespace pcc
