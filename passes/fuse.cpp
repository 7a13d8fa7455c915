// fuse: groups an anchor with its epilogue, and connected elementwise ops with
// at most one reduction, into Fused nodes whose body holds the group.
//
// Algorithm:
//  1. Number the nodes by position. Walk them in topological order and give
//     each eligible node a group (nodes with bodies, collectives, Opaque and
//     Injective ops other than the anchors stay alone):
//     a. an anchor (MatMul, Gemm, Conv) starts a new epilogue group;
//     b. an elementwise op (Ops.def kind Elementwise) joins the groups that
//        produce its inputs: first all of them together (when none holds an
//        anchor), else one of them (anchored groups first, then in input
//        order), else it starts a group of its own;
//     c. a reduction-like op (kind Reduction: Softmax, norms, Reduce*) does
//        the same with the groups that hold no anchor;
//     d. a view (Reshape, Squeeze, Unsqueeze, Flatten) joins the group of its
//        data input's producer, and never starts a group: exporters put one
//        between a Gemm on 2-D rows and its residual add.
//  2. A join is taken only if the grown group stays legal:
//     - at most one anchor; with an anchor, no reduction, and every
//       elementwise member's output has the anchor's dtype and element count
//       (an epilogue keeps the anchor's iteration space, perhaps through a
//       view: bias add, activation, residual add);
//     - at most one reduction, at the group's start (no member produces one
//       of its inputs) or at its end (no member reads its output);
//     - one pipeline stage;
//     - no cycle: every reader outside the group of a value the group
//       computes comes after the joining node, which is the group's last
//       member. Then the group can run as one node at the position of its
//       last member: its inputs are all defined earlier (they were defined
//       before the members that read them), and its outside readers all come
//       later, so the node order stays topological and no cycle can form.
//       Each group keeps the positions of its outside readers to check this.
//  3. Every group of two or more kernels (views do not count) becomes a
//     Fused node (attribute kind = "epilogue" when it holds an anchor, else
//     "elementwise"), inserted just after its last member, groups taken from
//     the last to the first so positions stay valid. Its body's parameters are the values the group
//     reads from outside (constants read as shape operands are copied into
//     the body instead, so its types can be inferred); its results are the
//     values read outside the group or returned by the graph: a value with
//     outside readers is an extra output, never a reason to stop fusing. A
//     group nothing reads (dead code) is left as it is.
//  4. Readers of the members' outputs are redirected to the Fused node's
//     outputs; then all members are erased together and the Fused outputs
//     take the members' value names. Constants left unused are dropped.
//  5. Count the groups in PassContext::stats ("fused_epilogue",
//     "fused_elementwise").
// Region nodes (If, Loop, Scan, Fused) are left alone and their bodies are
// not fused, so running the pass twice changes nothing the second time.

#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/regions.h"
#include "passes/fuse.h"
#include "passes/registry.h"

namespace pcc {

bool isViewOp(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Squeeze || op == OpKind::Unsqueeze || op == OpKind::Flatten ||
         op == OpKind::Identity;
}

int64_t countKernels(const Graph& g) {
  int64_t k = 0;
  for (const Node* n : g.nodes())
    if (!isViewOp(n->op()) && !isCollective(n->op())) ++k;
  return k;
}

namespace {

constexpr size_t kNoPos = std::numeric_limits<size_t>::max();

bool isAnchor(OpKind op) { return op == OpKind::MatMul || op == OpKind::Gemm || op == OpKind::Conv; }

enum class Role { kNone, kAnchor, kElementwise, kReduction, kView };

Role roleOf(const Node* n) {
  if (n->numBodies() > 0 || n->outputs().size() != 1) return Role::kNone;
  if (isAnchor(n->op())) return Role::kAnchor;
  if (isElementwiseOp(n->op())) return Role::kElementwise;
  if (opClass(n->op()) == OpClass::kReduction) return Role::kReduction;
  if (isViewOp(n->op())) return Role::kView;
  return Role::kNone;
}

struct Group {
  std::vector<Node*> members;  // in topological order
  Node* anchor = nullptr;
  Node* reduction = nullptr;
  /// Positions of the readers outside the group of the values it computes.
  std::multiset<size_t> outside;
  bool alive = true;
};

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), nodes_(g.nodes()) {
    for (size_t i = 0; i < nodes_.size(); ++i) pos_[nodes_[i]] = i;
  }

  /// Steps 1-4. \returns the number of epilogue and elementwise groups made.
  std::pair<int64_t, int64_t> run() {
    for (Node* n : nodes_) place(n);
    return materialize();
  }

 private:
  /// \returns the group index of `n`, or -1.
  int groupOf(const Node* n) const {
    auto it = groupOf_.find(n);
    return it == groupOf_.end() ? -1 : it->second;
  }

  /// Step 1 for one node.
  void place(Node* n) {
    Role role = roleOf(n);
    if (role == Role::kNone) return;
    if (role == Role::kAnchor) {
      newGroup(n);
      return;
    }
    if (role == Role::kView) {
      const Value* in = n->input(0);
      int gi = in && in->producer() ? groupOf(in->producer()) : -1;
      if (gi >= 0) tryJoin({gi}, n);
      return;
    }
    std::vector<int> anchored, plain;
    for (const Value* v : n->inputs()) {
      if (!v || !v->producer()) continue;
      int gi = groupOf(v->producer());
      if (gi < 0) continue;
      std::vector<int>& list = groups_[gi].anchor ? anchored : plain;
      if (std::find(list.begin(), list.end(), gi) == list.end()) list.push_back(gi);
    }
    if (anchored.empty() && plain.size() > 1 && tryJoin(plain, n)) return;
    if (role == Role::kElementwise)
      for (int gi : anchored)
        if (tryJoin({gi}, n)) return;
    for (int gi : plain)
      if (tryJoin({gi}, n)) return;
    newGroup(n);
  }

  void newGroup(Node* n) {
    Group gr;
    gr.members.push_back(n);
    if (roleOf(n) == Role::kAnchor) gr.anchor = n;
    if (roleOf(n) == Role::kReduction) gr.reduction = n;
    addOutsideReaders(gr, n);
    groupOf_[n] = static_cast<int>(groups_.size());
    groups_.push_back(std::move(gr));
  }

  void addOutsideReaders(Group& gr, const Node* n) {
    for (const Value* o : n->outputs())
      for (const Node* u : o->uses()) gr.outside.insert(pos_.at(u));
  }

  /// Step 2: joins `n` and the groups `gis` into one if the result is legal.
  /// \returns whether it did.
  bool tryJoin(const std::vector<int>& gis, Node* n) {
    std::unordered_set<int> in(gis.begin(), gis.end());
    auto member = [&](const Node* m) {
      if (m == n) return true;
      int gi = m ? groupOf(m) : -1;
      return gi >= 0 && in.count(gi) != 0;
    };
    Node* anchor = nullptr;
    Node* reduction = roleOf(n) == Role::kReduction ? n : nullptr;
    int anchors = 0, reductions = reduction ? 1 : 0;
    for (int gi : gis) {
      const Group& gr = groups_[gi];
      if (gr.anchor) ++anchors, anchor = gr.anchor;
      if (gr.reduction) ++reductions, reduction = gr.reduction;
      if (gr.members.front()->stage() != n->stage()) return false;
    }
    if (anchors > 1 || reductions > 1) return false;
    if (anchor && reduction) return false;
    if (anchor && roleOf(n) == Role::kElementwise &&
        (n->output()->type().dtype != anchor->output()->type().dtype ||
         n->output()->type().numel() != anchor->output()->type().numel()))
      return false;
    if (reduction) {
      bool atStart = true, atEnd = true;
      for (const Value* v : reduction->inputs())
        if (v && v->producer() && member(v->producer())) atStart = false;
      for (const Node* u : reduction->output()->uses())
        if (member(u)) atEnd = false;
      if (!atStart && !atEnd) return false;
    }
    // No cycle: the first outside reader of each group must follow n.
    size_t at = pos_.at(n);
    for (int gi : gis)
      for (size_t p : groups_[gi].outside) {
        if (member(nodes_[p])) continue;
        if (p < at) return false;
        break;  // ascending: the first outside reader decides
      }
    // Commit.
    Group& into = groups_[gis.front()];
    for (size_t k = 1; k < gis.size(); ++k) {
      Group& other = groups_[gis[k]];
      for (Node* m : other.members) {
        into.members.push_back(m);
        groupOf_[m] = gis.front();
      }
      into.outside.insert(other.outside.begin(), other.outside.end());
      if (other.reduction) into.reduction = other.reduction;
      other.alive = false;
      other.members.clear();
      other.outside.clear();
    }
    into.members.push_back(n);
    groupOf_[n] = gis.front();
    if (roleOf(n) == Role::kReduction) into.reduction = n;
    for (auto it = into.outside.begin(); it != into.outside.end();)
      it = member(nodes_[*it]) ? into.outside.erase(it) : std::next(it);
    addOutsideReaders(into, n);
    std::sort(into.members.begin(), into.members.end(),
              [&](const Node* a, const Node* b) { return pos_.at(a) < pos_.at(b); });
    return true;
  }

  /// \returns the members of `gr` that are kernels (not views).
  static size_t computing(const Group& gr) {
    size_t k = 0;
    for (const Node* m : gr.members) k += !isViewOp(m->op());
    return k;
  }

  /// Steps 3-4. \returns (epilogue groups, elementwise groups) fused.
  std::pair<int64_t, int64_t> materialize() {
    std::vector<int> order;
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      if (groups_[gi].alive && computing(groups_[gi]) >= 2) order.push_back(static_cast<int>(gi));
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return pos_.at(groups_[a].members.back()) > pos_.at(groups_[b].members.back());
    });
    std::unordered_set<const Value*> graphOutputs(g_.outputs().begin(), g_.outputs().end());
    std::vector<Node*> dead;
    std::vector<std::pair<Value*, std::string>> renames;
    int64_t epilogues = 0, elementwise = 0;
    for (int gi : order) {
      const Group& gr = groups_[gi];
      std::unordered_set<const Node*> members(gr.members.begin(), gr.members.end());
      auto body = std::make_unique<Graph>();
      body->setName("fused");
      std::unordered_map<const Value*, Value*> map;
      std::vector<Value*> inputs;
      // Constants read as a shape operand anywhere in the group live in the body.
      std::unordered_set<const Value*> bodyConstants;
      for (const Node* m : gr.members)
        for (size_t i = 0; i < m->inputs().size(); ++i)
          if (m->input(i) && m->input(i)->isConstant() && isShapeOperand(m->op(), i)) bodyConstants.insert(m->input(i));
      for (const Node* m : gr.members) {
        std::vector<Value*> ins;
        for (size_t i = 0; i < m->inputs().size(); ++i) {
          Value* v = m->input(i);
          if (!v) {
            ins.push_back(nullptr);
            continue;
          }
          auto it = map.find(v);
          if (it == map.end()) {
            bool inBody = bodyConstants.count(v) != 0;
            Value* bv = inBody ? body->addConstant(v->name(), v->constantData()) : body->addInput(v->name(), v->type());
            if (!inBody) inputs.push_back(v);
            it = map.emplace(v, bv).first;
          }
          ins.push_back(it->second);
        }
        std::vector<TensorType> types;
        std::vector<std::string> names;
        for (const Value* o : m->outputs()) {
          types.push_back(o->type());
          names.push_back(o->name());
        }
        Node* bn = body->addNode(m->op(), std::move(ins), std::move(types), m->attrs(), m->name(), std::move(names));
        for (size_t i = 0; i < m->outputs().size(); ++i) map[m->output(i)] = bn->output(i);
      }
      std::vector<Value*> results;
      for (const Node* m : gr.members)
        for (Value* o : m->outputs()) {
          bool usedOutside = graphOutputs.count(o) != 0;
          for (const Node* u : o->uses()) usedOutside |= members.count(u) == 0;
          if (usedOutside) results.push_back(o);
        }
      if (results.empty()) continue;  // nothing reads the group (dead code): left for dce
      std::vector<TensorType> types;
      std::vector<std::string> names;
      std::vector<Value*> bodyResults;
      for (Value* r : results) {
        types.push_back(r->type());
        names.push_back(g_.uniqueName(r->name() + ".fused"));
        bodyResults.push_back(map.at(r));
      }
      body->setOutputs(bodyResults);
      bool epilogue = gr.anchor != nullptr;
      AttrMap attrs;
      attrs.set("kind", std::string(epilogue ? "epilogue" : "elementwise"));
      const Node* first = gr.anchor ? gr.anchor : gr.members.front();
      std::string name = first->name().empty() ? std::string() : first->name() + "/fused";
      Node* f = g_.addNode(OpKind::Fused, inputs, types, std::move(attrs), std::move(name), names,
                           pos_.at(gr.members.back()) + 1);
      f->setStage(gr.members.front()->stage());
      f->addBody(std::move(body));
      for (size_t i = 0; i < results.size(); ++i) {
        f->output(i)->setSharding(results[i]->sharding());
        g_.replaceAllUsesWith(results[i], f->output(i));
        renames.emplace_back(f->output(i), results[i]->name());
      }
      dead.insert(dead.end(), gr.members.begin(), gr.members.end());
      ++(epilogue ? epilogues : elementwise);
    }
    if (!dead.empty()) {
      g_.eraseNodes(dead);
      for (auto& [v, name] : renames) g_.renameValue(v, name);
      g_.eraseUnusedConstants();
    }
    return {epilogues, elementwise};
  }

  Graph& g_;
  std::vector<Node*> nodes_;
  std::unordered_map<const Node*, size_t> pos_;
  std::unordered_map<const Node*, int> groupOf_;
  std::vector<Group> groups_;
};

class FusePass : public Pass {
 public:
  std::string_view name() const override { return "fuse"; }

  StatusOr<bool> run(Graph& g, PassContext& ctx) override {
    Fuser fuser(g);
    auto [epilogues, elementwise] = fuser.run();
    ctx.stats["fused_epilogue"] += epilogues;
    ctx.stats["fused_elementwise"] += elementwise;
    return epilogues + elementwise > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> createFusePass() { return std::make_unique<FusePass>(); }

}  // namespace pcc
