// Running a REGION instruction (If, Loop, Scan with bodies) on a Backend.
//
// A body is interpreted as a small program: its KERNEL instructions are
// prepared once through Backend::prepareKernel (the same kernel path as the
// rank program's), nested REGIONs recursively. Each run of a body allocates
// its buffers from the backend as they are written (outside the arena) and
// drops them at FREE or when the run ends. The region's own outputs are the
// executor's buffers (planned in the arena as usual); the body's results are
// copied into them once the region ends.
//
// What glues iterations together (the condition and trip count read back,
// Scan's slices, the stacked scan outputs) goes through toHost / toDevice.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/plan.pb.h"
#include "runtime/plan_regions.h"
#include "runtime/support/attribute.h"

namespace pcc {

/// The time limit of one run of a program (Executor::setTimeLimit).
struct RunLimit {
  int seconds = 0;  ///< 0: none
  std::chrono::steady_clock::time_point deadline;  ///< set when a run starts
};

/// What a region needs from the program it is part of.
struct RegionEnv {
  Backend* backend = nullptr;
  /// Weight `index` of the rank program: the device tensor, and in `*host` the
  /// mapped host tensor (kept alive by the caller as long as the region).
  std::function<StatusOr<Tensor>(int index, const Tensor** host)> weight;
  /// A Loop stops with an error once the clock passes the run's deadline
  /// (when `limit` has seconds): the run's time limit (pcc-run --timeout), so
  /// that a condition that never turns false or a huge trip count cannot hang
  /// the run. Owned by the executor.
  const RunLimit* limit = nullptr;
};

class BodyProgram;

/// A REGION instruction prepared on a backend.
class RegionRunner {
 public:
  /// Prepares `ins` (which must outlive the runner; its operand counts already
  /// checked by validatePlan) for inputs and outputs of the planned types
  /// (dtype kUndefined: absent); `where` names it in messages.
  /// \returns the runner, or an invalid-input error when the bodies' types do
  /// not fit the operands or a body's kernel cannot be prepared.
  static StatusOr<std::unique_ptr<RegionRunner>> prepare(const plan::Instruction& ins, const AttrMap& attrs,
                                                         const std::vector<TensorType>& inputs,
                                                         const std::vector<TensorType>& outputs, const RegionEnv& env,
                                                         const std::string& where);
  ~RegionRunner();

  /// Runs the region on `args` (device tensors; nullptr for an absent input),
  /// writing `outs` (device tensors of the planned types; undefined where the
  /// program does not use the output).
  /// \returns ok or the first error, naming the region (and the body's node).
  Status run(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs);

 private:
  RegionRunner() = default;
  Status runIf(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs);
  Status runLoop(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs);
  Status runScan(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs);
  /// Copies `results` into the defined tensors of `outs`.
  Status store(const std::vector<Tensor>& results, const std::vector<Tensor>& outs);

  const plan::Instruction* ins_ = nullptr;
  RegionEnv env_;
  std::string where_;
  std::vector<std::unique_ptr<BodyProgram>> bodies_;
  std::vector<TensorType> outputs_;
  // The layout (runtime/plan_regions.h) and, for Scan, its axes.
  RegionLayout::Op op_ = RegionLayout::Op::kIf;
  int64_t captures_ = 0, carried_ = 0, scanInputs_ = 0, scanOutputs_ = 0;
  std::vector<int64_t> inAxes_, outAxes_;  // normalized
  std::vector<bool> inReverse_, outReverse_;
  int64_t scanTrip_ = 0;
};

}  // namespace pcc
