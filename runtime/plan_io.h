// Reading and writing plan bundles: a directory NAME.pcc/ holding plan.pb (the
// plan::Plan message), one weight file per rank program, and report.json. See
// docs/plan-format.md for the layout and the versioning rule.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel_library.h"
#include "runtime/plan.pb.h"
#include "runtime/support/mapped_file.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

/// The plan schema this runtime reads and writes. Bump it on any change that an
/// older reader would misinterpret; readers refuse versions they do not know.
/// Version 3 added the checksum of plan.pb (Plan.plan_crc32); version 4 the
/// REGION instruction and its bodies (If, Loop, Scan run at run time);
/// version 5 pipeline stages: programs run once per micro-batch
/// (RankProgram.microbatches, IoBinding.per_microbatch);
/// version 6 the LAUNCH instruction and the table of generated kernels.
constexpr uint32_t kPlanSchemaVersion = 8;

/// Alignment of every tensor in a weight file, in bytes.
constexpr uint64_t kWeightAlignment = 64;

/// Told how far writing the weight files has come: bytes written so far of
/// `total`, and the file being written (relative to the bundle).
using WriteProgress = std::function<void(uint64_t done, uint64_t total, const std::string& file)>;

/// Builds one weight file. Tensors and blocks of tensors are kept by reference
/// (Tensor shares its buffer) until finish() writes them: adding a weight reads
/// and copies nothing, so planning never touches weight bytes.
class WeightFileWriter {
 public:
  /// Appends `t` at the next 64-byte aligned offset.
  /// \returns its plan::Weight (name, desc, offset, nbytes); crc32 is 0 until
  /// the file is written (finish, which writePlanBundle calls, computes it).
  plan::Weight add(const std::string& name, const Tensor& t);
  /// Appends block `b` of a tensor (a rank's piece of a weight), as add(name,
  /// Tensor) would append the block's copy. \returns its plan::Weight, crc32 0.
  plan::Weight add(const std::string& name, const TensorBlock& b);
  /// From now on, add() of a block of the same source tensor (the same
  /// memory) at the same place as one added before returns that weight's
  /// entry instead of appending a copy: programs that read the same pieces of
  /// one model (a generation plan's decode and prefill) share the file.
  /// A piece of at most kShareByContentBytes held in memory (not a file
  /// mapping) is also shared with an earlier one of the same type and bytes.
  void shareIdentical();
  static constexpr size_t kShareByContentBytes = size_t{1} << 20;
  /// \returns the size the file will have, in bytes.
  uint64_t size() const { return size_; }
  /// \returns the number of weights added.
  size_t count() const { return entries_.size(); }
  /// \returns the offset of weight `i` (in the order added).
  uint64_t offsetOf(size_t i) const { return entries_.at(i).offset; }
  /// \returns the size of weight `i` in bytes.
  uint64_t nbytesOf(size_t i) const { return entries_.at(i).block.nbytes(); }
  /// Writes the file (zero padding between tensors), streaming each weight
  /// from its source: a block's contiguous runs are copied straight from the
  /// source (a memory-mapped model) into the file, each CRC is computed as
  /// its bytes go by, and pages of mapped sources are released behind the
  /// write, so memory stays bounded whatever the file's size. `progress`
  /// (optional) is called as bytes are written, with `done` counted from
  /// `base` and `total` passed through.
  /// \returns the crc32 of every weight in the order added, or an
  /// invalid-input error naming `path` when it cannot be written.
  StatusOr<std::vector<uint32_t>> finish(const std::string& path, const WriteProgress& progress = {},
                                         uint64_t base = 0, uint64_t total = 0) const;

 private:
  struct Entry {
    uint64_t offset;
    TensorBlock block;
  };
  /// \returns the bytes of a small in-memory block (kShareByContentBytes), else nothing.
  static std::optional<std::string> smallBytes(const TensorBlock& b);
  void indexContent(size_t i);
  std::vector<Entry> entries_;
  uint64_t size_ = 0;
  bool shareIdentical_ = false;
  std::map<std::pair<uint32_t, size_t>, std::vector<size_t>> byContent_;  // (crc32, bytes) -> entries
};

/// \returns zlib's crc32 of `n` bytes at `data` (any size).
uint32_t crc32Of(const void* data, size_t n);

/// Writes the bundle `dir`: every weight file (`weightFiles` maps a file name
/// relative to `dir` to its writer), plan.pb (ending in its checksum, with the
/// crc32 of every weight of a program whose weight_file has a writer filled in
/// from what the writer wrote at that weight's offset and size) and report.json, all into a new directory next to
/// `dir` that is renamed to `dir` when complete. `progress` (optional) is told
/// how far the weight files have come. An existing `dir` is replaced only when it is a plan
/// bundle (or empty): it is moved aside, the new one moved in, the old one
/// removed, so a process running the old plan keeps its mapped files and a
/// failed write leaves the old plan whole. Parents are created. A plan with
/// schema_version 0 is stamped kPlanSchemaVersion. `otherFiles` (name
/// relative to `dir`, under kernels/ -> bytes) are written as they are: the
/// generated kernels, whose checksums the plan already holds.
/// \returns ok, or an invalid-input error for an empty path, `/`, a path that
/// exists and is not a bundle, a name that is not valid UTF-8, or a file that
/// could not be written.
Status writePlanBundle(const std::string& dir, const plan::Plan& plan,
                       const std::map<std::string, WeightFileWriter*>& weightFiles,
                       const std::string& reportJson, const WriteProgress& progress = {},
                       const std::map<std::string, std::string>& otherFiles = {});

/// \returns ok when writePlanBundle may write `dir` (new, empty, or an existing
/// bundle it may replace), or the invalid-input error it would return; lets a
/// tool refuse a bad output path before it compiles.
Status checkBundleTarget(const std::string& dir);

/// A plan bundle in memory: the plan and its weight files, memory-mapped.
struct LoadedPlan {
  plan::Plan plan;
  std::string dir;
  /// Weight file name (relative to dir, as in RankProgram.weight_file) -> mapping.
  std::map<std::string, std::shared_ptr<MappedFile>> files;
  /// The generated CPU kernels (kernels/cpu.so, checked, loaded on first
  /// use); null when the plan has no kernel table.
  std::shared_ptr<KernelLibrary> kernels;
};

/// \returns the prefill program of a generation plan (Plan.generation.prefill,
/// or with `shorter` >= 0 Plan.generation.shorter_prefills(shorter)) as a plan
/// of its own: its inputs, outputs, groups and ranks in Plan's fields,
/// Generation's roles set from it, no reference and no prefill programs; the
/// mesh, kernels and states as in `plan`.
plan::Plan prefillView(const plan::Plan& plan, int shorter = -1);

/// \returns Generation.prefill (`shorter` < 0) or Generation.shorter_prefills(shorter).
inline const plan::Prefill& prefillOf(const plan::Generation& g, int shorter) {
  return shorter < 0 ? g.prefill() : g.shorter_prefills(shorter);
}

/// Reads DIR/plan.pb, checks its checksum, validates it (validatePlan) and maps
/// the weight files its programs name (confined to DIR: no absolute path, no
/// '..', no symbolic link leading out).
/// \returns the plan, or an invalid-input error naming the file when DIR is not
/// a directory, plan.pb is missing, unparsable, of another schema version,
/// fails its checksum or its validation, or a weight file is missing or
/// lies outside DIR.
StatusOr<LoadedPlan> loadPlanBundle(const std::string& dir);

/// Checks everything about a plan that does not need its weight files: the
/// mesh, ranks and groups agree (pp*dp*tp rank programs, each rank once at its
/// mesh_coord, each group exactly the ranks of one mesh line along its axis),
/// every tensor type is known and at most 2^48 bytes, every buffer id, weight
/// index, group index, peer and input/output index is in range, instructions
/// have the operand counts of their kind (collectives' types and dims agree,
/// the reference program has no collectives or transfers), arena buffers lie
/// inside the arena, and the SENDs from each rank to another match that rank's
/// RECVs in number and types. Kernel types are checked when a backend
/// prepares them.
/// \returns ok or an invalid-input error naming the rank, buffer or instruction.
Status validatePlan(const plan::Plan& plan);

/// \returns ok, or an invalid-input error "CTX: problem" when `d` has an
/// unknown dtype, a negative dim or more than 2^48 bytes.
Status checkTensorDesc(const plan::TensorDesc& d, const std::string& ctx);

/// \returns ok, or an invalid-input error naming the first string of the plan
/// (a name, an op, a string attribute) that is not valid UTF-8, which
/// libprotobuf would write but refuse to read back.
Status checkPlanStrings(const plan::Plan& plan);

/// \returns `s` when it is valid UTF-8, else `s` with every byte outside
/// printable ASCII written as \xNN.
std::string utf8OrEscaped(const std::string& s);

/// \returns weight `weightIndex` of `prog` as a Tensor::view into the mapped
/// weight file (never copied), after checking that it lies inside the file, is
/// aligned and matches its desc, and (when `verifyChecksum`) its crc32; errors
/// are invalid-input and name the file and the weight.
StatusOr<Tensor> loadWeight(const LoadedPlan& p, const plan::RankProgram& prog, int weightIndex,
                            bool verifyChecksum);

}  // namespace pcc
