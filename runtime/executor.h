// Executor: runs one RankProgram of a plan on the CPU reference kernels, with
// its collectives and transfers going through the rank's communicators.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/ops/registry.h"
#include "runtime/plan_io.h"
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
  /// Prepares `prog` (which must outlive the executor, as must `p`): checks
  /// that every buffer id an instruction or binding names exists, that every
  /// op has a kernel, and maps the weights as views (checking their crc32 when
  /// `verifyChecksums`).
  /// With `fastKernels`, ops that have one run on the oneDNN kernels of
  /// runtime/cpu (falling back to the reference kernel for what those do not
  /// take); without, every op runs its reference kernel.
  /// \returns the executor, or an invalid-input error naming the rank and the
  /// instruction's node, buffer or weight at fault.
  static StatusOr<std::unique_ptr<Executor>> create(const LoadedPlan& p,
                                                    const plan::RankProgram& prog,
                                                    bool verifyChecksums, bool fastKernels = true);

  /// Runs the program once on the model inputs `inputs` (every one, in
  /// Plan.inputs order; the rank binds the slices it needs). `comms` may be
  /// null for a program without collectives or transfers.
  /// \returns ok with this rank's output pieces in `*outputs`, or the first
  /// error, naming the rank and the instruction's node.
  Status run(const std::vector<Tensor>& inputs, RankComms* comms, std::vector<OutputPiece>* outputs);

  int rank() const { return prog_.rank(); }

  /// Per-op time accounting: when on, run() adds each kernel's seconds and
  /// calls to opProfile() under its op name.
  void setProfiling(bool on) { profiling_ = on; }
  struct OpTime {
    double seconds = 0;
    int64_t calls = 0;
  };
  const std::map<std::string, OpTime>& opProfile() const { return profile_; }

 private:
  /// An instruction with its buffer ids resolved to slots and attributes parsed.
  struct Step {
    const plan::Instruction* ins;
    int index;  // position in the program
    AttrMap attrs;
    std::vector<int> in, out;  // slots; -1 for an absent optional input
    std::unique_ptr<KernelOverride> fast;  // the op's fast kernel, or null
  };

  Executor(const LoadedPlan& p, const plan::RankProgram& prog) : plan_(p), prog_(prog) {}

  Status prepare(bool verifyChecksums, bool fastKernels);
  Status execute(const Step& s, std::vector<Tensor>& bufs, RankComms* comms);
  /// \returns "rank R: node 'N' (OP)" or the instruction's index and kind.
  std::string where(const Step& s) const;
  /// \returns an error unless `t` has the type of buffer `slot`.
  Status checkType(const Step& s, int slot, const Tensor& t, const char* what) const;

  const LoadedPlan& plan_;
  const plan::RankProgram& prog_;
  std::vector<TensorType> types_;     // per slot
  std::vector<const plan::Buffer*> buffers_;
  std::vector<Tensor> weights_;       // per slot: the mapped weight, or undefined
  std::vector<Step> steps_;
  std::vector<int> inputSlots_, outputSlots_;  // per binding
  bool profiling_ = false;
  std::map<std::string, OpTime> profile_;
};

}  // namespace pcc
