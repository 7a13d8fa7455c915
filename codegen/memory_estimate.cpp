// The estimated peak memory of one rank program, from what the runtime
// allocates for it (docs/runtime.md#memory-accounting counts the same things
// when it runs):
//
// 1. Held for the whole run: the weights of the rank's weight file (mapped
//    and read), the arena the memory plan sized (one block, at least 64
//    bytes), the model input slices the rank binds and the model output
//    pieces it writes (each its own block outside the arena).
// 2. Transient, one instruction at a time: the communicator's staging buffers
//    of a collective (an all-gather receives into a staging vector and
//    assembles a new tensor, two times its output; a reduce-scatter lays its
//    input out by the scatter dim into a copy and makes its result, input
//    plus output; an all-reduce works in its output), and the results a
//    kernel allocates before they are copied into the arena (reference
//    kernels that do not write their planned outputs, KernelEntry::
//    writesOutputs false). The largest of these is added.
// 3. What the cpu backend's oneDNN Conv adds (runtime/cpu/dnnl_conv.cpp): a
//    float32 Conv that is not pointwise (a 1x1 kernel, stride 1, no pads,
//    one group, which runs as a matmul in place) reorders its input and its
//    output through buffers in oneDNN's blocked layout (a transient of input
//    plus output bytes, which also covers the reference kernel's allocated
//    result) and keeps a reordered copy of a plan weight for as long as the
//    program lives (held, the weight's bytes). Blocked layouts pad channels
//    to a multiple of 8 or 16; that padding is not counted.
// 4. Every block is counted 64-byte rounded, as the runtime allocates it.
#include "codegen/memory_estimate.h"

#include <algorithm>

#include "runtime/ops/registry.h"
#include "runtime/plan_convert.h"
#include "runtime/schema/infer_util.h"
#include "runtime/support/weight_packing.h"

namespace pcc {

namespace {

int64_t rounded(uint64_t bytes) { return static_cast<int64_t>(std::max<uint64_t>((bytes + 63) / 64 * 64, 64)); }

int64_t bufferBytes(const plan::RankProgram& prog, int id) {
  if (id < 0 || id >= prog.buffers_size()) return 0;
  return rounded(fromDesc(prog.buffers(id).desc()).bytes());
}

/// \returns whether the Conv `ins` runs on oneDNN's convolution with its
/// reorders (float32, not pointwise; see step 3); false when its geometry
/// cannot be read (inference refuses such a plan anyway).
/// \returns whether `ins` is a MatMul or Gemm whose kernel keeps a packed copy
/// of its constant B (runtime/cpu/dnnl_matmul.cpp, packsConstantWeight).
bool packingGemm(const plan::RankProgram& prog, const plan::Instruction& ins) {
  if ((ins.op() != "MatMul" && ins.op() != "Gemm") || ins.inputs_size() < 2) return false;
  const int a = ins.inputs(0), b = ins.inputs(1);
  if (a < 0 || b < 0 || a >= prog.buffers_size() || b >= prog.buffers_size() || prog.buffers(b).weight() < 0)
    return false;
  TensorType ta = fromDesc(prog.buffers(a).desc()), tb = fromDesc(prog.buffers(b).desc());
  if (ta.dtype != DType::kF32 || tb.dtype != DType::kF32 || tb.rank() != 2 || ta.rank() < 1) return false;
  if (ins.op() == "MatMul") return ta.shape.back() == tb.shape[0] && packsConstantWeight(tb.shape[0], tb.shape[1]);
  StatusOr<AttrMap> attrs = fromAttrProtos(ins.attrs());
  if (!attrs.ok() || ta.rank() != 2) return false;
  const bool transB = attrs->getInt("transB", 0) != 0;
  return packsConstantWeight(transB ? tb.shape[1] : tb.shape[0], transB ? tb.shape[0] : tb.shape[1]);
}

bool reorderingConv(const plan::RankProgram& prog, const plan::Instruction& ins) {
  if (ins.op() != "Conv" || ins.inputs_size() < 2) return false;
  auto type = [&](int k) {
    int id = ins.inputs(k);
    return id >= 0 && id < prog.buffers_size() ? fromDesc(prog.buffers(id).desc()) : TensorType{};
  };
  TensorType x = type(0), w = type(1);
  if (x.dtype != DType::kF32 || w.dtype != DType::kF32 || x.rank() < 3 || w.rank() != x.rank()) return false;
  StatusOr<AttrMap> attrs = fromAttrProtos(ins.attrs());
  if (!attrs.ok()) return false;
  Dims spatial(x.shape.begin() + 2, x.shape.end()), kernel(w.shape.begin() + 2, w.shape.end());
  StatusOr<ops::WindowGeometry> g = ops::windowGeometry(spatial, kernel, *attrs, false);
  if (!g.ok()) return false;
  bool pointwise = attrs->getInt("group", 1) == 1;
  for (int64_t i = 0; i < g->spatial; ++i)
    pointwise = pointwise && g->kernel[i] == 1 && g->strides[i] == 1 && g->padBegin[i] == 0 && g->padEnd[i] == 0;
  return !pointwise;
}

/// \returns whether op `op`'s reference kernel allocates its results (copied
/// into the planned outputs afterwards).
bool allocatesResults(const std::string& op) {
  std::optional<OpKind> k = opFromName(op);
  if (!k) return false;
  const KernelEntry* e = referenceKernel(*k);
  return e && !e->writesOutputs && !e->viewOfInput0;
}

}  // namespace

RankMemoryEstimate estimateRankMemory(const plan::RankProgram& prog) {
  RankMemoryEstimate m;
  // Step 1: held for the whole run.
  for (const plan::Weight& w : prog.weights()) m.weights += static_cast<int64_t>(w.nbytes());
  m.arena = rounded(prog.arena_bytes());
  for (const plan::IoBinding& b : prog.inputs()) m.inputs += bufferBytes(prog, b.buffer());
  for (const plan::IoBinding& b : prog.outputs()) m.outputs += bufferBytes(prog, b.buffer());
  for (const plan::StateBinding& b : prog.states()) m.states += bufferBytes(prog, b.buffer());
  // Step 2: the largest transient.
  for (const plan::Instruction& ins : prog.instructions()) {
    const int in = ins.inputs_size() > 0 ? ins.inputs(0) : -1;
    const int out = ins.outputs_size() > 0 ? ins.outputs(0) : -1;
    switch (ins.kind()) {
      case plan::Instruction::ALL_GATHER: m.comm = std::max(m.comm, 2 * bufferBytes(prog, out)); break;
      case plan::Instruction::REDUCE_SCATTER:
      case plan::Instruction::ALL_TO_ALL:  // the packed chunks sent and received
        m.comm = std::max(m.comm, bufferBytes(prog, in) + bufferBytes(prog, out));
        break;
      case plan::Instruction::KERNEL: {
        if (reorderingConv(prog, ins)) {  // step 3
          int w = ins.inputs(1);
          if (prog.buffers(w).weight() >= 0) m.kernelWeights += bufferBytes(prog, w);
          m.kernel = std::max(m.kernel, bufferBytes(prog, in) + bufferBytes(prog, out));
          break;
        }
        if (packingGemm(prog, ins)) m.kernelWeights += bufferBytes(prog, ins.inputs(1));
        if (!allocatesResults(ins.op())) break;
        int64_t bytes = 0;
        for (int id : ins.outputs()) bytes += bufferBytes(prog, id);
        m.kernel = std::max(m.kernel, bytes);
        break;
      }
      default: break;
    }
  }
  return m;
}

void recordPlannedMemory(plan::Plan* plan) {
  if (!plan->has_search() || plan->search().candidates_size() == 0) return;
  plan::MeshEstimate* chosen = plan->mutable_search()->mutable_candidates(0);
  for (plan::RankEstimate& rk : *chosen->mutable_ranks()) {
    const plan::RankProgram* prog = nullptr;
    for (const plan::RankProgram& p : plan->ranks())
      if (p.rank() == rk.rank()) prog = &p;
    if (!prog) continue;
    RankMemoryEstimate m = estimateRankMemory(*prog);
    rk.set_weight_bytes(m.weights);
    rk.set_arena_bytes(m.arena);
    rk.set_input_bytes(m.inputs);
    rk.set_output_bytes(m.outputs);
    rk.set_comm_bytes(m.comm);
    rk.set_kernel_bytes(m.kernel);
    rk.set_kernel_weight_bytes(m.kernelWeights);
    rk.set_memory_bytes(m.total());
  }
}

}  // namespace pcc
