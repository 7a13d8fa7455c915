// The executor (executor.h).
//
// The wait rule for collectives and receives:
//  1. A collective (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER) or a RECV is
//     started when the program reaches it (Communicator::start*) and kept in
//     flight with handles on its operands; its output slot counts as written.
//  2. Before any other instruction runs, every operation in flight whose
//     output that instruction reads, or whose input (still read by the
//     communicator: all-gather, reduce-scatter; an all-reduce works on a copy
//     in its output) or output that instruction writes, is waited for and
//     its result put in place. "Reads" and "writes" compare memory, not
//     buffer ids: the memory plan reuses arena ranges, so an instruction that
//     writes a buffer lying over an in-flight operation's bytes waits for it
//     (a started operation counts as such a writer too). A folded kernel
//     (one step running a chain of instructions) reads and writes what every
//     instruction of the chain does.
//  3. FREE waits for nothing: it only ends a buffer's name, the memory stays
//     where it was (the arena) or alive in the in-flight record (other
//     buffers), and whatever reuses the bytes later writes them and waits.
//  4. At the end of each micro-batch run, every operation of that run is
//     waited for.
//  5. Receives posted ahead: the RECVs that open the program (nothing before
//     them touches memory) with arena outputs are, for run m+1, posted during
//     run m right after its last RECV (so each peer's receives keep their
//     order), into a staging buffer of their own (two per receive, used by
//     alternate runs: the memory plan reuses the arena bytes of a received
//     tensor after its last reader, so run m's instructions may still write
//     them). Run m+1's first reader waits for the receive, which then copies
//     the staging buffer into the planned place. Rule 2 ignores such a
//     receive until its run starts. Only when the world communicator starts
//     operations in the background: posting a blocking receive early would
//     only move the block.
#include "runtime/executor.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/plan_convert.h"
#include "runtime/tensor_slice.h"

namespace pcc {

namespace {

const char* kindName(plan::Instruction::Kind k) {
  switch (k) {
    case plan::Instruction::KERNEL: return "KERNEL";
    case plan::Instruction::ALL_REDUCE: return "ALL_REDUCE";
    case plan::Instruction::ALL_GATHER: return "ALL_GATHER";
    case plan::Instruction::REDUCE_SCATTER: return "REDUCE_SCATTER";
    case plan::Instruction::ALL_TO_ALL: return "ALL_TO_ALL";
    case plan::Instruction::SEND: return "SEND";
    case plan::Instruction::RECV: return "RECV";
    case plan::Instruction::FREE: return "FREE";
    case plan::Instruction::REGION: return "REGION";
    case plan::Instruction::LAUNCH: return "LAUNCH";
    default: return "UNKNOWN";
  }
}

// The run's time limit (setTimeLimit, pcc-run --timeout) reaches a kernel
// that runs past it: one op may compute for minutes (a huge Pad, an edited
// plan's product) and checks no clock. Each thread that runs kernels (a
// rank's) publishes, in a slot of its own, the kernel it is in and its run's
// deadline: a few atomic stores per call, no lock. One watchdog thread per
// process looks at the slots four times a second; a kernel still running a
// second past its deadline makes it print one line naming the node and end
// the process with exit 4, the code of a timeout (a kernel cannot be stopped
// from outside, and its rank's peers would wait on it for ever).
class KernelWatchdog {
 public:
  struct Slot {
    std::atomic<const plan::Instruction*> ins{nullptr};  ///< null: in no kernel
    std::atomic<int64_t> deadline{0};                    ///< steady_clock ticks
    std::atomic<int> seconds{0}, rank{0};
  };

  /// \returns the process's watchdog (made on first use, never destroyed:
  /// its thread may outlive every static).
  static KernelWatchdog& get() {
    static KernelWatchdog* w = new KernelWatchdog;
    return *w;
  }
  /// \returns the calling thread's slot, watched until the thread ends.
  static Slot& mine() {
    thread_local Registered r;
    return r.slot;
  }

 private:
  struct Registered {
    Slot slot;
    Registered() { get().add(&slot); }
    ~Registered() { get().remove(&slot); }
  };
  static constexpr std::chrono::seconds kGrace{1};  // the kernel's own checks answer first

  void add(Slot* s) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_.push_back(s);
    if (!started_) std::thread([this] { watch(); }).detach();
    started_ = true;
  }
  void remove(Slot* s) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_.erase(std::remove(slots_.begin(), slots_.end(), s), slots_.end());
  }

  [[noreturn]] static void stop(const plan::Instruction& ins, int rank, int seconds) {
    std::string node = ins.node().empty() ? std::string("an unnamed node") : strCat("node '", ins.node(), "'");
    std::string line = strCat(program_invocation_short_name, ": error: rank ", rank, ": ", node, " (", ins.op(),
                              "): still running when the run's time limit of ", seconds,
                              " s (--timeout) passed; stopped");
    for (char& c : line)
      if (static_cast<unsigned char>(c) < 0x20) c = '?';  // one line, whatever the node's name holds
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    _exit(4);
  }

  void watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
      const int64_t grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kGrace).count();
      for (const Slot* s : slots_) {
        const plan::Instruction* ins = s->ins.load();
        if (ins && now >= s->deadline.load() + grace) stop(*ins, s->rank.load(), s->seconds.load());
      }
    }
  }

  std::mutex mu_;
  std::vector<Slot*> slots_;
  bool started_ = false;
};

/// Watches one kernel call while it lives (nothing when the run has no limit).
class WatchedCall {
 public:
  WatchedCall(const RunLimit& limit, int rank, const plan::Instruction& ins)
      : slot_(limit.seconds > 0 ? &KernelWatchdog::mine() : nullptr) {
    if (!slot_) return;
    // The fields first, then the instruction that publishes them (release;
    // the watchdog reads the instruction with acquire, then the fields).
    slot_->deadline.store(limit.deadline.time_since_epoch().count(), std::memory_order_relaxed);
    slot_->seconds.store(limit.seconds, std::memory_order_relaxed);
    slot_->rank.store(rank, std::memory_order_relaxed);
    slot_->ins.store(&ins, std::memory_order_release);
  }
  ~WatchedCall() {
    if (slot_) slot_->ins.store(nullptr, std::memory_order_release);
  }
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

 private:
  KernelWatchdog::Slot* slot_;
};

/// \returns the type of the slice an IoBinding selects from a tensor of type `full`.
StatusOr<TensorType> boundType(const plan::IoBinding& b, const TensorType& full) {
  if (b.split_dim() == -1) return full;
  if (b.split_dim() < 0 || b.split_dim() >= full.rank())
    return invalidInput("split dim ", b.split_dim(), " is out of range for ", full.str());
  if (b.offset() < 0 || b.length() < 0 || b.offset() + b.length() > full.shape[b.split_dim()])
    return invalidInput("slice [", b.offset(), ", ", b.offset() + b.length(), ") along dim ",
                        b.split_dim(), " is outside ", full.str());
  TensorType t = full;
  t.shape[b.split_dim()] = b.length();
  return t;
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> Executor::create(const LoadedPlan& p, const plan::RankProgram& prog,
                                                     std::shared_ptr<Backend> backend, bool verifyChecksums) {
  std::unique_ptr<Executor> e(new Executor(p, prog, std::move(backend)));
  RETURN_IF_ERROR(e->prepare(verifyChecksums));
  return e;
}

StatusOr<std::unique_ptr<Executor>> Executor::create(const LoadedPlan& p, const plan::RankProgram& prog,
                                                     bool verifyChecksums, bool fastKernels) {
  BackendOptions o;
  if (!fastKernels) o.kernelProviders = {Provider::kReference};
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, makeBackend("cpu", o));
  return create(p, prog, std::shared_ptr<Backend>(std::move(cpu)), verifyChecksums);
}

Status Executor::prepare(bool verifyChecksums) {
  const std::string rankName = strCat("rank ", prog_.rank());
  std::unordered_map<int, int> slotOf;
  for (const plan::Buffer& b : prog_.buffers()) {
    if (!slotOf.emplace(b.id(), static_cast<int>(buffers_.size())).second)
      return invalidInput(rankName, ": buffer id ", b.id(), " is defined twice");
    TensorType t = fromDesc(b.desc());
    if (t.dtype == DType::kUndefined)
      return invalidInput(rankName, ": buffer ", b.id(), " '", b.name(), "' has unknown dtype code ",
                          b.desc().dtype());
    buffers_.push_back(&b);
    types_.push_back(t);
    homes_.push_back(b.weight() >= 0 ? Home::kWeight : b.arena_offset() >= 0 ? Home::kArena : Home::kOwn);
    Tensor w;
    if (b.weight() >= 0) {
      ASSIGN_OR_RETURN(w, loadWeight(plan_, prog_, b.weight(), verifyChecksums));
      if (w.type() != t)
        return invalidInput(rankName, ": buffer ", b.id(), " '", b.name(), "' is ", t.str(),
                            " but its weight '", prog_.weights(b.weight()).name(), "' is ",
                            w.type().str());
      hostWeights_.resize(buffers_.size());
      hostWeights_.back() = w;
      auto dev = backend_->toDevice(w);
      if (!dev.ok()) return dev.status().withContext(strCat(rankName, ": weight '", b.name(), "'"));
      w = std::move(dev).value();
    }
    weights_.push_back(std::move(w));
  }
  auto resolve = [&](int id, bool allowAbsent, const std::string& ctx) -> StatusOr<int> {
    if (id == -1 && allowAbsent) return -1;
    auto it = slotOf.find(id);
    if (it == slotOf.end()) return invalidInput(ctx, ": no buffer with id ", id);
    return it->second;
  };

  // Model inputs and outputs live outside the arena; each binding's slice
  // must have its buffer's type.
  auto bind = [&](const auto& bindings, const auto& descs, const char* what,
                  std::vector<int>& slots) -> Status {
    for (const plan::IoBinding& b : bindings) {
      std::string ctx = strCat(rankName, ": ", what, " binding of ", what, " ", b.index());
      if (b.index() < 0 || b.index() >= descs.size())
        return invalidInput(ctx, ": the plan has ", descs.size(), " ", what, "s");
      ASSIGN_OR_RETURN(int slot, resolve(b.buffer(), false, ctx));
      auto t = boundType(b, fromDesc(descs.Get(b.index()).desc()));
      if (!t.ok()) return t.status().withContext(ctx);
      if (*t != types_[slot])
        return invalidInput(ctx, ": the slice is ", t->str(), " but buffer ", b.buffer(), " is ",
                            types_[slot].str());
      if (homes_[slot] == Home::kArena)
        return invalidInput(ctx, ": buffer ", b.buffer(), " is bound to a model ", what,
                            " but placed in the arena");
      slots.push_back(slot);
    }
    return Status::OK();
  };
  // A generation plan's reference program has the export's own interface.
  const bool genRef = plan_.plan.has_generation() && &prog_ == &plan_.plan.reference();
  RETURN_IF_ERROR(bind(prog_.inputs(), genRef ? plan_.plan.generation().reference_inputs() : plan_.plan.inputs(),
                       "input", inputSlots_));
  for (int slot : inputSlots_) homes_[slot] = Home::kInput;
  RETURN_IF_ERROR(bind(prog_.outputs(), genRef ? plan_.plan.generation().reference_outputs() : plan_.plan.outputs(),
                       "output", outputSlots_));
  // Session state: the input that reads a piece and the buffer its step
  // writes it back to are one allocation, kept between runs.
  stateOfSlot_.assign(buffers_.size(), -1);
  for (int i = 0; i < prog_.states_size(); ++i) {
    const plan::StateBinding& sb = prog_.states(i);
    const std::string ctx = strCat(rankName, ": state binding ", i);
    ASSIGN_OR_RETURN(int in, resolve(sb.buffer(), false, ctx));
    ASSIGN_OR_RETURN(int out, resolve(sb.out_buffer(), false, ctx));
    if (in == out || homes_[in] != Home::kOwn || homes_[out] != Home::kOwn || types_[in] != types_[out])
      return invalidInput(ctx, ": buffers ", sb.buffer(), " and ", sb.out_buffer(),
                          " must be two distinct buffers of one type outside the arena, bound to nothing else");
    homes_[in] = homes_[out] = Home::kState;
    stateOfSlot_[in] = stateOfSlot_[out] = i;
    auto dev = backend_->toDevice(Tensor::zeros(types_[in]));
    if (!dev.ok()) return dev.status().withContext(ctx);
    stateTensors_.push_back(std::move(dev).value());
  }
  RETURN_IF_ERROR(checkMemoryPlan(rankName));

  for (int i = 0; i < prog_.instructions_size(); ++i) {
    const plan::Instruction& ins = prog_.instructions(i);
    Step s;
    s.ins = &ins;
    s.index = i;
    std::string ctx = where(s);
    // Kernels and regions may name absent operands (-1).
    bool kernel = ins.kind() == plan::Instruction::KERNEL || ins.kind() == plan::Instruction::REGION;
    for (int id : ins.inputs()) {
      ASSIGN_OR_RETURN(int slot, resolve(id, kernel, ctx));
      s.in.push_back(slot);
    }
    for (int id : ins.outputs()) {
      ASSIGN_OR_RETURN(int slot, resolve(id, kernel, ctx));
      if (slot < 0) {  // an output the program does not use
        s.out.push_back(-1);
        continue;
      }
      if (homes_[slot] == Home::kWeight || homes_[slot] == Home::kInput)
        return invalidInput(ctx, ": writes buffer ", id, " '", buffers_[slot]->name(),
                            "', which holds a weight or a model input");
      s.out.push_back(slot);
    }
    size_t needIn = 0, needOut = 0;
    switch (ins.kind()) {
      case plan::Instruction::KERNEL: break;
      case plan::Instruction::ALL_REDUCE:
      case plan::Instruction::ALL_GATHER:
      case plan::Instruction::REDUCE_SCATTER:
      case plan::Instruction::ALL_TO_ALL: needIn = needOut = 1; break;
      case plan::Instruction::SEND: needIn = 1; break;
      case plan::Instruction::RECV: needOut = 1; break;
      case plan::Instruction::FREE: break;
      case plan::Instruction::REGION: break;
      case plan::Instruction::LAUNCH: break;
      default: return invalidInput(ctx, ": unknown instruction kind ", static_cast<int>(ins.kind()));
    }
    if (!kernel && ins.kind() != plan::Instruction::FREE && ins.kind() != plan::Instruction::LAUNCH &&
        (s.in.size() != needIn || s.out.size() != needOut))
      return invalidInput(ctx, ": takes ", needIn, " input(s) and ", needOut,
                          " output(s), the plan gives ", s.in.size(), " and ", s.out.size());
    if (ins.kind() == plan::Instruction::ALL_REDUCE && types_[s.in[0]] != types_[s.out[0]])
      return invalidInput(ctx, ": input is ", types_[s.in[0]].str(), " but output is ", types_[s.out[0]].str());
    auto parsed = fromAttrProtos(ins.attrs());
    if (!parsed.ok()) return parsed.status().withContext(ctx);
    s.attrs = std::move(parsed).value();
    steps_.push_back(std::move(s));
  }
  hostWeights_.resize(buffers_.size());
  for (Step& s : steps_) {
    if (s.ins->kind() == plan::Instruction::FREE) continue;
    for (int slot : s.in)
      if (slot >= 0) s.reads.push_back(slot);
    for (int slot : s.out)
      if (slot >= 0) s.writes.push_back(slot);
  }
  // Step 5 of the wait rule: which receives may be posted a run ahead, and after which step.
  for (const Step& s : steps_) {
    if (s.ins->kind() == plan::Instruction::FREE) continue;
    if (s.ins->kind() != plan::Instruction::RECV || homes_[s.out[0]] != Home::kArena || types_[s.out[0]].bytes() == 0)
      break;
    leadingRecvs_.push_back(s.index);
  }
  if (!leadingRecvs_.empty() && prog_.microbatches() > 1) {
    for (const Step& s : steps_)
      if (s.ins->kind() == plan::Instruction::RECV) postAfter_ = std::max(postAfter_, s.index);
    staging_.resize(leadingRecvs_.size());
  } else {
    leadingRecvs_.clear();
  }
  // Kernels are prepared once the steps no longer move (they keep &attrs).
  RETURN_IF_ERROR(prepareRegions(verifyChecksums));
  // Folding asks which slots anything else reads (a model output is read by the caller).
  std::vector<int> reads(buffers_.size(), 0);
  for (const Step& s : steps_)
    if (s.ins->kind() != plan::Instruction::FREE)
      for (int slot : s.in)
        if (slot >= 0) ++reads[slot];
  for (int slot : outputSlots_) ++reads[slot];
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    if (s.folded || (s.ins->kind() != plan::Instruction::KERNEL && s.ins->kind() != plan::Instruction::LAUNCH))
      continue;
    ASSIGN_OR_RETURN(KernelDesc k, describe(s));
    std::vector<std::pair<size_t, size_t>> chain;
    if (s.ins->kind() == plan::Instruction::KERNEL) chain = foldCandidates(i, reads);
    if (!chain.empty()) {
      std::vector<FoldCandidate> next;
      for (const auto& c : chain) {
        ASSIGN_OR_RETURN(KernelDesc n, describe(steps_[c.first]));
        next.push_back({std::move(n), c.second});
      }
      ASSIGN_OR_RETURN(FoldedKernel f, backend_->prepareFolded(k, next));
      if (f.kernel && f.folded > 0 && f.folded <= chain.size()) {
        for (size_t j = 0; j < f.folded; ++j) {
          Step& n = steps_[chain[j].first];
          for (size_t a = 0; a < n.in.size(); ++a)
            if (a != chain[j].second) s.in.push_back(n.in[a]);
          // The wait rule runs at this step for the whole chain: every
          // member's operands count (a member's input may be a collective's
          // result still in flight; its output may lie over one's memory).
          s.reads.insert(s.reads.end(), n.reads.begin(), n.reads.end());
          s.writes.insert(s.writes.end(), n.writes.begin(), n.writes.end());
          n.folded = true;
          n.foldedInto = s.index;
        }
        s.out = steps_[chain[f.folded - 1].first].out;
        s.kernel = std::move(f.kernel);
        continue;
      }
    }
    ASSIGN_OR_RETURN(s.kernel, backend_->prepareKernel(k));
  }

  // The arena: one allocation for the rank, its buffers' views made once.
  auto arena = backend_->allocate(prog_.arena_bytes());
  if (!arena.ok()) return arena.status().withContext(strCat(rankName, ": its ", prog_.arena_bytes(), "-byte arena"));
  arena_ = std::move(arena).value();
  arenaViews_.resize(buffers_.size());
  for (size_t slot = 0; slot < buffers_.size(); ++slot)
    if (homes_[slot] == Home::kArena)
      arenaViews_[slot] = arena_.view(static_cast<uint64_t>(buffers_[slot]->arena_offset()), types_[slot]);
  for (Step& s : steps_) {
    s.view = s.kernel && s.kernel->computesNothing();
    for (int slot : s.out) s.view = s.view && slot >= 0 && homes_[slot] == Home::kArena;
  }
  return Status::OK();
}

StatusOr<KernelDesc> Executor::describe(const Step& s) {
  KernelDesc k;
  k.op = s.ins->op();
  if (s.ins->kind() == plan::Instruction::LAUNCH) {  // a generated kernel (docs/kernels.md)
    if (!plan_.kernels) return invalidInput(where(s), ": the plan's generated kernels are not loaded");
    auto entry = plan_.kernels->cpuEntry(s.ins->kernel());
    if (!entry.ok()) return entry.status().withContext(where(s));
    k.cpuEntry = *entry;
    k.kernelName = plan_.plan.kernels(s.ins->kernel()).name();
    k.plan = &plan_;
    k.kernelIndex = s.ins->kernel();
  }
  k.attrs = &s.attrs;
  k.where = where(s);
  for (int slot : s.in) {
    k.inputs.push_back(slot >= 0 ? types_[slot] : TensorType{});
    // Plan weights hold the same data on every run: a kernel may keep a
    // reordered copy of them (host values: what inference and oneDNN read).
    k.constInputs.push_back(slot >= 0 && homes_[slot] == Home::kWeight ? &hostWeights_[slot] : nullptr);
  }
  for (int slot : s.out) {
    k.outputs.push_back(slot >= 0 ? types_[slot] : TensorType{});
    k.outputNames.push_back(slot >= 0 ? strCat("buffer ", buffers_[slot]->id(), " '", buffers_[slot]->name(), "'")
                                      : std::string("unused output"));
  }
  k.inPlace = !s.out.empty() && s.out[0] >= 0 && !s.in.empty() && s.in[0] >= 0 &&
              ((buffers_[s.out[0]]->in_place_of() == buffers_[s.in[0]]->id() && homes_[s.out[0]] == Home::kArena) ||
               (homes_[s.out[0]] == Home::kState && stateOfSlot_[s.out[0]] == stateOfSlot_[s.in[0]]));
  return k;
}

std::vector<std::pair<size_t, size_t>> Executor::foldCandidates(size_t i, const std::vector<int>& reads) const {
  // A chain of KERNEL or LAUNCH steps after a KERNEL, with only FREE steps between them (so nothing
  // between writes what a later member reads), each the only reader of its
  // predecessor's only output, and whose output shares no arena bytes with
  // any input of the chain so far (the folded kernel writes it while it
  // reads them).
  constexpr size_t kMaxFold = 4;
  std::vector<std::pair<size_t, size_t>> chain;
  const Step& first = steps_[i];
  if (first.out.size() != 1 || first.out[0] < 0) return chain;
  std::vector<int> inputs(first.in.begin(), first.in.end());
  int prev = first.out[0];
  auto overlaps = [&](int a, int b) {
    if (a < 0 || b < 0 || homes_[a] != Home::kArena || homes_[b] != Home::kArena) return a == b && a >= 0;
    const uint64_t a0 = static_cast<uint64_t>(buffers_[a]->arena_offset()), a1 = a0 + types_[a].bytes();
    const uint64_t b0 = static_cast<uint64_t>(buffers_[b]->arena_offset()), b1 = b0 + types_[b].bytes();
    return a0 < b1 && b0 < a1;
  };
  for (size_t j = i + 1; j < steps_.size() && chain.size() < kMaxFold; ++j) {
    const Step& n = steps_[j];
    if (n.ins->kind() == plan::Instruction::FREE) continue;
    if ((n.ins->kind() != plan::Instruction::KERNEL && n.ins->kind() != plan::Instruction::LAUNCH) ||
        n.out.size() != 1 || n.out[0] < 0)
      break;
    if (reads[prev] != 1 || homes_[prev] == Home::kWeight || homes_[prev] == Home::kInput) break;
    size_t at = n.in.size(), uses = 0;
    for (size_t a = 0; a < n.in.size(); ++a)
      if (n.in[a] == prev) at = a, ++uses;
    if (uses != 1) break;
    std::vector<int> grown = inputs;
    for (size_t a = 0; a < n.in.size(); ++a)
      if (a != at) grown.push_back(n.in[a]);
    bool clash = false;
    for (int slot : grown) clash = clash || overlaps(slot, n.out[0]);
    if (clash) break;
    inputs = std::move(grown);
    chain.push_back({j, at});
    prev = n.out[0];
  }
  return chain;
}

Status Executor::prepareRegions(bool verifyChecksums) {
  RegionEnv env;
  env.backend = backend_.get();
  env.limit = &limit_;
  env.weight = [this, verifyChecksums](int index, const Tensor** host) -> StatusOr<Tensor> {
    auto it = bodyWeights_.find(index);
    if (it == bodyWeights_.end()) {
      ASSIGN_OR_RETURN(Tensor w, loadWeight(plan_, prog_, index, verifyChecksums));
      ASSIGN_OR_RETURN(Tensor dev, backend_->toDevice(w));
      it = bodyWeights_.emplace(index, std::make_pair(std::move(dev), std::move(w))).first;
    }
    *host = &it->second.second;
    return it->second.first;
  };
  for (Step& s : steps_) {
    if (s.ins->kind() != plan::Instruction::REGION) continue;
    std::vector<TensorType> ins, outs;
    for (int slot : s.in) ins.push_back(slot >= 0 ? types_[slot] : TensorType{});
    for (int slot : s.out) outs.push_back(slot >= 0 ? types_[slot] : TensorType{});
    ASSIGN_OR_RETURN(s.region, RegionRunner::prepare(*s.ins, s.attrs, ins, outs, env, where(s)));
  }
  return Status::OK();
}

Status Executor::checkMemoryPlan(const std::string& rankName) const {
  const uint64_t arena = prog_.arena_bytes();
  auto range = [&](int slot) {
    uint64_t off = static_cast<uint64_t>(buffers_[slot]->arena_offset());
    return std::pair<uint64_t, uint64_t>(off, off + types_[slot].bytes());
  };
  // Any placement fits in the sum of its buffers' sizes: a larger arena is a
  // corrupt plan, not an allocation to attempt.
  uint64_t need = 0;
  for (size_t slot = 0; slot < buffers_.size(); ++slot)
    if (homes_[slot] == Home::kArena) need += (types_[slot].bytes() + 63) / 64 * 64;
  if (arena > need)
    return invalidInput(rankName, ": arena_bytes ", arena, " exceeds the ", need, " bytes its buffers take");
  for (size_t slot = 0; slot < buffers_.size(); ++slot) {
    const plan::Buffer& b = *buffers_[slot];
    std::string ctx = strCat(rankName, ": buffer ", b.id(), " '", b.name(), "'");
    if (homes_[slot] != Home::kArena) {
      if (b.weight() >= 0 && b.arena_offset() >= 0) return invalidInput(ctx, ": a weight placed in the arena");
      continue;
    }
    uint64_t lo = static_cast<uint64_t>(b.arena_offset()), bytes = types_[slot].bytes();
    if (lo % 64 != 0) return invalidInput(ctx, ": arena offset ", lo, " is not 64-byte aligned");
    if (lo > arena || bytes > arena - lo)
      return invalidInput(ctx, ": bytes [", lo, ", ", lo + bytes, ") lie outside the ", arena, "-byte arena");
  }
  // Within one instruction, an output shares memory with an input only where
  // the plan made it in place (a kernel may write before it has read).
  std::unordered_map<int, int> slotOf;
  for (size_t slot = 0; slot < buffers_.size(); ++slot) slotOf[buffers_[slot]->id()] = static_cast<int>(slot);
  for (const plan::Instruction& ins : prog_.instructions()) {
    if (ins.kind() == plan::Instruction::FREE) continue;
    for (int o = 0; o < ins.outputs_size(); ++o) {
      auto os = slotOf.find(ins.outputs(o));
      if (os == slotOf.end() || homes_[os->second] != Home::kArena || types_[os->second].bytes() == 0) continue;
      auto [olo, ohi] = range(os->second);
      for (int i = 0; i < ins.inputs_size(); ++i) {
        auto is = slotOf.find(ins.inputs(i));
        if (is == slotOf.end() || homes_[is->second] != Home::kArena || types_[is->second].bytes() == 0) continue;
        auto [ilo, ihi] = range(is->second);
        if (olo >= ihi || ilo >= ohi) continue;
        // Input 0 may also appear at other positions (Add(a, a) over a).
        bool declared = o == 0 && ins.inputs(i) == ins.inputs(0) &&
                        (ins.kind() == plan::Instruction::KERNEL || ins.kind() == plan::Instruction::LAUNCH) &&
                        buffers_[os->second]->in_place_of() == ins.inputs(0) && olo == ilo &&
                        types_[os->second].dtype == types_[is->second].dtype && ohi - olo == ihi - ilo;
        if (!declared)
          return invalidInput(rankName, ": node '", ins.node(), "' (", ins.op(), "): output buffer ",
                              ins.outputs(o), " overlaps input buffer ", ins.inputs(i),
                              " in the arena, and the plan does not make it in place");
      }
    }
  }
  return Status::OK();
}

std::string Executor::where(const Step& s) const {
  const plan::Instruction& ins = *s.ins;
  std::string r = strCat("rank ", prog_.rank());
  if (prog_.stage() > 0 || prog_.microbatches() > 1)
    r += strCat(" (stage ", prog_.stage(), ", micro-batch ", microbatch_, ")");
  r += ": ";
  if (!ins.node().empty()) {
    r += strCat("node '", ins.node(), "'");
  } else {
    r += strCat("instruction #", s.index);
  }
  bool named = ins.kind() == plan::Instruction::KERNEL || ins.kind() == plan::Instruction::REGION ||
               ins.kind() == plan::Instruction::LAUNCH;
  return r + strCat(" (", named ? ins.op() : kindName(ins.kind()), ")");
}

Status Executor::checkType(const Step& s, int slot, const Tensor& t, const char* what) const {
  if (t.type() == types_[slot]) return Status::OK();
  return invalidInput(where(s), ": ", what, " is ", t.type().str(), " but the plan's buffer ",
                      buffers_[slot]->id(), " '", buffers_[slot]->name(), "' is ",
                      types_[slot].str());
}

StatusOr<Tensor> Executor::outputOf(int slot, std::vector<Tensor>& bufs) {
  if (homes_[slot] == Home::kState) {
    bufs[slot] = stateTensors_[static_cast<size_t>(stateOfSlot_[slot])];
  } else if (homes_[slot] == Home::kArena) {
    bufs[slot] = arenaViews_[slot];
  } else {
    ASSIGN_OR_RETURN(DeviceMemory m, backend_->allocate(types_[slot].bytes()));
    bufs[slot] = m.view(0, types_[slot]);
  }
  return bufs[slot];
}

Status Executor::shareStates(const Executor& other) {
  for (int i = 0; i < prog_.states_size(); ++i) {
    const plan::StateBinding& mine = prog_.states(i);
    int partner = -1;
    for (int j = 0; j < other.prog_.states_size(); ++j) {
      const plan::StateBinding& theirs = other.prog_.states(j);
      if (theirs.state() == mine.state() &&
          std::equal(theirs.offsets().begin(), theirs.offsets().end(), mine.offsets().begin(), mine.offsets().end()))
        partner = j;
    }
    if (partner < 0 || !(other.stateTensors_[partner].type() == stateTensors_[i].type()))
      return invalidInput("rank ", rank(), ": its piece of state ", mine.state(),
                          " has no piece of the same place and type in the other program");
    stateTensors_[i] = other.stateTensors_[partner];
  }
  return Status::OK();
}

Status Executor::run(const std::vector<Tensor>& inputs, RankComms* comms,
                     std::vector<OutputPiece>* outputs) {
  return runAll(RunInputs{&inputs, nullptr}, comms, outputs);
}

Status Executor::runSlices(const std::vector<std::vector<Tensor>>& slices, RankComms* comms,
                           std::vector<OutputPiece>* outputs) {
  if (slices.size() != inputSlots_.size())
    return invalidInput("rank ", prog_.rank(), ": ", slices.size(), " input slices for ", inputSlots_.size(),
                        " input bindings");
  return runAll(RunInputs{nullptr, &slices}, comms, outputs);
}

StatusOr<Tensor> Executor::boundInput(const RunInputs& inputs, size_t i, int64_t m) const {
  const plan::IoBinding& b = prog_.inputs(static_cast<int>(i));
  if (inputs.slices) {
    const std::vector<Tensor>& runs = (*inputs.slices)[i];
    if (runs.empty()) return invalidInput("rank ", prog_.rank(), ": input ", b.index(), " has no slice");
    return runs[runs.size() == 1 ? 0 : std::min<size_t>(static_cast<size_t>(m), runs.size() - 1)];
  }
  const std::vector<Tensor>& whole = *inputs.whole;
  if (b.index() >= static_cast<int>(whole.size()))
    return invalidInput("rank ", prog_.rank(), ": model input ", b.index(), " was not given");
  const Tensor& full = whole[b.index()];
  if (b.split_dim() == -1) return full;
  const int64_t offset = b.offset() + (b.per_microbatch() ? m * b.length() : 0);
  auto sl = sliceAlong(full, b.split_dim(), offset, b.length());
  if (!sl.ok()) return sl.status().withContext(strCat("rank ", prog_.rank(), ": input ", b.index()));
  return sl;
}

void Executor::resetInstructionProfile() {
  instrProfile_.assign(steps_.size(), InstructionTime{});
  for (size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].folded) instrProfile_[i].provider = strCat("folded into instruction ", steps_[i].foldedInto);
}

Status Executor::runAll(const RunInputs& inputs, RankComms* comms, std::vector<OutputPiece>* outputs) {
  if (limit_.seconds > 0) limit_.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_.seconds);
  waitSeconds_ = 0;
  sentBytes_ = 0;
  collectiveTimes_ = CommTimes{};
  receiveTimes_ = CommTimes{};
  inflight_.clear();  // what a failed run left (its communicators are aborted)
  held_.clear();
  outputs->clear();
  if (profiling_ && instrProfile_.size() != steps_.size()) resetInstructionProfile();
  const int runs = std::max(1, prog_.microbatches());
  for (microbatch_ = 0; microbatch_ < runs; ++microbatch_)
    RETURN_IF_ERROR(runOnce(inputs, comms, outputs, microbatch_ + 1 == runs));
  microbatch_ = 0;
  while (!inflight_.empty()) RETURN_IF_ERROR(finish(0));
  // Sends run in the background; the run ends when the peers have them.
  if (comms && comms->world) {
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(comms->world->waitSends().withContext(strCat("rank ", prog_.rank(), " (stage ", prog_.stage(), ")")));
    waitSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return Status::OK();
}

Status Executor::runOnce(const RunInputs& inputs, RankComms* comms, std::vector<OutputPiece>* outputs, bool last) {
  const int64_t m = microbatch_;
  // The weights' views, every other slot undefined: each slot's tensor is
  // reset, not destroyed, so assigning it later allocates no shape.
  std::vector<Tensor>& bufs = bufs_;
  auto clearActivations = [&] {
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (!weights_[i].defined())
        bufs[i].reset();
      else if (!bufs[i].defined() || bufs[i].raw() != weights_[i].raw())
        bufs[i] = weights_[i];  // a FREE made it unreadable
    }
  };
  if (bufs.size() != weights_.size())
    bufs = weights_;
  else
    clearActivations();
  for (size_t i = 0; i < inputSlots_.size(); ++i) {
    const plan::IoBinding& b = prog_.inputs(static_cast<int>(i));
    ASSIGN_OR_RETURN(Tensor host, boundInput(inputs, i, m));
    if (host.type() != types_[inputSlots_[i]])
      return invalidInput("rank ", prog_.rank(), ": input ", b.index(), " slice is ", host.type().str(),
                          ", the plan expects ", types_[inputSlots_[i]].str());
    auto dev = backend_->toDevice(host);
    if (!dev.ok()) return dev.status().withContext(strCat("rank ", prog_.rank(), ": input ", b.index()));
    bufs[inputSlots_[i]] = std::move(dev).value();
  }
  for (size_t slot = 0; slot < stateOfSlot_.size(); ++slot)
    if (stateOfSlot_[slot] >= 0) bufs[slot] = stateTensors_[static_cast<size_t>(stateOfSlot_[slot])];
  const bool postAhead = overlap_ && postAfter_ >= 0 && m + 1 < std::max(1, prog_.microbatches()) && comms && comms->world &&
                         comms->world->startsInBackground();
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    if (s.folded) continue;  // computed by an earlier step's kernel
    if (stop_ && stop_->load(std::memory_order_relaxed))
      return Status(StatusCode::kEnvironment, strCat("rank ", prog_.rank(), ": interrupted"));
    const bool recv = s.ins->kind() == plan::Instruction::RECV;
    if (recv) {
      if (InFlight* f = postedFor(static_cast<int>(i), static_cast<int>(m))) {  // posted during the previous run
        bufs[f->outSlot] = f->out;
        if (profiling_) ++instrProfile_[i].calls;
        if (postAhead && static_cast<int>(i) == postAfter_) RETURN_IF_ERROR(postRecvsAhead(static_cast<int>(m) + 1, comms));
        continue;
      }
    }
    if (!inflight_.empty() && s.ins->kind() != plan::Instruction::FREE) RETURN_IF_ERROR(waitConflicts(s));
    if (!recv && (!profiling_ || s.ins->kind() == plan::Instruction::FREE)) {
      RETURN_IF_ERROR(execute(s, bufs, comms));
      if (!overlap_) RETURN_IF_ERROR(finishRun(static_cast<int>(m)));  // what it started, at once
      if (postAhead && static_cast<int>(i) == postAfter_) RETURN_IF_ERROR(postRecvsAhead(static_cast<int>(m) + 1, comms));
      continue;
    }
    // The whole instruction: gathering its operands, the kernel or the
    // collective (its wait for the peers included), settling the result.
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(execute(s, bufs, comms));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (recv) waitSeconds_ += took;  // the stage idles until its input arrives
    if (profiling_) {
      InstructionTime& t = instrProfile_[i];
      t.minSeconds = t.calls == 0 ? took : std::min(t.minSeconds, took);
      t.seconds += took;
      ++t.calls;
      if (s.kernel) t.provider = std::string(s.kernel->provider());
    }
    if (!overlap_) RETURN_IF_ERROR(finishRun(static_cast<int>(m)));  // what it started, at once
    if (postAhead && static_cast<int>(i) == postAfter_) RETURN_IF_ERROR(postRecvsAhead(static_cast<int>(m) + 1, comms));
  }
  RETURN_IF_ERROR(finishRun(static_cast<int>(m)));
  for (size_t i = 0; i < outputSlots_.size(); ++i) {
    const plan::IoBinding& b = prog_.outputs(static_cast<int>(i));
    // A piece that is not the batch's is the same in every run: kept once.
    if (!b.per_microbatch() && !last) continue;
    const Tensor& t = bufs[outputSlots_[i]];
    if (!t.defined())
      return invalidInput("rank ", prog_.rank(), ": output ", b.index(), " buffer ", b.buffer(),
                          " was never written (or was freed)");
    auto host = backend_->toHost(t);
    if (!host.ok()) return host.status().withContext(strCat("rank ", prog_.rank(), ": output ", b.index()));
    const int64_t offset = b.offset() + (b.per_microbatch() ? m * b.length() : 0);
    outputs->push_back({b.index(), b.split_dim(), offset, b.length(), std::move(host).value()});
  }
  clearActivations();  // what the run allocated is released now, not at the next run
  return Status::OK();
}

Status Executor::execute(Step& s, std::vector<Tensor>& bufs, RankComms* comms) {
  const plan::Instruction& ins = *s.ins;
  auto input = [&](size_t k) -> StatusOr<const Tensor*> {
    int slot = s.in[k];
    if (slot < 0) return static_cast<const Tensor*>(nullptr);
    if (!bufs[slot].defined())
      return invalidInput(where(s), ": input ", k, " (buffer ", buffers_[slot]->id(), " '",
                          buffers_[slot]->name(), "') is read before it is written");
    return &bufs[slot];
  };
  auto group = [&]() -> StatusOr<Communicator*> {
    if (!comms) return invalidInput(where(s), ": collective in a program run without communicators");
    if (ins.group() < 0 || ins.group() >= static_cast<int>(comms->groups.size()))
      return invalidInput(where(s), ": group ", ins.group(), " does not exist (the plan has ",
                          comms->groups.size(), ")");
    Communicator* c = comms->groups[ins.group()].get();
    if (!c) return invalidInput(where(s), ": rank ", prog_.rank(), " is not in group ", ins.group());
    return c;
  };
  auto world = [&]() -> StatusOr<Communicator*> {
    if (!comms || !comms->world)
      return invalidInput(where(s), ": send/recv in a program run without a world communicator");
    return comms->world.get();
  };
  // A kernel's or a region's operands: its inputs (nullptr: absent) and its
  // output buffers (undefined: a result that is dropped).
  struct Operands {
    std::vector<const Tensor*> args;
    std::vector<Tensor> outs;
  };
  auto operands = [&]() -> StatusOr<Operands> {
    Operands o;
    for (size_t k = 0; k < s.in.size(); ++k) {
      ASSIGN_OR_RETURN(const Tensor* t, input(k));
      o.args.push_back(t);
    }
    for (int slot : s.out) {
      if (slot < 0) {
        o.outs.emplace_back();
        continue;
      }
      ASSIGN_OR_RETURN(Tensor t, outputOf(slot, bufs));
      o.outs.push_back(std::move(t));
    }
    return o;
  };
  auto record = [&](const std::string& name, std::chrono::steady_clock::time_point t0) {
    OpTime& t = profile_[name];
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++t.calls;
  };
  switch (ins.kind()) {
    case plan::Instruction::KERNEL:
    case plan::Instruction::LAUNCH: {
      if (s.view) {  // nothing to compute: its inputs must be readable, its outputs become so
        for (size_t k = 0; k < s.in.size(); ++k) RETURN_IF_ERROR(input(k).status());
        for (int slot : s.out) bufs[slot] = arenaViews_[slot];
        if (profiling_) record(strCat(ins.op(), " (", s.kernel->provider(), ")"), std::chrono::steady_clock::now());
        return Status::OK();
      }
      // The per-instruction path: the step's own operand lists, no strings
      // unless profiling or failing.
      s.args.resize(s.in.size());
      for (size_t k = 0; k < s.in.size(); ++k) {
        ASSIGN_OR_RETURN(s.args[k], input(k));
      }
      s.outs.resize(s.out.size());
      for (size_t k = 0; k < s.out.size(); ++k) {
        const int slot = s.out[k];
        if (slot < 0) {
          s.outs[k].reset();
        } else if (homes_[slot] == Home::kArena) {
          bufs[slot] = arenaViews_[slot];
          s.outs[k] = arenaViews_[slot];
        } else {
          ASSIGN_OR_RETURN(s.outs[k], outputOf(slot, bufs));
        }
      }
      auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status st;
      {
        WatchedCall watched(limit_, prog_.rank(), ins);
        st = s.kernel->run(s.args, s.outs);
      }
      if (profiling_) {
        std::string_view provider = s.kernel->provider();
        record(provider.empty() ? ins.op() : strCat(ins.op(), " (", provider, ")"), t0);
      }
      for (size_t k = 0; k < s.out.size(); ++k)
        if (s.out[k] >= 0 && homes_[s.out[k]] != Home::kArena) s.outs[k].reset();
      if (!st.ok()) return st.withContext(where(s));
      return Status::OK();
    }
    case plan::Instruction::ALL_REDUCE: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      RETURN_IF_ERROR(checkType(s, s.out[0], *in, "the input"));
      ASSIGN_OR_RETURN(Tensor out, outputOf(s.out[0], bufs));
      RETURN_IF_ERROR(backend_->copy(*in, out).withContext(where(s)));
      // The communicator sums the copy: the input is free at once.
      return startComm(s, in, false, out, out, [&](Tensor* got) { return c->startAllReduceSum(*got); });
    }
    case plan::Instruction::ALL_GATHER: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      ASSIGN_OR_RETURN(Tensor out, outputOf(s.out[0], bufs));
      return startComm(s, in, true, out, Tensor(), [&](Tensor* got) { return c->startAllGather(*in, ins.dim(), got); });
    }
    case plan::Instruction::REDUCE_SCATTER: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      ASSIGN_OR_RETURN(Tensor out, outputOf(s.out[0], bufs));
      // `out` defined on entry: its extent is this rank's slice.
      return startComm(s, in, true, out, out,
                       [&](Tensor* got) { return c->startReduceScatterSum(*in, ins.dim(), got); });
    }
    case plan::Instruction::ALL_TO_ALL: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      ASSIGN_OR_RETURN(Tensor out, outputOf(s.out[0], bufs));
      // `out` defined on entry: its extent along concat_dim is the whole.
      return startComm(s, in, true, out, out, [&](Tensor* got) {
        return c->startAllToAll(*in, ins.dim(), ins.concat_dim(), got);
      });
    }
    case plan::Instruction::SEND: {
      ASSIGN_OR_RETURN(Communicator * c, world());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      // Posted: the stage computes on while the transfer runs (run() waits for it).
      sentBytes_ += static_cast<int64_t>(in->type().bytes());
      return c->postSend(*in, ins.peer()).withContext(where(s));
    }
    case plan::Instruction::RECV: {
      ASSIGN_OR_RETURN(Communicator * c, world());
      ASSIGN_OR_RETURN(Tensor out, outputOf(s.out[0], bufs));
      return startComm(s, nullptr, false, out, out, [&](Tensor* got) { return c->startRecv(got, ins.peer()); });
    }
    case plan::Instruction::REGION: {
      ASSIGN_OR_RETURN(Operands ops, operands());
      auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status st;
      {
        WatchedCall watched(limit_, prog_.rank(), ins);
        st = s.region->run(ops.args, ops.outs);  // errors name the region and the body's node
      }
      if (profiling_) record(ins.op(), t0);  // the region as a whole, its bodies' kernels included
      return st;
    }
    case plan::Instruction::FREE:
      // The memory stays where the plan put it; the slot only stops being readable.
      for (int slot : s.in)
        if (slot >= 0) bufs[slot].reset();
      return Status::OK();
    default:
      return invalidInput(where(s), ": unknown instruction kind");
  }
}

template <typename Start>
Status Executor::startComm(const Step& s, const Tensor* in, bool readsInput, Tensor out, Tensor got, Start&& start) {
  InFlight f;
  f.step = s.index;
  f.microbatch = microbatch_;
  if (in) f.in = *in;
  f.inSlot = readsInput ? s.in[0] : -1;
  f.outSlot = s.out[0];
  f.out = std::move(out);
  f.got = std::make_unique<Tensor>(std::move(got));  // its address stays put while the work runs
  f.issued = std::chrono::steady_clock::now();
  auto work = start(f.got.get());
  if (!work.ok()) return work.status().withContext(where(s));
  f.work = std::move(work).value();
  const auto started = std::chrono::steady_clock::now();
  f.blocked = std::chrono::duration<double>(started - f.issued).count();
  held_.emplace_back(f.issued, started);
  inflight_.push_back(std::move(f));
  return Status::OK();
}

bool Executor::overlaps(int a, int b) const {
  if (a == b) return true;
  if (homes_[a] != Home::kArena || homes_[b] != Home::kArena) return false;
  const uint64_t alo = static_cast<uint64_t>(buffers_[a]->arena_offset()), ahi = alo + types_[a].bytes();
  const uint64_t blo = static_cast<uint64_t>(buffers_[b]->arena_offset()), bhi = blo + types_[b].bytes();
  return alo < bhi && blo < ahi;
}

Status Executor::waitConflicts(const Step& s) {
  for (size_t k = 0; k < inflight_.size();) {
    const InFlight& f = inflight_[k];
    // A receive posted for a later run writes its staging buffer only.
    if (f.postedAhead && f.microbatch != microbatch_) {
      ++k;
      continue;
    }
    bool conflict = false;
    for (int r : s.reads) conflict = conflict || overlaps(r, f.outSlot);
    for (int w : s.writes) conflict = conflict || overlaps(w, f.outSlot) || (f.inSlot >= 0 && overlaps(w, f.inSlot));
    if (!conflict) {
      ++k;
      continue;
    }
    RETURN_IF_ERROR(finish(k));  // removes it: k now names the next one
  }
  return Status::OK();
}

Status Executor::finish(size_t k) {
  InFlight f = std::move(inflight_[k]);
  inflight_.erase(inflight_.begin() + static_cast<std::ptrdiff_t>(k));
  const Step& s = steps_[f.step];
  const int current = microbatch_;
  microbatch_ = f.microbatch;  // messages name the operation's run
  auto t0 = std::chrono::steady_clock::now();
  Status st = f.work->wait();
  const auto t1 = std::chrono::steady_clock::now();
  const double took = std::chrono::duration<double>(t1 - t0).count();
  f.blocked += took;
  held_.emplace_back(t0, t1);
  const bool recv = s.ins->kind() == plan::Instruction::RECV;
  if (recv) waitSeconds_ += took;  // the stage idles until its input arrives
  if (profiling_ && static_cast<size_t>(f.step) < instrProfile_.size()) instrProfile_[f.step].seconds += took;
  if (st.ok()) {
    const char* what = recv ? "the received tensor"
                       : s.ins->kind() == plan::Instruction::ALL_REDUCE ? "the reduced tensor"
                       : s.ins->kind() == plan::Instruction::ALL_GATHER ? "the gathered tensor"
                                                                           : "the scattered slice";
    st = checkType(s, f.outSlot, *f.got, what);
    if (st.ok() && f.got->raw() != f.out.raw()) st = backend_->copy(*f.got, f.out).withContext(where(s));
  } else {
    st = st.withContext(where(s));
  }
  microbatch_ = current;
  if (!st.ok()) return st;
  CommTimes& t = recv ? receiveTimes_ : collectiveTimes_;
  const auto done = f.work->finishedAt();
  const double busy = std::max(0.0, std::chrono::duration<double>(done - f.issued).count());
  // The rank's time held by communication while this one was in flight.
  double held = 0;
  for (const auto& [lo, hi] : held_) {
    const auto a = std::max(lo, f.issued), b = std::min(hi, done);
    if (a < b) held += std::chrono::duration<double>(b - a).count();
  }
  t.busySeconds += busy;
  t.blockedSeconds += f.blocked;
  t.hiddenSeconds += std::max(0.0, busy - held);
  ++t.operations;
  t.bytes += static_cast<int64_t>(recv ? f.out.type().bytes() : f.in.type().bytes());
  if (f.postedAhead) ++t.postedAhead;
  return Status::OK();
}

Status Executor::finishRun(int m) {
  for (size_t k = 0; k < inflight_.size();) {
    if (inflight_[k].microbatch != m) {
      ++k;
      continue;
    }
    RETURN_IF_ERROR(finish(k));
  }
  return Status::OK();
}

Executor::InFlight* Executor::postedFor(int step, int m) {
  for (InFlight& f : inflight_)
    if (f.step == step && f.microbatch == m) return &f;
  return nullptr;
}

Status Executor::postRecvsAhead(int m, RankComms* comms) {
  const int current = microbatch_;
  microbatch_ = m;
  Status st = Status::OK();
  for (size_t k = 0; k < leadingRecvs_.size() && st.ok(); ++k) {
    const Step& s = steps_[leadingRecvs_[k]];
    const int slot = s.out[0];
    // Run m-1's receive may still be in flight into the other buffer; run
    // m-2's, which used this one, was waited for at the end of its run.
    Tensor& into = staging_[k][m % 2];
    if (!into.defined()) {
      auto mem = backend_->allocate(types_[slot].bytes());
      if (!mem.ok()) {
        st = mem.status().withContext(where(s));
        break;
      }
      into = mem->view(0, types_[slot]);
    }
    st = startComm(s, nullptr, false, arenaViews_[slot], into,
                   [&](Tensor* got) { return comms->world->startRecv(got, s.ins->peer()); });
    if (st.ok()) inflight_.back().postedAhead = true;
  }
  microbatch_ = current;
  return st;
}

}  // namespace pcc
