// Sharding propagation: data parallelism over the batch and Megatron-style
// tensor parallelism for MatMul/Gemm chains.
//
// Algorithm:
//  1. Choose the mesh: tp and pp as requested, dp = the rest of --gpus; dp is
//     capped by the batch (leading dimension of the inputs), so a batch smaller
//     than the device count uses fewer ranks.
//  2. Split every graph input whose leading dimension is the batch over dp.
//  3. Tensor parallelism: walk the MatMul/Gemm nodes with constant 2-D weights
//     in order; one whose output reaches exactly one other such node through
//     elementwise ops only (the MLP pattern) becomes a pair: the first weight is
//     split by columns over tp, the second then reads a split K and is split by
//     rows, making its output a partial sum (one all-reduce).
//  4. In topological order, derive each node's output sharding from its
//     inputs' shardings through the op's dimension map (dim_map.h): a split
//     input dimension linked to an output dimension keeps it split, a split
//     contraction dimension on both sides makes the output partial. An op that
//     Ops.def marks Replicate links nothing (its split inputs are gathered, and
//     a note says so). Each input then gets the layout the node needs;
//     constants follow for free (they are sliced offline), activations are
//     converted at lowering.
// Before step 1, every Fused node (passes/fuse.cpp) is inlined: its body's
// ops take its place, so each shards by its own row of the op table and a
// group never straddles a split the partitioner decides (a row-parallel
// MatMul's partial sum is all-reduced before its bias add). The driver fuses
// the rank programs after lowering instead (docs/partitioning.md#fusion).
#include "passes/partition/partitioner.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>

#include "compiler/ir/regions.h"
#include "passes/partition/dim_map.h"

namespace pcc {

namespace {

using Hints = std::map<std::pair<const Node*, size_t>, Sharding>;

Sharding replicated(size_t rank) { return Sharding{std::vector<MeshAxis>(rank, MeshAxis::kNone), MeshAxis::kNone}; }

bool isWeightMatmul(const Node* n) {
  if (n->op() != OpKind::MatMul && n->op() != OpKind::Gemm) return false;
  Value* w = n->input(1);
  return w && w->isConstant() && w->type().rank() == 2 && n->input(0) && !n->input(0)->isConstant() &&
         (n->op() == OpKind::MatMul || n->attrs().getInt("transA", 0) == 0);
}

// Column dimension (N) of a weight-matmul's weight.
int weightColumnDim(const Node* n) {
  return n->op() == OpKind::Gemm && n->attrs().getInt("transB", 0) ? 0 : 1;
}

// Step 3: \returns the row-split partner of column-split candidate `first`, or
// nullptr when the values between them are not purely elementwise. `order`
// gives each node's position in the topological order.
const Node* findRowPartner(const Graph& g, const Node* first, const std::unordered_map<const Node*, size_t>& order) {
  // The readers of the region are visited in topological order (a min-heap on
  // their positions, fed from the use lists): every producer precedes its
  // readers, so when a node is reached, whether each of its inputs is in the
  // region is final. The walk costs the region's uses, not the graph.
  std::set<const Value*> region = {first->output()};
  std::set<const Value*> graphOutputs(g.outputs().begin(), g.outputs().end());
  using Item = std::pair<size_t, const Node*>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> todo;
  std::set<const Node*> queued;
  auto enqueueReaders = [&](const Value* v) {
    for (const Node* u : v->uses())
      if (queued.insert(u).second) todo.push({order.at(u), u});
  };
  enqueueReaders(first->output());
  const Node* partner = nullptr;
  while (!todo.empty()) {
    const Node* u = todo.top().second;
    todo.pop();
    if (isWeightMatmul(u) && region.count(u->input(0)) && !region.count(u->input(1))) {
      if (partner) return nullptr;
      partner = u;
      continue;
    }
    if (!isElementwiseOp(u->op())) return nullptr;
    for (Value* in : u->inputs())
      if (in && !in->isConstant() && !region.count(in)) return nullptr;
    for (Value* o : u->outputs()) {
      region.insert(o);
      enqueueReaders(o);
    }
  }
  // Nothing but the partner may read the region from outside, nor may the
  // graph return a value of it.
  for (const Value* v : region) {
    if (graphOutputs.count(v)) return nullptr;
    for (Node* u : g.users(v))
      if (u != partner && !region.count(u->output())) return nullptr;
  }
  return partner;
}

void planTensorParallel(const Graph& g, int tp, Hints& hints, Partition& p) {
  std::set<const Node*> used;
  std::vector<Node*> nodes = g.nodes();
  std::unordered_map<const Node*, size_t> order;
  for (size_t i = 0; i < nodes.size(); ++i) order[nodes[i]] = i;
  for (const Node* n : nodes) {
    if (!isWeightMatmul(n) || used.count(n)) continue;
    const Node* partner = findRowPartner(g, n, order);
    if (!partner || used.count(partner)) continue;
    int col = weightColumnDim(n);
    if (n->input(1)->type().shape[col] % tp != 0) continue;
    Sharding s = replicated(2);
    s.dims[col] = MeshAxis::kTP;
    hints[{n, 1}] = s;
    used.insert(n);
    used.insert(partner);
    p.tensorParallelPairs.push_back(strCat("column '", n->name(), "' -> row '", partner->name(), "'"));
  }
}

// Step 4 for one node.
// `gathered` counts, per op, the nodes marked Replicate whose inputs arrive split.
void propagateNode(Node* n, const Mesh& mesh, const Hints& hints, Partition& p,
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

  // What each input proposes: activations their own layout, hinted weights the
  // hint; other constants follow whatever the node decides.
  std::vector<std::optional<Sharding>> cur(n->inputs().size());
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    Value* v = n->input(i);
    if (!v) continue;
    auto h = hints.find({n, i});
    if (h != hints.end()) cur[i] = h->second;
    else if (!v->isConstant()) cur[i] = v->sharding().value_or(replicated(v->type().shape.size()));
  }
  if (opInfo(n->op()).shard == ShardRule::kReplicate &&
      std::any_of(cur.begin(), cur.end(), [](const auto& s) { return s && !s->isReplicated(); }))
    ++gathered[n->op()];
  auto linkHolds = [&](size_t i, size_t d, const DimLink& l, MeshAxis a) {
    if (!l.factor) return true;
    int parts = mesh.extent(a);
    return n->input(i)->type().shape[d] % parts == 0 && outShape[l.outDim] % parts == 0;
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
  if (m.pp > 1) return unsupported("pipeline parallelism (pp=", m.pp, ") is not implemented yet");
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
  return m;
}

}  // namespace

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
  for (Value* v : g.constants()) v->setSharding(replicated(v->type().shape.size()));
  int64_t batch = -1;
  for (Value* in : g.inputs()) {
    Sharding s = replicated(in->type().shape.size());
    if (in->type().rank() >= 1) {
      if (batch < 0) batch = in->type().shape[0];
      if (p.mesh.dp > 1 && in->type().shape[0] == batch) s.dims[0] = MeshAxis::kDP;
    }
    in->setSharding(s);
  }
  Hints hints;
  if (p.mesh.tp > 1) {
    planTensorParallel(g, p.mesh.tp, hints, p);
    if (p.tensorParallelPairs.empty())
      p.notes.push_back(strCat("tp=", p.mesh.tp,
                               ": no MatMul/Gemm chain to split; each tp group computes replicated"));
  }
  std::map<OpKind, int> gathered;
  for (Node* n : g.nodes()) propagateNode(n, p.mesh, hints, p, gathered);
  for (const auto& [op, count] : gathered)
    p.notes.push_back(strCat(count, " ", opName(op), count == 1 ? " node runs" : " nodes run",
                             " replicated (Ops.def marks ", opName(op), " Replicate): ",
                             count == 1 ? "its" : "their", " split inputs are gathered first"));
  return p;
}

}  // namespace pcc
