// Sharding propagation: data parallelism over the batch, then tensor
// parallelism chosen per op by the cost model (tp_search.h).
//
// Algorithm:
//  1. Choose the mesh: tp and pp as requested, dp = the rest of --gpus; dp is
//     capped by the batch (leading dimension of the inputs), so a batch smaller
//     than the device count uses fewer ranks.
//  2. Split every graph input whose leading dimension is the batch over dp.
//  3. In topological order, derive each node's output sharding from its
//     inputs' shardings through the op's dimension map (dim_map.h): a split
//     input dimension linked to an output dimension keeps it split, a split
//     contraction dimension on both sides makes the output partial. An op that
//     Ops.def marks Replicate links nothing (its split inputs are gathered, and
//     a note says so). Each input then gets the layout the node needs;
//     constants follow for free (they are sliced offline), activations are
//     converted at lowering.
//  4. Tensor parallelism (tp > 1): the search of tp_search.cpp chooses, for
//     every node, whether the tp ranks replicate it, split one of its output
//     dimensions, or split one of its contractions (a partial sum), by dynamic
//     programming over the graph with the cost of every resharding it implies;
//     its choices are laid over the data-parallel layouts of step 3.
//  5. Pipeline parallelism (pp > 1): the nodes are cut into pp stages
//     (pipeline.h).
// Micro-batches: every shape is one micro-batch's; the batch is split over
// dp · microbatches as if each micro-batch were a replica of its own
// (Partition::shapeMesh), run later in time on the same ranks.
// After step 1, with tp > 1, fused projections read by a Split are split into
// one product per piece (split_projections.h).
// Before step 1, every Fused node (passes/fuse.cpp) is inlined: its body's
// ops take its place, so each shards by its own row of the op table and a
// group never straddles a split the partitioner decides (a row-parallel
// MatMul's partial sum is all-reduced before its bias add). The driver fuses
// the rank programs after lowering instead (docs/partitioning.md#fusion).
#include "passes/partition/partitioner.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>

#include "compiler/ir/regions.h"
#include "passes/partition/cost_model.h"
#include "passes/partition/dim_map.h"
#include "passes/partition/pipeline.h"
#include "passes/partition/split_projections.h"
#include "passes/partition/tp_search.h"

namespace pcc {

namespace {

Sharding replicated(size_t rank) { return Sharding{std::vector<MeshAxis>(rank, MeshAxis::kNone), MeshAxis::kNone}; }

// Step 3 for one node.
// `gathered` counts, per op, the nodes marked Replicate whose inputs arrive split.
void propagateNode(Node* n, const Mesh& mesh, Partition& p,
                   std::map<OpKind, int>& gathered) {
  // Region nodes (If, Loop, Scan) run whole on every rank: every input is
  // gathered to replicated, every output is replicated.
  if (isRegionOp(n->op())) {
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (Value* v = n->input(i)) p.inputSharding[{n, i}] = replicated(v->type().shape.size());
    for (Value* o : n->outputs()) o->setSharding(replicated(o->type().shape.size()));
    return;
  }
  OpDimMap map = dimMapFor(*n);
  const Dims& outShape = n->output()->type().shape;
  size_t outRank = outShape.size();
  std::vector<MeshAxis> outDims(outRank, MeshAxis::kNone);
  MeshAxis partial = MeshAxis::kNone;
  std::set<MeshAxis> used;

  // What each input proposes: activations their own layout; constants follow
  // whatever the node decides.
  std::vector<std::optional<Sharding>> cur(n->inputs().size());
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    Value* v = n->input(i);
    if (!v) continue;
    if (!v->isConstant()) cur[i] = v->sharding().value_or(replicated(v->type().shape.size()));
  }
  if (opInfo(n->op()).shard == ShardRule::kReplicate &&
      std::any_of(cur.begin(), cur.end(), [](const auto& s) { return s && !s->isReplicated(); }))
    ++gathered[n->op()];
  auto linkHolds = [&](size_t i, size_t d, const DimLink& l, MeshAxis a) {
    if (!l.factor) return true;
    int parts = mesh.extent(a);
    return (n->input(i)->type().shape[d] / l.granule) % parts == 0 && outShape[l.outDim] % parts == 0;
  };
  for (size_t i = 0; i < cur.size(); ++i) {
    if (!cur[i]) continue;
    for (size_t d = 0; d < cur[i]->dims.size() && d < map.links[i].size(); ++d) {
      MeshAxis a = cur[i]->dims[d];
      const DimLink& l = map.links[i][d];
      if (a == MeshAxis::kNone || l.outDim < 0 || used.count(a) || !linkHolds(i, d, l, a)) continue;
      if (outDims[l.outDim] == MeshAxis::kNone) {
        outDims[l.outDim] = a;
        used.insert(a);
      }
    }
  }
  for (const auto& c : map.contractions) {
    auto axisOf = [&](int in, int dim) {
      return cur[in] ? cur[in]->dims[dim] : MeshAxis::kNone;
    };
    MeshAxis a = axisOf(c.inA, c.dimA), b = axisOf(c.inB, c.dimB);
    bool bFollows = !cur[c.inB], aFollows = !cur[c.inA];
    if (a != MeshAxis::kNone && (b == a || bFollows) && !used.count(a)) partial = a;
    else if (b != MeshAxis::kNone && aFollows && !used.count(b)) partial = b;
  }

  // The layout each input must have for this node.
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    Value* v = n->input(i);
    if (!v) continue;
    Sharding req = replicated(v->type().shape.size());
    for (size_t d = 0; d < req.dims.size() && d < map.links[i].size(); ++d) {
      const DimLink& l = map.links[i][d];
      if (l.outDim >= 0 && outDims[l.outDim] != MeshAxis::kNone && linkHolds(i, d, l, outDims[l.outDim]))
        req.dims[d] = outDims[l.outDim];
    }
    for (const auto& c : map.contractions) {
      if (partial == MeshAxis::kNone) continue;
      if (static_cast<size_t>(c.inA) == i) req.dims[c.dimA] = partial;
      if (static_cast<size_t>(c.inB) == i) req.dims[c.dimB] = partial;
    }
    p.inputSharding[{n, i}] = req;
  }
  for (Value* o : n->outputs()) {
    Sharding s{outDims, partial};
    s.dims.resize(o->type().shape.size(), MeshAxis::kNone);
    o->setSharding(s);
  }
}

StatusOr<Mesh> chooseMesh(const Graph& g, const PartitionOptions& opts, Partition& p) {
  if (opts.gpus < 1) return invalidInput("--gpus must be at least 1 (got ", opts.gpus, ")");
  Mesh m;
  m.pp = opts.pp > 0 ? opts.pp : 1;
  m.tp = opts.tp > 0 ? opts.tp : 1;
  if (opts.gpus % (m.pp * m.tp) != 0)
    return invalidInput("--strategy tp=", m.tp, ",pp=", m.pp, " does not divide --gpus ", opts.gpus);
  int dpMax = opts.gpus / (m.pp * m.tp);
  m.dp = opts.dp > 0 ? opts.dp : dpMax;
  if (m.dp * m.tp * m.pp != opts.gpus)
    return invalidInput("--strategy dp=", m.dp, ",tp=", m.tp, ",pp=", m.pp, " uses ", m.dp * m.tp * m.pp,
                        " devices but --gpus is ", opts.gpus);
  int64_t batch = -1;
  for (Value* in : g.inputs())
    if (in->type().rank() >= 1) { batch = in->type().shape[0]; break; }
  if (m.dp > 1 && batch >= 1 && batch < m.dp) {
    p.notes.push_back(strCat("batch ", batch, " is smaller than dp=", m.dp, ": using dp=", batch, " (",
                             batch * m.tp * m.pp, " of ", opts.gpus, " devices)"));
    m.dp = static_cast<int>(batch);
  } else if (m.dp > 1 && batch < 1) {
    p.notes.push_back("no input has a batch dimension: data parallelism disabled");
    m.dp = 1;
  }
  if (m.dp > 1 && batch % m.dp != 0)
    p.notes.push_back(strCat("batch ", batch, " does not divide by dp=", m.dp, ": ranks get ",
                             chunkSize(batch, m.dp, 0), " or ", chunkSize(batch, m.dp, m.dp - 1), " samples"));
  p.microbatches = std::max(1, opts.microbatches);
  if (p.microbatches > 1) {
    if (batch < 1) return invalidInput("--microbatches ", p.microbatches, ": no input has a batch dimension to cut");
    if (batch % (static_cast<int64_t>(m.dp) * p.microbatches) != 0)
      return invalidInput("--microbatches ", p.microbatches, ": the batch ", batch, " does not divide into dp=", m.dp,
                          " replicas of ", p.microbatches, " equal micro-batches");
  }
  return m;
}

// Step 4.
// `key`: what the tp search's result depends on besides the graph
// (PartitionOptions::tpCache).
Status planTensorParallel(Graph& g, const PartitionOptions& opts, const CostModel* cm, Partition& p,
                          const std::tuple<int, int, bool>& key) {
  TpSearchOptions so;
  so.cost = cm;
  so.minimizeWeights = opts.minimizeWeights;
  so.states = opts.states;
  so.pinned = opts.pinnedTp;
  so.fold = opts.foldRepeats;
  TpSearchResult r;
  if (auto it = opts.tpCache ? opts.tpCache->results.find(key) : decltype(opts.tpCache->results)::iterator{};
      opts.tpCache && it != opts.tpCache->results.end() && it->second.choices.size() == g.numNodes()) {
    r = it->second;
  } else {
    ASSIGN_OR_RETURN(r, searchTensorParallel(g, p, so));
    if (opts.tpCache) opts.tpCache->results[key] = r;
  }
  applyTpChoices(g, p, r.choices);
  {
    std::vector<Node*> all = g.nodes();
    for (size_t i = 0; i < all.size() && i < r.choices.size(); ++i) p.tpChoices[partitionKey(*all[i])] = r.choices[i];
  }
  p.tpSeconds = r.cost.seconds;
  p.tpWeightBytes = r.cost.weightBytes;
  p.tpExact = r.exact;
  p.tpFoldedBlocks = r.foldedBlocks;
  p.tpBlockNodes = r.blockNodes;
  p.tpRepeats = r.repeats;
  std::vector<Node*> nodes = g.nodes();
  std::map<std::string, int> counts;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (r.choices[i].kind == TpChoice::kReplicate) continue;
    const Node* n = nodes[i];
    const std::string& label = n->name().empty() && !n->outputs().empty() ? n->output()->name() : n->name();
    p.tensorParallel.push_back(strCat(opName(n->op()), " '", label, "': ", tpChoiceName(r.choices[i])));
    ++counts[strCat(opName(nodes[i]->op()), r.choices[i].kind == TpChoice::kContract ? " (partial sums)" : "")];
  }
  if (p.tensorParallel.empty()) {
    p.notes.push_back(strCat("tp=", p.mesh.tp, ": the cost model splits no op over tp (",
                             opts.minimizeWeights ? "no weight divides evenly" : "splitting costs more than it saves",
                             "); each tp group computes replicated"));
  } else {
    std::string what;
    for (const auto& [op, count] : counts) what += strCat(what.empty() ? "" : ", ", count, " ", op);
    p.notes.push_back(strCat("tp=", p.mesh.tp, " splits ", p.tensorParallel.size(), " of ", nodes.size(),
                             " nodes (", what, "); the other ", nodes.size() - p.tensorParallel.size(),
                             " replicate over tp", r.exact ? "" : " (search capped: not proven optimal)"));
  }
  if (r.foldedBlocks > 0)
    p.notes.push_back(strCat("the tp search found ", r.repeats, " repeats of a block of ", r.blockNodes,
                             " nodes and took ", r.foldedBlocks, " of them from the blocks before, unsearched "
                             "(docs/cost-model.md#repeated-blocks)"));
  return Status::OK();
}

// Each state input takes the layout its writer gives the state output, so
// that every rank reads and writes its own piece in place.
Status placeStates(Graph& g, const PartitionOptions& opts, Partition& p) {
  p.states = opts.states;
  for (const auto& [inName, outName] : opts.states) {
    Value* in = g.findValue(inName);
    Value* out = g.findValue(outName);
    Node* w = out ? out->producer() : nullptr;
    if (!in || !w || w->op() != OpKind::TensorScatter || w->input(0) != in)
      return internalError("state '", inName, "' -> '", outName, "' is not written by a TensorScatter of its input");
    Sharding s = *out->sharding();
    if (s.partial != MeshAxis::kNone)
      return internalError("state '", outName, "' would be a partial sum: ", s.str());
    in->setSharding(s);
    p.inputSharding[{w, 0}] = s;
  }
  if (p.mesh.tp > 1 && !opts.states.empty()) {
    size_t whole = 0;
    const Value* first = nullptr;
    for (const auto& [inName, outName] : opts.states) {
      const Value* v = g.findValue(inName);
      if (std::count(v->sharding()->dims.begin(), v->sharding()->dims.end(), MeshAxis::kTP) == 0 && !whole++)
        first = v;
    }
    if (whole) {
      const Dims& d = first->type().shape;
      const bool divides = d[0] % p.mesh.tp == 0 || d[1] % p.mesh.tp == 0;
      p.notes.push_back(strCat(
          whole, " of ", opts.states.size(), " KV cache tensors are whole on every tp rank (", first->name(), " ",
          first->type().str(), "): ",
          divides ? strCat("splitting them costs more time than it saves (a forced --strategy tp=", p.mesh.tp,
                           " saves their memory first)")
                  : strCat("neither their ", d[1], " kv heads nor their ", d[0], " sequences divide by tp=", p.mesh.tp,
                           ", so every tp rank holds all the kv heads")));
    }
  }
  return Status::OK();
}

}  // namespace

std::string partitionKey(const Node& n) {
  // Node names repeat (an importer's expansion names its nodes after the
  // op it expands); value names do not.
  return strCat(opName(n.op()), " ", n.outputs().empty() ? n.name() : n.output()->name());
}

Status inlineFusedNodes(Graph& g) {
  std::vector<Node*> fused;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::Fused) fused.push_back(n);
  if (fused.empty()) return Status::OK();
  std::vector<std::pair<Value*, std::string>> renames;
  for (Node* n : fused) {
    n->setName("");  // the body's nodes keep their own names
    ASSIGN_OR_RETURN(std::vector<Value*> results, inlineBody(g, n, 0, n->inputs()));
    for (size_t i = 0; i < results.size(); ++i) {
      g.replaceAllUsesWith(n->output(i), results[i]);
      renames.emplace_back(results[i], n->output(i)->name());
    }
  }
  g.eraseNodes(fused);
  for (const auto& r : renames)
    if (!g.renameValue(r.first, r.second))
      return internalError("inlining fused nodes: value name ", r.second, " is taken");
  return Status::OK();
}

StatusOr<Partition> partitionGraph(Graph& g, const PartitionOptions& opts) {
  Partition p;
  RETURN_IF_ERROR(inlineFusedNodes(g));
  ASSIGN_OR_RETURN(p.mesh, chooseMesh(g, opts, p));
  std::optional<CostModel> fallback;
  const CostModel* cm = opts.cost;
  if (!cm) {
    ASSIGN_OR_RETURN(ClusterSpec spec, builtinClusterSpec("h100"));
    fallback.emplace(std::move(spec));
    cm = &*fallback;
  }
  const Mesh shapes = p.shapeMesh();
  if (p.mesh.tp > 1 && opts.tensorParallelSearch) {
    ASSIGN_OR_RETURN(int split, splitFusedProjections(g));
    if (split > 0)
      p.notes.push_back(strCat(split, " fused projection", split == 1 ? " read by a Split was" : "s read by a Split were",
                               " split into one product per piece, so that each piece can split over tp"));
  }
  for (Value* v : g.constants()) v->setSharding(replicated(v->type().shape.size()));
  int64_t batch = -1;
  for (Value* in : g.inputs()) {
    Sharding s = replicated(in->type().shape.size());
    if (in->type().rank() >= 1) {
      if (batch < 0) batch = in->type().shape[0];
      if (shapes.dp > 1 && in->type().shape[0] == batch) s.dims[0] = MeshAxis::kDP;
    }
    in->setSharding(s);
  }
  std::map<OpKind, int> gathered;
  for (Node* n : g.nodes()) propagateNode(n, shapes, p, gathered);
  for (const auto& [op, count] : gathered)
    p.notes.push_back(strCat(count, " ", opName(op), count == 1 ? " node runs" : " nodes run",
                             " replicated (Ops.def marks ", opName(op), " Replicate): ",
                             count == 1 ? "its" : "their", " split inputs are gathered first"));
  auto seconds = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  };
  // What the tp search and the stage costs depend on besides the graph (the
  // candidates of one dp · micro-batches × tp share them).
  const std::tuple<int, int, bool> shared{p.shapeMesh().dp, p.mesh.tp, opts.minimizeWeights};
  auto start = std::chrono::steady_clock::now();
  if (p.mesh.tp > 1 && opts.tensorParallelSearch) RETURN_IF_ERROR(planTensorParallel(g, opts, cm, p, shared));
  p.tpSearchSeconds = seconds(start);
  RETURN_IF_ERROR(placeStates(g, opts, p));
  start = std::chrono::steady_clock::now();
  if (p.mesh.pp > 1)
    RETURN_IF_ERROR(opts.pinnedStages ? followStages(g, p, *cm, *opts.pinnedStages)
                                      : cutStages(g, p, *cm, opts.stageCache, shared));
  p.stageCutSeconds = seconds(start);
  return p;
}

}  // namespace pcc
