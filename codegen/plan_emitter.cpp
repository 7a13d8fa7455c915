#include "codegen/plan_emitter.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "codegen/attention_kernel.h"
#include "codegen/kernel_build.h"
#include "codegen/memory_plan.h"
#include "codegen/region_emitter.h"
#include "compiler/ir/regions.h"
#include "passes/partition/dim_map.h"
#include "report/plan_report.h"
#include "runtime/plan_convert.h"
#include "passes/partition/partitioner.h"

namespace pcc {

namespace {

plan::Instruction::Kind collectiveKind(OpKind op) {
  switch (op) {
    case OpKind::AllReduce: return plan::Instruction::ALL_REDUCE;
    case OpKind::AllGather: return plan::Instruction::ALL_GATHER;
    case OpKind::ReduceScatter: return plan::Instruction::REDUCE_SCATTER;
    case OpKind::AllToAll: return plan::Instruction::ALL_TO_ALL;
    default: return plan::Instruction::KERNEL;
  }
}

// Index of the group of `rank` along `axis`, adding it to the plan on first use.
int groupIndex(plan::Plan& p, const Mesh& mesh, int rank, MeshAxis axis) {
  std::vector<int> ranks = mesh.groupOf(rank, axis);
  for (int i = 0; i < p.groups_size(); ++i) {
    const plan::Group& g = p.groups(i);
    if (g.axis() == meshAxisName(axis) && std::vector<int>(g.ranks().begin(), g.ranks().end()) == ranks) return i;
  }
  plan::Group* g = p.add_groups();
  g->set_axis(std::string(meshAxisName(axis)));
  for (int r : ranks) g->add_ranks(r);
  return p.groups_size() - 1;
}

// Emits one program. Buffers are numbered in value order; constants become
// weights in `weights`; a FREE follows each value's last use. A Fused node
// (passes/fuse.cpp) is emitted as its body's ops, in order, as ordinary
// instructions (docs/runtime.md#fused-nodes): its body's parameters are the
// node's input buffers, its results the node's output buffers, and its other
// values buffers of their own named "NODE/VALUE", freed after their last use
// in the body. With a KernelTable, a Fused node that describeFused can
// describe is one LAUNCH of its generated kernel instead (docs/kernels.md);
// one it cannot is emitted as its body and recorded with the reason.
// The shortest run of a fused body generated as a kernel. One: a lone Relu
// after a Conv as a generated kernel took a hundredth of oneDNN's eltwise
// primitive on the committed ResNet export (pcc-run --profile, docs/kernels.md).
constexpr size_t kMinRunNodes = 1;

class ProgramEmitter {
 public:
  ProgramEmitter(int rank, const Mesh& mesh, plan::Plan& plan, WeightFileWriter& weights, plan::RankProgram* prog,
                 KernelTable* kernels)
      : rank_(rank), mesh_(mesh), plan_(plan), weights_(weights), prog_(prog), kernels_(kernels) {}

  /// Emits `g` (the program's own graph, or a body when `ids` binds its
  /// parameters and results). \returns OK or an internal error.
  Status emitGraph(const Graph& g, std::unordered_map<const Value*, int>& ids, const std::string& prefix) {
    auto bufferOf = [&](const Value* v) {
      auto it = ids.find(v);
      if (it != ids.end()) return it->second;
      int id = prog_->buffers_size();
      plan::Buffer* b = prog_->add_buffers();
      b->set_id(id);
      b->set_name(prefix + v->name());
      *b->mutable_desc() = toDesc(v->type());
      b->set_weight(-1);
      if (v->isConstant()) {
        *prog_->add_weights() = addWeight(weights_, prefix + v->name(), *v);
        b->set_weight(prog_->weights_size() - 1);
      }
      ids[v] = id;
      return id;
    };
    for (Value* in : g.inputs()) bufferOf(in);
    // Last reader of each value, so temporaries are released early.
    std::unordered_map<const Value*, size_t> lastUse;
    std::vector<Node*> nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i)
      for (Value* v : nodes[i]->inputs())
        if (v) lastUse[v] = i;
    std::set<const Value*> keep(g.outputs().begin(), g.outputs().end());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node* n = nodes[i];
      if (runOf_.count(n)) {
        // A node of a generated run of a fused body: the run's first node launches it, the others emit nothing.
        const Run& run = *runOf_.at(n);
        if (run.nodes.front() == n) {
          plan::Instruction* ins = prog_->add_instructions();
          ins->set_kind(plan::Instruction::LAUNCH);
          ins->set_op(std::string(opName(OpKind::Fused)));
          ins->set_node(prefix + n->name());
          ins->set_kernel(run.kernel);
          for (const Node* m : run.nodes) {
            plan::Computed* c = ins->add_computes();
            c->set_node(prefix + m->name());
            *c->mutable_desc() = toDesc(m->output(0)->type());
          }
          for (const Value* v : run.inputs) ins->add_inputs(bufferOf(v));
          for (const Value* v : run.outputs) ins->add_outputs(bufferOf(v));
        }
      } else if (n->op() == OpKind::Fused) {
        RETURN_IF_ERROR(emitFused(*n, bufferOf, prefix));
      } else if (kernels_ && prefix.empty() && isGeneratedReduction(*n) && mayBeGenerated(*n) &&
                 emitLoneReduction(*n, bufferOf)) {
        // A reduction outside any fused group: one generated kernel of its own.
      } else if (kernels_ && prefix.empty() && n->op() == OpKind::Attention && emitAttention(*n, bufferOf)) {
        // Attention: a generated kernel with online softmax (codegen/attention_kernel.h).
      } else {
        plan::Instruction* ins = prog_->add_instructions();
        ins->set_kind(collectiveKind(n->op()));
        ins->set_op(std::string(n->opName()));
        ins->set_node(prefix + n->name());
        for (Value* v : n->inputs()) ins->add_inputs(v ? bufferOf(v) : -1);
        for (Value* v : n->outputs()) ins->add_outputs(bufferOf(v));
        if (n->op() == OpKind::Send || n->op() == OpKind::Recv) {
          ins->set_kind(n->op() == OpKind::Send ? plan::Instruction::SEND : plan::Instruction::RECV);
          ins->set_peer(static_cast<int32_t>(n->attrs().getInt("peer", -1)));
        } else if (isCollective(n->op())) {
          auto axis = meshAxisFromName(n->attrs().getString("axis", ""));
          if (!axis || *axis == MeshAxis::kNone) return internalError(n->describe(), ": collective without a mesh axis");
          ins->set_group(groupIndex(plan_, mesh_, rank_, *axis));
          ins->set_dim(static_cast<int32_t>(n->attrs().getInt("dim", -1)));
          if (n->op() == OpKind::AllToAll)
            ins->set_concat_dim(static_cast<int32_t>(n->attrs().getInt("concat_dim", -1)));
        } else {
          for (const auto& [name, a] : n->attrs().all()) toAttrProto(name, a, ins->add_attrs());
        }
        // If, Loop, Scan: a REGION carrying its bodies (codegen/region_emitter.h).
        if (isRegionOp(n->op())) RETURN_IF_ERROR(emitRegion(*n, weights_, prog_, ins));
      }
      plan::Instruction* freeIns = nullptr;
      for (Value* v : n->inputs()) {
        // A program's graph inputs are freed like temporaries (the executor
        // owns them); a body's parameters belong to the enclosing program.
        // Values inside a generated run have no buffer.
        if (!v || v->isConstant() || keep.count(v) || lastUse[v] != i || !ids.count(v)) continue;
        if (!prefix.empty() && std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end()) continue;
        if (!freeIns) {
          freeIns = prog_->add_instructions();
          freeIns->set_kind(plan::Instruction::FREE);
        }
        freeIns->add_inputs(ids.at(v));
      }
    }
    // A graph output no node produces (folded to a constant) still needs a buffer.
    for (Value* out : g.outputs()) bufferOf(out);
    return Status::OK();
  }

 private:
  /// Emits reduction `n` of the program's own graph (no fused group holds
  /// it) as a LAUNCH of a kernel of its own. \returns false, emitting
  /// nothing, when describeGroup refuses it (it then runs on its kernel).
  template <typename BufferOf>
  bool emitLoneReduction(const Node& n, BufferOf& bufferOf) {
    std::vector<const Value*> ins;
    for (const Value* v : kernelOperands(n)) {
      if (!v || (v->isConstant() && v->type().numel() == 1)) continue;
      if (std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
    }
    const std::string name = n.name().empty() ? n.output(0)->name() : n.name();
    auto spec = describeGroup({&n}, ins, {n.output(0)}, name);
    if (!spec.ok()) return false;
    plan::Instruction* ins0 = prog_->add_instructions();
    ins0->set_kind(plan::Instruction::LAUNCH);
    ins0->set_op(std::string(opName(OpKind::Fused)));
    ins0->set_node(name);
    ins0->set_kernel(kernels_->add(std::move(spec).value()));
    plan::Computed* c = ins0->add_computes();
    c->set_node(name);
    *c->mutable_desc() = toDesc(n.output(0)->type());
    for (const Value* v : ins) ins0->add_inputs(bufferOf(v));
    ins0->add_outputs(bufferOf(n.output(0)));
    return true;
  }

  /// Emits Attention node `n` as a LAUNCH of its generated kernel (op
  /// "Attention", so the memory planner never puts Y over Q). \returns false,
  /// emitting nothing but the reason in the kernel table's fallbacks, when
  /// describeAttention refuses it (it then runs on the runtime's kernels).
  template <typename BufferOf>
  bool emitAttention(const Node& n, BufferOf& bufferOf) {
    const std::string name = n.name().empty() ? n.output(0)->name() : n.name();
    auto spec = describeAttention(n);
    if (!spec.ok()) {
      kernels_->fallback(name, spec.status().message());
      return false;
    }
    plan::Instruction* ins = prog_->add_instructions();
    ins->set_kind(plan::Instruction::LAUNCH);
    ins->set_op(std::string(n.opName()));
    ins->set_node(name);
    ins->set_kernel(kernels_->add(std::move(spec).value()));
    // The node's attributes, for a backend that runs large heads its own way.
    for (const auto& [attr, a] : n.attrs().all()) toAttrProto(attr, a, ins->add_attrs());
    plan::Computed* c = ins->add_computes();
    c->set_node(name);
    *c->mutable_desc() = toDesc(n.output(0)->type());
    for (size_t k = 0; k < 4 && k < n.inputs().size(); ++k)
      if (n.input(k)) ins->add_inputs(bufferOf(n.input(k)));
    ins->add_outputs(bufferOf(n.output(0)));
    return true;
  }

  template <typename BufferOf>
  Status emitFused(const Node& n, BufferOf& bufferOf, const std::string& prefix) {
    const Graph& body = *n.body(0);
    if (body.inputs().size() != n.inputs().size() || body.outputs().size() != n.outputs().size())
      return internalError(n.describe(), ": body does not match the node's inputs and outputs");
    std::string name = n.name().empty() ? n.output(0)->name() : n.name();
    if (kernels_) {
      auto spec = describeFused(n);
      if (spec.ok()) {
        plan::Instruction* ins = prog_->add_instructions();
        ins->set_kind(plan::Instruction::LAUNCH);
        ins->set_op(std::string(n.opName()));
        ins->set_node(prefix + name);
        ins->set_kernel(kernels_->add(std::move(spec).value()));
        for (const Node* m : body.nodes()) {
          plan::Computed* c = ins->add_computes();
          c->set_node(prefix + name + "/" + m->name());
          *c->mutable_desc() = toDesc(m->output(0)->type());
        }
        for (Value* v : n.inputs()) ins->add_inputs(bufferOf(v));
        for (Value* v : n.outputs()) ins->add_outputs(bufferOf(v));
        return Status::OK();
      }
      // The whole group cannot be one kernel: its runs of generatable elementwise ops still can.
      int runs = planRuns(body, prefix + name + "/");
      kernels_->fallback(prefix + name, spec.status().message() +
                                            (runs ? strCat("; its elementwise part runs as ", runs, " generated kernel",
                                                           runs == 1 ? "" : "s")
                                                  : std::string()));
    }
    std::unordered_map<const Value*, int> inner;
    for (size_t k = 0; k < body.inputs().size(); ++k) {
      if (!n.input(k)) return internalError(n.describe(), ": absent input ", k);
      inner[body.inputs()[k]] = bufferOf(n.input(k));
    }
    for (size_t k = 0; k < body.outputs().size(); ++k) {
      const Value* r = body.outputs()[k];
      if (!r->producer() || inner.count(r))
        return internalError(n.describe(), ": body result ", k, " is not computed by a body node exactly once");
      inner[r] = bufferOf(n.output(k));
    }
    Status st = emitGraph(body, inner, prefix + name + "/");
    runOf_.clear();
    runs_.clear();
    return st;
  }

  /// A run of a fused body's nodes emitted as one generated kernel.
  struct Run {
    std::vector<const Node*> nodes;
    std::vector<const Value*> inputs, outputs;
    int kernel = -1;
  };

  /// Finds the maximal runs of consecutive body nodes that mayBeGenerated
  /// (at least kMinRunNodes; consecutive, so every input of a run is defined
  /// before its first node and the LAUNCH can stand there), describes each,
  /// and adds those that describeGroup accepts to the kernel table and runOf_.
  /// A run with a reduction that is refused is tried again as its parts: the
  /// runs between its reductions, and each reduction alone.
  /// \returns the number of runs generated.
  int planRuns(const Graph& body, const std::string& prefix) {
    std::vector<Node*> nodes = body.nodes();
    int made = 0;
    for (size_t i = 0; i < nodes.size();) {
      size_t j = i;
      while (j < nodes.size() && mayBeGenerated(*nodes[j])) ++j;
      if (j - i >= kMinRunNodes && !planRun(body, nodes, i, j, prefix, made)) {
        for (size_t a = i; a < j;) {
          size_t b = a;
          if (isGeneratedReduction(*nodes[a])) {
            b = a + 1;
          } else {
            while (b < j && !isGeneratedReduction(*nodes[b])) ++b;
          }
          if (b - a >= kMinRunNodes) planRun(body, nodes, a, b, prefix, made);
          a = b;
        }
      }
      i = j == i ? i + 1 : j;
    }
    return made;
  }

  /// Describes nodes [i, j) of `nodes` (a run of `body`) as one kernel and,
  /// when describeGroup accepts it, adds it (counted in `made`).
  /// \returns whether it was accepted.
  bool planRun(const Graph& body, const std::vector<Node*>& nodes, size_t i, size_t j, const std::string& prefix,
               int& made) {
    std::set<const Value*> results(body.outputs().begin(), body.outputs().end());
    std::set<const Value*> params(body.inputs().begin(), body.inputs().end());
    auto run = std::make_unique<Run>();
    std::set<const Node*> members(nodes.begin() + i, nodes.begin() + j);
    std::set<const Value*> produced, seen;
    for (size_t k = i; k < j; ++k) {
      run->nodes.push_back(nodes[k]);
      for (const Value* v : kernelOperands(*nodes[k])) {
        if (!v || produced.count(v) || seen.count(v)) continue;
        // Scalar constants of the body become literals; everything else is an operand.
        if (v->isConstant() && !params.count(v) && v->type().numel() == 1) continue;
        seen.insert(v);
        run->inputs.push_back(v);
      }
      produced.insert(nodes[k]->output(0));
    }
    for (size_t k = i; k < j; ++k) {
      const Value* out = nodes[k]->output(0);
      bool usedAfter = results.count(out) > 0;
      for (const Node* u : out->uses()) usedAfter = usedAfter || !members.count(u);
      if (usedAfter) run->outputs.push_back(out);
    }
    auto spec = describeGroup(run->nodes, run->inputs, run->outputs, prefix + nodes[i]->name());
    if (!spec.ok()) return false;
    run->kernel = kernels_->add(std::move(spec).value());
    for (const Node* m : run->nodes) runOf_[m] = run.get();
    runs_.push_back(std::move(run));
    ++made;
    return true;
  }

  int rank_;
  const Mesh& mesh_;
  plan::Plan& plan_;
  WeightFileWriter& weights_;
  plan::RankProgram* prog_;
  KernelTable* kernels_;
  // The generated runs of the fused body being emitted.
  std::vector<std::unique_ptr<Run>> runs_;
  std::unordered_map<const Node*, const Run*> runOf_;
};

Status emitProgram(const Graph& g, int rank, const Mesh& mesh, plan::Plan& plan, WeightFileWriter& weights,
                   plan::RankProgram* prog, KernelTable* kernels) {
  std::unordered_map<const Value*, int> ids;
  return ProgramEmitter(rank, mesh, plan, weights, prog, kernels).emitGraph(g, ids, "");
}

void addBindings(const std::vector<IoBind>& binds, const std::unordered_map<const Value*, int>& ids,
                 google::protobuf::RepeatedPtrField<plan::IoBinding>* out) {
  for (const IoBind& b : binds) {
    plan::IoBinding* pb = out->Add();
    pb->set_buffer(ids.at(b.value));
    pb->set_index(static_cast<int32_t>(b.index));
    pb->set_split_dim(b.splitDim);
    pb->set_offset(b.offset);
    pb->set_length(b.length);
    pb->set_per_microbatch(b.perMicrobatch);
  }
}

// Buffer ids by value, recovered from the program (buffers are named by value).
std::unordered_map<const Value*, int> idsByName(const Graph& g, const plan::RankProgram& prog) {
  std::unordered_map<std::string, int> byName;
  for (const plan::Buffer& b : prog.buffers()) byName.emplace(b.name(), b.id());
  std::unordered_map<const Value*, int> ids;
  for (Value* v : g.inputs()) ids[v] = byName.at(v->name());
  for (Value* v : g.outputs()) ids[v] = byName.at(v->name());
  return ids;
}

/// Describes the inputs and outputs of `partitioned` in `ins` and `outs`,
/// leaving out the partition's states (each rank binds its pieces itself,
/// RankProgram.states).
void describeIo(const Graph& partitioned, const Partition& partition,
                google::protobuf::RepeatedPtrField<plan::IoDesc>* ins,
                google::protobuf::RepeatedPtrField<plan::IoDesc>* outs) {
  std::set<std::string> stateIns, stateOuts;
  for (const auto& [in, o] : partition.states) {
    stateIns.insert(in);
    stateOuts.insert(o);
  }
  auto add = [](const std::vector<Value*>& values, const std::set<std::string>& skip,
                google::protobuf::RepeatedPtrField<plan::IoDesc>* to) {
    for (const Value* v : values) {
      if (skip.count(v->name())) continue;
      plan::IoDesc* d = to->Add();
      d->set_name(v->name());
      *d->mutable_desc() = toDesc(v->type());
    }
  };
  add(partitioned.inputs(), stateIns, ins);
  add(partitioned.outputs(), stateOuts, outs);
}

/// Points the collectives of `instructions` (bodies too) at the groups of
/// `rank` along their groups' axes, and their sends and receives `shift`
/// ranks further: a replica's copy of its lead's program.
Status retarget(google::protobuf::RepeatedPtrField<plan::Instruction>& instructions, int shift, int rank,
                const Mesh& mesh, plan::Plan& p) {
  for (plan::Instruction& ins : instructions) {
    switch (ins.kind()) {
      case plan::Instruction::SEND:
      case plan::Instruction::RECV: ins.set_peer(ins.peer() + shift); break;
      case plan::Instruction::ALL_REDUCE:
      case plan::Instruction::ALL_GATHER:
      case plan::Instruction::REDUCE_SCATTER:
      case plan::Instruction::ALL_TO_ALL: {
        if (ins.group() < 0 || ins.group() >= p.groups_size()) return internalError("instruction ", ins.node(), ": no group");
        auto axis = meshAxisFromName(p.groups(ins.group()).axis());
        if (!axis || *axis == MeshAxis::kNone) return internalError("instruction ", ins.node(), ": group without a mesh axis");
        ins.set_group(groupIndex(p, mesh, rank, *axis));
        break;
      }
      default: break;
    }
    for (plan::Body& body : *ins.mutable_bodies()) RETURN_IF_ERROR(retarget(*body.mutable_instructions(), shift, rank, mesh, p));
  }
  return Status::OK();
}

/// Emits one program per rank of `ranks` into `progs`, each rank's weights
/// into writers["rankR.bin"] (made when missing); collectives' groups go to
/// `p`. A replica (RankGraph::replicaOf) copies its lead's instructions and
/// weight file, retargeted, and binds its own inputs, outputs and states.
Status emitRanks(const Partition& partition, const std::vector<RankGraph>& ranks, plan::Plan& p,
                 google::protobuf::RepeatedPtrField<plan::RankProgram>* progs,
                 std::map<std::string, std::unique_ptr<WeightFileWriter>>& writers, KernelTable* kernels) {
  // The programs replicas copy (RankGraph::replicaOf), as emitted, before
  // their bindings and memory plans.
  std::set<int> leads;
  for (const RankGraph& rg : ranks)
    if (rg.replicaOf >= 0) leads.insert(rg.replicaOf);
  std::map<int, plan::RankProgram> emitted;
  for (const RankGraph& rg : ranks) {
    plan::RankProgram* prog = progs->Add();
    if (rg.replicaOf >= 0) {
      // The lead's instructions and weights (its file too: the same pieces),
      // with this rank's groups and peers.
      auto lead = emitted.find(rg.replicaOf);
      if (lead == emitted.end())
        return internalError("rank ", rg.rank, " replicates rank ", rg.replicaOf, ", which is not emitted before it");
      *prog = lead->second;
      prog->set_rank(rg.rank);
      prog->clear_mesh_coord();
      for (MeshAxis a : {MeshAxis::kPP, MeshAxis::kDP, MeshAxis::kTP}) prog->add_mesh_coord(partition.mesh.coord(rg.rank, a));
      RETURN_IF_ERROR(retarget(*prog->mutable_instructions(), rg.rank - rg.replicaOf, rg.rank, partition.mesh, p)
                          .withContext(strCat("rank ", rg.rank)));
    } else {
      std::string file = strCat("rank", rg.rank, ".bin");
      std::unique_ptr<WeightFileWriter>& writer = writers[file];
      if (!writer) writer = std::make_unique<WeightFileWriter>();
      prog->set_rank(rg.rank);
      prog->set_stage(rg.stage);
      if (partition.microbatches > 1) prog->set_microbatches(partition.microbatches);
      for (MeshAxis a : {MeshAxis::kPP, MeshAxis::kDP, MeshAxis::kTP}) prog->add_mesh_coord(partition.mesh.coord(rg.rank, a));
      prog->set_weight_file(file);
      RETURN_IF_ERROR(emitProgram(*rg.graph, rg.rank, partition.mesh, p, *writer, prog, kernels).withContext(strCat("rank ", rg.rank)));
      if (leads.count(rg.rank)) emitted[rg.rank] = *prog;
    }
    auto ids = idsByName(programOf(ranks, rg), *prog);
    addBindings(rg.inputs, ids, prog->mutable_inputs());
    addBindings(rg.outputs, ids, prog->mutable_outputs());
    for (const StateBind& sb : rg.states) {
      if (!sb.in || !sb.out)
        return internalError("rank ", rg.rank, ": state ", sb.state, " is read but never written back");
      plan::StateBinding* b = prog->add_states();
      b->set_state(static_cast<int32_t>(sb.state));
      b->set_buffer(ids.at(sb.in));
      b->set_out_buffer(ids.at(sb.out));
      for (int64_t o : sb.offsets) b->add_offsets(o);
      // The step writes the piece in place: its writer reads it as input 0.
      bool inPlace = false;
      for (const plan::Instruction& ins : prog->instructions())
        if (ins.outputs_size() > 0 && ins.outputs(0) == b->out_buffer())
          inPlace = ins.inputs_size() > 0 && ins.inputs(0) == b->buffer();
      if (!inPlace)
        return internalError("rank ", rg.rank, ": state '", sb.in->name(), "' is not written in place by its step");
    }
    RETURN_IF_ERROR(planMemory(prog, opMayRunInPlace).status().withContext(strCat("rank ", rg.rank)));
  }

  return Status::OK();
}

}  // namespace

StatusOr<EmittedPlan> emitPlan(const Graph& reference, const Graph& partitioned, const Partition& partition,
                               const std::vector<RankGraph>& ranks, const std::string& modelPath,
                               KernelTable* kernels, const plan::Generation* generation) {
  EmittedPlan out;
  plan::Plan& p = out.plan;
  p.set_schema_version(kPlanSchemaVersion);
  p.set_model(utf8OrEscaped(modelPath));  // informational: a path need not be UTF-8
  p.set_producer("pcc 0.1.0");
  if (!partition.states.empty() && !generation)
    return internalError("a partition with session state needs its generation description");
  if (generation) *p.mutable_generation() = *generation;
  describeIo(partitioned, partition, p.mutable_inputs(), p.mutable_outputs());
  p.mutable_mesh()->set_pp(partition.mesh.pp);
  p.mutable_mesh()->set_dp(partition.mesh.dp);
  p.mutable_mesh()->set_tp(partition.mesh.tp);
  for (const std::string& n : partition.notes) p.add_notes(n);
  for (const std::string& s : partition.tensorParallel) p.add_tensor_parallel(s);

  RETURN_IF_ERROR(emitRanks(partition, ranks, p, p.mutable_ranks(), out.weights, kernels));

  // The oracle: the unpartitioned graph as one program with whole inputs/outputs.
  auto refWriter = std::make_unique<WeightFileWriter>();
  plan::RankProgram* ref = p.mutable_reference();
  ref->set_rank(0);
  ref->set_weight_file("reference.bin");
  RETURN_IF_ERROR(emitProgram(reference, 0, Mesh{}, p, *refWriter, ref, nullptr).withContext("reference program"));
  auto ids = idsByName(reference, *ref);
  std::vector<IoBind> ins, outs;
  for (size_t k = 0; k < reference.inputs().size(); ++k) ins.push_back({k, reference.inputs()[k], -1, 0, 0});
  for (size_t k = 0; k < reference.outputs().size(); ++k) outs.push_back({k, reference.outputs()[k], -1, 0, 0});
  addBindings(ins, ids, ref->mutable_inputs());
  addBindings(outs, ids, ref->mutable_outputs());
  RETURN_IF_ERROR(planMemory(ref, opMayRunInPlace).status().withContext("reference program"));
  out.weights["reference.bin"] = std::move(refWriter);
  return out;
}

Status emitPrefill(const Graph& partitioned, const Partition& partition, const std::vector<RankGraph>& ranks,
                   KernelTable* kernels, EmittedPlan& into, plan::Prefill& out) {
  plan::Plan scratch;
  describeIo(partitioned, partition, out.mutable_inputs(), out.mutable_outputs());
  std::map<std::string, uint64_t> before;
  for (auto& [name, w] : into.weights) {
    w->shareIdentical();
    before[name] = w->size();
  }
  RETURN_IF_ERROR(emitRanks(partition, ranks, scratch, out.mutable_ranks(), into.weights, kernels).withContext("prefill"));
  int64_t extra = 0;
  for (auto& [name, w] : into.weights)
    if (before.count(name)) extra += static_cast<int64_t>(w->size() - before[name]);
  out.set_extra_weight_bytes(extra);
  out.mutable_groups()->Swap(scratch.mutable_groups());
  return Status::OK();
}

Status writeEmittedPlan(const std::string& dir, const EmittedPlan& p, const WriteProgress& progress) {
  std::map<std::string, WeightFileWriter*> files;
  for (const auto& [name, w] : p.weights) files[name] = w.get();
  // Every plan pcc writes must read back: a plan the reader would refuse is a
  // compiler bug, reported before anything is written.
  if (Status st = validatePlan(p.plan); !st.ok()) return internalError("the emitted plan is invalid: ", st.message());
  return writePlanBundle(dir, p.plan, files, planReportJson(p.plan), progress, p.files);
}

}  // namespace pcc
