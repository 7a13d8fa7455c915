// Executor: runs one RankProgram of a plan on a Backend (cpu: the reference
// and oneDNN kernels), with its collectives and transfers going through the
// communicators the backend's factory made. Buffers live where the plan's
// memory plan put them: one arena per rank, allocated once by the backend,
// with kernel outputs written into their planned place; weights, model inputs
// and model outputs stay outside it. The executor never touches buffer memory
// itself: every allocation, copy and kernel goes through the backend.
// REGION instructions (If, Loop, Scan) run through a RegionRunner
// (runtime/region.h), their bodies' kernels prepared on the same backend.
// Collectives and receives are started when reached and waited for only where
// the program needs them (executor.cpp: the wait rule), so they overlap the
// computation that does not touch their memory.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <utility>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/plan_io.h"
#include "runtime/region.h"
#include "runtime/support/attribute.h"

namespace pcc {

/// One rank's part of a model output (RankProgram.outputs).
struct OutputPiece {
  int index = 0;         ///< position in Plan.outputs
  int splitDim = -1;     ///< -1: the whole output
  int64_t offset = 0;    ///< start along splitDim
  int64_t length = 0;    ///< extent along splitDim
  Tensor tensor;
};

class Executor {
 public:
  /// Prepares `prog` (which must outlive the executor, as must `p`) on
  /// `backend`: checks that every buffer id an instruction or binding names
  /// exists, that the memory plan keeps every arena buffer inside the arena and
  /// shares memory between an instruction's inputs and outputs only where the
  /// plan made it in place, prepares every kernel from the plan's types (no
  /// type is inferred while the program runs), maps the weights as views
  /// (checking their crc32 when `verifyChecksums`) and allocates the arena.
  /// \returns the executor, or an invalid-input error naming the rank and the
  /// instruction's node, buffer or weight at fault.
  static StatusOr<std::unique_ptr<Executor>> create(const LoadedPlan& p, const plan::RankProgram& prog,
                                                    std::shared_ptr<Backend> backend, bool verifyChecksums);
  /// create() on the cpu backend: with `fastKernels`, ops that have one run on
  /// the oneDNN kernels of runtime/cpu (falling back to the reference kernel
  /// for what those do not take); without, every op runs its reference kernel.
  static StatusOr<std::unique_ptr<Executor>> create(const LoadedPlan& p,
                                                    const plan::RankProgram& prog,
                                                    bool verifyChecksums, bool fastKernels = true);

  /// Runs the program on the model inputs `inputs` (every one, in
  /// Plan.inputs order; the rank binds the slices it needs): once per
  /// micro-batch (RankProgram.microbatches), each run binding its slice of the
  /// batch, then waits for its sends to arrive. `comms` may be null for a
  /// program without collectives or transfers.
  /// \returns ok with this rank's output pieces in `*outputs`, or the first
  /// error, naming the rank and the instruction's node.
  Status run(const std::vector<Tensor>& inputs, RankComms* comms, std::vector<OutputPiece>* outputs);
  /// Runs the program as run() does on inputs already sliced (the input
  /// pipeline's staging buffers, runtime/input_pipeline.h): `slices` holds,
  /// per input binding (RankProgram.inputs order), the host tensor of each
  /// micro-batch run, or one tensor used by every run.
  /// \returns as run().
  Status runSlices(const std::vector<std::vector<Tensor>>& slices, RankComms* comms,
                   std::vector<OutputPiece>* outputs);

  /// Binds this program's state pieces to the memory of `other`'s pieces of
  /// the same states (RankProgram.states: the same state and offsets), so
  /// that two programs of one rank (a generation plan's decode step and
  /// prefill) read and write one cache. Call before either runs, never while
  /// one does. \returns an invalid-input error when a piece has no partner.
  Status shareStates(const Executor& other);

  int rank() const { return prog_.rank(); }
  /// \returns the backend the program runs on.
  Backend& backend() { return *backend_; }
  /// \returns the seconds the last run() spent waiting on transfers: in RECV
  /// for an earlier stage's activations, and for its own sends to be taken.
  double waitSeconds() const { return waitSeconds_; }
  /// The communication of the last run() that could overlap computation:
  /// collectives, and receives, each summed over the run's operations.
  struct CommTimes {
    /// From each start to its completion (CommWork::finishedAt, measured
    /// where it ran).
    double busySeconds = 0;
    /// The time the rank was held by it: its start call and its wait.
    double blockedSeconds = 0;
    /// Of busySeconds, the part the rank computed through: per operation,
    /// busy minus the time the rank was held by any start call or wait of
    /// communication meanwhile (its own, or another operation's: an
    /// operation in flight while the rank waits for another hides nothing
    /// behind compute), at least 0.
    double hiddenSeconds = 0;
    int64_t operations = 0;
    /// The bytes the rank gave its collectives (their inputs) or received.
    int64_t bytes = 0;
    /// Receives started ahead, during the previous micro-batch.
    int64_t postedAhead = 0;
  };
  const CommTimes& collectiveTimes() const { return collectiveTimes_; }
  const CommTimes& receiveTimes() const { return receiveTimes_; }
  /// \returns the bytes the last run() sent to other stages (SEND).
  int64_t sentBytes() const { return sentBytes_; }

  /// \returns the bytes of the rank's arena (RankProgram.arena_bytes).
  uint64_t arenaBytes() const { return arena_.bytes; }

  /// Bounds each run() to `seconds` (0: no bound) where it could otherwise
  /// run for ever: a Loop region stops with an error once the run has taken
  /// that long (its condition never turned false, or a huge trip count).
  /// Collectives have their own timeout (RunOptions::timeoutSeconds).
  void setTimeLimit(int seconds) { limit_.seconds = seconds; }
  /// Makes every run() stop before its next instruction, with an
  /// environment error ("interrupted"), once `*flag` is true (null: never).
  /// The flag must outlive the executor's runs.
  void setStopFlag(const std::atomic<bool>* flag) { stop_ = flag; }
  /// With `on` false, every collective and receive is waited for right after
  /// its instruction started it and no receive is posted ahead: nothing overlaps (for
  /// comparison). On by default.
  void setOverlap(bool on) { overlap_ = on; }

  /// Per-op time accounting: when on, run() adds each kernel's seconds and
  /// calls to opProfile() under its op name and the kernel provider that ran
  /// the call ("MatMul (onednn)", "Softmax (reference)"; see Provider); a
  /// region's under If, Loop or Scan, its bodies' kernels included.
  void setProfiling(bool on) { profiling_ = on; }
  struct OpTime {
    double seconds = 0;
    int64_t calls = 0;
  };
  const std::map<std::string, OpTime>& opProfile() const { return profile_; }

  /// Per-instruction time accounting (setProfiling on): the seconds and runs
  /// of every instruction but FREE, indexed like RankProgram.instructions
  /// (FREE ones stay at zero calls), and the provider of the kernel that ran
  /// it last ("" for collectives, transfers and regions).
  struct InstructionTime {
    double seconds = 0;     ///< the sum over its runs
    double minSeconds = 0;  ///< the fastest run
    int64_t calls = 0;
    std::string provider;
  };
  const std::vector<InstructionTime>& instructionProfile() const { return instrProfile_; }
  /// Forgets the per-instruction profile (the launcher calls it after the
  /// warm-up runs, so that it holds the timed runs only).
  /// An instruction folded into an earlier one's kernel (Backend::prepareFolded)
  /// does not run: its calls stay 0 and its provider says "folded into
  /// instruction N" (the one whose time includes it).
  void resetInstructionProfile();

 private:
  /// Where a buffer's memory is.
  enum class Home {
    kWeight,  // the mapped weight, on the device
    kInput,   // (a slice of) a model input, bound per run
    kArena,   // its planned place in the arena
    kOwn,     // memory of its own, allocated when written (model outputs)
    kState,   // a piece of session state (RankProgram.states): kept between runs
  };
  /// An instruction with its buffer ids resolved to slots and attributes parsed.
  struct Step {
    const plan::Instruction* ins = nullptr;
    int index = 0;  // position in the program
    AttrMap attrs;
    std::vector<int> in, out;  // slots; -1 for an absent optional input
    std::unique_ptr<DeviceKernel> kernel;  // KERNEL steps
    std::unique_ptr<RegionRunner> region;  // REGION steps
    // A KERNEL's or LAUNCH's operand lists, kept between runs so that a run
    // allocates no vectors per instruction (outputs that are not arena views
    // are dropped after each call).
    std::vector<const Tensor*> args;
    std::vector<Tensor> outs;
    // A KERNEL or LAUNCH the backend computes in an earlier step's kernel
    // (Backend::prepareFolded): it does not run.
    bool folded = false;
    int foldedInto = -1;  // that instruction's index
    // A kernel that computes nothing (DeviceKernel::computesNothing) whose
    // outputs are arena views: running it only makes them readable.
    bool view = false;
    // The memory it reads and writes (for the wait rule).
    std::vector<int> reads, writes;  // slots
  };
  /// A collective or receive started and not yet waited for.
  struct InFlight {
    std::unique_ptr<CommWork> work;
    int step = 0;        // its instruction
    int microbatch = 0;  // the run it belongs to
    Tensor in, out;      // its operands, kept alive until it is waited for
    std::unique_ptr<Tensor> got;  // where the communicator delivers its result
    int inSlot = -1;     // the input it still reads after the start; -1: none
    int outSlot = -1;
    std::chrono::steady_clock::time_point issued;
    double blocked = 0;  // seconds in its start call and its wait
    bool postedAhead = false;  // a receive posted during the previous run
  };

  Executor(const LoadedPlan& p, const plan::RankProgram& prog, std::shared_ptr<Backend> backend)
      : plan_(p), prog_(prog), backend_(std::move(backend)) {}

  Status prepare(bool verifyChecksums);
  /// \returns the operands of step `s` as a backend sees them.
  StatusOr<KernelDesc> describe(const Step& s);
  /// \returns the steps after step `i` that the backend may fold into its
  /// kernel (Backend::prepareFolded), with the input each reads its
  /// predecessor through; `reads` counts each slot's readers.
  std::vector<std::pair<size_t, size_t>> foldCandidates(size_t i, const std::vector<int>& reads) const;
  /// The model inputs of a run: whole tensors to slice, or slices made already.
  struct RunInputs {
    const std::vector<Tensor>* whole = nullptr;
    const std::vector<std::vector<Tensor>>* slices = nullptr;
  };
  Status runAll(const RunInputs& inputs, RankComms* comms, std::vector<OutputPiece>* outputs);
  /// One run of the program for micro-batch `microbatch_`; `last`: the final one.
  Status runOnce(const RunInputs& inputs, RankComms* comms, std::vector<OutputPiece>* outputs, bool last);
  /// \returns the host tensor input binding `i` binds in micro-batch run `m`.
  StatusOr<Tensor> boundInput(const RunInputs& inputs, size_t i, int64_t m) const;
  /// Checks the memory plan of every buffer and of every instruction.
  Status checkMemoryPlan(const std::string& rankName) const;
  /// Prepares the REGION steps (their bodies' kernels and weights).
  Status prepareRegions(bool verifyChecksums);
  Status execute(Step& s, std::vector<Tensor>& bufs, RankComms* comms);
  /// \returns whether slots `a` and `b` may share memory: the same slot, or
  /// arena buffers whose byte ranges overlap.
  bool overlaps(int a, int b) const;
  /// The wait rule: waits for every operation in flight whose output step `s`
  /// reads, or whose input or output memory `s` writes.
  Status waitConflicts(const Step& s);
  /// Waits for `inflight_[k]`, puts its result in its output and removes it.
  Status finish(size_t k);
  /// Waits for every operation of micro-batch run `m`.
  Status finishRun(int m);
  /// Starts the receives of `leadingRecvs_` for micro-batch run `m`.
  Status postRecvsAhead(int m, RankComms* comms);
  /// \returns the in-flight receive step `step` posted for run `m`, or nullptr.
  InFlight* postedFor(int step, int m);
  /// Starts the collective or receive of step `s` (its output `out`, its
  /// input `in` or nullptr) with `start`, which is handed where the result
  /// goes, and records it in flight.
  template <typename Start>
  Status startComm(const Step& s, const Tensor* in, bool readsInput, Tensor out, Tensor got, Start&& start);
  /// \returns the memory output `slot` is written to in this run (and marks it written).
  StatusOr<Tensor> outputOf(int slot, std::vector<Tensor>& bufs);
  /// \returns "rank R: node 'N' (OP)" or the instruction's index and kind.
  std::string where(const Step& s) const;
  /// \returns an error unless `t` has the type of buffer `slot`.
  Status checkType(const Step& s, int slot, const Tensor& t, const char* what) const;

  const LoadedPlan& plan_;
  const plan::RankProgram& prog_;
  std::shared_ptr<Backend> backend_;
  DeviceMemory arena_;
  std::vector<Tensor> stateTensors_;  // per RankProgram.states entry
  std::vector<int> stateOfSlot_;      // per slot: its state piece, or -1
  std::vector<TensorType> types_;     // per slot
  std::vector<const plan::Buffer*> buffers_;
  std::vector<Home> homes_;           // per slot
  std::vector<Tensor> weights_;       // per slot: the weight on the device, or undefined
  std::vector<Tensor> hostWeights_;   // per slot: the mapped weight, or undefined
  std::vector<Tensor> arenaViews_;    // per slot: its view into the arena, or undefined
  // per slot: the run's tensor (runOnce). Kept between runs so that a run
  // allocates no shapes: the weights stay, the other slots are reset.
  std::vector<Tensor> bufs_;
  std::vector<Step> steps_;
  std::vector<int> inputSlots_, outputSlots_;  // per binding
  bool profiling_ = false;
  std::map<std::string, OpTime> profile_;
  std::vector<InstructionTime> instrProfile_;  // per step
  // REGION bodies: the weights they read (by weight index) and the run's deadline.
  std::map<int, std::pair<Tensor, Tensor>> bodyWeights_;  // device, host
  RunLimit limit_;
  int microbatch_ = 0;       // the run in progress (for messages)
  double waitSeconds_ = 0;   // of the last run()
  int64_t sentBytes_ = 0;    // of the last run()
  // Started collectives and receives, in the order they were started.
  std::vector<InFlight> inflight_;
  /// The intervals of this runAll in which the rank was held by a start call
  /// or a wait of communication, in time order (CommTimes::hiddenSeconds).
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>> held_;
  // RECVs at the head of the program (before anything else touches memory)
  // whose output is in the arena: posted for run m+1 once run m has executed
  // step postAfter_ (its last RECV), into staging_[k][(m+1) % 2] (allocated
  // when first used).
  std::vector<int> leadingRecvs_;
  int postAfter_ = -1;
  std::vector<std::array<Tensor, 2>> staging_;
  bool overlap_ = true;
  const std::atomic<bool>* stop_ = nullptr;  // setStopFlag
  CommTimes collectiveTimes_, receiveTimes_;
};

}  // namespace pcc
