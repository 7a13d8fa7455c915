// Communicator: the collectives and point-to-point transfers a rank program
// uses. One communicator spans one group of ranks (Plan.groups); ranks, peers
// and the rank order of gathers are positions inside that group. Every call is
// bounded by a timeout: a peer that never arrives is an error, never a hang.
//
// Each operation also has a start form (startAllReduceSum, ...) that returns
// a CommWork at once and completes in the background; CommWork::wait()
// finishes it. Operations of one communicator complete in the order they were
// started or called. The default start forms run the blocking call, so a
// communicator that implements only the blocking calls is correct, with
// nothing overlapped.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// An operation a Communicator started (Communicator::startAllReduceSum and
/// the others). Until wait() returns, the caller must keep its operands alive,
/// must not write its input or output, and must not read its output.
class CommWork {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~CommWork() = default;
  /// Waits for the operation to finish (bounded by the communicator's
  /// timeout). On a device backend this may only order the device's compute
  /// after the operation, without blocking the host.
  /// \returns its status (the same on every call); the output holds the
  /// result only when it is ok.
  virtual Status wait() = 0;
  /// \returns when the operation finished, as measured where it ran (the
  /// communication thread), or, where that is not known, when wait() returned.
  /// Valid once wait() has returned.
  virtual Clock::time_point finishedAt() const = 0;
};

/// \returns a work that has already finished with `status` (the start forms'
/// default: the blocking call ran).
std::unique_ptr<CommWork> finishedWork(Status status);

class Communicator {
 public:
  virtual ~Communicator() = default;

  /// \returns this rank's position in the group.
  virtual int rank() const = 0;
  /// \returns the number of ranks in the group.
  virtual int size() const = 0;

  /// Sums `t` over the group in place; `t` must own its buffer and have the
  /// same type on every rank.
  virtual Status allReduceSum(Tensor& t) = 0;
  /// Concatenates every rank's `in` along `dim` in group order into `*out`.
  /// Extents along `dim` may differ between ranks; other dims must agree.
  virtual Status allGather(const Tensor& in, int dim, Tensor* out) = 0;
  /// Sums `in` (same type on every rank) over the group and keeps this rank's
  /// slice along `dim`. When `*out` is defined on entry its extent along `dim`
  /// is this rank's slice length (slices follow in group order and must cover
  /// the dim); otherwise the dim is split evenly, the first `dim % size` ranks
  /// taking one extra row.
  virtual Status reduceScatterSum(const Tensor& in, int dim, Tensor* out) = 0;
  /// Splits `in` along `splitDim` into one chunk per rank (the first
  /// `extent % size` ranks taking one extra row), sends chunk j to group rank
  /// j and concatenates the chunks received along `concatDim` in group order
  /// into `*out`: the split moves from `concatDim` to `splitDim`. `in` has the
  /// same type on every rank except along `concatDim`. When `*out` is defined
  /// on entry its extent along `concatDim` is the whole, split over the ranks
  /// by the same rule (it must give this rank `in`'s extent); otherwise the
  /// extents are exchanged first.
  virtual Status allToAll(const Tensor& in, int splitDim, int concatDim, Tensor* out) = 0;
  /// Sends `t` to group rank `peer`; the peer posts a matching recv.
  virtual Status send(const Tensor& t, int peer) = 0;
  /// Receives into `*t`, which must be allocated with the expected type.
  virtual Status recv(Tensor* t, int peer) = 0;
  /// Starts sending a copy of `t` to group rank `peer` and returns without
  /// waiting for the peer to take it; transfers to a peer arrive in the order
  /// they were started (send() and postSend() alike). Default: send().
  virtual Status postSend(const Tensor& t, int peer) { return send(t, peer); }
  /// Waits until every postSend() has been taken by its peer (bounded by the
  /// timeout). \returns the first failure.
  virtual Status waitSends() { return Status::OK(); }

  /// \returns whether the start forms return before their operation ends (a
  /// communication thread or stream runs it); false when they run the
  /// blocking call (the defaults).
  virtual bool startsInBackground() const { return false; }
  /// Starts allReduceSum(t): `t` is summed in place in the background.
  /// \returns the work, or an error found before anything was started.
  virtual StatusOr<std::unique_ptr<CommWork>> startAllReduceSum(Tensor& t);
  /// Starts allGather(in, dim, out); `*out` is set once wait() returned ok.
  virtual StatusOr<std::unique_ptr<CommWork>> startAllGather(const Tensor& in, int dim, Tensor* out);
  /// Starts reduceScatterSum(in, dim, out); `*out` as in reduceScatterSum,
  /// holding the slice once wait() returned ok.
  virtual StatusOr<std::unique_ptr<CommWork>> startReduceScatterSum(const Tensor& in, int dim, Tensor* out);
  /// Starts allToAll(in, splitDim, concatDim, out); `*out` as in allToAll,
  /// holding the exchanged tensor once wait() returned ok.
  virtual StatusOr<std::unique_ptr<CommWork>> startAllToAll(const Tensor& in, int splitDim, int concatDim,
                                                             Tensor* out);
  /// Posts recv(t, peer): `*t`'s memory receives the data in the background.
  virtual StatusOr<std::unique_ptr<CommWork>> startRecv(Tensor* t, int peer);

  /// Closes this rank's connections so that peers blocked on it fail at once
  /// instead of waiting for their timeout. The communicator is unusable after.
  virtual void abort() {}
};

/// The communicators of one rank: one per group of the plan it belongs to, and
/// one over all ranks for send/recv (peers there are global ranks).
struct RankComms {
  /// Null when the plan has no send/recv.
  std::unique_ptr<Communicator> world;
  /// Indexed like Plan.groups; null where this rank is not a member.
  std::vector<std::unique_ptr<Communicator>> groups;

  /// Aborts every communicator (see Communicator::abort).
  void abortAll() {
    if (world) world->abort();
    for (auto& g : groups)
      if (g) g->abort();
  }
};

/// One group of ranks (a Plan.groups entry).
struct CommGroup {
  std::string axis;        ///< "tp", "dp", "pp": for messages
  std::vector<int> ranks;  ///< global ranks, in group order
};

/// Makes the communicators of one rank; each Backend has one (gloo for cpu).
class CommunicatorFactory {
 public:
  virtual ~CommunicatorFactory() = default;
  /// Connects global rank `rank` of `worldSize`: a communicator for every
  /// group in `groups` that contains it (its peers call this concurrently),
  /// and one over all ranks when `withWorld`.
  /// \returns the communicators, or an error naming the rank and group.
  virtual StatusOr<RankComms> connect(int rank, int worldSize, const std::vector<CommGroup>& groups,
                                      bool withWorld) = 0;
};

}  // namespace pcc
