// The verifier walks the graph once in node order, keeping the set of values
// defined so far; every check reports the first violation it finds.

#include "compiler/ir/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/regions.h"
#include "compiler/ir/text.h"

namespace pcc {

namespace {

/// \returns "node 'name' (Op)", or "node defining %out (Op)" for unnamed nodes,
/// so that errors on parsed IR point at a line.
std::string describeNode(const Node* n) {
  if (!n->name().empty()) return n->describe();
  if (!n->outputs().empty() && n->output(0))
    return strCat("node defining ", valueRefText(n->output(0)->name()), " (", n->opName(), ")");
  return strCat("unnamed node (", n->opName(), ")");
}

std::string typeList(const std::vector<TensorType>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return s;
}

Status checkSharding(const Value* v, const std::string& where) {
  if (v->sharding() && static_cast<int64_t>(v->sharding()->dims.size()) != v->type().rank())
    return invalidInput("verifier: ", where, ": value ", valueRefText(v->name()), " of type ", v->type().str(),
                        " has sharding ", v->sharding()->str(), " of rank ", v->sharding()->dims.size());
  return Status::OK();
}

/// What a graph's walk knows of the values around it: those of the enclosing
/// graphs (a body may not read them) and those defined inside the bodies met
/// so far (the enclosing graph may not read them). Only for error messages:
/// the check itself is that a value is defined in the graph being walked.
struct Scope {
  const Scope* outer = nullptr;
  const std::unordered_set<const Value*>* defined = nullptr;  // the enclosing graph's values so far
  std::string where;                                          // "body @then of node 'if' (If)"
  bool definesOutside(const Value* v) const {
    for (const Scope* s = this; s && s->defined; s = s->outer)
      if (s->defined->count(v)) return true;
    return false;
  }
};

/// \returns why `v`, read at `what` but not defined before it, is out of scope.
std::string outOfScope(const Value* v, const Scope& scope,
                       const std::unordered_map<const Value*, std::string>& insideBodies) {
  if (auto it = insideBodies.find(v); it != insideBodies.end())
    return strCat(" is defined inside ", it->second, " and cannot be used outside it");
  if (scope.definesOutside(v))
    return strCat(" is defined outside ", scope.where,
                  "; a body reads outer values only as parameters (pass them as the node's captured inputs)");
  return " is not defined before the node (nodes must be in topological order)";
}

Status verifyGraphIn(const Graph& g, const Scope& scope);

Status verifyNode(const Node* n, const std::unordered_set<const Value*>& defined, const Scope& scope,
                  std::unordered_map<const Value*, std::string>& insideBodies) {
  const OpInfo& info = opInfo(n->op());
  std::string what = describeNode(n);
  int numIn = static_cast<int>(n->inputs().size());
  if (numIn < info.minInputs || (info.maxInputs >= 0 && numIn > info.maxInputs)) {
    std::string range = info.maxInputs < 0 ? strCat("at least ", info.minInputs)
                        : info.minInputs == info.maxInputs ? strCat(info.minInputs)
                                                           : strCat(info.minInputs, " to ", info.maxInputs);
    return invalidInput("verifier: ", what, ": has ", numIn, " inputs, expected ", range);
  }
  int numOut = static_cast<int>(n->outputs().size());
  if (info.numOutputs >= 0 ? numOut != info.numOutputs : numOut < 1)
    return invalidInput("verifier: ", what, ": has ", numOut, " outputs, expected ",
                        info.numOutputs >= 0 ? strCat(info.numOutputs) : std::string("at least 1"));
  for (int i = 0; i < numIn; ++i) {
    const Value* v = n->input(i);
    if (!v) {
      if (i < info.minInputs) return invalidInput("verifier: ", what, ": required input ", i, " is absent");
      continue;
    }
    if (!defined.count(v))
      return invalidInput("verifier: ", what, ": input ", i, " ", valueRefText(v->name()), outOfScope(v, scope, insideBodies));
  }
  if (n->stage() < 0) return invalidInput("verifier: ", what, ": negative stage ", n->stage());
  for (const Value* o : n->outputs()) {
    if (!o) return invalidInput("verifier: ", what, ": has a null output");
    if (o->producer() != n) return invalidInput("verifier: ", what, ": output ", valueRefText(o->name()), " names another producer");
    RETURN_IF_ERROR(checkSharding(o, what));
  }

  // Region nodes: their bodies first (each a graph of its own, seeing nothing
  // of this one), then the node's signature against them.
  if (n->numBodies() != numBodiesOf(n->op()))
    return invalidInput("verifier: ", what, ": has ", n->numBodies(), " bodies, ", n->opName(), " takes ", numBodiesOf(n->op()));
  if (isRegionOp(n->op())) {
    for (const auto& b : n->bodies()) {
      Scope inner{&scope, &defined, strCat("body @", b->name(), " of ", what)};
      RETURN_IF_ERROR(verifyGraphIn(*b, inner));
    }
    RETURN_IF_ERROR(checkRegionNode(*n, what).withContext("verifier"));
    for (const auto& b : n->bodies()) {
      std::string where = strCat("body @", b->name(), " of ", what);
      for (const Value* v : b->inputs()) insideBodies.emplace(v, where);
      for (const Value* v : b->constants()) insideBodies.emplace(v, where);
      for (const Node* bn : b->nodes())
        for (const Value* o : bn->outputs()) insideBodies.emplace(o, where);
    }
    return Status::OK();
  }

  std::string inferName = n->name().empty() ? valueRefText(n->output(0)->name()) : n->name();
  auto inferred = inferOutputTypes(n->op(), n->inputs(), n->attrs(), inferName);
  if (!inferred.ok()) {
    // AllGather's, ReduceScatter's and AllToAll's types depend on attributes
    // (`dim`, `group_size`) that a hand-written or partially lowered graph may
    // leave out; without them there is nothing to check against.
    bool sizedCollective =
        n->op() == OpKind::AllGather || n->op() == OpKind::ReduceScatter || n->op() == OpKind::AllToAll;
    if (sizedCollective && (!n->attrs().has("dim") || !n->attrs().has("group_size"))) return Status::OK();
    return invalidInput("verifier: ", inferred.status().message());
  }
  std::vector<TensorType> actual;
  for (const Value* o : n->outputs()) actual.push_back(o->type());
  if (inferred->size() != actual.size())
    return invalidInput("verifier: ", what, ": has ", actual.size(), " outputs but type inference gives ",
                        inferred->size(), " (", typeList(*inferred), ")");
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != (*inferred)[i])
      return invalidInput("verifier: ", what, ": output ", i, " ", valueRefText(n->output(i)->name()), " has type ",
                          actual[i].str(), " but type inference gives ", (*inferred)[i].str());
  }
  return Status::OK();
}

Status verifyGraphIn(const Graph& g, const Scope& scope) {
  std::unordered_set<const Value*> defined;
  std::unordered_map<const Value*, std::string> insideBodies;
  std::unordered_set<std::string> names;
  auto define = [&](const Value* v, const std::string& where) -> Status {
    if (v->name().empty()) return invalidInput("verifier: ", where, ": a value has an empty name");
    if (!names.insert(v->name()).second)
      return invalidInput("verifier: ", where, ": value name ", valueRefText(v->name()), " is defined twice");
    defined.insert(v);
    return Status::OK();
  };

  for (const Value* v : g.inputs()) {
    if (v->producer() || v->isConstant())
      return invalidInput("verifier: graph input ", valueRefText(v->name()), " is also a node output or a constant");
    RETURN_IF_ERROR(define(v, strCat("graph input ", valueRefText(v->name()))));
    RETURN_IF_ERROR(checkSharding(v, "graph input"));
  }
  for (const Value* c : g.constants()) {
    if (c->producer()) return invalidInput("verifier: constant ", valueRefText(c->name()), " is also a node output");
    TensorType dataType = c->constantBlock() ? c->constantBlock()->type() : c->constantData().type();
    if (dataType != c->type())
      return invalidInput("verifier: constant ", valueRefText(c->name()), " has type ", c->type().str(), " but its data is ",
                          dataType.str());
    RETURN_IF_ERROR(define(c, strCat("constant ", valueRefText(c->name()))));
    RETURN_IF_ERROR(checkSharding(c, "constant"));
  }
  for (const Node* n : g.nodes()) {
    RETURN_IF_ERROR(verifyNode(n, defined, scope, insideBodies));
    for (const Value* o : n->outputs()) RETURN_IF_ERROR(define(o, describeNode(n)));
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value* v = g.outputs()[i];
    if (!v) return invalidInput("verifier: graph output ", i, " is null");
    if (!defined.count(v))
      return invalidInput("verifier: ", scope.defined ? scope.where + " result " : std::string("graph output "), i, " ",
                          valueRefText(v->name()),
                          scope.defined || insideBodies.count(v) ? outOfScope(v, scope, insideBodies)
                                                                 : std::string(" is not defined in the graph"));
  }
  return Status::OK();
}

}  // namespace

Status verifyGraph(const Graph& g) { return verifyGraphIn(g, Scope{}); }

}  // namespace pcc
