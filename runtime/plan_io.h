// Reading and writing plan bundles: a directory NAME.pcc/ holding plan.pb (the
// plan::Plan message), one weight file per rank program, and report.json. See
// docs/plan-format.md for the layout and the versioning rule.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan.pb.h"
#include "runtime/support/mapped_file.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// The plan schema this runtime reads and writes. Bump it on any change that an
/// older reader would misinterpret; readers refuse versions they do not know.
constexpr uint32_t kPlanSchemaVersion = 2;

/// Alignment of every tensor in a weight file, in bytes.
constexpr uint64_t kWeightAlignment = 64;

/// Builds one weight file. Tensors are kept by reference (Tensor shares its
/// buffer) until finish() writes them, so adding a weight copies nothing.
class WeightFileWriter {
 public:
  /// Appends `t` at the next 64-byte aligned offset.
  /// \returns its plan::Weight (name, desc, offset, nbytes, crc32 via zlib's crc32).
  plan::Weight add(const std::string& name, const Tensor& t);
  /// \returns the size the file will have, in bytes.
  uint64_t size() const { return size_; }
  /// Writes the file (zero padding between tensors).
  /// \returns ok, or an invalid-input error naming `path` when it cannot be written.
  Status finish(const std::string& path) const;

 private:
  struct Entry {
    uint64_t offset;
    Tensor tensor;
  };
  std::vector<Entry> entries_;
  uint64_t size_ = 0;
};

/// \returns zlib's crc32 of `n` bytes at `data` (any size).
uint32_t crc32Of(const void* data, size_t n);

/// Creates `dir` (and its parents) and writes plan.pb, every weight file
/// (`weightFiles` maps a file name relative to `dir` to its writer) and
/// report.json. A plan with schema_version 0 is stamped kPlanSchemaVersion.
/// \returns ok, or an error naming the file that could not be written.
Status writePlanBundle(const std::string& dir, const plan::Plan& plan,
                       const std::map<std::string, WeightFileWriter*>& weightFiles,
                       const std::string& reportJson);

/// A plan bundle in memory: the plan and its weight files, memory-mapped.
struct LoadedPlan {
  plan::Plan plan;
  std::string dir;
  /// Weight file name (relative to dir, as in RankProgram.weight_file) -> mapping.
  std::map<std::string, std::shared_ptr<MappedFile>> files;
};

/// Reads DIR/plan.pb and maps the weight files its programs name.
/// \returns the plan, or an invalid-input error naming the file when DIR is not
/// a directory, plan.pb is missing or unparsable, its schema version is not
/// kPlanSchemaVersion, or a weight file is missing.
StatusOr<LoadedPlan> loadPlanBundle(const std::string& dir);

/// \returns weight `weightIndex` of `prog` as a Tensor::view into the mapped
/// weight file (never copied), after checking that it lies inside the file, is
/// aligned and matches its desc, and (when `verifyChecksum`) its crc32; errors
/// are invalid-input and name the file and the weight.
StatusOr<Tensor> loadWeight(const LoadedPlan& p, const plan::RankProgram& prog, int weightIndex,
                            bool verifyChecksum);

}  // namespace pcc
