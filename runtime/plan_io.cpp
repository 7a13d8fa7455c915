#include "runtime/plan_io.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runtime/plan_convert.h"

namespace pcc {

namespace fs = std::filesystem;

namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string joinPath(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

Status writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return invalidInput(path, ": cannot open for writing");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return invalidInput(path, ": write failed");
  return Status::OK();
}

Status ensureParent(const std::string& path) {
  std::error_code ec;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return invalidInput(parent.string(), ": cannot create directory: ", ec.message());
  return Status::OK();
}

}  // namespace

uint32_t crc32Of(const void* data, size_t n) {
  // zlib's length argument is a uInt: feed large buffers in chunks.
  uLong crc = crc32(0L, Z_NULL, 0);
  const Bytef* p = static_cast<const Bytef*>(data);
  constexpr size_t kChunk = size_t{1} << 30;
  while (n > 0) {
    size_t c = std::min(n, kChunk);
    crc = crc32(crc, p, static_cast<uInt>(c));
    p += c;
    n -= c;
  }
  return static_cast<uint32_t>(crc);
}

plan::Weight WeightFileWriter::add(const std::string& name, const Tensor& t) {
  uint64_t offset = (size_ + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  plan::Weight w;
  w.set_name(name);
  *w.mutable_desc() = toDesc(t.type());
  w.set_offset(offset);
  w.set_nbytes(t.nbytes());
  w.set_crc32(crc32Of(t.raw(), t.nbytes()));
  entries_.push_back({offset, t});
  size_ = offset + t.nbytes();
  return w;
}

Status WeightFileWriter::finish(const std::string& path) const {
  RETURN_IF_ERROR(ensureParent(path));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return invalidInput(path, ": cannot open for writing");
  static const char kZeros[kWeightAlignment] = {};
  uint64_t pos = 0;
  for (const Entry& e : entries_) {
    out.write(kZeros, static_cast<std::streamsize>(e.offset - pos));
    out.write(static_cast<const char*>(e.tensor.raw()),
              static_cast<std::streamsize>(e.tensor.nbytes()));
    pos = e.offset + e.tensor.nbytes();
  }
  out.close();
  if (!out) return invalidInput(path, ": write failed");
  return Status::OK();
}

Status writePlanBundle(const std::string& dir, const plan::Plan& plan,
                       const std::map<std::string, WeightFileWriter*>& weightFiles,
                       const std::string& reportJson) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return invalidInput(dir, ": cannot create directory: ", ec.message());
  if (plan.schema_version() != 0 && plan.schema_version() != kPlanSchemaVersion)
    return internalError(dir, ": refusing to write plan schema version ", plan.schema_version(),
                         " (this build writes ", kPlanSchemaVersion, ")");
  std::string bytes;
  if (plan.schema_version() == 0) {
    plan::Plan stamped = plan;
    stamped.set_schema_version(kPlanSchemaVersion);
    if (!stamped.SerializeToString(&bytes)) return internalError(dir, "/plan.pb: cannot serialize");
  } else if (!plan.SerializeToString(&bytes)) {
    return internalError(dir, "/plan.pb: cannot serialize");
  }
  RETURN_IF_ERROR(writeBytes(joinPath(dir, "plan.pb"), bytes));
  for (const auto& [name, writer] : weightFiles) {
    if (!writer) return internalError(joinPath(dir, name), ": no writer");
    RETURN_IF_ERROR(writer->finish(joinPath(dir, name)));
  }
  return writeBytes(joinPath(dir, "report.json"), reportJson);
}

StatusOr<LoadedPlan> loadPlanBundle(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return invalidInput(dir, ": not a plan bundle (not a directory)");
  std::string planPath = joinPath(dir, "plan.pb");
  if (!fs::is_regular_file(planPath, ec)) return invalidInput(planPath, ": missing");
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> planFile, MappedFile::open(planPath));
  if (planFile->size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return invalidInput(planPath, ": too large to parse (", planFile->size(), " bytes)");
  LoadedPlan lp;
  lp.dir = dir;
  if (!lp.plan.ParseFromArray(planFile->data(), static_cast<int>(planFile->size())))
    return invalidInput(planPath, ": cannot parse as a pcc plan");
  if (lp.plan.schema_version() > 0 && lp.plan.schema_version() < kPlanSchemaVersion)
    return invalidInput(planPath, ": plan schema version ", lp.plan.schema_version(),
                        " is older than this runtime's ", kPlanSchemaVersion,
                        " (it has no memory plan); recompile the model with this pcc");
  if (lp.plan.schema_version() != kPlanSchemaVersion)
    return invalidInput(planPath, ": plan schema version ", lp.plan.schema_version(),
                        " is not supported by this runtime (supports ", kPlanSchemaVersion, ")");
  auto openFile = [&](const plan::RankProgram& prog) -> Status {
    const std::string& name = prog.weight_file();
    if (name.empty() || lp.files.count(name)) return Status::OK();
    std::string path = joinPath(dir, name);
    if (!fs::is_regular_file(path, ec))
      return invalidInput(path, ": weight file of rank ", prog.rank(), " is missing");
    ASSIGN_OR_RETURN(lp.files[name], MappedFile::open(path));
    return Status::OK();
  };
  for (const plan::RankProgram& prog : lp.plan.ranks()) RETURN_IF_ERROR(openFile(prog));
  if (lp.plan.has_reference()) RETURN_IF_ERROR(openFile(lp.plan.reference()));
  return lp;
}

StatusOr<Tensor> loadWeight(const LoadedPlan& p, const plan::RankProgram& prog, int weightIndex,
                            bool verifyChecksum) {
  std::string path = joinPath(p.dir, prog.weight_file());
  if (weightIndex < 0 || weightIndex >= prog.weights_size())
    return invalidInput(path, ": rank ", prog.rank(), " has no weight ", weightIndex, " (it has ",
                        prog.weights_size(), ")");
  const plan::Weight& w = prog.weights(weightIndex);
  auto it = p.files.find(prog.weight_file());
  if (it == p.files.end())
    return invalidInput(path, ": weight file of rank ", prog.rank(), " is not loaded");
  const MappedFile& file = *it->second;
  TensorType type = fromDesc(w.desc());
  if (type.dtype == DType::kUndefined)
    return invalidInput(path, ": weight '", w.name(), "' has unknown dtype code ", w.desc().dtype());
  for (int64_t d : type.shape)
    if (d < 0) return invalidInput(path, ": weight '", w.name(), "' has a negative dim: ", type.str());
  if (w.nbytes() != type.bytes())
    return invalidInput(path, ": weight '", w.name(), "' is ", type.str(), " (", type.bytes(),
                        " bytes) but records ", w.nbytes(), " bytes");
  if (w.offset() > file.size() || w.nbytes() > file.size() - w.offset())
    return invalidInput(path, ": weight '", w.name(), "' [", w.offset(), ", +", w.nbytes(),
                        ") lies outside the file (", file.size(), " bytes)");
  if (w.offset() % kWeightAlignment != 0)
    return invalidInput(path, ": weight '", w.name(), "' offset ", w.offset(),
                        " is not ", kWeightAlignment, "-byte aligned");
  const uint8_t* data = file.data() + w.offset();
  if (verifyChecksum) {
    uint32_t computed = crc32Of(data, w.nbytes());
    if (computed != w.crc32())
      return invalidInput(path, ": weight '", w.name(), "' checksum mismatch (stored ",
                          hex32(w.crc32()), ", computed ", hex32(computed), ")");
  }
  return Tensor::view(type.dtype, type.shape, data, it->second);
}

}  // namespace pcc
