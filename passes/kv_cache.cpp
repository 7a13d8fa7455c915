#include "passes/kv_cache.h"

#include <algorithm>
#include <set>

#include "passes/rewrite/pattern.h"

namespace pcc {

namespace {

struct Found {
  Value* past = nullptr;
  Value* present = nullptr;
  Node* concat = nullptr;
  /// present = TensorScatter(Concat(past, zeros), new, start) (GroupQueryAttention
  /// imported): the scatter, whose input 1 is the new slice.
  Node* scatter = nullptr;
  std::vector<Node*> passThrough;  ///< Identity / one-input Concat between past and concat, past first
  int axis = -1;
};

/// \returns whether `n` passes its one input through unchanged.
bool passesThrough(const Node* n) {
  return n->inputs().size() == 1 && n->outputs().size() == 1 &&
         (n->op() == OpKind::Identity || n->op() == OpKind::Concat);
}

/// \returns the Concat that makes `pair`'s present from its past, checked.
StatusOr<Found> findConcat(const Graph& g, const KvCachePair& pair, const std::string& modelPath) {
  Found f;
  f.past = g.findValue(pair.past);
  f.present = g.findValue(pair.present);
  const auto& ins = g.inputs();
  const auto& outs = g.outputs();
  if (!f.past || std::find(ins.begin(), ins.end(), f.past) == ins.end())
    return invalidInput(modelPath, ": the cache input '", pair.past, "' is not a graph input after import");
  if (!f.present || std::find(outs.begin(), outs.end(), f.present) == outs.end())
    return invalidInput(modelPath, ": the cache output '", pair.present, "' is not a graph output after import");
  const TensorType& pt = f.past->type();
  const TensorType& qt = f.present->type();
  Node* n = f.present->producer();
  auto unrecognized = [&](const std::string& why) {
    return invalidInput(modelPath, ": cache layout not recognized: present '", pair.present, "' ", qt.str(),
                        n ? strCat(" is computed by ", n->describe()) : std::string(" has no producer"), "; ", why,
                        " (pcc expects present = Concat(past '", pair.past, "', new) along the sequence axis)");
  };
  if (pt.rank() != 4 || qt.rank() != 4 || pt.dtype != qt.dtype)
    return unrecognized(strCat("past is ", pt.str(), ": a 4-D [batch, heads, positions, head dim] cache of the "
                               "present's type is expected"));
  if (n && n->op() == OpKind::TensorScatter && n->inputs().size() == 3 && n->input(0) &&
      n->input(0)->producer() && n->input(0)->producer()->op() == OpKind::Concat &&
      n->input(0)->uses().size() == 1) {
    // The past grown by zero slots, the new slice written at each sequence's
    // own position (GroupQueryAttention as imported): the same cache write.
    Node* grown = n->input(0)->producer();
    const Value* zeros = grown->inputs().size() == 2 ? grown->input(1) : nullptr;
    int64_t axis = n->attrs().getInt("axis", -2), grownAxis = grown->attrs().getInt("axis", 0);
    if (axis < 0) axis += 4;
    if (grownAxis < 0) grownAxis += 4;
    if (!zeros || !isSplat(zeros, 0.0, 0.0) || n->attrs().getString("mode", "linear") != "linear" || grownAxis != axis ||
        zeros->type() != n->input(1)->type())
      return unrecognized("it is a TensorScatter into something other than the past grown by zero slots for the "
                          "new positions");
    f.scatter = n;
    n = grown;
  }
  if (!n || n->op() != OpKind::Concat || n->inputs().size() != 2)
    return unrecognized("it is not a Concat of the past and one new tensor, in that order");
  // Exporters may pass the past through an Identity or a one-input Concat first.
  const Value* first = n->input(0);
  while (first != f.past && first->producer() && passesThrough(first->producer()) && first->uses().size() == 1) {
    f.passThrough.insert(f.passThrough.begin(), first->producer());
    first = first->producer()->input(0);
  }
  if (first != f.past) return unrecognized("it is not a Concat of the past and one new tensor, in that order");
  int64_t axis = n->attrs().getInt("axis", 0);
  if (axis < 0) axis += 4;
  if (axis < 1 || axis > 3) return unrecognized(strCat("its axis ", axis, " is not a position axis"));
  const Value* fresh = f.scatter ? f.scatter->input(1) : n->input(1);
  for (int d = 0; d < 4; ++d)
    if (d != axis && (pt.shape[d] != qt.shape[d] || fresh->type().shape[d] != qt.shape[d]))
      return unrecognized(strCat("dim ", d, " differs between past, new and present"));
  if (f.past->uses().size() != 1) return unrecognized("the past is also read elsewhere");
  f.concat = n;
  f.axis = static_cast<int>(axis);
  return f;
}

}  // namespace

namespace {

StatusOr<std::vector<KvCacheState>> rewrite(Graph& g, const std::vector<KvCachePair>& pairs,
                                            const std::vector<KvCacheState>* decode, const std::string& modelPath) {
  if (pairs.empty()) return invalidInput(modelPath, ": no KV cache pairs to rewrite");
  if (decode && decode->size() != pairs.size())
    return internalError("kv cache: ", decode->size(), " decode states for ", pairs.size(), " pairs");
  std::vector<Found> found;
  for (const KvCachePair& p : pairs) {
    ASSIGN_OR_RETURN(Found f, findConcat(g, p, modelPath));
    found.push_back(f);
  }
  // Every check passed: rewrite.
  const int64_t batch = found.front().past->type().shape[0];
  if (g.findValue(kCachePositionInput))
    return invalidInput(modelPath, ": the model already has a value named '", kCachePositionInput, "'");
  Value* position = g.addInput(kCachePositionInput, {DType::kI64, {batch}});
  std::vector<KvCacheState> states;
  std::set<Value*> pasts, presents;
  std::vector<Value*> caches, written;
  for (size_t i = 0; i < found.size(); ++i) {
    Found& f = found[i];
    KvCacheState st;
    st.past = pairs[i].past;
    st.present = pairs[i].present;
    st.type = decode ? (*decode)[i].type : f.present->type();
    st.axis = f.axis;
    st.newAtPosition = f.scatter != nullptr;
    st.name = decode ? (*decode)[i].name : g.uniqueName(pairs[i].past + "/cache");
    if (decode && ((*decode)[i].axis != st.axis || (*decode)[i].newAtPosition != st.newAtPosition))
      return invalidInput(modelPath, ": prefill: the cache '", pairs[i].present,
                          "' is written differently than in the decode step");
    if (g.findValue(st.name))
      return invalidInput(modelPath, ": the model already has a value named '", st.name, "'");
    Value* cache = g.addInput(st.name, st.type);
    AttrMap attrs;
    attrs.set("axis", static_cast<int64_t>(f.axis));
    attrs.set("mode", std::string("linear"));
    Node* last = f.scatter ? f.scatter : f.concat;
    Value* fresh = f.scatter ? f.scatter->input(1) : f.concat->input(1);
    Node* w = g.addNode(OpKind::TensorScatter, {cache, fresh, position}, {st.type}, std::move(attrs), last->name(), {},
                        g.indexOf(last));
    Value* present = f.present;
    if (decode && !f.scatter) {
      // Prefill with a placeholder past: the attention keeps reading the
      // Concat of a zero slot and the new positions; the cache is written beside it.
      Value* zeros = g.addConstant(g.uniqueName(pairs[i].past + "/placeholder"), Tensor::zeros(f.past->type()));
      g.replaceAllUsesWith(f.past, zeros);
      if (!g.renameValue(present, g.uniqueName(pairs[i].present + "/prompt")))
        return internalError("kv cache: cannot rename '", pairs[i].present, "'");
    } else {
      g.replaceAllUsesWith(present, w->output());
      std::vector<Node*> dead;
      if (f.scatter) dead.push_back(f.scatter);
      dead.push_back(f.concat);
      dead.insert(dead.end(), f.passThrough.rbegin(), f.passThrough.rend());
      g.eraseNodes(dead);
    }
    if (!g.renameValue(w->output(), st.present))
      return internalError("kv cache: the name '", st.present, "' is still taken after the rewrite");
    pasts.insert(f.past);
    caches.push_back(cache);
    written.push_back(w->output());
    states.push_back(std::move(st));
  }
  // Inputs: the others in order, the position, the caches; outputs: the others, the caches.
  std::vector<Value*> ins;
  for (Value* v : g.inputs())
    if (!pasts.count(v) && v != position && std::find(caches.begin(), caches.end(), v) == caches.end())
      ins.push_back(v);
  ins.push_back(position);
  ins.insert(ins.end(), caches.begin(), caches.end());
  g.setInputs(std::move(ins));
  std::vector<Value*> outs;
  std::set<const Value*> replaced;  // the presents a prefill leaves in place, no outputs any more
  if (decode)
    for (const Found& f : found)
      if (!f.scatter) replaced.insert(f.present);
  for (Value* v : g.outputs())
    if (std::find(written.begin(), written.end(), v) == written.end() && !replaced.count(v)) outs.push_back(v);
  outs.insert(outs.end(), written.begin(), written.end());
  g.setOutputs(std::move(outs));
  return states;
}

}  // namespace

StatusOr<std::vector<KvCacheState>> rewriteKvCache(Graph& g, const std::vector<KvCachePair>& pairs,
                                                   const std::string& modelPath) {
  return rewrite(g, pairs, nullptr, modelPath);
}

StatusOr<int> limitPrefillAttention(Graph& g, int64_t keys) {
  int changed = 0;
  for (Node* n : g.nodes()) {
    if (n->op() != OpKind::Attention || n->inputs().size() != 4) continue;
    Value *k = n->input(1), *v = n->input(2), *m = n->input(3);
    auto written = [](const Value* x) { return x && x->producer() && x->producer()->op() == OpKind::TensorScatter; };
    if (!written(k) || !written(v) || !m || m->type().dtype != DType::kBool) continue;
    const Dims& ks = k->type().shape;
    if (ks.size() != 4 || ks[2] <= keys || v->type().rank() != 4 || v->type().shape[2] != ks[2] ||
        m->type().rank() != 4 || m->type().shape[3] != ks[2])
      continue;
    // Each Slice goes right before the Attention: its input is computed by then.
    auto first = [&](Value* x, int64_t axis, const char* what) -> StatusOr<Value*> {
      const std::string base = g.uniqueName(n->name() + "/" + what + "_prompt");
      std::vector<Value*> ins = {
          x, g.addConstant(g.uniqueName(base + "/starts"), Tensor::fromVector<int64_t>(DType::kI64, {1}, {0})),
          g.addConstant(g.uniqueName(base + "/ends"), Tensor::fromVector<int64_t>(DType::kI64, {1}, {keys})),
          g.addConstant(g.uniqueName(base + "/axes"), Tensor::fromVector<int64_t>(DType::kI64, {1}, {axis}))};
      ASSIGN_OR_RETURN(std::vector<TensorType> types, inferOutputTypes(OpKind::Slice, ins, {}, base));
      return g.addNode(OpKind::Slice, ins, types, {}, base, {}, g.indexOf(n))->output();
    };
    ASSIGN_OR_RETURN(Value* k2, first(k, 2, "keys"));
    ASSIGN_OR_RETURN(Value* v2, first(v, 2, "values"));
    // A mask compared from constant key positions (GroupQueryAttention's):
    // compare the first `keys` positions, a Slice of the constant that
    // constant folding computes once, rather than slicing each run's mask.
    Value* m2 = nullptr;
    if (const Node* cmp = m->producer();
        cmp && cmp->inputs().size() == 2 && (cmp->op() == OpKind::LessOrEqual || cmp->op() == OpKind::Less) &&
        cmp->input(0)->isConstant() && cmp->input(0)->type().rank() == 4 && cmp->input(0)->type().shape[3] == ks[2] &&
        cmp->input(1)->type().rank() == 4 && cmp->input(1)->type().shape[3] == 1) {
      ASSIGN_OR_RETURN(Value* cols, first(cmp->input(0), 3, "key_positions"));
      std::vector<Value*> ins = {cols, cmp->input(1)};
      const std::string base = g.uniqueName(n->name() + "/mask_prompt");
      ASSIGN_OR_RETURN(std::vector<TensorType> types, inferOutputTypes(cmp->op(), ins, {}, base));
      m2 = g.addNode(cmp->op(), ins, types, {}, base, {}, g.indexOf(n))->output();
    } else {
      ASSIGN_OR_RETURN(m2, first(m, 3, "mask"));
    }
    n->setInput(1, k2);
    n->setInput(2, v2);
    n->setInput(3, m2);
    ++changed;
  }
  return changed;
}

StatusOr<bool> lastPositionLogits(Graph& g, const std::string& logits) {
  Value* out = g.findValue(logits);
  Node* mm = out ? out->producer() : nullptr;
  if (!mm || mm->op() != OpKind::MatMul || mm->inputs().size() != 2) return false;
  Value* hidden = mm->input(0);
  Value* w = mm->input(1);
  const Dims& hs = hidden->type().shape;
  if (hs.size() != 3 || !w->isConstant() || w->type().rank() != 2 || out->type().rank() != 3) return false;
  if (g.users(hidden).size() != 1) return false;  // the positions' hidden states feed something else too
  if (g.findValue(kLastPositionInput))
    return invalidInput("the model already has a value named '", kLastPositionInput, "'");
  Value* at = g.addInput(kLastPositionInput, {DType::kI64, {hs[0], 1, hs[2]}});
  AttrMap a;
  a.set("axis", int64_t{1});
  const std::string name = g.uniqueName(mm->name() + "/last_position");
  std::vector<Value*> ins = {hidden, at};
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferOutputTypes(OpKind::GatherElements, ins, a, name));
  Node* gather = g.addNode(OpKind::GatherElements, ins, types, a, name, {}, g.indexOf(mm));
  mm->setInput(0, gather->output());
  ASSIGN_OR_RETURN(std::vector<TensorType> now, inferOutputTypes(OpKind::MatMul, mm->inputs(), mm->attrs(), mm->name()));
  out->setType(now[0]);
  // The input goes before pcc_cache_position and the caches (which the KV
  // cache rewrite put last), after the export's own inputs.
  std::vector<Value*> inputs = g.inputs();
  inputs.erase(std::find(inputs.begin(), inputs.end(), at));
  auto pos = std::find_if(inputs.begin(), inputs.end(), [](const Value* v) { return v->name() == kCachePositionInput; });
  inputs.insert(pos, at);
  g.setInputs(std::move(inputs));
  return true;
}

StatusOr<std::vector<KvCacheState>> rewriteKvCachePrefill(Graph& g, const std::vector<KvCachePair>& pairs,
                                                          const std::vector<KvCacheState>& decode,
                                                          const std::string& modelPath) {
  return rewrite(g, pairs, &decode, modelPath);
}

}  // namespace pcc
