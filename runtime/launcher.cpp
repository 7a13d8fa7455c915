#include "runtime/launcher.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

#include "runtime/backend.h"
#include "runtime/comm_gloo.h"
#include "runtime/cpu/fast_kernels.h"
#include "runtime/executor.h"
#include "runtime/input_pipeline.h"
#include "runtime/plan_convert.h"
#include "runtime/support/memory_account.h"
#include "runtime/support/random.h"
#include "runtime/tensor_slice.h"

namespace pcc {

namespace {

/// Puts the pieces of every output together, checking that the pieces of each
/// output cover it exactly once.
StatusOr<std::vector<Tensor>> assemble(const plan::Plan& plan,
                                       const std::vector<std::vector<OutputPiece>>& perRank) {
  std::vector<std::vector<const OutputPiece*>> byOutput(plan.outputs_size());
  for (const auto& pieces : perRank)
    for (const OutputPiece& p : pieces) byOutput[p.index].push_back(&p);
  std::vector<Tensor> outs;
  for (int k = 0; k < plan.outputs_size(); ++k) {
    const plan::IoDesc& d = plan.outputs(k);
    std::string ctx = strCat("plan output ", k, " '", d.name(), "'");
    auto& pieces = byOutput[k];
    if (pieces.empty()) return invalidInput(ctx, ": no rank produces it");
    TensorType type = fromDesc(d.desc());
    bool whole = std::any_of(pieces.begin(), pieces.end(), [](auto* p) { return p->splitDim == -1; });
    if (whole) {
      if (pieces.size() != 1)
        return invalidInput(ctx, ": ", pieces.size(), " ranks produce it, one of them whole");
      if (pieces[0]->tensor.type() != type)
        return invalidInput(ctx, ": produced as ", pieces[0]->tensor.type().str(), ", declared ",
                            type.str());
      outs.push_back(pieces[0]->tensor);
      continue;
    }
    int dim = pieces[0]->splitDim;
    std::sort(pieces.begin(), pieces.end(),
              [](auto* a, auto* b) { return a->offset < b->offset; });
    Tensor full = Tensor::zeros(type);
    int64_t next = 0;
    for (const OutputPiece* p : pieces) {
      if (p->splitDim != dim)
        return invalidInput(ctx, ": pieces split along different dims (", dim, " and ", p->splitDim, ")");
      if (p->offset != next)
        return invalidInput(ctx, ": pieces along dim ", dim, p->offset < next ? " overlap" : " leave a gap",
                            " at ", std::min(p->offset, next));
      Status st = insertAlong(full, p->tensor, dim, p->offset);
      if (!st.ok()) return st.withContext(ctx);
      next = p->offset + p->length;
    }
    if (dim < 0 || dim >= type.rank() || next != type.shape[dim])
      return invalidInput(ctx, ": pieces cover [0, ", next, ") of ", type.str(), " along dim ", dim);
    outs.push_back(std::move(full));
  }
  return outs;
}

bool hasTransfers(const plan::Plan& plan) {
  for (const plan::RankProgram& r : plan.ranks())
    for (const plan::Instruction& i : r.instructions())
      if (i.kind() == plan::Instruction::SEND || i.kind() == plan::Instruction::RECV) return true;
  return false;
}

}  // namespace

Status validateInputs(const plan::Plan& plan, const std::vector<Tensor>& inputs) {
  for (int k = 0; k < plan.inputs_size(); ++k) {
    const plan::IoDesc& d = plan.inputs(k);
    TensorType want = fromDesc(d.desc());
    if (k >= static_cast<int>(inputs.size()) || !inputs[k].defined())
      return invalidInput("input ", k, " '", d.name(), "' (", want.str(), ") is missing");
    if (inputs[k].type() != want)
      return invalidInput("input ", k, " '", d.name(), "': the plan expects ", want.str(), ", got ",
                          inputs[k].type().str());
  }
  if (inputs.size() > static_cast<size_t>(plan.inputs_size()))
    return invalidInput("got ", inputs.size(), " inputs, the plan takes ", plan.inputs_size());
  return Status::OK();
}

namespace {

/// \returns an executor's time per op and kernel provider (Executor::opProfile)
/// as RunResult::profile holds it.
std::map<std::string, RunResult::OpTime> opTimes(const Executor& e) {
  std::map<std::string, RunResult::OpTime> out;
  for (const auto& [op, t] : e.opProfile()) out[op] = {t.seconds, t.calls};
  return out;
}

/// \returns `s` naming `rank`, unless its message already starts with the
/// rank's name (the executor's errors do): one "rank N: " prefix, never two.
Status withRank(const Status& s, int rank) {
  const std::string name = strCat("rank ", rank);
  const std::string& m = s.message();
  if (m.compare(0, name.size(), name) == 0 && m.size() > name.size() && (m[name.size()] == ':' || m[name.size()] == ' '))
    return s;
  return s.withContext(name);
}

/// What every way of running a plan needs first: the programs by rank and the
/// groups, checked, so a bad plan fails before any rank waits on another.
struct Prepared {
  std::vector<const plan::RankProgram*> progs;
  std::vector<GlooGroup> groups;
};

StatusOr<Prepared> prepare(const LoadedPlan& p, const std::vector<Tensor>& inputs, const RunOptions& o,
                           bool checkInputs = true) {
  // A streamed run's batches are checked by the pipeline as they are read.
  if (!o.pipeline && checkInputs) RETURN_IF_ERROR(validateInputs(p.plan, inputs));
  const int n = p.plan.ranks_size();
  if (n == 0) return invalidInput(p.dir, ": the plan has no rank programs");
  if (o.iters < 1 || o.warmup < 0) return invalidInput("iters must be >= 1 and warmup >= 0");
  Prepared pr;
  // Rank programs by rank; every rank 0..n-1 exactly once.
  pr.progs.assign(n, nullptr);
  for (const plan::RankProgram& r : p.plan.ranks()) {
    if (r.rank() < 0 || r.rank() >= n || pr.progs[r.rank()])
      return invalidInput(p.dir, ": rank ", r.rank(), " is out of range or repeated (", n, " ranks)");
    pr.progs[r.rank()] = &r;
  }
  for (int g = 0; g < p.plan.groups_size(); ++g) {
    const plan::Group& grp = p.plan.groups(g);
    GlooGroup gg{grp.axis(), {grp.ranks().begin(), grp.ranks().end()}};
    std::vector<int> sorted = gg.ranks;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty() || sorted.front() < 0 || sorted.back() >= n ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return invalidInput(p.dir, ": group ", g, " has an invalid rank list");
    pr.groups.push_back(std::move(gg));
  }
  return pr;
}

/// \returns how many ranks of a `worldSize`-rank multi-process run share this
/// machine: LOCAL_WORLD_SIZE (torchrun) or OMPI_COMM_WORLD_LOCAL_SIZE
/// (mpirun) when set, else all of them (the safe guess against oversubscription).
int localRanks(int worldSize) {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end == 0 && n >= 1) return static_cast<int>(std::min<long>(n, worldSize));
  }
  return worldSize;
}

/// Runs warmup + iters passes of one rank. \returns the mean seconds of the timed ones.
/// \returns a rank's executor on a new backend o.backend.
StatusOr<std::unique_ptr<Executor>> makeExecutor(const LoadedPlan& p, const plan::RankProgram& prog,
                                                 const RunOptions& o) {
  BackendOptions bo;
  if (o.referenceKernels) bo.kernelProviders = {Provider::kReference};
  bo.poisonMemory = o.poisonMemory;
  bo.foldEpilogues = o.foldEpilogues;
  bo.rank = prog.rank();
  bo.synchronize = o.profile;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, makeBackend(o.backend, bo));
  ASSIGN_OR_RETURN(auto exec, Executor::create(p, prog, std::shared_ptr<Backend>(std::move(backend)), o.verifyChecksums));
  exec->setTimeLimit(o.timeoutSeconds);
  exec->setOverlap(o.overlapComm);
  return exec;
}

/// How a rank of a multi-process run learns that a peer died, gave up,
/// stopped answering or never arrived, to name it when a collective fails
/// and to stop at once rather than at the timeout.
///
/// Every rank's watcher thread calls beat() five times a second, in its own
/// thread, so a rank busy in a long kernel still beats; a rank whose process
/// stopped (SIGSTOP, a debugger, a machine swapping) falls silent. A rank
/// that gives up on its own (a timeout, an error) posts why (failed()); a
/// rank that stops because a peer was lost only ends (ended()), so that the
/// reasons name the first cause, not a chain of them.
class RankLiveness {
 public:
  virtual ~RankLiveness() = default;
  /// Marks this rank as ended on its own (before its connections close, so
  /// that a peer that sees them close does not take it for dead).
  virtual void ended() = 0;
  /// Posts that this rank gave up and why, for its peers to read.
  virtual void failed(const std::string& why) = 0;
  /// Tells the peers this rank is still running.
  virtual void beat() {}
  /// \returns the peers that died, have been silent for over `silence`,
  /// gave up or, with `arrivals`, never arrived, as phrases.
  virtual std::vector<std::string> lost(bool arrivals, std::chrono::milliseconds silence) = 0;
  /// Rank 0 after its success: waits (at most `limit`) until no peer is
  /// still running, so that closing what rank 0 holds for the others (the TCP
  /// store) cannot look like its death to a peer finishing its last send.
  virtual void awaitPeers(std::chrono::milliseconds limit) {}

  /// \returns `s`, its message led by the peers that died, stopped answering
  /// (silent for over `silence`), gave up or never arrived, when `s` is a
  /// communication failure (an environment error) and there are some; else `s`.
  Status explain(const Status& s, std::chrono::milliseconds silence) {
    if (s.code() != StatusCode::kEnvironment) return s;
    std::vector<std::string> dead = lost(/*arrivals=*/true, silence);
    if (dead.empty()) return s;
    return Status(s.code(), strCat(join(dead), "; ", s.message()));
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
    return out;
  }

 protected:
  /// \returns the phrase for a peer that gave up with `reason` (cut short: the
  /// whole of it is in that rank's own message).
  static std::string gaveUp(int r, const std::string& reason) {
    constexpr size_t kShown = 300;
    return strCat("rank ", r, " gave up (", reason.size() > kShown ? reason.substr(0, kShown) + "..." : reason, ")");
  }
  /// Appends `gave` (peers that gave up) to `lost` (peers that died or
  /// stopped): with their reasons when they are the only cause known, else
  /// by rank only (their reasons would name the same peers again).
  static void addGaveUp(std::vector<std::string>* lost, const std::vector<std::pair<int, std::string>>& gave) {
    const bool causeKnown = !lost->empty();
    for (const auto& [r, reason] : gave) lost->push_back(causeKnown ? strCat("rank ", r, " gave up") : gaveUp(r, reason));
  }
  static std::string silent(int r, const std::string& where, std::chrono::milliseconds ms) {
    return strCat("rank ", r, " (process ", where, ") stopped answering (silent for ", ms.count() / 100 / 10.0,
                  " s)");
  }
};

/// What the processes of a multi-process run leave in the rendezvous folder,
/// so that a survivor can name a rank that died (a SIGKILL, the OOM killer),
/// stopped or gave up: `rank<R>.pid` ("<host> <pid>") when rank R starts,
/// `rank<R>.beat` (a counter its watcher raises five times a second),
/// `rank<R>.fail` (why it gave up) and `rank<R>.end` when it ends on its
/// own, with success or with an error it reports. A rank whose process is
/// gone (or a zombie) on this host without an `.end` file died; one whose
/// counter has not moved for a while (as this process's clock measures it:
/// no clocks are compared across machines) stopped answering.
class DirLiveness final : public RankLiveness {
 public:
  DirLiveness(std::string dir, int rank, int worldSize)
      : dir_(std::move(dir)), rank_(rank), n_(worldSize), seen_(worldSize) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    host_ = host;
    std::error_code ec;
    for (const char* ext : {"end", "fail", "beat"})
      std::filesystem::remove(file(rank_, ext), ec);  // left by an earlier run of the same id
    std::ofstream(file(rank_, "pid")) << host_ << " " << getpid() << "\n";
  }

  void ended() override { std::ofstream(file(rank_, "end")) << "\n"; }

  void failed(const std::string& why) override {
    // Whole or not at all: written aside, then renamed.
    const std::string tmp = file(rank_, "fail.tmp");
    std::ofstream(tmp) << why << "\n";
    std::error_code ec;
    std::filesystem::rename(tmp, file(rank_, "fail"), ec);
  }

  void beat() override {
    const std::string tmp = file(rank_, "beat.tmp");
    std::ofstream(tmp) << ++beats_ << "\n";
    std::error_code ec;
    std::filesystem::rename(tmp, file(rank_, "beat"), ec);
  }

  std::vector<std::string> lost(bool arrivals, std::chrono::milliseconds silence) override {
    std::vector<std::string> died, stopped, never;
    std::vector<std::pair<int, std::string>> gave;
    std::lock_guard<std::mutex> lock(mu_);  // the watcher and the failing thread
    const auto now = std::chrono::steady_clock::now();
    for (int r = 0; r < n_; ++r) {
      if (r == rank_) continue;
      std::string reason;
      if (std::getline(std::ifstream(file(r, "fail")), reason)) {
        gave.emplace_back(r, reason);
        continue;
      }
      if (std::filesystem::exists(file(r, "end"))) continue;
      std::ifstream in(file(r, "pid"));
      std::string host;
      long pid = 0;
      if (!in) {
        if (arrivals) never.push_back(strCat("rank ", r, " never arrived"));
        continue;
      }
      if (!(in >> host >> pid) || pid <= 0) continue;
      if (host == host_ && processGone(pid) && !std::filesystem::exists(file(r, "end"))) {
        died.push_back(strCat("rank ", r, " (process ", pid, ") died without a message"));
        continue;
      }
      long count = -1;
      if (!(std::ifstream(file(r, "beat")) >> count)) continue;  // not beating yet
      Seen& s = seen_[r];
      if (count != s.count) s = {count, now};
      const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - s.since);
      if (quiet > silence) stopped.push_back(silent(r, strCat(host, " ", pid), quiet));
    }
    died.insert(died.end(), stopped.begin(), stopped.end());
    addGaveUp(&died, gave);
    died.insert(died.end(), never.begin(), never.end());
    return died;
  }

 private:
  std::string file(int r, const char* ext) const { return strCat(dir_, "/rank", r, ".", ext); }

  /// \returns true when `pid` no longer runs: gone, or a zombie its parent
  /// has not reaped yet.
  static bool processGone(long pid) {
    if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
    std::ifstream stat(strCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(stat, line)) return false;
    size_t close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    char state = line[close + 2];
    return state == 'Z' || state == 'X';
  }

  /// A peer's beat counter as last read, and when it last changed.
  struct Seen {
    long count = -1;
    std::chrono::steady_clock::time_point since;
  };
  std::string dir_, host_;
  int rank_, n_;
  long beats_ = 0;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

/// Liveness from the TCP store: it records a rank whose connection closed
/// without a BYE as died, one that posted FAIL with its reason, and how long
/// each live rank has been silent (its watcher's PEERS requests are its
/// beats); when the store itself is gone, rank 0 (its host) is.
class StoreLiveness final : public RankLiveness {
 public:
  explicit StoreLiveness(std::shared_ptr<TcpStoreClient> c) : client_(std::move(c)) {}

  void ended() override {
    if (ended_.exchange(true)) return;
    client_->bye().ignore();  // the store may be gone with rank 0 already
  }

  void failed(const std::string& why) override { client_->fail(why).ignore(); }

  std::vector<std::string> lost(bool arrivals, std::chrono::milliseconds silence) override {
    auto peers = client_->peers();
    std::lock_guard<std::mutex> lock(mu_);
    if (!peers.ok()) {
      // The store closes with rank 0: what it told before still stands.
      std::vector<std::string> out = phrases(last_, /*arrivals=*/false, silence);
      // Once this rank ended, rank 0 may close the store at any time.
      if (client_->rank() != 0 && !ended_ && out.empty())
        out.push_back(strCat("rank 0 (serving the rendezvous store at ", client_->address().str(), ") is gone"));
      return out;
    }
    last_ = *peers;
    return phrases(last_, arrivals, silence);
  }

  void awaitPeers(std::chrono::milliseconds limit) override {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      auto peers = client_->peers();
      if (!peers.ok() || std::none_of(peers->begin(), peers->end(),
                                      [](const PeerState& p) { return p.kind == PeerState::kAlive; }))
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  /// \returns the phrases of RankLiveness::lost for what the store said.
  std::vector<std::string> phrases(const std::vector<PeerState>& peers, bool arrivals,
                                   std::chrono::milliseconds silence) const {
    std::vector<std::string> out, died, stopped;
    std::vector<std::pair<int, std::string>> gave;
    for (size_t r = 0; r < peers.size(); ++r) {
      const PeerState& ps = peers[r];
      const int rank = static_cast<int>(r);
      if (rank == client_->rank()) continue;
      if (ps.kind == PeerState::kDied)
        died.push_back(strCat("rank ", r, " (process ", ps.where, ") died without a message"));
      else if (ps.kind == PeerState::kFailed)
        gave.emplace_back(rank, ps.reason);
      else if (ps.kind == PeerState::kAlive && std::chrono::milliseconds(ps.silentMs) > silence)
        stopped.push_back(silent(rank, ps.where, std::chrono::milliseconds(ps.silentMs)));
      else if (arrivals && ps.kind == PeerState::kNeverArrived)
        out.push_back(strCat("rank ", r, " never arrived"));
    }
    died.insert(died.end(), stopped.begin(), stopped.end());
    addGaveUp(&died, gave);
    out.insert(out.begin(), died.begin(), died.end());
    return out;
  }

  std::shared_ptr<TcpStoreClient> client_;
  std::atomic<bool> ended_{false};
  std::mutex mu_;
  std::vector<PeerState> last_;  ///< what the store last told
};

/// \returns the bytes of the weights rank program `prog` maps. Every one is
/// read when it is mapped (its crc32, unless that check is off) and on every
/// run, so its pages are resident: counted at their size.
int64_t mappedWeightBytes(const plan::RankProgram& prog) {
  int64_t bytes = 0;
  for (const plan::Weight& w : prog.weights()) bytes += static_cast<int64_t>(w.nbytes());
  return bytes;
}

/// \returns the bytes of the whole model inputs rank program `prog` binds:
/// the caller's tensors, read in place (a slice the rank copies is a tensor it
/// allocates, counted when made), 64-byte rounded as an allocation is.
int64_t wholeInputBytes(const plan::Plan& plan, const plan::RankProgram& prog) {
  int64_t bytes = 0;
  for (const plan::IoBinding& b : prog.inputs()) {
    if (b.split_dim() != -1 || b.index() < 0 || b.index() >= plan.inputs_size()) continue;
    uint64_t n = fromDesc(plan.inputs(b.index()).desc()).bytes();
    bytes += static_cast<int64_t>(std::max<uint64_t>((n + 63) / 64 * 64, 64));
  }
  return bytes;
}

/// \returns a new memory account for rank program `prog`, holding what the
/// rank reads in place from its start: its mapped weights and the whole
/// model inputs it binds.
std::shared_ptr<MemoryAccount> rankAccount(const plan::Plan& plan, const plan::RankProgram& prog) {
  std::shared_ptr<MemoryAccount> a = MemoryAccount::make();
  a->add(mappedWeightBytes(prog) + wholeInputBytes(plan, prog));
  return a;
}

/// \returns what `account` counted for a rank (RunOptions::measureMemory).
RunResult::RankMemory rankMemory(const MemoryAccount& account, const plan::RankProgram& prog, bool aloneInProcess) {
  RunResult::RankMemory m;
  m.peakBytes = account.peak();
  m.weightBytes = mappedWeightBytes(prog);
  m.arenaBytes = static_cast<int64_t>(std::max<uint64_t>((prog.arena_bytes() + 63) / 64 * 64, 64));
  m.processPeakRss = aloneInProcess ? processPeakRss() : -1;
  return m;
}

std::vector<RunResult::InstructionTime> instructionTimes(const Executor& e) {
  std::vector<RunResult::InstructionTime> out;
  for (const Executor::InstructionTime& t : e.instructionProfile()) out.push_back({t.seconds, t.minSeconds, t.calls, t.provider});
  return out;
}

/// Mean seconds of one timed run, and of its waiting on transfers; its
/// communication that may overlap computation.
struct RunTimes {
  double seconds = 0, waitSeconds = 0;
  RunResult::CommOverlap collectives, receives;
};

void addComm(RunResult::CommOverlap* into, const Executor::CommTimes& t) {
  into->busySeconds += t.busySeconds;
  into->blockedSeconds += t.blockedSeconds;
  into->hiddenSeconds += t.hiddenSeconds;
  into->operations += static_cast<double>(t.operations);
  into->postedAhead += static_cast<double>(t.postedAhead);
}

void scaleComm(RunResult::CommOverlap* c, double by) {
  c->busySeconds *= by;
  c->blockedSeconds *= by;
  c->hiddenSeconds *= by;
  c->operations *= by;
  c->postedAhead *= by;
}

/// The figures each rank sends rank 0 after a run of rank processes.
constexpr int64_t kRankFigures = 17;

StatusOr<RunTimes> timedRuns(Executor& exec, const std::vector<Tensor>& inputs, RankComms* comms,
                             std::vector<OutputPiece>* pieces, const RunOptions& o,
                             const std::atomic<bool>* lostPeer = nullptr) {
  RunTimes t;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    if (lostPeer && *lostPeer) return environmentError("a peer rank is lost (stopped before run ", it + 1, ")");
    if (it == o.warmup) exec.resetInstructionProfile();
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(exec.run(inputs, comms, pieces));
    if (it < o.warmup) continue;
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.waitSeconds += exec.waitSeconds();
    addComm(&t.collectives, exec.collectiveTimes());
    addComm(&t.receives, exec.receiveTimes());
  }
  t.seconds /= o.iters;
  t.waitSeconds /= o.iters;
  scaleComm(&t.collectives, 1.0 / o.iters);
  scaleComm(&t.receives, 1.0 / o.iters);
  return t;
}

/// One rank's times in a streamed run, per batch.
struct StreamTimes {
  std::vector<double> wait, run, transferWait;
  double total = 0;
};

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

/// Runs every batch of `pipe` once on `exec`: waits for the batch, runs it on
/// the pipeline's slices, keeps its output pieces in `(*batches)[k]`
/// (copying any that shares bytes with a staging buffer, which the next batch
/// overwrites) and releases the batch.
/// \returns ok, or the first error (the reader's, the run's, or a lost peer).
Status streamedRuns(Executor& exec, InputPipeline& pipe, RankComms* comms,
                    std::vector<std::vector<OutputPiece>>* batches, StreamTimes* t,
                    const std::atomic<bool>* lostPeer = nullptr) {
  using Clock = std::chrono::steady_clock;
  const int n = pipe.batches();
  batches->assign(n, {});
  const Clock::time_point start = Clock::now();
  for (int k = 0; k < n; ++k) {
    if (lostPeer && *lostPeer) return environmentError("a peer rank is lost (stopped before batch ", k, ")");
    double wait = 0;
    ASSIGN_OR_RETURN(const RankSlices* slices, pipe.acquire(k, exec.rank(), &wait));
    const Clock::time_point t0 = Clock::now();
    Status st = exec.runSlices(*slices, comms, &(*batches)[k]);
    const double ran = std::chrono::duration<double>(Clock::now() - t0).count();
    if (st.ok())
      for (OutputPiece& piece : (*batches)[k])
        if (pipe.holds(piece.tensor)) piece.tensor = piece.tensor.clone();
    pipe.release(k, exec.rank());
    RETURN_IF_ERROR(st.withContext(strCat("batch ", k)));
    t->wait.push_back(wait);
    t->run.push_back(ran);
    t->transferWait.push_back(exec.waitSeconds());
  }
  t->total = std::chrono::duration<double>(Clock::now() - start).count();
  return Status::OK();
}

/// Fills result->stream and the per-rank means from every rank's stream
/// times and output pieces (`pieces[r][k]`: rank r's pieces of batch k).
Status collectStream(const plan::Plan& plan, const std::vector<StreamTimes>& times,
                     std::vector<std::vector<std::vector<OutputPiece>>>& pieces, RunResult* result) {
  const size_t n = times.size();
  const size_t batches = n ? times[0].run.size() : 0;
  for (size_t r = 0; r < n; ++r) {
    result->stream.waitSeconds.push_back(times[r].wait);
    result->stream.runSeconds.push_back(times[r].run);
    result->stream.totalSeconds.push_back(times[r].total);
    result->rankSeconds[r] = mean(times[r].run);
    result->rankWaitSeconds[r] = mean(times[r].transferWait);
  }
  for (size_t k = 0; k < batches; ++k) {
    std::vector<std::vector<OutputPiece>> perRank(n);
    for (size_t r = 0; r < n; ++r) perRank[r] = std::move(pieces[r][k]);
    auto outs = assemble(plan, perRank);
    if (!outs.ok()) return outs.status().withContext(strCat("batch ", k));
    result->stream.outputs.push_back(std::move(outs).value());
  }
  return Status::OK();
}

}  // namespace

StatusOr<RunResult> runPlan(const LoadedPlan& p, const std::vector<Tensor>& inputs,
                            const RunOptions& o) {
  ASSIGN_OR_RETURN(Prepared pr, prepare(p, inputs, o));
  const int n = static_cast<int>(pr.progs.size());
  const std::vector<GlooGroup>& groups = pr.groups;
  std::vector<std::unique_ptr<Executor>> execs(n);
  // Each rank's memory account: charged on this thread while its executor is
  // prepared, then on its own thread (RunOptions::measureMemory).
  std::vector<std::shared_ptr<MemoryAccount>> accounts(n);
  for (int r = 0; r < n; ++r) {
    if (o.measureMemory) accounts[r] = rankAccount(p.plan, *pr.progs[r]);
    ScopedMemoryAccount charging(accounts[r].get());
    ASSIGN_OR_RETURN(execs[r], makeExecutor(p, *pr.progs[r], o));
    execs[r]->setProfiling(o.profile);
  }

  const bool withWorld = hasTransfers(p.plan);
  const bool needComms = withWorld || !groups.empty();
  GlooOptions gopts;
  gopts.timeout = std::chrono::seconds(o.timeoutSeconds);
  std::shared_ptr<GlooStore> store = GlooStore::inProcess();

  std::mutex mu;
  Status firstError;
  auto fail = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (firstError.ok()) firstError = s;
  };
  // Communicators outlive every thread: a rank that finishes early keeps its
  // connections open while its peers still drain theirs.
  std::vector<RankComms> comms(n);
  std::vector<std::vector<OutputPiece>> pieces(n);
  std::vector<std::vector<std::vector<OutputPiece>>> batchPieces(n);  // streamed: per rank, per batch
  std::vector<StreamTimes> streamTimes(n);
  RunResult result;
  result.rankSeconds.assign(n, 0.0);
  result.rankWaitSeconds.assign(n, 0.0);
  if (!o.pipeline) {
    result.rankCollectives.assign(n, {});
    result.rankReceives.assign(n, {});
  }
  // Every rank is a thread of this process: they share its processors.
  const int kernelThreads = o.threadsPerRank > 0 ? o.threadsPerRank : cpu::threadsPerRank(n);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        ScopedMemoryAccount charging(accounts[r].get());
        cpu::setKernelThreads(kernelThreads);
        if (needComms) {
          auto c = execs[r]->backend().communicators(store, gopts)->connect(r, n, groups, withWorld);
          if (!c.ok()) {
            if (o.pipeline) o.pipeline->cancel();  // its batches would never be released
            return fail(c.status());
          }
          comms[r] = std::move(c).value();
        }
        if (o.pipeline) {
          Status st = streamedRuns(*execs[r], *o.pipeline, &comms[r], &batchPieces[r], &streamTimes[r]);
          if (!st.ok()) {
            fail(st);
            o.pipeline->cancel();
            comms[r].abortAll();
          }
          return;
        }
        auto secs = timedRuns(*execs[r], inputs, &comms[r], &pieces[r], o);
        if (!secs.ok()) {
          fail(secs.status());
          comms[r].abortAll();
          return;
        }
        result.rankSeconds[r] = secs->seconds;
        result.rankWaitSeconds[r] = secs->waitSeconds;
        result.rankCollectives[r] = secs->collectives;
        result.rankReceives[r] = secs->receives;
      });
    }
    for (auto& t : threads) t.join();
  }
  // A reader error is the cause of whatever the ranks saw after it.
  if (!firstError.ok() && o.pipeline && !o.pipeline->error().ok()) return o.pipeline->error();
  if (!firstError.ok()) return firstError;
  result.profile = opTimes(*execs[0]);
  if (o.profile)
    for (const auto& e : execs) result.instructions.push_back(instructionTimes(*e));
  if (o.measureMemory)
    for (int r = 0; r < n; ++r) result.memory.push_back(rankMemory(*accounts[r], *pr.progs[r], n == 1));
  if (o.pipeline) {
    RETURN_IF_ERROR(collectStream(p.plan, streamTimes, batchPieces, &result));
    return result;
  }
  ASSIGN_OR_RETURN(result.outputs, assemble(p.plan, pieces));
  return result;
}

StatusOr<RunResult> runPlanRank(const LoadedPlan& p, const std::vector<Tensor>& inputs, const RunOptions& o,
                                int rank, const std::string& rendezvousDir) {
  Rendezvous rv;
  rv.dir = rendezvousDir;
  return runPlanRank(p, inputs, o, rank, rv);
}

namespace {

/// A process rank's connection to its peers, for one run or a session of
/// them: the rendezvous (a directory, or the TCP store rank 0 serves for as
/// long as the link lives), the liveness record with its watcher, and the
/// communicators. The watcher beats for this rank and looks for peers that
/// died, stopped answering or gave up, five times a second, from before
/// connecting to the end, and stops this rank when one did, even when it is
/// not talking to that peer (gloo does not wake an operation waiting on a
/// live peer).
class RankLink {
 public:
  /// Meets the other ranks through `rendezvous` and connects `exec`'s
  /// communicators (`groups`, and the world communicator, which also carries
  /// output pieces to rank 0).
  static StatusOr<std::unique_ptr<RankLink>> open(Executor& exec, const std::vector<GlooGroup>& groups,
                                                  const RunOptions& o, int rank, int n, const Rendezvous& rendezvous) {
    std::unique_ptr<RankLink> l(new RankLink(o, rank));
    const auto timeout = std::chrono::seconds(o.timeoutSeconds);
    std::shared_ptr<GlooStore> store;
    if (!rendezvous.dir.empty()) {
      ASSIGN_OR_RETURN(store, GlooStore::inDirectory(rendezvous.dir, timeout));
      l->liveness_ = std::make_unique<DirLiveness>(rendezvous.dir, rank, n);
    } else {
      if (rank == 0) {
        auto served = TcpStoreServer::start(rendezvous.tcp, rendezvous.runId, rendezvous.secret, n);
        if (!served.ok()) return served.status().withContext("rank 0");
        l->server_ = std::move(served).value();
      }
      ASSIGN_OR_RETURN(std::shared_ptr<TcpStoreClient> client,
                       TcpStoreClient::connect(rendezvous.tcp, rendezvous.runId, rendezvous.secret, rank, n, timeout));
      store = GlooStore::overTcp(client);
      l->liveness_ = std::make_unique<StoreLiveness>(client);
    }
    l->gopts_.timeout = timeout;
    if (!o.glooHost.empty()) l->gopts_.hostname = o.glooHost;
    l->gopts_.iface = o.glooIface;
    l->store_ = store;
    l->n_ = n;
    RankLink* raw = l.get();
    l->watcher_ = std::thread([raw] { raw->watch(); });
    RETURN_IF_ERROR(l->connect(exec, groups, store));
    return l;
  }

  /// Connects the communicators of another program of the same ranks (a
  /// generation plan's prefill), over the same rendezvous under its own key
  /// prefix, so that its groups never meet the first program's.
  /// \returns them (the link keeps them; the watcher aborts them too).
  StatusOr<RankComms*> connectMore(Executor& exec, const std::vector<GlooGroup>& groups) {
    RETURN_IF_ERROR(connect(exec, groups, store_->withPrefix(strCat("program", comms_.size()))));
    return &comms_.back();
  }

  ~RankLink() { stopWatcher(); }

  /// The first program's communicators.
  RankComms& comms() { return comms_.front(); }
  /// Set by the watcher once a peer is lost.
  const std::atomic<bool>& lostPeer() const { return lostPeer_; }

  /// Every failure after open: names the peers that were lost, posts why
  /// this rank gave up (unless a lost peer stopped it: the peers see that
  /// cause themselves), marks this rank as ended and closes its connections
  /// (so that its peers stop at once rather than at the timeout).
  /// \returns `s` with the lost peers named.
  Status failed(const Status& s) {
    stopWatcher();
    RankLiveness& live = *liveness_;
    Status why = live.explain(s, blameLimit_);
    // A peer's death can reach this rank's sockets (a reset connection)
    // before it reaches the liveness record (the store seeing the closed
    // connection, the folder the vanished process): give the record a moment
    // before naming no one.
    for (int i = 0; i < 40 && s.code() == StatusCode::kEnvironment && why.message() == s.message(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      why = live.explain(s, blameLimit_);
    }
    if (!lostPeer_) live.failed(why.message());
    live.ended();
    abortAll();
    // Rank 0 serves the TCP store: it stays a moment for its peers to read
    // why it gave up before the store closes with it.
    if (server_) live.awaitPeers(std::chrono::seconds(2));
    return why;
  }

  /// This rank ended its runs on its own; rank 0 then waits (at most
  /// `awaitPeers`) until no peer is still running, so that closing the TCP
  /// store it serves cannot look like its death to a peer finishing its last send.
  void ended(std::chrono::milliseconds awaitPeers) {
    liveness_->ended();
    if (rank_ == 0) liveness_->awaitPeers(awaitPeers);
  }

 private:
  RankLink(const RunOptions& o, int rank) : o_(o), rank_(rank) {
    const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::seconds(o.timeoutSeconds));
    // A peer silent for longer than an operation may take stopped answering;
    // when this rank fails, a peer silent for a few seconds (not 5 beats of
    // its watcher) is named as the likely cause.
    stopLimit_ = timeout + std::chrono::seconds(1);
    blameLimit_ = std::clamp(timeout / 2, std::chrono::milliseconds(500), std::chrono::milliseconds(3000));
  }

  void watch() {
    RankLiveness& live = *liveness_;
    std::unique_lock<std::mutex> lock(watchMu_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [&] { return done_; })) {
      live.beat();
      if (!live.lost(/*arrivals=*/false, stopLimit_).empty()) {
        lostPeer_ = true;
        abortAllLocked();
        if (!wake_.wait_for(lock, std::chrono::seconds(1), [&] { return done_; }) && o_.onStuckAfterPeerLost) {
          live.ended();
          // Rank 0 serves the TCP store: its peers may still be reading it.
          if (server_) live.awaitPeers(std::chrono::seconds(2));
          o_.onStuckAfterPeerLost(live.explain(
              environmentError("rank ", rank_, !comms_.empty() ? ": stopped while blocked in a collective or transfer"
                                                          : ": stopped while connecting to its peers"),
              blameLimit_));
        }
        return;
      }
    }
  }

  /// Connects `exec`'s communicators through `store` and keeps them.
  Status connect(Executor& exec, const std::vector<GlooGroup>& groups, std::shared_ptr<GlooStore> store) {
    auto connected = exec.backend().communicators(std::move(store), gopts_)->connect(rank_, n_, groups,
                                                                                     /*withWorld=*/n_ > 1);
    if (!connected.ok()) return failed(connected.status());
    std::lock_guard<std::mutex> lock(watchMu_);
    comms_.push_back(std::move(connected).value());
    return Status::OK();
  }

  void abortAll() {
    std::lock_guard<std::mutex> lock(watchMu_);
    abortAllLocked();
  }
  void abortAllLocked() {
    for (RankComms& c : comms_) c.abortAll();
  }

  void stopWatcher() {
    {
      std::lock_guard<std::mutex> lock(watchMu_);
      done_ = true;
    }
    wake_.notify_all();
    if (watcher_.joinable()) watcher_.join();
  }

  RunOptions o_;
  int rank_;
  std::chrono::milliseconds stopLimit_, blameLimit_;
  // Rank 0 serves the TCP store for as long as the link lives: declared
  // first, it is closed last.
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<RankLiveness> liveness_;
  std::shared_ptr<GlooStore> store_;
  GlooOptions gopts_;
  int n_ = 1;
  // Per program, the first one's first; grows under watchMu_ (a deque: the
  // programs' executors keep pointers to theirs).
  std::deque<RankComms> comms_;
  std::atomic<bool> lostPeer_{false};
  std::mutex watchMu_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread watcher_;
};

/// Rank 0 of a process run: receives rank r's output pieces of one batch
/// into `into`. A rank's pieces are its output bindings, with the types of
/// their buffers, in the order Executor::run makes them: per micro-batch the
/// batch's pieces, and the others once, with the last.
Status receivePieces(const LoadedPlan& p, const plan::RankProgram& prog, int r, Communicator& world,
                     std::vector<OutputPiece>* into) {
  const int runs = std::max(1, prog.microbatches());
  for (int m = 0; m < runs; ++m) {
    for (const plan::IoBinding& b : prog.outputs()) {
      if (!b.per_microbatch() && m + 1 != runs) continue;
      if (b.buffer() < 0 || b.buffer() >= prog.buffers_size())
        return invalidInput(p.dir, ": rank ", r, " binds output ", b.index(), " to a buffer it does not have");
      const int64_t offset = b.offset() + (b.per_microbatch() ? m * b.length() : 0);
      OutputPiece piece{b.index(), b.split_dim(), offset, b.length(),
                        Tensor::zeros(fromDesc(prog.buffers(b.buffer()).desc()))};
      RETURN_IF_ERROR(world.recv(&piece.tensor, r));
      into->push_back(std::move(piece));
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<RunResult> runPlanRank(const LoadedPlan& p, const std::vector<Tensor>& inputs, const RunOptions& o,
                                int rank, const Rendezvous& rendezvous) {
  ASSIGN_OR_RETURN(Prepared pr, prepare(p, inputs, o));
  const int n = static_cast<int>(pr.progs.size());
  if (rank < 0 || rank >= n) return invalidInput("rank ", rank, " is outside the plan's ", n, " ranks");
  std::shared_ptr<MemoryAccount> account = o.measureMemory ? rankAccount(p.plan, *pr.progs[rank]) : nullptr;
  ScopedMemoryAccount charging(account.get());  // this thread runs the rank
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, makeExecutor(p, *pr.progs[rank], o));
  exec->setProfiling(o.profile);
  cpu::setKernelThreads(o.threadsPerRank > 0 ? o.threadsPerRank : cpu::threadsPerRank(localRanks(n)));
  ASSIGN_OR_RETURN(std::unique_ptr<RankLink> link, RankLink::open(*exec, pr.groups, o, rank, n, rendezvous));
  RankComms& comms = link->comms();
  std::vector<OutputPiece> mine;
  // A streamed run: this rank's pieces and times per batch.
  std::vector<std::vector<OutputPiece>> myBatches;
  StreamTimes myTimes;
  std::optional<RunTimes> secs;
  if (o.pipeline) {
    Status st = streamedRuns(*exec, *o.pipeline, &comms, &myBatches, &myTimes, &link->lostPeer());
    if (!st.ok()) {
      o.pipeline->cancel();
      // Every process reads the same batches: a reader error is this rank's cause too.
      Status reader = o.pipeline->error();
      return link->failed(reader.ok() ? withRank(st, rank) : reader);
    }
    secs = RunTimes{mean(myTimes.run), mean(myTimes.transferWait), {}, {}};
  } else {
    auto timed = timedRuns(*exec, inputs, &comms, &mine, o, &link->lostPeer());
    if (!timed.ok()) return link->failed(withRank(timed.status(), rank));
    secs = *timed;
  }
  const int batches = o.pipeline ? o.pipeline->batches() : 0;
  // A streamed run's times go to rank 0 as [total, waits..., runs...].
  auto streamTensor = [&](const StreamTimes& st) {
    std::vector<double> v{st.total};
    v.insert(v.end(), st.wait.begin(), st.wait.end());
    v.insert(v.end(), st.run.begin(), st.run.end());
    return Tensor::fromVector<double>(DType::kF64, {static_cast<int64_t>(v.size())}, v);
  };
  // Rank times and memory figures, then pieces, go to rank 0 in rank order;
  // rank 0 assembles.
  RunResult::RankMemory mem = account ? rankMemory(*account, *pr.progs[rank], true) : RunResult::RankMemory{};
  const RunResult::CommOverlap& co = secs->collectives;
  const RunResult::CommOverlap& re = secs->receives;
  Tensor t = Tensor::fromVector<double>(DType::kF64, {kRankFigures},
                                        {secs->seconds, secs->waitSeconds, double(mem.peakBytes),
                                         double(mem.weightBytes), double(mem.arenaBytes), double(mem.processPeakRss),
                                         double(o.localRank), co.busySeconds, co.blockedSeconds, co.hiddenSeconds,
                                         co.operations, co.postedAhead, re.busySeconds, re.blockedSeconds,
                                         re.hiddenSeconds, re.operations, re.postedAhead});
  RunResult result;
  if (rank != 0) {
    Status sent = comms.world->send(t, 0);
    if (o.pipeline) {
      if (sent.ok()) sent = comms.world->send(streamTensor(myTimes), 0);
      for (size_t k = 0; sent.ok() && k < myBatches.size(); ++k)
        for (size_t i = 0; sent.ok() && i < myBatches[k].size(); ++i) sent = comms.world->send(myBatches[k][i].tensor, 0);
    }
    for (size_t i = 0; sent.ok() && i < mine.size(); ++i) sent = comms.world->send(mine[i].tensor, 0);
    if (!sent.ok()) return link->failed(sent);
    link->ended({});
    return result;
  }
  std::vector<std::vector<OutputPiece>> pieces(n);
  pieces[0] = std::move(mine);
  std::vector<std::vector<std::vector<OutputPiece>>> batchPieces(n);
  std::vector<StreamTimes> streamTimes(n);
  batchPieces[0] = std::move(myBatches);
  streamTimes[0] = myTimes;
  result.profile = opTimes(*exec);
  if (o.profile) result.instructions.push_back(instructionTimes(*exec));
  result.rankSeconds.push_back(secs->seconds);
  result.rankWaitSeconds.push_back(secs->waitSeconds);
  if (!o.pipeline) {
    result.rankCollectives.push_back(secs->collectives);
    result.rankReceives.push_back(secs->receives);
  }
  if (account) result.memory.push_back(mem);
  result.localRanks.push_back(o.localRank);
  for (int r = 1; r < n; ++r) {
    Tensor s = Tensor::zeros(DType::kF64, {kRankFigures});
    if (Status got = comms.world->recv(&s, r); !got.ok()) return link->failed(got);
    const double* f = s.data<double>();
    result.rankSeconds.push_back(f[0]);
    result.rankWaitSeconds.push_back(f[1]);
    if (account)
      result.memory.push_back({static_cast<int64_t>(f[2]), static_cast<int64_t>(f[3]), static_cast<int64_t>(f[4]),
                               static_cast<int64_t>(f[5])});
    result.localRanks.push_back(static_cast<int>(f[6]));
    if (!o.pipeline) {
      result.rankCollectives.push_back({f[7], f[8], f[9], f[10], f[11]});
      result.rankReceives.push_back({f[12], f[13], f[14], f[15], f[16]});
    }
    if (o.pipeline) {
      Tensor st = Tensor::zeros(DType::kF64, {1 + 2 * static_cast<int64_t>(batches)});
      if (Status got = comms.world->recv(&st, r); !got.ok()) return link->failed(got);
      const double* v = st.data<double>();
      streamTimes[r].total = v[0];
      streamTimes[r].wait.assign(v + 1, v + 1 + batches);
      streamTimes[r].run.assign(v + 1 + batches, v + 1 + 2 * batches);
      streamTimes[r].transferWait.assign(batches, f[1]);
    }
    // A streamed run sends the pieces of every batch in order.
    batchPieces[r].resize(batches);
    for (int k = 0; k < std::max(1, batches); ++k) {
      std::vector<OutputPiece>& into = o.pipeline ? batchPieces[r][k] : pieces[r];
      Status got = receivePieces(p, *pr.progs[r], r, *comms.world, &into);
      if (!got.ok()) return got.code() == StatusCode::kInvalidInput ? got : link->failed(got);
    }
  }
  link->ended(std::chrono::seconds(std::min(5, o.timeoutSeconds)));
  if (o.pipeline) {
    RETURN_IF_ERROR(collectStream(p.plan, streamTimes, batchPieces, &result));
    return result;
  }
  ASSIGN_OR_RETURN(result.outputs, assemble(p.plan, pieces));
  return result;
}

struct ProcessRankSession::Impl {
  /// One program of the session: the plan, then the ones start was given as `more`.
  struct Program {
    const LoadedPlan* plan = nullptr;
    Prepared pr;
    std::unique_ptr<Executor> exec;
    RankComms* comms = nullptr;  ///< owned by the link
    std::vector<OutputPiece> mine;
  };
  std::vector<Program> programs;
  int rank = 0, n = 0, kernelThreads = 1, timeoutSeconds = 300;
  std::unique_ptr<RankLink> link;
  std::atomic<bool> stop{false};
  Status firstError;
  int lastProgram = 0;

  Status fail(const Status& s) {
    firstError = link->failed(s);
    return firstError;
  }
};

ProcessRankSession::ProcessRankSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessRankSession::~ProcessRankSession() {
  Impl& m = *impl_;
  if (m.link && m.firstError.ok()) m.link->ended(std::chrono::seconds(std::min(5, m.timeoutSeconds)));
}

StatusOr<std::unique_ptr<ProcessRankSession>> ProcessRankSession::start(const LoadedPlan& p, const RunOptions& o,
                                                                         int rank, const Rendezvous& rendezvous) {
  return start(p, {}, o, rank, rendezvous);
}

StatusOr<std::unique_ptr<ProcessRankSession>> ProcessRankSession::start(const LoadedPlan& p,
                                                                         const std::vector<const LoadedPlan*>& more,
                                                                         const RunOptions& o, int rank,
                                                                         const Rendezvous& rendezvous) {
  RunOptions checked = o;
  checked.iters = 1;
  checked.warmup = 0;
  checked.pipeline = nullptr;
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->timeoutSeconds = o.timeoutSeconds;
  std::vector<const LoadedPlan*> all{&p};
  all.insert(all.end(), more.begin(), more.end());
  for (const LoadedPlan* lp : all) {
    if (!lp) return internalError("a session's program is missing");
    Impl::Program prog;
    ASSIGN_OR_RETURN(prog.pr, prepare(*lp, {}, checked, /*checkInputs=*/false));
    prog.plan = lp;
    const int n = static_cast<int>(prog.pr.progs.size());
    if (!impl->programs.empty() && n != impl->n)
      return invalidInput(lp->dir, ": a further program of ", n, " ranks for a session of ", impl->n);
    impl->n = n;
    if (rank < 0 || rank >= n) return invalidInput("rank ", rank, " is outside the plan's ", n, " ranks");
    ASSIGN_OR_RETURN(prog.exec, makeExecutor(*lp, *prog.pr.progs[rank], checked));
    prog.exec->setStopFlag(&impl->stop);
    prog.exec->setProfiling(o.profile);
    if (!impl->programs.empty()) RETURN_IF_ERROR(prog.exec->shareStates(*impl->programs.front().exec));
    impl->programs.push_back(std::move(prog));
  }
  impl->kernelThreads = o.threadsPerRank > 0 ? o.threadsPerRank : cpu::threadsPerRank(localRanks(impl->n));
  Impl::Program& first = impl->programs.front();
  ASSIGN_OR_RETURN(impl->link, RankLink::open(*first.exec, first.pr.groups, checked, rank, impl->n, rendezvous));
  first.comms = &impl->link->comms();
  for (size_t k = 1; k < impl->programs.size(); ++k) {
    Impl::Program& more = impl->programs[k];
    auto comms = impl->link->connectMore(*more.exec, more.pr.groups);
    if (!comms.ok()) {
      impl->firstError = comms.status();
      return comms.status();
    }
    more.comms = *comms;
  }
  return std::unique_ptr<ProcessRankSession>(new ProcessRankSession(std::move(impl)));
}

int ProcessRankSession::rank() const { return impl_->rank; }

int ProcessRankSession::programs() const { return static_cast<int>(impl_->programs.size()); }

StatusOr<std::vector<Tensor>> ProcessRankSession::run(const std::vector<Tensor>& inputs) { return runProgram(0, inputs); }

StatusOr<std::vector<Tensor>> ProcessRankSession::runProgram(int k, const std::vector<Tensor>& inputs) {
  Impl& m = *impl_;
  if (k < 0 || k >= static_cast<int>(m.programs.size()))
    return internalError("the session has no program ", k, " (", m.programs.size(), ")");
  if (!m.firstError.ok())
    return Status(m.firstError.code(), strCat("the session stopped at an earlier error: ", m.firstError.message()));
  Impl::Program& prog = m.programs[k];
  m.lastProgram = k;
  RETURN_IF_ERROR(validateInputs(prog.plan->plan, inputs));
  cpu::setKernelThreads(m.kernelThreads);  // the calling thread's kernels
  RankComms& comms = *prog.comms;
  if (m.link->lostPeer()) return m.fail(environmentError("a peer rank is lost (stopped before this run)"));
  if (Status st = prog.exec->run(inputs, &comms, &prog.mine); !st.ok()) return m.fail(withRank(st, m.rank));
  if (m.rank != 0) {
    for (const OutputPiece& piece : prog.mine)
      if (Status sent = comms.world->send(piece.tensor, 0); !sent.ok()) return m.fail(sent);
    return std::vector<Tensor>{};
  }
  std::vector<std::vector<OutputPiece>> pieces(m.n);
  pieces[0] = prog.mine;  // views: kept for lastOwnParts
  for (int r = 1; r < m.n; ++r) {
    Status got = receivePieces(*prog.plan, *prog.pr.progs[r], r, *comms.world, &pieces[r]);
    if (!got.ok()) return m.fail(got);
  }
  return assemble(prog.plan->plan, pieces);
}

Status ProcessRankSession::sumOverRanks(Tensor& t) {
  Impl& m = *impl_;
  if (!m.firstError.ok())
    return Status(m.firstError.code(), strCat("the session stopped at an earlier error: ", m.firstError.message()));
  if (m.n == 1) return Status::OK();
  if (Status st = m.programs.front().comms->world->allReduceSum(t); !st.ok()) return m.fail(st);
  return Status::OK();
}

int64_t ProcessRankSession::lastRunCommBytes() const {
  const Executor& e = *impl_->programs[impl_->lastProgram].exec;
  return e.collectiveTimes().bytes + e.receiveTimes().bytes + e.sentBytes();
}

std::map<std::string, RunResult::OpTime> ProcessRankSession::opProfile(int k) const {
  if (k < 0 || k >= static_cast<int>(impl_->programs.size())) return {};
  return opTimes(*impl_->programs[k].exec);
}

void ProcessRankSession::interrupt() { impl_->stop.store(true); }

StatusOr<std::vector<ProcessRankSession::OwnPart>> ProcessRankSession::lastOwnParts() const {
  const plan::Plan& plan = impl_->programs.front().plan->plan;
  std::vector<std::vector<const OutputPiece*>> byOutput(plan.outputs_size());
  for (const OutputPiece& p : impl_->programs.front().mine) byOutput[p.index].push_back(&p);
  std::vector<OwnPart> parts(plan.outputs_size());
  for (int k = 0; k < plan.outputs_size(); ++k) {
    auto& pieces = byOutput[k];
    if (pieces.empty()) continue;
    std::sort(pieces.begin(), pieces.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    const OutputPiece& first = *pieces.front();
    if (pieces.size() == 1 || first.splitDim < 0) {
      parts[k] = {first.tensor, first.splitDim, first.offset};
      continue;
    }
    // A rank's micro-batches: adjacent slices along one dim, joined.
    TensorType type = first.tensor.type();
    int64_t extent = 0;
    for (const OutputPiece* p : pieces) {
      if (p->splitDim != first.splitDim || p->offset != first.offset + extent)
        return internalError("rank ", impl_->rank, ": its pieces of output ", k, " are not adjacent slices");
      extent += p->length;
    }
    type.shape[first.splitDim] = extent;
    Tensor joined = Tensor::zeros(type);
    for (const OutputPiece* p : pieces)
      RETURN_IF_ERROR(insertAlong(joined, p->tensor, first.splitDim, p->offset - first.offset));
    parts[k] = {std::move(joined), first.splitDim, first.offset};
  }
  return parts;
}

struct RankSession::Impl {
  const LoadedPlan* plan = nullptr;
  int n = 0;
  std::vector<std::unique_ptr<Executor>> execs;
  std::vector<RankComms> comms;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable wake, done;
  int64_t step = 0;      // the run the ranks are asked for
  int pending = 0;       // ranks still running it
  bool stopping = false;
  const std::vector<Tensor>* inputs = nullptr;
  std::vector<std::vector<OutputPiece>> pieces;
  Status firstError;
  bool broken = false;
  // One rank with nothing to communicate runs on the caller's thread (no
  // hand-off to its rank thread and back each run: the overhead of a small step).
  bool runsInline = false;
  std::atomic<bool> stop{false};  // interrupt()
  int kernelThreads = 1;
  bool inlineThreadsSet = false;

  void fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (firstError.ok()) firstError = s;
  }

  void rankLoop(int r, int kernelThreads, bool needComms, bool withWorld, const std::vector<GlooGroup>& groups,
                std::shared_ptr<GlooStore> store, GlooOptions gopts) {
    cpu::setKernelThreads(kernelThreads);
    if (needComms) {
      auto c = execs[r]->backend().communicators(store, gopts)->connect(r, n, groups, withWorld);
      if (!c.ok()) fail(c.status());
      else comms[r] = std::move(c).value();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (--pending == 0) done.notify_all();
    }
    int64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return stopping || step > seen; });
        if (stopping) return;
        seen = step;
      }
      Status st = execs[r]->run(*inputs, needComms ? &comms[r] : nullptr, &pieces[r]);
      if (!st.ok()) {
        fail(withRank(st, r));
        comms[r].abortAll();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--pending == 0) done.notify_all();
    }
  }
};

RankSession::RankSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RankSession::~RankSession() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->threads) t.join();
}

StatusOr<std::unique_ptr<RankSession>> RankSession::start(const LoadedPlan& p, const RunOptions& o) {
  RunOptions checked = o;
  checked.iters = 1;
  checked.warmup = 0;
  checked.pipeline = nullptr;
  // prepare() checks the programs and groups; the inputs come with each run.
  ASSIGN_OR_RETURN(Prepared pr, prepare(p, {}, checked, /*checkInputs=*/false));
  auto impl = std::make_unique<Impl>();
  impl->plan = &p;
  impl->n = static_cast<int>(pr.progs.size());
  const int n = impl->n;
  impl->execs.resize(n);
  impl->comms.resize(n);
  impl->pieces.resize(n);
  for (int r = 0; r < n; ++r) {
    ASSIGN_OR_RETURN(impl->execs[r], makeExecutor(p, *pr.progs[r], checked));
    impl->execs[r]->setStopFlag(&impl->stop);
    impl->execs[r]->setProfiling(o.profile);
  }
  const bool withWorld = hasTransfers(p.plan);
  const bool needComms = withWorld || !pr.groups.empty();
  GlooOptions gopts;
  gopts.timeout = std::chrono::seconds(o.timeoutSeconds);
  std::shared_ptr<GlooStore> store = GlooStore::inProcess();
  const int kernelThreads = o.threadsPerRank > 0 ? o.threadsPerRank : cpu::threadsPerRank(n);
  impl->runsInline = n == 1 && !needComms && !o.interruptible;
  impl->kernelThreads = kernelThreads;
  impl->pending = n;
  Impl* raw = impl.get();
  for (int r = 0; r < n; ++r)
    impl->threads.emplace_back([raw, r, kernelThreads, needComms, withWorld, groups = pr.groups, store, gopts] {
      raw->rankLoop(r, kernelThreads, needComms, withWorld, groups, store, gopts);
    });
  std::unique_ptr<RankSession> session(new RankSession(std::move(impl)));
  {
    std::unique_lock<std::mutex> lock(raw->mu);
    raw->done.wait(lock, [&] { return raw->pending == 0; });
    if (!raw->firstError.ok()) return raw->firstError;
  }
  return session;
}

StatusOr<std::vector<Tensor>> RankSession::run(const std::vector<Tensor>& inputs) {
  Impl& m = *impl_;
  if (m.broken)
    return Status(m.firstError.code(), strCat("the session stopped at an earlier error: ", m.firstError.message()));
  RETURN_IF_ERROR(validateInputs(m.plan->plan, inputs));
  if (m.runsInline) {
    if (!m.inlineThreadsSet) {
      cpu::setKernelThreads(m.kernelThreads);
      m.inlineThreadsSet = true;
    }
    Status st = m.execs[0]->run(inputs, nullptr, &m.pieces[0]);
    if (!st.ok()) {
      m.broken = true;
      m.firstError = withRank(st, 0);
      return m.firstError;
    }
    return assemble(m.plan->plan, m.pieces);
  }
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.inputs = &inputs;
    m.pending = m.n;
    ++m.step;
  }
  m.wake.notify_all();
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.done.wait(lock, [&] { return m.pending == 0; });
    if (!m.firstError.ok()) {
      m.broken = true;
      return m.firstError;
    }
  }
  return assemble(m.plan->plan, m.pieces);
}

void RankSession::interrupt() {
  // Each rank stops at its next instruction and closes its connections
  // (rankLoop), which wakes a peer blocked in a collective with it.
  impl_->stop.store(true);
}

int64_t RankSession::lastRunCommBytes() const {
  int64_t n = 0;
  for (const auto& e : impl_->execs)
    n += e->collectiveTimes().bytes + e->receiveTimes().bytes + e->sentBytes();
  return n;
}

std::map<std::string, RunResult::OpTime> RankSession::opProfile() const {
  return opTimes(*impl_->execs.front());
}

Status RankSession::shareStates(const RankSession& other) {
  if (other.impl_->n != impl_->n)
    return invalidInput("sessions of ", impl_->n, " and ", other.impl_->n, " ranks cannot share state");
  for (int r = 0; r < impl_->n; ++r) RETURN_IF_ERROR(impl_->execs[r]->shareStates(*other.impl_->execs[r]));
  return Status::OK();
}

StatusOr<std::vector<Tensor>> runReference(const LoadedPlan& p, const std::vector<Tensor>& inputs, int timeLimitSeconds) {
  RETURN_IF_ERROR(validateInputs(p.plan, inputs));
  if (!p.plan.has_reference() || p.plan.reference().instructions_size() == 0)
    return invalidInput(p.dir, ": the plan has no reference program");
  ASSIGN_OR_RETURN(auto exec, Executor::create(p, p.plan.reference(), /*verifyChecksums=*/true,
                                               /*fastKernels=*/false));
  exec->setTimeLimit(timeLimitSeconds);
  std::vector<std::vector<OutputPiece>> pieces(1);
  RETURN_IF_ERROR(exec->run(inputs, nullptr, &pieces[0]).withContext("reference program"));
  return assemble(p.plan, pieces);
}

std::vector<Tensor> randomInputsFor(const plan::Plan& plan, uint64_t seed) {
  std::vector<TensorType> types;
  for (const plan::IoDesc& d : plan.inputs()) types.push_back(fromDesc(d.desc()));
  return pseudoRandomTensors(types, seed);
}


}  // namespace pcc
