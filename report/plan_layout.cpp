// The layout of a plan's model, from the plan alone.
//
// 1. Index the reference program: its kernels in order, the kernel writing
//    each buffer, the data edges, the kernels reading each model input and
//    writing each model output, and the kernels and value producers by name.
// 2. Match each rank program's kernels to reference kernels by node name (the
//    k-th of a name to the k-th of that name; a node a rewrite made, named
//    "<root>/<Op>", to the pattern's root) and keep the shape of output 0.
// 3. For each reference kernel, compare each rank's output shape with the
//    reference's: a smaller dimension is split over the mesh axis along which
//    the pieces add up to the whole (a line of ranks that differ only in that
//    axis' coordinate), over dp and tp together when only all the stage's
//    ranks add up to it, else over an unknown axis. When both axes add up
//    (dp = tp), the batch decides: the first such dimension of a kernel that
//    reads a model input split over dp is dp (unless another is), the rest tp.
// 4. Place each collective of the rank programs: the reference kernel (or
//    model input) whose value it reads, found by buffer name or else by its
//    writer's node name, and the reference kernels of the instructions that
//    read its result, or the model outputs it is bound to. Collectives alike in kind, axis, group and place are
//    merged across ranks; the edges they sit on are dropped.
#include "report/plan_layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "runtime/plan_convert.h"

namespace pcc {

namespace {

std::vector<int64_t> shapeOf(const plan::RankProgram& prog, int32_t buffer) {
  if (buffer < 0 || buffer >= prog.buffers_size()) return {};
  const auto& s = prog.buffers(buffer).desc().shape();
  return std::vector<int64_t>(s.begin(), s.end());
}

std::string kindName(plan::Instruction::Kind k) {
  std::string name = plan::Instruction::Kind_Name(k);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name;
}

// The reference program, indexed (step 1).
struct Reference {
  std::vector<int> kernelOf;                            // instruction -> kernel index, or -1
  std::map<std::string, std::vector<int>> kernelsByName;  // node name -> kernels, in order
  std::unordered_map<std::string, int> valueProducer;   // buffer name -> kernel writing it
  std::unordered_map<std::string, int> inputByName;     // buffer name -> model input index
  std::vector<bool> batchDependent;                     // kernel -> reads (through others) a split input
};

Reference indexReference(const plan::Plan& p, PlanLayout& out) {
  const plan::RankProgram& ref = p.reference();
  Reference r;
  std::vector<int> writer(ref.buffers_size(), -1);
  std::vector<int> inputOf(ref.buffers_size(), -1);
  // The model inputs some rank reads a slice of (the batch, split over dp).
  std::set<int> splitInputs;
  for (const plan::RankProgram& prog : p.ranks())
    for (const plan::IoBinding& b : prog.inputs())
      if (b.split_dim() >= 0) splitInputs.insert(b.index());
  std::vector<bool> dependent(ref.buffers_size(), false);
  out.inputConsumers.assign(p.inputs_size(), {});
  out.outputProducers.assign(p.outputs_size(), -1);
  for (const plan::IoBinding& b : ref.inputs()) {
    if (b.buffer() < 0 || b.buffer() >= ref.buffers_size() || b.index() < 0 || b.index() >= p.inputs_size()) continue;
    inputOf[b.buffer()] = b.index();
    r.inputByName.emplace(ref.buffers(b.buffer()).name(), b.index());
  }
  std::set<std::pair<int, int>> edges;
  r.kernelOf.assign(ref.instructions_size(), -1);
  for (int i = 0; i < ref.instructions_size(); ++i) {
    const plan::Instruction& ins = ref.instructions(i);
    if (ins.kind() != plan::Instruction::KERNEL) continue;
    int k = static_cast<int>(out.kernels.size());
    r.kernelOf[i] = k;
    KernelLayout kl;
    kl.op = ins.op();
    kl.node = ins.node();
    if (ins.outputs_size() > 0 && ins.outputs(0) >= 0 && ins.outputs(0) < ref.buffers_size()) {
      kl.type = fromDesc(ref.buffers(ins.outputs(0)).desc());
    }
    out.kernels.push_back(std::move(kl));
    r.kernelsByName[ins.node()].push_back(k);
    bool reads = false;
    for (int32_t id : ins.inputs()) {
      if (id < 0 || id >= ref.buffers_size()) continue;
      reads = reads || dependent[id] || (inputOf[id] >= 0 && splitInputs.count(inputOf[id]));
      if (writer[id] >= 0 && writer[id] != k) edges.insert({writer[id], k});
      if (inputOf[id] >= 0) {
        std::vector<int>& readers = out.inputConsumers[inputOf[id]];
        if (readers.empty() || readers.back() != k) readers.push_back(k);
      }
    }
    r.batchDependent.push_back(reads);
    for (int32_t id : ins.outputs()) {
      if (id < 0 || id >= ref.buffers_size()) continue;
      writer[id] = k;
      dependent[id] = reads;
      r.valueProducer[ref.buffers(id).name()] = k;
    }
  }
  for (const plan::IoBinding& b : ref.outputs())
    if (b.buffer() >= 0 && b.buffer() < ref.buffers_size() && b.index() >= 0 && b.index() < p.outputs_size())
      out.outputProducers[b.index()] = writer[b.buffer()];
  out.edges.assign(edges.begin(), edges.end());
  return r;
}

// Rank lines along each mesh axis: ranks whose coordinates differ only in
// that axis (mesh_coord is (pp, dp, tp)).
std::vector<std::vector<int>> linesAlong(const plan::Plan& p, int axis) {
  std::map<std::vector<int>, std::vector<int>> lines;
  for (const plan::RankProgram& r : p.ranks()) {
    if (r.mesh_coord_size() != 3) continue;
    std::vector<int> key(r.mesh_coord().begin(), r.mesh_coord().end());
    key[axis] = -1;
    lines[key].push_back(r.rank());
  }
  std::vector<std::vector<int>> out;
  for (auto& entry : lines)
    if (entry.second.size() >= 2) out.push_back(std::move(entry.second));
  return out;
}

// The ranks' output shapes of one kernel, and the mesh around them.
struct Pieces {
  const std::map<int, std::vector<int64_t>>& shapes;  // rank -> output 0 shape
  const std::vector<std::vector<int>>& dpLines;
  const std::vector<std::vector<int>>& tpLines;
  const std::map<int, int>& stageOf;

  // \returns true when along every line of `lines` whose ranks all run
  // the kernel (one at least) the pieces of dimension `d` add up to `extent`.
  bool cover(const std::vector<std::vector<int>>& lines, size_t d, int64_t extent) const {
    bool any = false;
    for (const std::vector<int>& line : lines) {
      int64_t sum = 0;
      bool all = true;
      for (int r : line) {
        auto it = shapes.find(r);
        if (it == shapes.end()) all = false;
        else sum += it->second[d];
      }
      if (!all) continue;
      if (sum != extent) return false;
      any = true;
    }
    return any;
  }
  // \returns true when the pieces of all the ranks of each stage add up to
  // `extent`: split over dp and tp at once.
  bool coverStages(size_t d, int64_t extent) const {
    std::map<int, int64_t> byStage;
    for (const auto& entry : shapes) byStage[stageOf.at(entry.first)] += entry.second[d];
    bool whole = !byStage.empty() && !dpLines.empty() && !tpLines.empty();
    for (const auto& entry : byStage) whole = whole && entry.second == extent;
    return whole;
  }
};

// Step 3 for one kernel. When the pieces add up along dp and along tp
// alike (dp and tp of one size, even pieces), shapes cannot tell the axes
// apart: the batch is split over dp, so the first such dimension of a kernel
// that reads the batch and has no other dp split is dp, the others tp.
void layOut(KernelLayout& k, const Pieces& pieces, bool batchDependent) {
  const auto& shapes = pieces.shapes;
  k.rankCount = static_cast<int>(shapes.size());
  if (shapes.empty()) {
    k.kind = KernelLayout::Kind::kAbsent;
    return;
  }
  k.stage = pieces.stageOf.at(shapes.begin()->first);
  for (const auto& entry : shapes) k.stage = std::min(k.stage, pieces.stageOf.at(entry.first));
  bool sameRank = std::all_of(shapes.begin(), shapes.end(),
                              [&](const auto& entry) { return entry.second.size() == k.type.shape.size(); });
  if (!sameRank) {  // a rank holds a tensor of another rank: no dimension to name
    k.splits.push_back({-1, "?", 0, 0});
    k.kind = KernelLayout::Kind::kSplit;
    return;
  }
  std::vector<size_t> ambiguous;  // indices into k.splits
  for (size_t d = 0; d < k.type.shape.size(); ++d) {
    int64_t extent = k.type.shape[d], largest = 0;
    bool differs = false;
    for (const auto& entry : shapes) {
      largest = std::max(largest, entry.second[d]);
      differs = differs || entry.second[d] != extent;
    }
    if (!differs) continue;
    bool dp = pieces.cover(pieces.dpLines, d, extent), tp = pieces.cover(pieces.tpLines, d, extent);
    std::string axis = dp && tp ? "" : dp ? "dp" : tp ? "tp" : pieces.coverStages(d, extent) ? "dp+tp" : "?";
    if (axis.empty()) ambiguous.push_back(k.splits.size());
    k.splits.push_back({static_cast<int>(d), axis, extent, largest});
  }
  bool dpSplit = false;
  for (const DimSplit& s : k.splits) dpSplit = dpSplit || s.axis == "dp" || s.axis == "dp+tp";
  for (size_t i : ambiguous) {
    k.splits[i].axis = batchDependent && !dpSplit ? "dp" : "tp";
    dpSplit = dpSplit || k.splits[i].axis == "dp";
  }
  k.kind = k.splits.empty() ? KernelLayout::Kind::kReplicated : KernelLayout::Kind::kSplit;
}

}  // namespace

std::string KernelLayout::layoutClass() const {
  if (kind == Kind::kAbsent) return "absent";
  if (kind == Kind::kReplicated) return "replicated";
  bool dp = false, tp = false, unknown = false;
  for (const DimSplit& s : splits) {
    dp = dp || s.axis == "dp" || s.axis == "dp+tp";
    tp = tp || s.axis == "tp" || s.axis == "dp+tp";
    unknown = unknown || s.axis == "?";
  }
  std::string out;
  for (auto [on, name] : {std::pair{dp, "dp"}, std::pair{tp, "tp"}, std::pair{unknown, "?"}})
    if (on) out += (out.empty() ? "" : "+") + std::string(name);
  return out;
}

PlanLayout planLayout(const plan::Plan& p) {
  PlanLayout out;
  Reference ref = indexReference(p, out);
  std::map<int, int> stageOf;
  std::set<int> stages;
  for (const plan::RankProgram& r : p.ranks()) {
    stageOf[r.rank()] = r.stage();
    stages.insert(r.stage());
  }
  out.stages.assign(stages.begin(), stages.end());

  // Step 2: rank instruction -> reference kernel, and each kernel's shapes by rank.
  std::vector<std::map<int, std::vector<int64_t>>> shapes(out.kernels.size());
  std::vector<std::vector<int>> matched(p.ranks_size());
  for (int ri = 0; ri < p.ranks_size(); ++ri) {
    const plan::RankProgram& prog = p.ranks(ri);
    std::map<std::string, size_t> seen;
    matched[ri].assign(prog.instructions_size(), -1);
    for (int i = 0; i < prog.instructions_size(); ++i) {
      const plan::Instruction& ins = prog.instructions(i);
      if (ins.kind() != plan::Instruction::KERNEL && ins.kind() != plan::Instruction::LAUNCH) continue;
      auto match = [&](std::string name, const std::string& op, std::vector<int64_t> shape) {
        // An op of a fused group's body is emitted as "<group>/fused/<node>"
        // (codegen/plan_emitter.cpp): it stands for <node>.
        size_t fused = name.rfind("/fused/");
        if (!ref.kernelsByName.count(name) && fused != std::string::npos) name = name.substr(fused + 7);
        // A rewrite names the node that replaces a pattern "<root>/<Op>" after
        // the pattern's root, whose value it computes.
        bool rewritten = false;
        size_t slash = name.rfind('/');
        if (!ref.kernelsByName.count(name) && slash != std::string::npos && slash > 0 &&
            ref.kernelsByName.count(name.substr(0, slash))) {
          name = name.substr(0, slash);
          rewritten = true;
        }
        auto it = ref.kernelsByName.find(name);
        size_t occurrence = seen[name]++;
        if (it == ref.kernelsByName.end() || occurrence >= it->second.size()) return;
        int k = it->second[occurrence];
        if (matched[ri][i] < 0) matched[ri][i] = k;  // a LAUNCH stands for its first node
        if (rewritten && out.kernels[k].fusedAs.empty()) out.kernels[k].fusedAs = op;
        shapes[k].emplace(prog.rank(), std::move(shape));
      };
      if (ins.kind() == plan::Instruction::LAUNCH) {
        // A generated kernel computes several source nodes (Instruction.computes).
        for (const plan::Computed& c : ins.computes())
          match(c.node(), ins.op(), std::vector<int64_t>(c.desc().shape().begin(), c.desc().shape().end()));
        continue;
      }
      match(ins.node(), ins.op(), ins.outputs_size() > 0 ? shapeOf(prog, ins.outputs(0)) : std::vector<int64_t>{});
    }
  }

  // Step 3.
  std::vector<std::vector<int>> dpLines = linesAlong(p, 1), tpLines = linesAlong(p, 2);
  for (size_t k = 0; k < out.kernels.size(); ++k)
    layOut(out.kernels[k], Pieces{shapes[k], dpLines, tpLines, stageOf}, ref.batchDependent[k]);

  // Step 4.
  using Key = std::tuple<std::string, std::string, int, int, int, std::vector<int>, std::vector<int>>;
  std::map<Key, size_t> siteOf;
  std::set<std::pair<int, int>> covered;
  for (int ri = 0; ri < p.ranks_size(); ++ri) {
    const plan::RankProgram& prog = p.ranks(ri);
    std::vector<int> lastWriter(prog.buffers_size(), -1);
    for (int i = 0; i < prog.instructions_size(); ++i) {
      const plan::Instruction& ins = prog.instructions(i);
      if (ins.kind() == plan::Instruction::FREE) continue;
      bool collective = ins.kind() != plan::Instruction::KERNEL && ins.kind() != plan::Instruction::LAUNCH;
      if (collective) {
        CollectiveSite s;
        s.kind = kindName(ins.kind());
        s.axis = "-";
        if (ins.kind() == plan::Instruction::SEND || ins.kind() == plan::Instruction::RECV) {
          s.groupSize = 2;
        } else if (ins.group() >= 0 && ins.group() < p.groups_size()) {
          s.axis = p.groups(ins.group()).axis();
          s.groupSize = p.groups(ins.group()).ranks_size();
        }
        int32_t in = ins.inputs_size() > 0 ? ins.inputs(0) : -1;
        if (in >= 0 && in < prog.buffers_size()) {
          const plan::Buffer& b = prog.buffers(in);
          s.bytes = static_cast<int64_t>(fromDesc(b.desc()).bytes());
          if (auto it = ref.valueProducer.find(b.name()); it != ref.valueProducer.end()) s.producer = it->second;
          else if (auto jt = ref.inputByName.find(b.name()); jt != ref.inputByName.end()) s.input = jt->second;
          else if (lastWriter[in] >= 0) s.producer = matched[ri][lastWriter[in]];
        }
        // Readers of the result until another collective rewrites it.
        int32_t result = ins.outputs_size() > 0 ? ins.outputs(0) : in;
        std::set<int> readers;
        for (int j = i + 1; j < prog.instructions_size() && result >= 0; ++j) {
          const plan::Instruction& next = prog.instructions(j);
          if (next.kind() == plan::Instruction::FREE) continue;
          bool reads = std::find(next.inputs().begin(), next.inputs().end(), result) != next.inputs().end();
          bool kernel = next.kind() == plan::Instruction::KERNEL || next.kind() == plan::Instruction::LAUNCH;
          if (reads && kernel && matched[ri][j] >= 0) readers.insert(matched[ri][j]);
          if (std::find(next.outputs().begin(), next.outputs().end(), result) != next.outputs().end()) break;
        }
        s.consumers.assign(readers.begin(), readers.end());
        std::set<int> outputs;
        for (const plan::IoBinding& b : prog.outputs())
          if (b.buffer() == result && b.index() >= 0 && b.index() < p.outputs_size()) outputs.insert(b.index());
        s.outputs.assign(outputs.begin(), outputs.end());
        s.stage = prog.stage();
        s.node = ins.node();
        Key key{s.kind, s.axis, s.groupSize, s.producer, s.input, s.consumers, s.outputs};
        auto [it, fresh] = siteOf.emplace(key, out.collectives.size());
        if (fresh) {
          for (int c : s.consumers) {
            if (s.producer >= 0) covered.insert({s.producer, c});
            if (s.input >= 0) std::erase(out.inputConsumers[s.input], c);
          }
          for (int o : s.outputs)
            if (s.producer >= 0 && out.outputProducers[o] == s.producer) out.outputProducers[o] = -1;
          out.collectives.push_back(std::move(s));
        }
        CollectiveSite& site = out.collectives[it->second];
        site.bytes = std::max(site.bytes, s.bytes);
        site.stage = std::min(site.stage, s.stage);
        ++site.rankCount;
      }
      for (int32_t id : ins.outputs())
        if (id >= 0 && id < prog.buffers_size() && !collective) lastWriter[id] = i;
    }
  }
  std::vector<std::pair<int, int>> kept;
  for (const auto& e : out.edges)
    if (!covered.count(e)) kept.push_back(e);
  out.edges = std::move(kept);
  return out;
}

}  // namespace pcc
