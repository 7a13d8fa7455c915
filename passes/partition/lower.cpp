// Lowering an annotated global graph to per-rank local graphs.
//
// Algorithm, for each rank:
//  1. Graph inputs become local inputs of the rank's slice (IoBind says which).
//  2. Nodes are copied in order. Each input is first brought to the layout the
//     node needs (Partition::inputSharding): constants are sliced offline
//     (a piece of more than LowerOptions::eagerSliceElements stays a TensorBlock
//     of the global constant, streamed by the plan writer: no weight byte is
//     read or copied while planning);
//     activations are converted by the steps of reshard.h: a ReduceScatter
//     (partial -> split) or an AllReduce (partial -> full), an AllToAll (split
//     moves to another dimension) or an AllGather per split dimension the
//     node cannot take, and a local Slice per dimension the node wants split
//     but has whole (uneven pieces carry the whole extent of a gathered
//     dimension as `gathered_size` and this rank's extent of a scattered one
//     as `piece_size`). Every
//     layout reached is cached per (value, layout), so readers that need the
//     same layout, or share steps towards theirs, share the nodes.
//  3. Shape operands (Reshape's and Expand's shape, ConstantOfShape's input)
//     are replaced by the local output shape; a Gemm bias added to a partial
//     sum is kept on the first rank of the group only; a 3-D Attention split
//     over its packed heads gets its local head counts.
//  4. Every local output type is re-inferred and must equal the shape the
//     sharding predicts; a mismatch is an internal error, never a silent
//     wrong answer.
//  5. Graph outputs are made whole except for at most one split dimension
//     (the batch's when there are micro-batches); one rank per distinct piece
//     of the stage that computes it writes it.
// Pipeline stages (pp > 1): a rank lowers only the nodes of its stage
// (Node::stage). Before them, a Recv per value an earlier stage computes and
// this one reads, in the order the values are computed, from the rank of the
// producing stage with the same dp and tp coordinates; after each node, a Send
// of each of its outputs to every later stage that reads it. Both sides keep
// the producer's layout, so a pair of ranks always sees its transfers in the
// same order. Shapes are those of one micro-batch: the partition's shapeMesh()
// (dp · microbatches replicas) gives every local shape and slice; a collective
// over dp would need the whole batch at once and is refused when there are
// micro-batches.
#include <algorithm>
#include <map>
#include <set>

#include "compiler/ir/graph_equal.h"
#include "compiler/ir/regions.h"
#include "passes/partition/partitioner.h"
#include "passes/partition/reshard.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

StatusOr<Value*> addConstantSlice(Graph& g, const std::string& name, const Value* of, const Dims& start,
                                  const Dims& extent, int64_t eagerElements) {
  const TensorBlock* outer = of->constantBlock();
  Dims at = start;
  if (outer)
    for (size_t d = 0; d < at.size() && d < outer->start.size(); ++d) at[d] += outer->start[d];
  const Tensor& source = outer ? outer->source : of->constantData();
  ASSIGN_OR_RETURN(TensorBlock block, makeBlock(source, at, extent));
  if (outer) block.as = outer->as;  // a converted weight's pieces are converted too
  // A small constant's piece is copied; a large one's, or a weight's from an
  // external-data file, stays a block however small the piece (at a large tp
  // a weight's piece can be small, and copying it would read the weight
  // while planning).
  if (numElements(source.shape()) <= eagerElements && !source.isMapped())
    return g.addConstant(name, readBlock(block));
  return g.addConstantBlock(name, std::move(block));
}

namespace {

// Adds to `lg` the piece of constant `v` that `rank` holds under sharding `s`:
// the constant itself when whole, else addConstantSlice's piece.
StatusOr<Value*> sliceConstant(Graph& lg, const std::string& name, const Value* v, const Sharding& s,
                               const Mesh& mesh, int rank, int64_t eager) {
  const Dims& global = v->type().shape;
  Dims local = localShape(global, s, mesh, rank);
  if (local == global) {
    const TensorBlock* outer = v->constantBlock();
    return outer ? lg.addConstantBlock(name, *outer) : lg.addConstant(name, v->constantData());
  }
  Dims start(global.size(), 0);
  for (size_t d = 0; d < start.size(); ++d)
    if (s.dims[d] != MeshAxis::kNone) start[d] = chunkOffset(global[d], mesh.extent(s.dims[d]), mesh.coord(rank, s.dims[d]));
  return addConstantSlice(lg, name, v, start, local, eager);
}

class RankLowering {
 public:
  RankLowering(const Graph& g, const Partition& p, int rank, const LowerOptions& opts)
      : g_(g), p_(p), rank_(rank), opts_(opts), shape_(p.shapeMesh()), srank_(p.shapeRank(rank)),
        stage_(p.mesh.coord(rank, MeshAxis::kPP)) {}

  StatusOr<RankGraph> run() {
    RankGraph rg;
    rg.rank = rank_;
    rg.stage = stage_;
    rg.graph = std::make_unique<Graph>();
    lg_ = rg.graph.get();
    lg_->setName(g_.name());
    // What each stage reads (pipelines only).
    std::set<const Value*> readHere;
    if (p_.mesh.pp > 1) {
      for (const Node* n : g_.nodes())
        for (const Value* v : n->inputs())
          if (v) {
            if (n->stage() == stage_) readHere.insert(v);
            if (v->producer() && n->stage() > v->producer()->stage()) laterStages_[v].insert(n->stage());
          }
      if (stage_ == 0)
        for (const Value* v : g_.outputs()) readHere.insert(v);
    }
    for (size_t k = 0; k < g_.inputs().size(); ++k) {
      Value* v = g_.inputs()[k];
      if (p_.mesh.pp > 1 && !readHere.count(v)) continue;
      const Sharding& s = *v->sharding();
      Value* lv = lg_->addInput(v->name(), {v->type().dtype, localShape(v->type().shape, s, shape_, srank_)});
      lv->setSharding(s);
      cache_[key(v, s)] = lv;
      if (int st = stateOf(v->name(), /*output=*/false); st >= 0) {
        StateBind sb;
        sb.state = static_cast<size_t>(st);
        sb.in = lv;
        for (size_t d = 0; d < s.dims.size(); ++d)
          sb.offsets.push_back(s.dims[d] == MeshAxis::kNone
                                   ? 0
                                   : chunkOffset(v->type().shape[d], shape_.extent(s.dims[d]),
                                                 shape_.coord(srank_, s.dims[d])));
        rg.states.push_back(std::move(sb));
        continue;
      }
      IoBind b{k, lv, -1, 0, 0};
      for (size_t d = 0; d < s.dims.size(); ++d)
        if (s.dims[d] != MeshAxis::kNone) setSplit(b, v, s, static_cast<int>(d));
      rg.inputs.push_back(b);
    }
    if (p_.mesh.pp > 1) RETURN_IF_ERROR(addRecvs(readHere));
    std::vector<Node*> nodes = g_.nodes();
    for (const Node* n : nodes) {
      rg.nodeStarts.push_back(lg_->numNodes());
      if (n->stage() != stage_) continue;
      RETURN_IF_ERROR(lowerNode(n));
      if (p_.mesh.pp > 1) RETURN_IF_ERROR(addSends(n));
    }
    rg.nodeStarts.push_back(lg_->numNodes());
    RETURN_IF_ERROR(bindOutputs(rg));
    return rg;
  }

 private:
  static std::string key(const Value* v, const Sharding& s) { return strCat(v->id(), "|", s.str()); }

  /// \returns the state whose input (or output) is named `name`, or -1.
  int stateOf(const std::string& name, bool output) const {
    for (size_t i = 0; i < p_.states.size(); ++i)
      if ((output ? p_.states[i].second : p_.states[i].first) == name) return static_cast<int>(i);
    return -1;
  }

  void setSplit(IoBind& b, const Value* v, const Sharding& s, int d) {
    int parts = shape_.extent(s.dims[d]), c = shape_.coord(srank_, s.dims[d]);
    b.splitDim = d;
    b.offset = chunkOffset(v->type().shape[d], parts, c);
    b.length = chunkSize(v->type().shape[d], parts, c);
    b.perMicrobatch = s.dims[d] == MeshAxis::kDP && p_.microbatches > 1;
  }

  /// The physical rank of stage `stage` with this rank's dp and tp coordinates.
  int peerIn(int stage) const {
    return p_.mesh.rankOf(stage, p_.mesh.coord(rank_, MeshAxis::kDP), p_.mesh.coord(rank_, MeshAxis::kTP));
  }

  // A Recv of every value of an earlier stage that this stage reads, in the
  // order the values are computed.
  Status addRecvs(const std::set<const Value*>& readHere) {
    for (const Node* n : g_.nodes()) {
      if (n->stage() >= stage_) continue;
      for (const Value* o : n->outputs()) {
        if (!readHere.count(o)) continue;
        const Sharding& s = *o->sharding();
        TensorType t{o->type().dtype, localShape(o->type().shape, s, shape_, srank_)};
        AttrMap a;
        a.set("peer", static_cast<int64_t>(peerIn(n->stage())));
        a.set("dtype", static_cast<int64_t>(static_cast<int32_t>(t.dtype)));
        a.set("shape", t.shape);
        std::string name = fresh(o->name() + ".recv");
        Node* r = lg_->addNode(OpKind::Recv, {}, {t}, a, name, {o->name()});
        r->setStage(stage_);
        r->output()->setSharding(s);
        cache_[key(o, s)] = r->output();
      }
    }
    return Status::OK();
  }

  // A Send of each output of `n` to every later stage that reads it.
  Status addSends(const Node* n) {
    for (const Value* o : n->outputs()) {
      auto later = laterStages_.find(o);
      if (later == laterStages_.end()) continue;
      Value* lv = cache_.at(key(o, *o->sharding()));
      for (int stage : later->second) {
        AttrMap a;
        a.set("peer", static_cast<int64_t>(peerIn(stage)));
        Node* sn = lg_->addNode(OpKind::Send, {lv}, {}, a, fresh(strCat(o->name(), ".send", stage)), {});
        sn->setStage(stage_);
      }
    }
    return Status::OK();
  }

  std::string fresh(const std::string& base) { return lg_->uniqueName(base); }

  Value* i64Const(const std::string& name, const std::vector<int64_t>& vals) {
    return lg_->addConstant(fresh(name), Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(vals.size())}, vals));
  }

  /// `a` holds the op's own attributes (gathered_size, piece_size, ...).
  StatusOr<Value*> addCollective(OpKind op, Value* in, MeshAxis axis, int dim, const std::string& base,
                                 AttrMap a = {}) {
    if (axis == MeshAxis::kDP && p_.microbatches > 1)
      return unsupported("value '", in->name(), "' needs a collective over dp (the whole batch at once), which ",
                         p_.microbatches, " micro-batches cannot give");
    a.set("axis", std::string(meshAxisName(axis)));
    a.set("dim", static_cast<int64_t>(dim));
    a.set("group_size", static_cast<int64_t>(shape_.extent(axis)));
    ASSIGN_OR_RETURN(auto types, inferOutputTypes(op, {in}, a, base));
    Node* n = lg_->addNode(op, {in}, types, a, fresh(base), {fresh(base)});
    return n->output();
  }

  // Uneven pieces of dimension `dim` of `v` over `axis`: this rank's extent
  // of a dimension a collective scatters.
  void setPiece(AttrMap& a, const Value* v, MeshAxis axis, int dim) const {
    const int64_t whole = v->type().shape[dim];
    const int parts = shape_.extent(axis);
    if (whole % parts != 0) a.set("piece_size", chunkSize(whole, parts, shape_.coord(srank_, axis)));
  }

  // ... and the whole extent of a dimension a collective gathers.
  void setGathered(AttrMap& a, const Value* v, MeshAxis axis, int dim) const {
    const int64_t whole = v->type().shape[dim];
    if (whole % shape_.extent(axis) != 0) a.set("gathered_size", whole);
  }

  // Step 2: \returns the local value of `v` laid out as `req`.
  StatusOr<Value*> materialize(const Value* v, const Sharding& req) {
    auto hit = cache_.find(key(v, req));
    if (hit != cache_.end()) return hit->second;
    if (v->isConstant()) {
      ASSIGN_OR_RETURN(Value* lc, sliceConstant(*lg_, fresh(v->name()), v, req, shape_, srank_, opts_.eagerSliceElements));
      lc->setSharding(req);
      cache_[key(v, req)] = lc;
      return lc;
    }
    Sharding cur = *v->sharding();
    auto own = cache_.find(key(v, cur));
    if (own == cache_.end())
      return internalError("rank ", rank_, " (stage ", stage_, "): value '", v->name(), "' of stage ",
                           v->producer() ? v->producer()->stage() : 0, " was neither computed nor received here");
    Value* lv = own->second;
    const std::string& name = v->name();
    std::vector<ReshardStep> steps = reshardSteps(cur, req);
    // A layout reached already that needs no collective to get there wins.
    if (!isLocal(steps))
      for (const Sharding& w : reached_[v]) {
        std::vector<ReshardStep> local = reshardSteps(w, req);
        if (!isLocal(local)) continue;
        cur = w, lv = cache_.at(key(v, w)), steps = std::move(local);
        break;
      }
    for (const ReshardStep& step : steps) {
      auto done = cache_.find(key(v, step.result));
      if (done != cache_.end()) {
        lv = done->second;
      } else if (step.kind == ReshardStep::kAllReduce) {
        ASSIGN_OR_RETURN(lv, addCollective(OpKind::AllReduce, lv, step.axis, -1, name + ".allreduce"));
      } else if (step.kind == ReshardStep::kReduceScatter) {
        AttrMap a;
        setPiece(a, v, step.axis, step.dim);
        ASSIGN_OR_RETURN(lv, addCollective(OpKind::ReduceScatter, lv, step.axis, step.dim, name + ".reducescatter", a));
      } else if (step.kind == ReshardStep::kAllToAll) {
        AttrMap a;
        a.set("concat_dim", static_cast<int64_t>(step.fromDim));
        setPiece(a, v, step.axis, step.dim);
        setGathered(a, v, step.axis, step.fromDim);
        ASSIGN_OR_RETURN(lv, addCollective(OpKind::AllToAll, lv, step.axis, step.dim, name + ".alltoall", a));
      } else if (step.kind == ReshardStep::kAllGather) {
        AttrMap a;
        setGathered(a, v, step.axis, step.dim);
        ASSIGN_OR_RETURN(lv, addCollective(OpKind::AllGather, lv, step.axis, step.dim, name + ".allgather", a));
      } else {
        int parts = shape_.extent(step.axis), c = shape_.coord(srank_, step.axis);
        int64_t extent = v->type().shape[step.dim];
        int64_t off = chunkOffset(extent, parts, c), len = chunkSize(extent, parts, c);
        std::vector<Value*> ins = {lv, i64Const(name + ".start", {off}), i64Const(name + ".end", {off + len}),
                                   i64Const(name + ".axes", {static_cast<int64_t>(step.dim)})};
        std::string nodeName = fresh(name + ".slice");
        ASSIGN_OR_RETURN(auto types, inferOutputTypes(OpKind::Slice, ins, {}, nodeName));
        lv = lg_->addNode(OpKind::Slice, ins, types, {}, nodeName, {fresh(name + ".local")})->output();
      }
      cur = step.result;
      lv->setSharding(cur);
      if (cache_.emplace(key(v, cur), lv).second) reached_[v].push_back(cur);
    }
    if (!(cur == req))
      return internalError("cannot lay out value '", name, "' as ", req.str(), " (reached ", cur.str(), ")");
    return lv;
  }

  Status lowerNode(const Node* n) {
    std::vector<Value*> ins;
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->input(i);
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      ASSIGN_OR_RETURN(Value* lv, materialize(v, p_.inputSharding.at({n, i})));
      ins.push_back(lv);
    }
    // Step 3: shape operands and partial-sum biases.
    std::vector<Dims> expected;
    for (Value* o : n->outputs()) expected.push_back(localShape(o->type().shape, *o->sharding(), shape_, srank_));
    int shapeOperand = n->op() == OpKind::Reshape || n->op() == OpKind::Expand ? 1
                       : n->op() == OpKind::ConstantOfShape                    ? 0
                                                                               : -1;
    if (shapeOperand >= 0 && expected[0] != n->output()->type().shape)
      ins[shapeOperand] = i64Const(n->input(shapeOperand)->name() + ".local", expected[0]);
    const Sharding& os = *n->output()->sharding();
    if (n->op() == OpKind::Gemm && ins.size() > 2 && ins[2] && os.partial != MeshAxis::kNone &&
        shape_.coord(srank_, os.partial) != 0)
      ins[2] = lg_->addConstant(fresh(n->input(2)->name() + ".zero"), Tensor::zeros(ins[2]->type()));
    // A 3-D Attention split over its packed heads holds fewer heads locally.
    AttrMap attrs = n->attrs();
    if (n->op() == OpKind::Attention && ins[0] && ins[0]->type().rank() == 3 && n->input(0)->type().rank() == 3) {
      const int64_t globalQ = n->input(0)->type().shape[2], localQ = ins[0]->type().shape[2];
      const int64_t globalKv = n->input(1)->type().shape[2], localKv = ins[1]->type().shape[2];
      if (localQ != globalQ) attrs.set("q_num_heads", attrs.getInt("q_num_heads", 0) * localQ / globalQ);
      if (localKv != globalKv) attrs.set("kv_num_heads", attrs.getInt("kv_num_heads", 0) * localKv / globalKv);
    }
    // Step 4.
    // Region nodes are replicated (partitioner.cpp): their local types are the global ones.
    std::vector<TensorType> types;
    for (const Value* o : n->outputs()) types.push_back(o->type());
    if (!isRegionOp(n->op())) {
      ASSIGN_OR_RETURN(types, inferOutputTypes(n->op(), ins, attrs, n->name()));
    }
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i].shape != expected[i])
        return internalError("rank ", rank_, ": ", n->describe(), " output ", i, " has local shape ",
                             dimsToString(types[i].shape), " but its sharding ", n->output(i)->sharding()->str(),
                             " of ", n->output(i)->type().str(), " predicts ", dimsToString(expected[i]));
    std::vector<std::string> names;
    for (Value* o : n->outputs()) names.push_back(o->name());
    Node* ln = lg_->addNode(n->op(), ins, types, attrs, n->name(), names);
    ln->setStage(n->stage());
    for (const auto& b : n->bodies()) ln->addBody(b->clone());
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* o = n->output(i);
      ln->output(i)->setSharding(o->sharding());
      cache_[key(o, *o->sharding())] = ln->output(i);
    }
    return Status::OK();
  }

  // Step 5.
  Status bindOutputs(RankGraph& rg) {
    std::vector<Value*> outs;
    for (size_t k = 0; k < g_.outputs().size(); ++k) {
      const Value* v = g_.outputs()[k];
      const int from = v->producer() ? v->producer()->stage() : 0;
      if (p_.mesh.pp > 1 && from != stage_) continue;  // the stage that computes it writes it
      if (int st = stateOf(v->name(), /*output=*/true); st >= 0) {
        // A state is written back in its own layout, on every rank that holds a piece.
        ASSIGN_OR_RETURN(Value* lv, materialize(v, *v->sharding()));
        auto sb = std::find_if(rg.states.begin(), rg.states.end(),
                               [&](const StateBind& b) { return b.state == static_cast<size_t>(st); });
        if (sb == rg.states.end())
          return internalError("rank ", rank_, ": state output '", v->name(), "' is computed where its input is not read");
        sb->out = lv;
        outs.push_back(lv);
        continue;
      }
      Sharding want = *v->sharding();
      want.partial = MeshAxis::kNone;
      // Micro-batches keep the batch's split (gathering it is impossible);
      // otherwise the first split dimension is kept.
      int keep = p_.microbatches > 1 ? want.dimSplitOver(MeshAxis::kDP) : -1;
      for (size_t d = 0; d < want.dims.size() && keep < 0; ++d)
        if (want.dims[d] != MeshAxis::kNone) keep = static_cast<int>(d);
      for (size_t d = 0; d < want.dims.size(); ++d)
        if (static_cast<int>(d) != keep) want.dims[d] = MeshAxis::kNone;
      ASSIGN_OR_RETURN(Value* lv, materialize(v, want));
      bool writer = true;
      for (MeshAxis a : {MeshAxis::kDP, MeshAxis::kTP})
        if (want.dimSplitOver(a) < 0 && shape_.coord(srank_, a) != 0) writer = false;
      if (!writer) continue;
      IoBind b{k, lv, -1, 0, 0};
      for (size_t d = 0; d < want.dims.size(); ++d)
        if (want.dims[d] != MeshAxis::kNone) setSplit(b, v, want, static_cast<int>(d));
      rg.outputs.push_back(b);
      outs.push_back(lv);
    }
    lg_->setOutputs(outs);
    return Status::OK();
  }

  const Graph& g_;
  const Partition& p_;
  int rank_;
  const LowerOptions& opts_;
  const Mesh shape_;  // the mesh of local shapes (Partition::shapeMesh)
  const int srank_;   // this rank's place in it
  const int stage_;
  Graph* lg_ = nullptr;
  std::map<std::string, Value*> cache_;
  std::map<const Value*, std::vector<Sharding>> reached_;  // the layouts materialize() made, in order
  std::map<const Value*, std::set<int>> laterStages_;  // the later stages reading a value
};

}  // namespace

StatusOr<RankGraph> lowerRank(const Graph& g, const Partition& p, int rank, const LowerOptions& opts) {
  if (rank < 0 || rank >= p.mesh.size()) return internalError("rank ", rank, " is not in mesh ", p.mesh.str());
  return RankLowering(g, p, rank, opts).run();
}

namespace {

// Whether `a`'s attributes are `b`'s, a Send's or Recv's peer `shift` further.
AttrsMatch peersShiftedBy(int64_t shift) {
  return [shift](const Node& a, const Node& b) {
    if (a.op() != OpKind::Send && a.op() != OpKind::Recv) return attrsEqual(a.attrs(), b.attrs());
    return attrsEqual(a.attrs(), b.attrs(), "peer") && a.attrs().has("peer") == b.attrs().has("peer") &&
           a.attrs().getInt("peer", 0) == b.attrs().getInt("peer", 0) + shift;
  };
}

void shiftPeers(Graph& g, int64_t shift) {
  for (Node* n : g.nodes()) {
    if ((n->op() == OpKind::Send || n->op() == OpKind::Recv) && n->attrs().has("peer"))
      n->attrs().set("peer", n->attrs().getInt("peer", 0) + shift);
    for (const auto& body : n->bodies()) shiftPeers(*body, shift);
  }
}

}  // namespace

int findReplicas(std::vector<RankGraph>& ranks, const Mesh& mesh) {
  int found = 0;
  for (RankGraph& rg : ranks) {
    rg.replicaOf = -1;
    if (mesh.coord(rg.rank, MeshAxis::kDP) == 0) continue;
    const int lead = mesh.rankOf(mesh.coord(rg.rank, MeshAxis::kPP), 0, mesh.coord(rg.rank, MeshAxis::kTP));
    if (lead < 0 || static_cast<size_t>(lead) >= ranks.size() || ranks[lead].rank != lead) continue;
    if (graphsIdentical(*rg.graph, *ranks[lead].graph, peersShiftedBy(rg.rank - lead))) {
      rg.replicaOf = lead;
      ++found;
    }
  }
  return found;
}

Status makeReplica(RankGraph& replica, const RankGraph& lead) {
  if (!lead.graph) return internalError("rank ", replica.rank, ": its lead, rank ", lead.rank, ", has no program");
  auto rebind = [&](Value*& v) -> Status {
    if (!v) return Status::OK();
    Value* to = lead.graph->findValue(v->name());
    if (!to) return internalError("rank ", replica.rank, ": value '", v->name(), "' is not in the program of rank ",
                                  lead.rank, " it runs");
    v = to;
    return Status::OK();
  };
  for (IoBind& b : replica.inputs) RETURN_IF_ERROR(rebind(b.value));
  for (IoBind& b : replica.outputs) RETURN_IF_ERROR(rebind(b.value));
  for (StateBind& sb : replica.states) {
    RETURN_IF_ERROR(rebind(sb.in));
    RETURN_IF_ERROR(rebind(sb.out));
  }
  replica.graph.reset();
  replica.replicaOf = lead.rank;
  return Status::OK();
}

const Graph& programOf(const std::vector<RankGraph>& ranks, const RankGraph& rg) {
  return rg.graph ? *rg.graph : *ranks.at(static_cast<size_t>(rg.replicaOf)).graph;
}

std::unique_ptr<Graph> replicaProgram(const Graph& lead, int shift) {
  std::unique_ptr<Graph> copy = lead.clone();
  shiftPeers(*copy, shift);
  return copy;
}

StatusOr<std::vector<RankGraph>> lowerToRanks(const Graph& g, const Partition& p, const LowerOptions& opts) {
  std::vector<RankGraph> out;
  for (int r = 0; r < p.mesh.size(); ++r) {
    ASSIGN_OR_RETURN(RankGraph rg, RankLowering(g, p, r, opts).run());
    out.push_back(std::move(rg));
  }
  return out;
}

}  // namespace pcc
