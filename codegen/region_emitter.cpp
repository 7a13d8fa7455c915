// Emission of a region node's bodies, each as a plan::Body:
//  1. buffers are numbered in the order values are met: parameters first,
//     then each node's operands; a constant becomes a weight of the rank
//     program (its weight file) and a buffer that names it; every body
//     buffer is outside the arena (the runtime allocates it per run);
//  2. each node becomes a KERNEL (or, for a nested region node, a REGION
//     emitted by this same function), followed by a FREE of the values whose
//     last reader it is (not constants, not the body's results);
//  3. the body's results name the buffers of its outputs.
#include "codegen/region_emitter.h"

#include <set>
#include <unordered_map>

#include "compiler/ir/regions.h"
#include "runtime/plan_convert.h"

namespace pcc {

plan::Weight addWeight(WeightFileWriter& weights, const std::string& name, const Value& v) {
  if (const TensorBlock* b = v.constantBlock()) return weights.add(name, *b);
  return weights.add(name, v.constantData());
}

namespace {

Status emitBody(const Graph& g, const Node& owner, WeightFileWriter& weights, plan::RankProgram* prog,
                plan::Body* body) {
  body->set_name(g.name());
  std::unordered_map<const Value*, int> ids;
  auto bufferOf = [&](const Value* v) {
    auto it = ids.find(v);
    if (it != ids.end()) return it->second;
    int id = body->buffers_size();
    plan::Buffer* b = body->add_buffers();
    b->set_id(id);
    b->set_name(v->name());
    *b->mutable_desc() = toDesc(v->type());
    b->set_weight(-1);
    b->set_arena_offset(-1);
    b->set_in_place_of(-1);
    if (v->isConstant()) {
      *prog->add_weights() = addWeight(weights, strCat(owner.name(), "/", g.name(), "/", v->name()), *v);
      b->set_weight(prog->weights_size() - 1);
    }
    ids[v] = id;
    return id;
  };
  // Step 1: parameters.
  for (const Value* in : g.inputs()) body->add_params(bufferOf(in));
  std::unordered_map<const Value*, size_t> lastUse;
  std::vector<Node*> nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value* v : nodes[i]->inputs())
      if (v) lastUse[v] = i;
  std::set<const Value*> keep(g.outputs().begin(), g.outputs().end());
  // Step 2: instructions.
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    if (isCollective(n->op()))
      return internalError(owner.describe(), ": body @", g.name(), " holds collective ", n->describe());
    plan::Instruction* ins = body->add_instructions();
    ins->set_kind(plan::Instruction::KERNEL);
    ins->set_op(std::string(n->opName()));
    ins->set_node(n->name());
    for (const Value* v : n->inputs()) ins->add_inputs(v ? bufferOf(v) : -1);
    for (const Value* v : n->outputs()) ins->add_outputs(bufferOf(v));
    for (const auto& [name, a] : n->attrs().all()) toAttrProto(name, a, ins->add_attrs());
    if (isRegionOp(n->op())) RETURN_IF_ERROR(emitRegion(*n, weights, prog, ins));
    plan::Instruction* freeIns = nullptr;
    for (const Value* v : n->inputs()) {
      if (!v || v->isConstant() || keep.count(v) || lastUse[v] != i) continue;
      if (!freeIns) {
        freeIns = body->add_instructions();
        freeIns->set_kind(plan::Instruction::FREE);
      }
      freeIns->add_inputs(ids.at(v));
    }
  }
  // Step 3: results.
  for (const Value* out : g.outputs()) body->add_results(bufferOf(out));
  return Status::OK();
}

}  // namespace

Status emitRegion(const Node& n, WeightFileWriter& weights, plan::RankProgram* prog, plan::Instruction* ins) {
  ins->set_kind(plan::Instruction::REGION);
  for (const auto& b : n.bodies()) RETURN_IF_ERROR(emitBody(*b, n, weights, prog, ins->add_bodies()));
  return Status::OK();
}

}  // namespace pcc
