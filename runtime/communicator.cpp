// The start forms' defaults: the blocking call runs, and its work has finished.
#include "runtime/communicator.h"

namespace pcc {

namespace {

class FinishedWork final : public CommWork {
 public:
  explicit FinishedWork(Status s) : status_(std::move(s)), at_(Clock::now()) {}
  Status wait() override { return status_; }
  Clock::time_point finishedAt() const override { return at_; }

 private:
  Status status_;
  Clock::time_point at_;
};

/// \returns the work of a blocking call that returned `s`: an error is the start's.
StatusOr<std::unique_ptr<CommWork>> ranBlocking(Status s) {
  if (!s.ok()) return s;
  return finishedWork(Status::OK());
}

}  // namespace

std::unique_ptr<CommWork> finishedWork(Status status) { return std::make_unique<FinishedWork>(std::move(status)); }

StatusOr<std::unique_ptr<CommWork>> Communicator::startAllReduceSum(Tensor& t) { return ranBlocking(allReduceSum(t)); }

StatusOr<std::unique_ptr<CommWork>> Communicator::startAllGather(const Tensor& in, int dim, Tensor* out) {
  return ranBlocking(allGather(in, dim, out));
}

StatusOr<std::unique_ptr<CommWork>> Communicator::startReduceScatterSum(const Tensor& in, int dim, Tensor* out) {
  return ranBlocking(reduceScatterSum(in, dim, out));
}

StatusOr<std::unique_ptr<CommWork>> Communicator::startAllToAll(const Tensor& in, int splitDim, int concatDim,
                                                                 Tensor* out) {
  return ranBlocking(allToAll(in, splitDim, concatDim, out));
}

StatusOr<std::unique_ptr<CommWork>> Communicator::startRecv(Tensor* t, int peer) { return ranBlocking(recv(t, peer)); }

}  // namespace pcc
