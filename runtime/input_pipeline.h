// InputPipeline: streams the model inputs of K batches to the ranks of a run
// (`pcc-run --batches K`, docs/runtime.md#input-pipeline). A reader thread
// gets each batch's whole inputs from a BatchReader (decoding tensor files, or
// making seeded random ones), checks them against the plan, and copies the
// slices each rank binds (per input binding and per micro-batch, as the
// plan's IoBindings say) into host staging buffers allocated once, through a
// StagingAllocator (the Backend's hook, so that a device backend can pin
// them). It holds `prefetch + 1` slots: while the ranks compute batch k from
// one slot, the reader fills batch k+1 .. k+prefetch into the others; a slot
// is filled again only once every rank has released the batch it held.
//
// 1. start() allocates every slot's staging tensors and starts the reader.
// 2. The reader, for k = 0..K-1: waits for slot k % slots to be free, reads
//    the batch (timing its busy time), checks count, dtype and shape of every
//    input, copies the slices, marks the slot ready for batch k.
// 3. A rank calls acquire(k) (timing its wait), runs, calls release(k).
// 4. A reader error is kept with its batch: acquire(j) answers it for j >= k,
//    so every rank stops at the same batch and none waits for ever; a rank
//    that fails calls cancel(), which wakes the reader and every waiting rank.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/plan_io.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// The whole model inputs of one batch, as a BatchReader returns them.
struct BatchInputs {
  std::vector<Tensor> tensors;       ///< one per Plan.inputs entry, in order
  std::vector<std::string> sources;  ///< per tensor: where it came from (a file), for messages
};

/// \returns the inputs of batch `batch` (0-based), or an error naming the file.
using BatchReader = std::function<StatusOr<BatchInputs>(int batch)>;
/// \returns a host tensor of type `t` the pipeline may write (Backend::allocateStaging).
using StagingAllocator = std::function<StatusOr<Tensor>(const TensorType& t)>;

struct PipelineOptions {
  int batches = 1;
  /// Batches the reader may have ready ahead of the one the ranks compute;
  /// 0 reads each batch only after the ranks released the one before
  /// (synchronous: no overlap, `pcc-run --no-prefetch`).
  int prefetch = 2;
  /// A testing aid: the reader sleeps this long per batch (counted as its busy time).
  int readDelayMs = 0;
};

/// One rank's inputs of one batch: per input binding (RankProgram.inputs
/// order), per micro-batch, the host tensor it binds (one tensor when the
/// binding is the same in every micro-batch run). Executor::runSlices takes it.
using RankSlices = std::vector<std::vector<Tensor>>;

class InputPipeline {
 public:
  /// Allocates the staging buffers of `progs` (the rank programs this process
  /// runs; each must outlive the pipeline, as must `plan`) and starts the reader.
  /// \returns the pipeline, or an error (a binding outside its input, an
  /// allocation failure).
  static StatusOr<std::unique_ptr<InputPipeline>> start(const plan::Plan& plan,
                                                        std::vector<const plan::RankProgram*> progs,
                                                        BatchReader read, StagingAllocator allocate,
                                                        PipelineOptions options);
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  int batches() const { return options_.batches; }
  int prefetch() const { return options_.prefetch; }

  /// Rank `rank` waits until batch `batch` is ready; `*waitSeconds` gets the
  /// time it waited. \returns its slices (valid until release), or the
  /// reader's error when it failed at this batch or an earlier one, or an
  /// error after cancel().
  StatusOr<const RankSlices*> acquire(int batch, int rank, double* waitSeconds);
  /// Rank `rank` is done with batch `batch` (and with its slices).
  void release(int batch, int rank);
  /// Stops the reader and wakes every waiting rank with an error (a rank failed).
  void cancel();
  /// Stops the reader and waits for it (a no-op when it has finished).
  void stop();

  /// \returns the reader's error (ok when none).
  Status error() const;
  /// \returns per batch read so far, the reader's busy seconds (reading,
  /// checking and copying; not its waits for a free slot).
  std::vector<double> readSeconds() const;
  /// \returns the bytes of every slot's staging buffers.
  int64_t stagingBytes() const { return stagingBytes_; }
  /// \returns true when `t`'s bytes lie in a staging buffer.
  bool holds(const Tensor& t) const;

 private:
  struct Slot {
    int batch = -1;
    bool ready = false;
    int pending = 0;                // ranks yet to release it
    std::vector<Tensor> whole;      // per plan input: a whole-input staging tensor, or undefined
    std::vector<RankSlices> ranks;  // per rank program of this process
  };

  InputPipeline(const plan::Plan& plan, std::vector<const plan::RankProgram*> progs, BatchReader read,
                PipelineOptions options)
      : plan_(plan), progs_(std::move(progs)), read_(std::move(read)), options_(options) {}

  Status allocate(const StagingAllocator& allocate);
  void readerLoop();
  /// Reads batch `k` into `slot` (no lock held: the ranks do not use a slot that is not ready).
  Status fill(int k, Slot& slot);
  int indexOf(int rank) const;

  const plan::Plan& plan_;
  std::vector<const plan::RankProgram*> progs_;
  BatchReader read_;
  PipelineOptions options_;
  std::vector<Slot> slots_;
  int64_t stagingBytes_ = 0;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;  // staging bytes [lo, hi)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  Status error_;
  int errorBatch_ = -1;
  std::vector<double> readSeconds_;
  std::thread reader_;
};

}  // namespace pcc
