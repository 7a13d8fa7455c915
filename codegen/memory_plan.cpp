// Memory planning of one rank program: greedy by size over buffer lifetimes,
// the approach of TFLite's arena planner and ONNX Runtime's memory pattern
// planner, on the program's instruction list.
//
// 1. The arena holds every buffer that is not a weight, a model input or a
//    model output (those have memory of their own: the mapped weight file, the
//    caller's input tensors, the tensors the run hands back).
// 2. Each arena buffer's lifetime is [first instruction that writes it, last
//    instruction that reads or writes it] in program order; FREE instructions
//    are not uses. A buffer read before any instruction writes it is an error.
//    The input of an ALL_GATHER, REDUCE_SCATTER or ALL_TO_ALL is still read
//    by the communicator while the operation is in flight, which lasts until
//    the first instruction that reads its output (runtime/executor.cpp, wait
//    rule): its lifetime reaches the last instruction before that reader, so
//    no instruction run meanwhile (the overlap scheduler puts independent
//    ones there, passes/schedule.h) is given its bytes and has to wait for
//    it. An ALL_REDUCE works on a copy in its output: its input dies at it.
// 3. In place: a kernel whose op the predicate accepts (elementwise ops, and
//    ops that only rename the input's bytes such as Reshape), whose input 0 is
//    an arena buffer of the output's dtype and element count and dies at this
//    instruction (its lifetime ends there), writes output 0 over input 0. The
//    two join one block whose lifetime is the union of theirs; a chain of such
//    ops (Add -> Relu -> Reshape -> Mul) shares one block.
// 4. Blocks are sorted by size, largest first (ties: earlier start, then lower
//    buffer id, so plans are deterministic). Each is placed at the lowest
//    64-byte aligned offset where it overlaps no already placed block whose
//    lifetime intersects its own (first fit over those blocks sorted by
//    offset). Zero-byte buffers get offset 0 and occupy nothing.
// 5. The arena size is the highest end of a placed block; the naive figure is
//    the sum of the arena buffers' rounded sizes.
#include "codegen/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "compiler/ir/ir.h"
#include "runtime/ops/registry.h"
#include "runtime/plan_convert.h"

namespace pcc {

bool opMayRunInPlace(std::string_view op) {
  std::optional<OpKind> k = opFromName(op);
  if (!k) return false;
  if (isElementwiseOp(*k)) return true;
  const KernelEntry* s = referenceKernel(*k);
  return opClass(*k) == OpClass::kInjective && s && s->viewOfInput0;
}

namespace {

uint64_t alignUp(uint64_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

/// Same dtype and element count: the output can take the input's bytes.
bool sameBytes(const TensorType& a, const TensorType& b) { return a.dtype == b.dtype && a.numel() == b.numel(); }

struct Block {
  int root = -1;          // buffer index that opened the block
  uint64_t size = 0;      // rounded bytes
  int start = 0, end = 0; // lifetime, instruction indices (inclusive)
  uint64_t offset = 0;
};

}  // namespace

StatusOr<MemoryPlanStats> planMemory(plan::RankProgram* prog, const InPlacePredicate& inPlaceOk) {
  const int nb = prog->buffers_size();
  // Buffer ids are indices in every plan pcc writes; anything else is a bug here.
  for (int i = 0; i < nb; ++i)
    if (prog->buffers(i).id() != i)
      return internalError("rank ", prog->rank(), ": buffer ", i, " has id ", prog->buffers(i).id());
  auto valid = [&](int id) { return id >= 0 && id < nb; };

  // Step 1: which buffers live in the arena.
  std::vector<bool> inArena(nb, true);
  for (int i = 0; i < nb; ++i)
    if (prog->buffers(i).weight() >= 0) inArena[i] = false;
  for (const plan::IoBinding& b : prog->inputs())
    if (valid(b.buffer())) inArena[b.buffer()] = false;
  for (const plan::IoBinding& b : prog->outputs())
    if (valid(b.buffer())) inArena[b.buffer()] = false;
  for (const plan::StateBinding& b : prog->states())  // session state: memory of its own
    for (int id : {b.buffer(), b.out_buffer()})
      if (valid(id)) inArena[id] = false;

  // Step 2: lifetimes.
  std::vector<int> def(nb, -1), last(nb, -1);
  for (int i = 0; i < prog->instructions_size(); ++i) {
    const plan::Instruction& ins = prog->instructions(i);
    if (ins.kind() == plan::Instruction::FREE) continue;
    for (int id : ins.inputs()) {
      if (id == -1) continue;
      if (!valid(id)) return internalError("rank ", prog->rank(), ": instruction ", i, " reads buffer ", id);
      if (inArena[id] && def[id] < 0)
        return internalError("rank ", prog->rank(), ": instruction ", i, " (", ins.node(), ") reads buffer ", id,
                             " '", prog->buffers(id).name(), "' before it is written");
      last[id] = i;
    }
    for (int id : ins.outputs()) {
      if (id == -1) continue;  // an unused output
      if (!valid(id)) return internalError("rank ", prog->rank(), ": instruction ", i, " writes buffer ", id);
      if (def[id] < 0) def[id] = i;
      last[id] = std::max(last[id], i);
    }
  }

  for (int i = 0; i < prog->instructions_size(); ++i) {
    const plan::Instruction& ins = prog->instructions(i);
    if (ins.kind() != plan::Instruction::ALL_GATHER && ins.kind() != plan::Instruction::REDUCE_SCATTER &&
        ins.kind() != plan::Instruction::ALL_TO_ALL)
      continue;
    if (ins.inputs_size() < 1 || ins.outputs_size() < 1 || !valid(ins.inputs(0))) continue;
    int reader = i + 1;
    for (; reader < prog->instructions_size(); ++reader) {
      const plan::Instruction& r = prog->instructions(reader);
      if (r.kind() != plan::Instruction::FREE &&
          std::find(r.inputs().begin(), r.inputs().end(), ins.outputs(0)) != r.inputs().end())
        break;
    }
    // The last instruction before the reader that is not a FREE (a FREE is not a use).
    int lastUse = reader - 1;
    while (lastUse > i && prog->instructions(lastUse).kind() == plan::Instruction::FREE) --lastUse;
    last[ins.inputs(0)] = std::max(last[ins.inputs(0)], lastUse);
  }

  // Step 3: in-place chains. blockOf[b] is the index of b's block.
  MemoryPlanStats stats;
  std::vector<int> blockOf(nb, -1), inPlaceOf(nb, -1);
  std::vector<Block> blocks;
  std::vector<uint64_t> size(nb, 0);
  for (int i = 0; i < nb; ++i) size[i] = alignUp(fromDesc(prog->buffers(i).desc()).bytes());
  for (int i = 0; i < prog->instructions_size(); ++i) {
    const plan::Instruction& ins = prog->instructions(i);
    for (int id : ins.outputs()) {
      if (id == -1 || !inArena[id] || def[id] != i || blockOf[id] >= 0) continue;
      int in = ins.inputs_size() > 0 ? ins.inputs(0) : -1;
      // A LAUNCH runs a generated elementwise kernel (docs/kernels.md), which may always run in place.
      bool opInPlace = (ins.kind() == plan::Instruction::KERNEL && inPlaceOk && inPlaceOk(ins.op())) ||
                       ins.kind() == plan::Instruction::LAUNCH;
      bool inPlace = id == ins.outputs(0) && opInPlace && in >= 0 && in != id && inArena[in] && last[in] == i &&
                     blockOf[in] >= 0 && size[in] > 0 &&
                     sameBytes(fromDesc(prog->buffers(in).desc()), fromDesc(prog->buffers(id).desc())) &&
                     std::find(ins.outputs().begin(), ins.outputs().end(), in) == ins.outputs().end();
      if (inPlace) {
        blockOf[id] = blockOf[in];
        blocks[blockOf[id]].end = std::max(blocks[blockOf[id]].end, last[id]);
        inPlaceOf[id] = in;
        ++stats.inPlace;
      } else {
        blockOf[id] = static_cast<int>(blocks.size());
        blocks.push_back({id, size[id], def[id], last[id], 0});
      }
    }
  }

  // Step 4: greedy by size, first fit among blocks whose lifetimes intersect.
  std::vector<int> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.size != y.size) return x.size > y.size;
    if (x.start != y.start) return x.start < y.start;
    return x.root < y.root;
  });
  std::vector<int> placed;
  std::vector<const Block*> overlapping;
  for (int bi : order) {
    Block& b = blocks[bi];
    if (b.size == 0) continue;
    overlapping.clear();
    for (int pi : placed) {
      const Block& p = blocks[pi];
      if (p.start <= b.end && b.start <= p.end) overlapping.push_back(&p);
    }
    std::sort(overlapping.begin(), overlapping.end(),
              [](const Block* x, const Block* y) { return x->offset < y->offset; });
    uint64_t at = 0;
    for (const Block* p : overlapping) {
      if (at + b.size <= p->offset) break;
      at = std::max(at, p->offset + p->size);
    }
    b.offset = at;
    stats.arenaBytes = std::max(stats.arenaBytes, at + b.size);
    placed.push_back(bi);
  }

  // Step 5: write the plan.
  for (int i = 0; i < nb; ++i) {
    plan::Buffer* buf = prog->mutable_buffers(i);
    buf->set_arena_offset(blockOf[i] >= 0 ? static_cast<int64_t>(blocks[blockOf[i]].offset) : -1);
    buf->set_in_place_of(inPlaceOf[i]);
    if (blockOf[i] >= 0) stats.naiveBytes += size[i];
  }
  prog->set_arena_bytes(stats.arenaBytes);
  prog->set_naive_arena_bytes(stats.naiveBytes);
  return stats;
}

}  // namespace pcc
