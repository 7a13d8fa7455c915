// Launcher: runs a whole plan, one thread per rank, each on its Backend (picked
// by name) with the communicators the backend's factory makes, and assembles
// the ranks' output pieces into model outputs.
// Also the pieces pcc-run needs around it: the reference run (the oracle for
// --check), seeded random inputs and tensor comparison.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/plan_io.h"
#include "runtime/support/compare.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"
#include "runtime/tcp_store.h"

namespace pcc {

class InputPipeline;
class Executor;

struct RunOptions {
  /// Check every weight's crc32 when mapping it.
  bool verifyChecksums = true;
  /// Bound on connecting and on every collective, in seconds; also the bound
  /// on one run of a rank program that holds a Loop (Executor::setTimeLimit).
  int timeoutSeconds = 300;
  /// Timed runs; outputs come from the last one.
  int iters = 1;
  /// Untimed runs before the timed ones.
  int warmup = 0;
  /// OpenMP threads of each rank's oneDNN kernels; 0: the processors this
  /// process may use divided by the ranks sharing the machine (at least 1).
  int threadsPerRank = 0;
  /// Run the rank programs on the reference kernels instead of the oneDNN ones.
  bool referenceKernels = false;
  /// Overlap collectives and receives with computation (Executor::setOverlap);
  /// false waits for each one right after its start (`pcc-run --no-overlap`,
  /// for comparison).
  bool overlapComm = true;
  /// Fold GEMMs and convolutions with the elementwise instructions after them
  /// (BackendOptions::foldEpilogues); false: `pcc-run --no-fold`, for comparison.
  bool foldEpilogues = true;
  /// Time every kernel by op (RunResult.profile) and every instruction of
  /// every rank (RunResult.instructions).
  bool profile = false;
  /// Count the bytes each rank holds (RunResult.memory; docs/runtime.md#memory-accounting).
  /// `pcc-run --profile` turns it on.
  bool measureMemory = false;
  /// Fill every allocation of the backend (the arena, model outputs) with
  /// 0xFF bytes (NaN for floats) before use: a kernel that leaves an output
  /// element unwritten then shows in the results (BackendOptions::poisonMemory).
  bool poisonMemory = false;
  /// RankSession only: the caller may stop a run from another thread
  /// (RankSession::interrupt), so every rank runs on its own thread, even a
  /// lone rank that would otherwise run on the caller's.
  bool interruptible = false;
  /// The Backend every rank runs on, by name (see makeBackend; "cpu" is the
  /// one built in).
  std::string backend = "cpu";
  /// Process ranks (runPlanRank) only: called when a peer on this host died
  /// and this rank is still blocked a second after closing its connections
  /// (gloo does not wake a collective waiting on a live peer when the
  /// connections close); `why` names the dead rank. A tool prints it and
  /// ends the process; unset, the rank waits for its timeout.
  std::function<void(const Status& why)> onStuckAfterPeerLost;
  /// Process ranks only: this rank's index among the ranks on its machine
  /// (LOCAL_RANK, or OMPI_COMM_WORLD_LOCAL_RANK under mpirun), for a backend
  /// that picks a device per rank; -1: unknown (a backend may then use the
  /// global rank). RunResult.localRanks reports it.
  int localRank = -1;
  /// Process ranks only: the address gloo's TCP device listens on and its
  /// peers connect to (`pcc-run --gloo-host`); empty: 127.0.0.1, which only
  /// serves ranks on one machine.
  std::string glooHost;
  /// Process ranks only: the network interface whose address gloo listens
  /// on (`pcc-run --gloo-iface`); when set it wins over glooHost.
  std::string glooIface;
  /// A streamed run (`pcc-run --batches K`, runtime/input_pipeline.h): when
  /// set, every rank of this process runs the pipeline's K batches once each,
  /// taking its inputs from it (the `inputs` argument is unused and
  /// iters/warmup are ignored); RunResult.stream holds the outputs and times
  /// of every batch. The pipeline must hold this process's rank programs.
  InputPipeline* pipeline = nullptr;
};

/// Where the processes of a multi-process run meet (runPlanRank).
struct Rendezvous {
  /// A fresh directory every rank can see (a gloo FileStore), or empty.
  std::string dir;
  /// When dir is empty: the TCP store that rank 0 serves and every rank
  /// uses (runtime/tcp_store.h).
  TcpAddress tcp;
  /// The run id every rank of one run shares: the TCP store refuses ranks
  /// of another run (the directory holds it in its path).
  std::string runId;
  /// With the TCP store: the secret every rank presents in its HELLO
  /// (PCC_RDZV_SECRET); the store refuses a connection without it.
  std::string secret;
};

struct RunResult {
  /// Model outputs in Plan.outputs order.
  std::vector<Tensor> outputs;
  /// Per rank: mean wall time of one timed run, in seconds.
  std::vector<double> rankSeconds;
  /// Per rank: of rankSeconds, the mean time spent waiting on pipeline
  /// transfers (Executor::waitSeconds): its stage's idle time.
  std::vector<double> rankWaitSeconds;
  /// With RunOptions.profile: rank 0's seconds and calls per op and kernel
  /// provider ("MatMul (onednn)"), over all its
  /// runs (warmup included).
  struct OpTime {
    double seconds = 0;
    int64_t calls = 0;
  };
  std::map<std::string, OpTime> profile;
  /// With RunOptions.profile: per rank, per instruction (indexed like
  /// RankProgram.instructions), the seconds and calls over the timed runs
  /// (warmup excluded) and the kernel provider that ran it. Every rank in a
  /// threaded run (runPlan); this process's rank only in runPlanRank.
  struct InstructionTime {
    double seconds = 0;     ///< the sum over the timed runs
    double minSeconds = 0;  ///< the fastest timed run
    int64_t calls = 0;
    std::string provider;
  };
  std::vector<std::vector<InstructionTime>> instructions;
  /// With RunOptions.measureMemory: per rank (every rank, in both kinds of
  /// run), what it held (docs/runtime.md#memory-accounting).
  struct RankMemory {
    /// The most bytes the rank held at once, from its preparation to the end
    /// of its last run: weights, arena, input slices, outputs, communicator
    /// staging and kernel allocations outside the arena.
    int64_t peakBytes = 0;
    int64_t weightBytes = 0;  ///< of those, its mapped weights
    int64_t arenaBytes = 0;   ///< of those, its arena (64-byte rounded)
    /// The peak resident set size (VmHWM) of the process that ran this rank
    /// when that process ran no other rank; -1 otherwise.
    int64_t processPeakRss = -1;
  };
  std::vector<RankMemory> memory;
  /// Per rank, the mean per timed run of the communication that may overlap
  /// computation (Executor::CommTimes): collectives, and receives. Empty in
  /// a streamed run.
  struct CommOverlap {
    double busySeconds = 0;     ///< from each start to its completion
    double blockedSeconds = 0;  ///< the rank held in the start call and the wait
    double hiddenSeconds = 0;   ///< busy minus blocked, per operation, at least 0
    double operations = 0;
    double postedAhead = 0;     ///< receives posted during the previous micro-batch
  };
  std::vector<CommOverlap> rankCollectives, rankReceives;
  /// runPlanRank on rank 0: every rank's RunOptions::localRank, in rank order.
  std::vector<int> localRanks;
  /// A streamed run (RunOptions.pipeline): per batch, the outputs, and per
  /// rank (every rank, in both kinds of run) per batch, the seconds it waited
  /// for the batch's inputs and the seconds it ran the batch.
  struct Stream {
    std::vector<std::vector<Tensor>> outputs;
    std::vector<std::vector<double>> waitSeconds, runSeconds;
    /// Per rank: from its first wait for a batch to the end of its last batch.
    std::vector<double> totalSeconds;
  };
  Stream stream;
};

/// \returns an invalid-input error naming the input and both types when
/// `inputs` does not match Plan.inputs in count, dtype and shape.
Status validateInputs(const plan::Plan& plan, const std::vector<Tensor>& inputs);

/// Runs every rank of `p` as a thread of this process on `inputs` (one per
/// Plan.inputs entry). The first error of any rank wins; a failing rank closes
/// its connections so that the others stop at once rather than at the timeout.
/// \returns the outputs and per-rank times, or the first error.
StatusOr<RunResult> runPlan(const LoadedPlan& p, const std::vector<Tensor>& inputs,
                            const RunOptions& o);

/// Runs only rank `rank` of `p` in this process; the plan's other ranks run in
/// other processes (started by mpirun, a job scheduler or by hand, on one
/// machine or several) that meet through `rendezvous`: a gloo FileStore in a
/// directory every rank can see, or the TCP store rank 0 serves. Every rank
/// sends its output pieces and time to rank 0. A rank that dies (its process
/// gone on this machine with the directory; its store connection closed with
/// the TCP store) makes the others stop within the timeout, naming it.
/// \returns on rank 0 the assembled outputs and every rank's time; on other
/// ranks an empty result.
StatusOr<RunResult> runPlanRank(const LoadedPlan& p, const std::vector<Tensor>& inputs, const RunOptions& o,
                                int rank, const Rendezvous& rendezvous);
/// The same with a directory rendezvous in `rendezvousDir`.
StatusOr<RunResult> runPlanRank(const LoadedPlan& p, const std::vector<Tensor>& inputs, const RunOptions& o,
                                int rank, const std::string& rendezvousDir);

/// Every rank of a plan as a thread of this process, kept between runs: each
/// rank's executor (its weights, arena and session state, RankProgram.states)
/// and communicators live as long as the session, so that a generation plan's
/// KV cache stays on its ranks from one decode step to the next
/// (runtime/generate.h). Runs are one at a time.
class RankSession {
 public:
  /// Prepares every rank and connects the communicators (RunOptions: backend,
  /// kernels, timeout, threads, profile (opProfile); not iters, warmup or pipeline).
  static StatusOr<std::unique_ptr<RankSession>> start(const LoadedPlan& p, const RunOptions& o);
  ~RankSession();
  RankSession(const RankSession&) = delete;
  RankSession& operator=(const RankSession&) = delete;

  /// Runs every rank once on `inputs` (one per Plan.inputs entry, checked).
  /// \returns the assembled outputs, or the first error; after an error the
  /// session is broken and every later run fails with the same code.
  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);

  /// Makes every rank's program bind its state pieces to the memory of the
  /// same rank's pieces in `other` (Executor::shareStates): a generation
  /// plan's prefill session writes the cache its decode session reads.
  /// Call before either runs.
  Status shareStates(const RankSession& other);

  /// Stops the run in progress, from any thread: every rank ends it at its
  /// next instruction (a rank blocked in a collective when its peer stops and
  /// closes its connections) and the run fails with an environment error. The session is then broken. A
  /// rank running on the caller's thread (one rank, nothing to communicate,
  /// RunOptions::interruptible unset) is not stopped.
  void interrupt();

  /// \returns the bytes every rank's last run gave its collectives, sent and
  /// received, summed over the ranks (the communicators' traffic).
  int64_t lastRunCommBytes() const;

  /// With RunOptions::profile at start: rank 0's seconds and calls per op and
  /// kernel provider over every run so far (as RunResult::profile).
  std::map<std::string, RunResult::OpTime> opProfile() const;

 private:
  struct Impl;
  explicit RankSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One rank of a plan whose other ranks run in other processes (as
/// runPlanRank), kept between runs: it meets its peers and connects once,
/// then runs as often as asked, every process running the same runs in the
/// same order; its weights, arena and session state stay in place. The peers'
/// liveness is watched for the session's whole life, as in runPlanRank.
class ProcessRankSession {
 public:
  /// Prepares rank `rank` and meets the other ranks through `rendezvous`
  /// (RunOptions: backend, kernels, timeout, threads, gloo's address, profile
  /// (opProfile); not iters, warmup or pipeline).
  static StatusOr<std::unique_ptr<ProcessRankSession>> start(const LoadedPlan& p, const RunOptions& o, int rank,
                                                             const Rendezvous& rendezvous);
  /// Ends this rank (rank 0, which may serve the TCP store, first waits a
  /// moment for its peers to end).
  ~ProcessRankSession();
  ProcessRankSession(const ProcessRankSession&) = delete;
  ProcessRankSession& operator=(const ProcessRankSession&) = delete;

  /// The same with more programs of the same ranks, `more` (a generation
  /// plan's prefill programs, prefillView), each prepared beside the first and
  /// connected over the same rendezvous; their state pieces are bound to the
  /// first program's (Executor::shareStates).
  static StatusOr<std::unique_ptr<ProcessRankSession>> start(const LoadedPlan& p,
                                                             const std::vector<const LoadedPlan*>& more,
                                                             const RunOptions& o, int rank,
                                                             const Rendezvous& rendezvous);

  int rank() const;
  /// \returns 1 + the programs given as `more`.
  int programs() const;

  /// Runs this rank once on `inputs` (every Plan.inputs entry: each process
  /// passes the whole inputs). \returns on rank 0 the assembled outputs, on
  /// other ranks none; or the first error, after which the session is broken
  /// and its peers stop too.
  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);
  /// The same for program `k` (0: the first; k: more[k - 1]; an internal
  /// error when there is none).
  StatusOr<std::vector<Tensor>> runProgram(int k, const std::vector<Tensor>& inputs);

  /// Sums `t` (a host tensor) over every rank in place, through the world
  /// communicator: rank 0 tells the others what it decided (the generation
  /// loop's chosen tokens). Every rank calls it at the same point.
  Status sumOverRanks(Tensor& t);

  /// \returns the bytes this rank's last run (of either program) gave its
  /// collectives, sent and received.
  int64_t lastRunCommBytes() const;

  /// With RunOptions::profile at start: this rank's seconds and calls per op
  /// and kernel provider in program `k` (as runProgram) over every run so far.
  std::map<std::string, RunResult::OpTime> opProfile(int k) const;

  /// Stops the run in progress at its next instruction, from any thread (as
  /// RankSession::interrupt); the session is then broken.
  void interrupt();

  /// This rank's own part of one output in the last run.
  struct OwnPart {
    Tensor tensor;        ///< undefined: the rank computes none of the output
    int splitDim = -1;    ///< -1: the whole output
    int64_t offset = 0;   ///< where the part starts along splitDim
  };
  /// \returns per Plan.outputs entry what this rank computed of it in the
  /// first program's last run: the whole output, its slice (its
  /// micro-batches' slices joined), or nothing.
  StatusOr<std::vector<OwnPart>> lastOwnParts() const;

 private:
  struct Impl;
  explicit ProcessRankSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Runs Plan.reference, the unpartitioned one-rank program, on the reference
/// kernels (never the oneDNN ones), so that --check compares the fast kernels
/// with the simple ones. `timeLimitSeconds` (0: none) bounds its Loop regions
/// as RunOptions::timeoutSeconds bounds the ranks' (Executor::setTimeLimit).
/// \returns its outputs, or an error (invalid-input when the plan has none).
StatusOr<std::vector<Tensor>> runReference(const LoadedPlan& p, const std::vector<Tensor>& inputs,
                                           int timeLimitSeconds = 0);

/// \returns one tensor per Plan.inputs entry from pseudoRandomTensors
/// (runtime/support/random.h), the generator of the evaluator's randomInputs:
/// floats uniform in [-1, 1), integers in [0, 4), bools 0 or 1.
std::vector<Tensor> randomInputsFor(const plan::Plan& plan, uint64_t seed);



}  // namespace pcc
