#include "runtime/plan_io.h"

#include <google/protobuf/stubs/logging.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include "runtime/plan_convert.h"
#include "runtime/plan_regions.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/schema.h"
#include "runtime/support/confined_path.h"

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


// libprotobuf logs its complaints (invalid UTF-8 in a string field, ...) on
// stderr by itself. While plan_io parses or serializes, they are caught here
// and become part of its one error message instead.
class ProtobufLogCapture {
 public:
  ProtobufLogCapture() { previous_ = google::protobuf::SetLogHandler(&ProtobufLogCapture::handle); }
  ~ProtobufLogCapture() {
    google::protobuf::SetLogHandler(previous_);
    last().clear();
  }
  ProtobufLogCapture(const ProtobufLogCapture&) = delete;
  ProtobufLogCapture& operator=(const ProtobufLogCapture&) = delete;
  /// \returns " (what libprotobuf said)", or "" when it said nothing.
  static std::string said() { return last().empty() ? std::string() : " (" + last() + ")"; }

 private:
  static std::string& last() {
    static thread_local std::string s;
    return s;
  }
  static void handle(google::protobuf::LogLevel, const char*, int, const std::string& message) {
    if (last().empty()) last() = message;
  }
  google::protobuf::LogHandler* previous_;
};

// plan.pb's last 5 bytes: field 12 (Plan.plan_crc32, fixed32) = tag 0x65, then
// the crc32 of every byte before them, little-endian.
constexpr uint8_t kPlanCrcTag = (12 << 3) | 5;
constexpr size_t kPlanCrcTrailer = 5;

void appendPlanCrc(std::string& bytes) {
  uint32_t crc = crc32Of(bytes.data(), bytes.size());
  bytes.push_back(static_cast<char>(kPlanCrcTag));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
}

/// \returns the first position of `s` that is not valid UTF-8, or npos.
size_t invalidUtf8At(const std::string& s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
    else return i;
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += len;
  }
  return std::string::npos;
}

/// \returns `s` with every byte outside printable ASCII as \xNN: safe to print.
std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// A bundle directory that may be replaced: plan.pb, report.json, weight files
// (*.bin) and kernels/, nothing else.
bool bundleEntry(const fs::directory_entry& e) {
  std::error_code ec;
  std::string name = e.path().filename().string();
  if (e.is_directory(ec)) return name == "kernels";
  if (!e.is_regular_file(ec) || e.is_symlink(ec)) return false;
  return name == "plan.pb" || name == "report.json" ||
         (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0);
}

/// Checks that `dir` may become (or be replaced by) a bundle.
/// \returns the target path, normalized, or an invalid-input error.
StatusOr<fs::path> bundleTarget(const std::string& dir) {
  if (dir.empty()) return invalidInput("the plan bundle path is empty");
  fs::path target = fs::path(dir).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "out.pcc/" -> "out.pcc"
  std::string leaf = target.filename().string();
  if (target.empty() || leaf.empty() || leaf == "." || leaf == ".." || target == target.root_path())
    return invalidInput(dir, ": not a usable plan bundle path (name a new or existing NAME.pcc directory)");
  std::error_code ec;
  fs::file_status st = fs::symlink_status(target, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st))
      return invalidInput(dir, ": exists and is not a plan bundle directory; refusing to replace it");
    fs::directory_iterator it(target, ec), end;
    if (ec) return invalidInput(dir, ": cannot list it: ", ec.message());
    bool hasPlan = false, empty = true;
    for (; it != end; it.increment(ec)) {
      if (ec) return invalidInput(dir, ": cannot list it: ", ec.message());
      empty = false;
      if (!bundleEntry(*it))
        return invalidInput(dir, ": exists and is not a plan bundle (it holds '",
                            escaped(it->path().filename().string()), "'); refusing to replace it");
      hasPlan = hasPlan || it->path().filename() == "plan.pb";
    }
    if (!empty && !hasPlan)
      return invalidInput(dir, ": exists and is not a plan bundle (no plan.pb); refusing to replace it");
  }
  return target;
}

/// \returns a new, empty directory next to `target` named .LEAF.WHAT-XXXXXX.
StatusOr<fs::path> siblingTempDir(const fs::path& target, const char* what) {
  fs::path parent = target.parent_path();
  std::string templ = (parent / ("." + target.filename().string() + "." + what + "-XXXXXX")).string();
  if (!mkdtemp(templ.data()))
    return invalidInput(target.string(), ": cannot create a temporary directory next to it: ",
                        std::error_code(errno, std::generic_category()).message());
  return fs::path(templ);
}

// Writes the weight files into `dir` (a fresh directory). \returns the
// crc32s of each file's weights, by file name.
StatusOr<std::map<std::string, std::vector<uint32_t>>> writeWeightFiles(
    const fs::path& dir, const std::string& shownDir, const std::map<std::string, WeightFileWriter*>& weightFiles,
    const WriteProgress& progress) {
  auto shown = [&](const std::string& name) { return joinPath(shownDir, name); };
  uint64_t total = 0, done = 0;
  for (const auto& entry : weightFiles)
    if (entry.second) total += entry.second->size();
  std::map<std::string, std::vector<uint32_t>> crcs;
  for (const auto& [name, writer] : weightFiles) {
    if (!writer) return internalError(shown(name), ": no writer");
    fs::path rel(name);
    bool confined = !name.empty() && rel.is_relative() && !rel.has_root_name() &&
                    std::none_of(rel.begin(), rel.end(), [](const fs::path& c) { return c == ".."; });
    if (!confined) return internalError(shown(name), ": a weight file name must stay inside the bundle");
    auto written = writer->finish((dir / rel).string(), progress, done, total);
    if (!written.ok()) return invalidInput(shown(name), ": write failed");
    crcs[name] = std::move(written).value();
    done += writer->size();
  }
  return crcs;
}

// Fills in the crc32 of each weight of `prog` from what its file's writer
// wrote at the weight's offset with its size; a weight that matches nothing
// written keeps the caller's value (the reader then judges it).
void fillWeightCrcs(plan::RankProgram& prog, const std::map<std::string, WeightFileWriter*>& weightFiles,
                    const std::map<std::string, std::vector<uint32_t>>& crcs) {
  auto it = crcs.find(prog.weight_file());
  if (it == crcs.end()) return;  // a file the caller wrote: its checksums are the caller's
  const WeightFileWriter& w = *weightFiles.at(prog.weight_file());
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> written;  // (offset, nbytes) -> crc32
  for (size_t i = 0; i < it->second.size(); ++i) written[{w.offsetOf(i), w.nbytesOf(i)}] = it->second[i];
  for (plan::Weight& weight : *prog.mutable_weights()) {
    auto found = written.find({weight.offset(), weight.nbytes()});
    if (found != written.end()) weight.set_crc32(found->second);
  }
}

// Writes the bundle's files into `dir` (a fresh directory): the weight files
// first, so that plan.pb records the checksums computed while writing them.
Status writeBundleFiles(const fs::path& dir, const std::string& shownDir, plan::Plan& plan,
                        const std::map<std::string, WeightFileWriter*>& weightFiles,
                        const std::string& reportJson, const WriteProgress& progress,
                        const std::map<std::string, std::string>& otherFiles) {
  auto shown = [&](const std::string& name) { return joinPath(shownDir, name); };
  ASSIGN_OR_RETURN(auto crcs, writeWeightFiles(dir, shownDir, weightFiles, progress));
  for (const auto& [name, data] : otherFiles) {  // generated kernels, under kernels/
    if (name.rfind("kernels/", 0) != 0 || name.find("..") != std::string::npos || name.size() <= 8 ||
        name.find('/', 8) != std::string::npos)
      return internalError(shown(name), ": a bundle holds other files under kernels/ only");
    std::error_code ec;
    fs::create_directories(dir / "kernels", ec);
    if (ec) return invalidInput(shown("kernels"), ": cannot create directory: ", ec.message());
    if (Status st = writeBytes((dir / name).string(), data); !st.ok()) return invalidInput(shown(name), ": write failed");
  }
  for (plan::RankProgram& prog : *plan.mutable_ranks()) fillWeightCrcs(prog, weightFiles, crcs);
  if (plan.has_generation() && plan.generation().has_prefill())
    for (plan::RankProgram& prog : *plan.mutable_generation()->mutable_prefill()->mutable_ranks())
      fillWeightCrcs(prog, weightFiles, crcs);
  if (plan.has_generation())
    for (plan::Prefill& shorter : *plan.mutable_generation()->mutable_shorter_prefills())
      for (plan::RankProgram& prog : *shorter.mutable_ranks()) fillWeightCrcs(prog, weightFiles, crcs);
  if (plan.has_reference()) fillWeightCrcs(*plan.mutable_reference(), weightFiles, crcs);
  std::string bytes;
  {
    ProtobufLogCapture capture;
    if (!plan.SerializeToString(&bytes))
      return internalError(shown("plan.pb"), ": cannot serialize", ProtobufLogCapture::said());
  }
  appendPlanCrc(bytes);
  if (Status st = writeBytes((dir / "plan.pb").string(), bytes); !st.ok())
    return invalidInput(shown("plan.pb"), ": write failed");
  if (Status st = writeBytes((dir / "report.json").string(), reportJson); !st.ok())
    return invalidInput(shown("report.json"), ": write failed");
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
  return add(name, TensorBlock{t, Dims(t.shape().size(), 0), t.shape()});
}

plan::Weight WeightFileWriter::add(const std::string& name, const TensorBlock& b) {
  plan::Weight w;
  w.set_name(name);
  *w.mutable_desc() = toDesc(b.type());
  if (shareIdentical_) {
    // The same piece of the same memory; or, for a small piece held in memory
    // (lowering slices those eagerly, so each program has its own copy), the
    // same type and bytes.
    for (const Entry& e : entries_)
      if (b.source.raw() && e.block.source.raw() == b.source.raw() && e.block.source.dtype() == b.source.dtype() &&
          e.block.dtype() == b.dtype() &&
          e.block.source.shape() == b.source.shape() && e.block.start == b.start && e.block.extent == b.extent) {
        w.set_offset(e.offset);
        w.set_nbytes(b.nbytes());
        return w;
      }
    if (std::optional<std::string> bytes = smallBytes(b)) {
      for (size_t i : byContent_[{crc32Of(bytes->data(), bytes->size()), b.nbytes()}]) {
        const Entry& e = entries_[i];
        if (e.block.dtype() == b.dtype() && e.block.extent == b.extent && smallBytes(e.block) == bytes) {
          w.set_offset(e.offset);
          w.set_nbytes(b.nbytes());
          return w;
        }
      }
    }
  }
  uint64_t offset = (size_ + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  w.set_offset(offset);
  w.set_nbytes(b.nbytes());
  entries_.push_back({offset, b});
  size_ = offset + b.nbytes();
  if (shareIdentical_) indexContent(entries_.size() - 1);
  return w;
}

std::optional<std::string> WeightFileWriter::smallBytes(const TensorBlock& b) {
  if (b.nbytes() > kShareByContentBytes || b.source.isMapped() || !b.source.raw()) return std::nullopt;
  std::string out;
  forEachStoredRun(b, [&](const void* data, size_t n, const void*, size_t) { out.append(static_cast<const char*>(data), n); });
  return out;
}

void WeightFileWriter::indexContent(size_t i) {
  if (std::optional<std::string> bytes = smallBytes(entries_[i].block))
    byContent_[{crc32Of(bytes->data(), bytes->size()), entries_[i].block.nbytes()}].push_back(i);
}

void WeightFileWriter::shareIdentical() {
  if (shareIdentical_) return;
  shareIdentical_ = true;
  for (size_t i = 0; i < entries_.size(); ++i) indexContent(i);
}

namespace {

// Streams one weight file. Runs longer than kChunk are cut, so the progress
// and the release of mapped pages advance inside a large tensor too.
class WeightStreamer {
 public:
  WeightStreamer(std::FILE* out, const WriteProgress& progress, uint64_t base, uint64_t total,
                 const std::string& name)
      : out_(out), progress_(progress), done_(base), total_(total), name_(name) {}

  /// Writes `n` zero bytes. \returns false on a write error.
  bool zeros(uint64_t n) {
    static const char kZeros[kWeightAlignment] = {};
    while (n > 0) {
      size_t c = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
      if (std::fwrite(kZeros, 1, c, out_) != c) return false;
      n -= c;
      advance(c);
    }
    return true;
  }

  /// Writes block `b` from its source. \returns its crc32, or nullopt on a
  /// write error.
  std::optional<uint32_t> block(const TensorBlock& b) {
    uLong crc = crc32(0L, Z_NULL, 0);
    bool ok = true;
    const bool mapped = b.source.isMapped();
    const char* releasedTo = nullptr;  // mapped pages before this were released
    const char* readTo = nullptr;
    forEachStoredRun(b, [&](const void* data, size_t n, const void* source, size_t sourceBytes) {
      const char* p = static_cast<const char*>(data);
      const char* src = static_cast<const char*>(source);
      if (!releasedTo) releasedTo = src;
      for (size_t done = 0; ok && done < n;) {
        size_t c = std::min(n - done, kChunk);
        crc = crc32(crc, reinterpret_cast<const Bytef*>(p + done), static_cast<uInt>(c));
        ok = std::fwrite(p + done, 1, c, out_) == c;
        done += c;
        advance(c);
        // Runs go up the source in address order: what lies behind them is done.
        readTo = src + (sourceBytes == n ? done : done * sourceBytes / n);  // converted pieces are <= 1 MiB
        if (mapped && static_cast<size_t>(readTo - releasedTo) >= kRelease) {
          releaseMappedPages(releasedTo, static_cast<size_t>(readTo - releasedTo));
          releasedTo = readTo;
        }
      }
    });
    if (mapped && readTo > releasedTo) releaseMappedPages(releasedTo, static_cast<size_t>(readTo - releasedTo));
    if (!ok) return std::nullopt;
    return static_cast<uint32_t>(crc);
  }

 private:
  static constexpr size_t kChunk = size_t{4} << 20;
  static constexpr size_t kRelease = size_t{64} << 20;

  void advance(uint64_t n) {
    done_ += n;
    sinceReport_ += n;
    if (progress_ && sinceReport_ >= kChunk) {
      progress_(done_, total_, name_);
      sinceReport_ = 0;
    }
  }

  std::FILE* out_;
  const WriteProgress& progress_;
  uint64_t done_, total_, sinceReport_ = 0;
  const std::string& name_;
};

}  // namespace

StatusOr<std::vector<uint32_t>> WeightFileWriter::finish(const std::string& path, const WriteProgress& progress,
                                                         uint64_t base, uint64_t total) const {
  RETURN_IF_ERROR(ensureParent(path));
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) return invalidInput(path, ": cannot open for writing");
  std::vector<char> buffer(size_t{1} << 20);
  std::setvbuf(out, buffer.data(), _IOFBF, buffer.size());
  std::string name = fs::path(path).filename().string();
  WeightStreamer stream(out, progress, base, total, name);
  std::vector<uint32_t> crcs;
  uint64_t pos = 0;
  bool ok = true;
  for (const Entry& e : entries_) {
    ok = stream.zeros(e.offset - pos);
    std::optional<uint32_t> crc = ok ? stream.block(e.block) : std::nullopt;
    if (!crc) {
      ok = false;
      break;
    }
    crcs.push_back(*crc);
    pos = e.offset + e.block.nbytes();
  }
  if (std::fclose(out) != 0) ok = false;
  if (!ok) return invalidInput(path, ": write failed");
  if (progress) progress(base + size_, total, name);
  return crcs;
}

Status checkBundleTarget(const std::string& dir) { return bundleTarget(dir).status(); }

Status writePlanBundle(const std::string& dir, const plan::Plan& plan,
                       const std::map<std::string, WeightFileWriter*>& weightFiles,
                       const std::string& reportJson, const WriteProgress& progress,
                       const std::map<std::string, std::string>& otherFiles) {
  ASSIGN_OR_RETURN(fs::path target, bundleTarget(dir));
  if (plan.schema_version() != 0 && plan.schema_version() != kPlanSchemaVersion)
    return internalError(dir, ": refusing to write plan schema version ", plan.schema_version(),
                         " (this build writes ", kPlanSchemaVersion, ")");
  RETURN_IF_ERROR(checkPlanStrings(plan));
  plan::Plan stamped = plan;
  if (stamped.schema_version() == 0) stamped.set_schema_version(kPlanSchemaVersion);
  stamped.clear_plan_crc32();

  // Everything goes into a fresh directory next to the target, renamed into
  // place when complete: a failed write leaves any old bundle whole, and the
  // files of a bundle a running pcc-run maps are never rewritten.
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) return invalidInput(target.parent_path().string(), ": cannot create directory: ", ec.message());
  }
  ASSIGN_OR_RETURN(fs::path tmp, siblingTempDir(target, "tmp"));
  auto abandon = [&](Status st) {
    fs::remove_all(tmp, ec);
    return st;
  };
  if (Status st = writeBundleFiles(tmp, dir, stamped, weightFiles, reportJson, progress, otherFiles); !st.ok())
    return abandon(st);
  ::chmod(tmp.c_str(), 0755);  // mkdtemp made it 0700; a bundle is an ordinary directory (best effort)

  bool replacing = fs::exists(fs::symlink_status(target, ec));
  if (!replacing) {
    fs::rename(tmp, target, ec);
    if (ec) return abandon(invalidInput(dir, ": cannot move the new bundle into place: ", ec.message()));
    return Status::OK();
  }
  // The old bundle is moved aside, the new one in, and the old one removed
  // (a process that maps its files keeps them until it unmaps them).
  auto asideOr = siblingTempDir(target, "old");
  if (!asideOr.ok()) return abandon(asideOr.status());
  fs::path aside = *asideOr;
  fs::rename(target, aside, ec);
  if (ec) {
    fs::remove(aside, ec);
    return abandon(invalidInput(dir, ": cannot move the old bundle aside: ", ec.message()));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::string why = ec.message();
    std::error_code back;
    fs::rename(aside, target, back);
    return abandon(invalidInput(dir, ": cannot move the new bundle into place: ", why));
  }
  fs::remove_all(aside, ec);
  return Status::OK();
}

namespace {

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;

/// \returns the byte size of `d`, or an error for an unknown dtype, a negative
/// dim, or a size over 2^48 bytes (checked without overflow).
StatusOr<uint64_t> descBytes(const plan::TensorDesc& d) {
  std::optional<DType> t = dtypeFromOnnx(d.dtype());
  if (!t || *t == DType::kUndefined) return invalidInput("unknown dtype code ", d.dtype());
  uint64_t bytes = dtypeSize(*t);
  for (int64_t dim : d.shape()) {
    if (dim < 0) return invalidInput("negative dim ", dim);
    if (dim != 0 && bytes > kMaxTensorBytes / static_cast<uint64_t>(dim))
      return invalidInput("more than 2^48 bytes");
    bytes *= static_cast<uint64_t>(dim);
  }
  return bytes;
}

Status checkDesc(const plan::TensorDesc& d, const std::string& ctx) {
  auto b = descBytes(d);
  return b.ok() ? Status::OK() : b.status().withContext(ctx);
}

bool sameDesc(const plan::TensorDesc& a, const plan::TensorDesc& b) {
  return a.dtype() == b.dtype() && std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

struct MeshShape {
  int64_t pp, dp, tp;
  std::array<int64_t, 3> coord(int64_t r) const { return {r / (tp * dp), (r / tp) % dp, r % tp}; }
  int64_t rankOf(const std::array<int64_t, 3>& c) const { return (c[0] * dp + c[1]) * tp + c[2]; }
};

const char* const kAxes[3] = {"pp", "dp", "tp"};

Status checkBinding(const plan::IoBinding& b, const google::protobuf::RepeatedPtrField<plan::IoDesc>& io,
                    const std::map<int, const plan::Buffer*>& byId, const std::string& ctx, int64_t microbatches) {
  if (b.index() < 0 || b.index() >= io.size())
    return invalidInput(ctx, ": index ", b.index(), " is out of range (the plan has ", io.size(), ")");
  auto it = byId.find(b.buffer());
  if (it == byId.end()) return invalidInput(ctx, ": no buffer with id ", b.buffer());
  const plan::TensorDesc& full = io.Get(b.index()).desc();
  if (b.split_dim() == -1) {
    if (b.per_microbatch()) return invalidInput(ctx, ": per micro-batch but not split");
    return Status::OK();
  }
  if (b.split_dim() < 0 || b.split_dim() >= full.shape_size())
    return invalidInput(ctx, ": split dim ", b.split_dim(), " is out of range for rank ", full.shape_size());
  int64_t extent = full.shape(b.split_dim());
  // Per micro-batch, runs 0 .. microbatches-1 cover [offset, offset + microbatches * length).
  const int64_t span = b.per_microbatch() ? b.length() * microbatches : b.length();
  if (b.offset() < 0 || b.length() < 0 || b.offset() > extent || span > extent - b.offset())
    return invalidInput(ctx, ": slice [", b.offset(), ", +", span, ") along dim ", b.split_dim(),
                        " is outside the extent ", extent);
  return Status::OK();
}

/// A KERNEL instruction of an op pcc knows, as the kernels will index it: its
/// operand count fits the op (Ops.def), no required operand is absent (-1),
/// and, unless a shape operand is present (its value, a weight, is read only
/// when the rank is prepared, where the op is checked again), the op's
/// inference accepts the plan's types and attributes and gives the declared
/// outputs' types. An edited plan (a MatMul operand of -1, Conv pads that do
/// not give the output's shape) is refused here, before any kernel runs.
Status checkKernelOp(const plan::Instruction& ins, const std::map<int, const plan::Buffer*>& byId,
                     const std::string& ctx) {
  std::optional<OpKind> op = opFromName(ins.op());
  if (!op) return Status::OK();  // the backend refuses an op it has no kernel for
  const OpInfo& info = opInfo(*op);
  const int n = ins.inputs_size();
  if (n < info.minInputs || (info.maxInputs >= 0 && n > info.maxInputs))
    return invalidInput(ctx, ": ", ins.op(), " takes ", info.minInputs,
                        info.maxInputs < 0 ? " or more" : info.maxInputs == info.minInputs ? "" : strCat(" to ", info.maxInputs),
                        " input(s), the plan gives ", n);
  for (int i = 0; i < std::min(n, info.minInputs); ++i)
    if (ins.inputs(i) == -1) return invalidInput(ctx, ": ", ins.op(), " input ", i, " is required but absent (-1)");
  InferFn infer = inferFn(*op);
  if (!infer) return Status::OK();
  auto attrs = fromAttrProtos(ins.attrs());
  if (!attrs.ok()) return attrs.status().withContext(ctx);
  InferArgs args;
  args.attrs = &*attrs;
  for (int i = 0; i < n; ++i) {
    const int id = ins.inputs(i);
    args.inputs.push_back(id == -1 ? TensorType{} : fromDesc(byId.at(id)->desc()));
    if (id != -1 && isShapeOperand(*op, static_cast<size_t>(i))) return Status::OK();
  }
  while (!args.inputs.empty() && args.inputs.back().dtype == DType::kUndefined) args.inputs.pop_back();
  args.constInputs.assign(args.inputs.size(), nullptr);
  auto inferred = infer(args);
  if (!inferred.ok())
    return invalidInput(ctx, ": ", ins.op(), " with inputs (", ops::typesToString(args.inputs),
                        "): ", inferred.status().message());
  if (static_cast<size_t>(ins.outputs_size()) > inferred->size())
    return invalidInput(ctx, ": ", ins.op(), " makes ", inferred->size(), " output(s), the plan names ",
                        ins.outputs_size());
  for (int i = 0; i < ins.outputs_size(); ++i) {
    if (ins.outputs(i) == -1) continue;
    const plan::Buffer& b = *byId.at(ins.outputs(i));
    if (fromDesc(b.desc()) != (*inferred)[i])
      return invalidInput(ctx, ": ", ins.op(), " with inputs (", ops::typesToString(args.inputs), ") makes output ",
                          i, " ", (*inferred)[i].str(), " but buffer ", b.id(), " '", b.name(), "' is ",
                          fromDesc(b.desc()).str());
  }
  return Status::OK();
}

/// One program. `n` is the world size; `groups` null for the reference
/// program (which has no collectives or transfers).
Status checkProgram(const plan::Plan& plan, const plan::RankProgram& prog, const std::string& who, int64_t n,
                    bool reference) {
  for (int w = 0; w < prog.weights_size(); ++w)
    RETURN_IF_ERROR(checkDesc(prog.weights(w).desc(), strCat(who, ": weight ", w, " '", prog.weights(w).name(), "'")));
  if (prog.weights_size() > 0 && prog.weight_file().empty())
    return invalidInput(who, ": has ", prog.weights_size(), " weights but no weight file");
  std::map<int, const plan::Buffer*> byId;
  for (const plan::Buffer& b : prog.buffers()) {
    std::string ctx = strCat(who, ": buffer ", b.id(), " '", b.name(), "'");
    if (b.id() < 0) return invalidInput(ctx, ": a buffer id must not be negative");
    if (!byId.emplace(b.id(), &b).second) return invalidInput(ctx, ": id ", b.id(), " is defined twice");
    ASSIGN_OR_RETURN(uint64_t bytes, [&]() -> StatusOr<uint64_t> {
      auto r = descBytes(b.desc());
      if (!r.ok()) return r.status().withContext(ctx);
      return r;
    }());
    if (b.weight() < -1 || b.weight() >= prog.weights_size())
      return invalidInput(ctx, ": weight index ", b.weight(), " is out of range (", prog.weights_size(), " weights)");
    if (b.weight() >= 0 && !sameDesc(b.desc(), prog.weights(b.weight()).desc()))
      return invalidInput(ctx, ": its type differs from its weight '", prog.weights(b.weight()).name(), "'");
    if (b.arena_offset() < -1) return invalidInput(ctx, ": arena offset ", b.arena_offset(), " is negative");
    if (b.arena_offset() >= 0) {
      if (b.weight() >= 0) return invalidInput(ctx, ": a weight placed in the arena");
      uint64_t off = static_cast<uint64_t>(b.arena_offset());
      if (off > prog.arena_bytes() || bytes > prog.arena_bytes() - off)
        return invalidInput(ctx, ": bytes [", off, ", +", bytes, ") lie outside the ", prog.arena_bytes(),
                            "-byte arena");
    }
  }
  for (const plan::Buffer& b : prog.buffers())
    if (b.in_place_of() != -1 && !byId.count(b.in_place_of()))
      return invalidInput(who, ": buffer ", b.id(), " '", b.name(), "': in_place_of names no buffer (",
                          b.in_place_of(), ")");
  if (prog.microbatches() < 0 || (reference && prog.microbatches() > 1))
    return invalidInput(who, ": micro-batch count ", prog.microbatches(), " is not allowed here");
  const int64_t mb = std::max(1, prog.microbatches());
  // A generation plan's reference program binds the export's own interface.
  const bool genRef = reference && plan.has_generation();
  const auto& inDescs = genRef ? plan.generation().reference_inputs() : plan.inputs();
  const auto& outDescs = genRef ? plan.generation().reference_outputs() : plan.outputs();
  for (int k = 0; k < prog.inputs_size(); ++k)
    RETURN_IF_ERROR(checkBinding(prog.inputs(k), inDescs, byId, strCat(who, ": input binding ", k), mb));
  for (int k = 0; k < prog.outputs_size(); ++k)
    RETURN_IF_ERROR(checkBinding(prog.outputs(k), outDescs, byId, strCat(who, ": output binding ", k), mb));

  for (int i = 0; i < prog.instructions_size(); ++i) {
    const plan::Instruction& ins = prog.instructions(i);
    std::string ctx = strCat(who, ": instruction #", i);
    if (!ins.node().empty()) ctx += strCat(" (node '", ins.node(), "')");
    using K = plan::Instruction;
    bool kernel = ins.kind() == K::KERNEL || ins.kind() == K::REGION;  // may name absent operands (-1)
    for (int id : ins.inputs())
      if (!byId.count(id) && !(kernel && id == -1)) return invalidInput(ctx, ": input names no buffer (", id, ")");
    for (int id : ins.outputs())
      if (!byId.count(id) && !(kernel && id == -1)) return invalidInput(ctx, ": output names no buffer (", id, ")");
    int needIn = 0, needOut = 0;
    switch (ins.kind()) {
      case K::KERNEL:
        if (ins.op().empty()) return invalidInput(ctx, ": a kernel without an op");
        RETURN_IF_ERROR(checkKernelOp(ins, byId, ctx));
        continue;
      case K::FREE:
        if (ins.outputs_size() != 0) return invalidInput(ctx, ": FREE has outputs");
        continue;
      case K::REGION:
        RETURN_IF_ERROR(checkRegion(ins, prog, ctx, 1));
        continue;
      case K::LAUNCH: {
        if (reference) return invalidInput(ctx, ": the reference program has a LAUNCH");
        if (ins.kernel() < 0 || ins.kernel() >= plan.kernels_size())
          return invalidInput(ctx, ": LAUNCH of kernel ", ins.kernel(), ", the plan has ", plan.kernels_size());
        const plan::Kernel& k = plan.kernels(ins.kernel());
        if (ins.inputs_size() != k.inputs_size() || ins.outputs_size() != k.outputs_size())
          return invalidInput(ctx, ": kernel '", k.name(), "' takes ", k.inputs_size(), " input(s) and ",
                              k.outputs_size(), " output(s), the plan gives ", ins.inputs_size(), " and ",
                              ins.outputs_size());
        for (int j = 0; j < ins.inputs_size(); ++j)
          if (!sameDesc(byId.at(ins.inputs(j))->desc(), k.inputs(j)))
            return invalidInput(ctx, ": input ", j, " (buffer ", ins.inputs(j), ") is not of the type kernel '",
                                k.name(), "' was generated for");
        for (int j = 0; j < ins.outputs_size(); ++j)
          if (!sameDesc(byId.at(ins.outputs(j))->desc(), k.outputs(j)))
            return invalidInput(ctx, ": output ", j, " (buffer ", ins.outputs(j), ") is not of the type kernel '",
                                k.name(), "' was generated for");
        continue;
      }
      case K::ALL_REDUCE: case K::ALL_GATHER: case K::REDUCE_SCATTER: case K::ALL_TO_ALL: needIn = needOut = 1; break;
      case K::SEND: needIn = 1; break;
      case K::RECV: needOut = 1; break;
      default: return invalidInput(ctx, ": unknown instruction kind ", static_cast<int>(ins.kind()));
    }
    const char* kind = K::Kind_Name(ins.kind()).c_str();
    if (ins.inputs_size() != needIn || ins.outputs_size() != needOut)
      return invalidInput(ctx, ": ", kind, " takes ", needIn, " input(s) and ", needOut, " output(s), the plan gives ",
                          ins.inputs_size(), " and ", ins.outputs_size());
    if (reference) return invalidInput(ctx, ": the reference program has a ", kind);
    if (ins.kind() == K::SEND || ins.kind() == K::RECV) {
      if (ins.peer() < 0 || ins.peer() >= n || ins.peer() == prog.rank())
        return invalidInput(ctx, ": ", kind, " peer ", ins.peer(), " is not another rank of ", n);
      continue;
    }
    if (ins.group() < 0 || ins.group() >= plan.groups_size())
      return invalidInput(ctx, ": group ", ins.group(), " does not exist (the plan has ", plan.groups_size(), ")");
    const auto& members = plan.groups(ins.group()).ranks();
    if (std::find(members.begin(), members.end(), prog.rank()) == members.end())
      return invalidInput(ctx, ": rank ", prog.rank(), " is not in group ", ins.group());
    const plan::TensorDesc& in = byId.at(ins.inputs(0))->desc();
    const plan::TensorDesc& out = byId.at(ins.outputs(0))->desc();
    if (in.dtype() != out.dtype() || in.shape_size() != out.shape_size())
      return invalidInput(ctx, ": ", kind, " input and output differ in dtype or rank");
    if (ins.kind() == K::ALL_REDUCE && !sameDesc(in, out))
      return invalidInput(ctx, ": ALL_REDUCE input and output differ in shape");
    if (ins.kind() != K::ALL_REDUCE && (ins.dim() < 0 || ins.dim() >= in.shape_size()))
      return invalidInput(ctx, ": ", kind, " dim ", ins.dim(), " is out of range for rank ", in.shape_size());
    if (ins.kind() == K::ALL_TO_ALL &&
        (ins.concat_dim() < 0 || ins.concat_dim() >= in.shape_size() || ins.concat_dim() == ins.dim()))
      return invalidInput(ctx, ": ALL_TO_ALL concat_dim ", ins.concat_dim(), " is out of range for rank ",
                          in.shape_size(), " or equals dim ", ins.dim());
  }
  return Status::OK();
}

}  // namespace

Status checkTensorDesc(const plan::TensorDesc& d, const std::string& ctx) { return checkDesc(d, ctx); }

// Collectives match across each group: every member runs the same sequence
// of collectives on it, of the same kind, dimension and element type, and an
// all-reduce of the same shape (the pieces of an all-gather or a
// reduce-scatter may differ in size between ranks). A plan in which one rank
// skips or changes a collective would otherwise hang or combine unrelated data.
static Status checkCollectivesMatch(const plan::Plan& plan) {
  struct Collective {
    int kind = 0, dim = 0, dtype = 0, concatDim = 0;
    std::vector<int64_t> shape;  // an all-reduce's; empty for the others
    bool operator==(const Collective& o) const {
      return kind == o.kind && dim == o.dim && dtype == o.dtype && concatDim == o.concatDim && shape == o.shape;
    }
    std::string str() const {
      std::string n = plan::Instruction::Kind_Name(static_cast<plan::Instruction::Kind>(kind));
      std::transform(n.begin(), n.end(), n.begin(), ::tolower);
      std::string dims;
      for (int64_t d : shape) dims += strCat(dims.empty() ? "" : ",", d);
      return strCat(n, " dim ", dim, kind == plan::Instruction::ALL_TO_ALL ? strCat(" concat_dim ", concatDim) : "",
                    " of dtype ", dtype, shape.empty() ? "" : " [" + dims + "]");
    }
  };
  // group -> rank -> its collectives on that group, in program order
  std::map<int, std::map<int, std::vector<Collective>>> byGroup;
  for (const plan::RankProgram& r : plan.ranks()) {
    std::map<int, const plan::TensorDesc*> desc;
    for (const plan::Buffer& b : r.buffers()) desc[b.id()] = &b.desc();
    for (const plan::Instruction& ins : r.instructions()) {
      using K = plan::Instruction;
      if (ins.kind() != K::ALL_REDUCE && ins.kind() != K::ALL_GATHER && ins.kind() != K::REDUCE_SCATTER &&
          ins.kind() != K::ALL_TO_ALL)
        continue;
      const plan::TensorDesc& d = *desc.at(ins.inputs(0));
      Collective c{ins.kind(), ins.kind() == K::ALL_REDUCE ? 0 : ins.dim(), d.dtype(),
                   ins.kind() == K::ALL_TO_ALL ? ins.concat_dim() : 0, {}};
      if (ins.kind() == K::ALL_REDUCE) c.shape.assign(d.shape().begin(), d.shape().end());
      byGroup[ins.group()][r.rank()].push_back(std::move(c));
    }
  }
  for (const auto& [g, ranks] : byGroup) {
    const plan::Group& grp = plan.groups(g);
    const int first = grp.ranks(0);
    const std::vector<Collective>& want = ranks.count(first) ? ranks.at(first) : std::vector<Collective>{};
    for (int member : grp.ranks()) {
      const std::vector<Collective>& got = ranks.count(member) ? ranks.at(member) : std::vector<Collective>{};
      std::string where = strCat("group ", g, " (", grp.axis(), ")");
      if (got.size() != want.size())
        return invalidInput(where, ": rank ", member, " runs ", got.size(), " collective(s) on it, rank ", first,
                            " runs ", want.size());
      for (size_t k = 0; k < got.size(); ++k)
        if (!(got[k] == want[k]))
          return invalidInput(where, ": collective ", k, " is ", want[k].str(), " on rank ", first, " but ",
                              got[k].str(), " on rank ", member);
    }
  }
  return Status::OK();
}

plan::Plan prefillView(const plan::Plan& plan, int shorter) {
  plan::Plan v = plan;
  plan::Prefill* pre = shorter < 0 ? v.mutable_generation()->mutable_prefill()
                                   : v.mutable_generation()->mutable_shorter_prefills(shorter);
  v.mutable_inputs()->Swap(pre->mutable_inputs());
  v.mutable_outputs()->Swap(pre->mutable_outputs());
  v.mutable_groups()->Swap(pre->mutable_groups());
  v.mutable_ranks()->Swap(pre->mutable_ranks());
  v.clear_reference();
  plan::Generation* g = v.mutable_generation();
  g->set_input_ids(pre->input_ids());
  g->set_attention_mask(pre->attention_mask());
  g->set_position_ids(pre->position_ids());
  g->set_cache_position(pre->cache_position());
  g->set_logits(pre->logits());
  g->clear_prefill();
  g->clear_shorter_prefills();
  return v;
}

namespace {

/// A prefill program of a generation plan (Plan.generation.prefill, or
/// shorter_prefills(shorter)): a plan of its own on the same mesh, binding
/// exactly the state pieces the decode programs bind.
Status checkPrefill(const plan::Plan& plan, int shorter) {
  const plan::Prefill& pre = prefillOf(plan.generation(), shorter);
  if (pre.max_prompt() < 1) return invalidInput("prefill: max_prompt ", pre.max_prompt(), " is below 1");
  if (shorter >= 0) {
    const int next = shorter + 1 < plan.generation().shorter_prefills_size() ? shorter + 1 : -1;
    const int64_t below = prefillOf(plan.generation(), next).max_prompt();
    if (pre.max_prompt() >= below)
      return invalidInput("shorter prefill ", shorter, ": max_prompt ", pre.max_prompt(), " is not below the next's ",
                          below);
  }
  if (pre.ranks_size() != plan.ranks_size())
    return invalidInput("prefill: ", pre.ranks_size(), " rank programs for ", plan.ranks_size(), " ranks");
  auto role = [&](int32_t i, int n, const char* what, bool optional) -> Status {
    if ((optional && i == -1) || (i >= 0 && i < n)) return Status::OK();
    return invalidInput("prefill: ", what, " index ", i, " is out of range (", n, ")");
  };
  RETURN_IF_ERROR(role(pre.input_ids(), pre.inputs_size(), "input_ids", false));
  RETURN_IF_ERROR(role(pre.attention_mask(), pre.inputs_size(), "attention_mask", false));
  RETURN_IF_ERROR(role(pre.position_ids(), pre.inputs_size(), "position_ids", true));
  RETURN_IF_ERROR(role(pre.cache_position(), pre.inputs_size(), "cache_position", false));
  RETURN_IF_ERROR(role(pre.logits(), pre.outputs_size(), "logits", false));
  if (pre.mask_offset() < 0) return invalidInput("prefill: mask_offset ", pre.mask_offset(), " is negative");
  if (pre.logits_last_only()) {
    RETURN_IF_ERROR(role(pre.last_position(), pre.inputs_size(), "last_position", false));
    const plan::TensorDesc& lp = pre.inputs(pre.last_position()).desc();
    if (lp.dtype() != static_cast<int>(DType::kI64) || lp.shape_size() != 3)
      return invalidInput("prefill: last_position must be int64 [batch, 1, hidden]");
  }
  plan::Plan view = prefillView(plan, shorter);
  RETURN_IF_ERROR(validatePlan(view).withContext(shorter < 0 ? std::string("prefill")
                                                             : strCat("shorter prefill ", shorter)));
  std::vector<const plan::RankProgram*> decode(plan.ranks_size());
  for (const plan::RankProgram& r : plan.ranks()) decode[r.rank()] = &r;
  for (const plan::RankProgram& r : view.ranks()) {
    auto pieces = [](const plan::RankProgram& p) {
      std::set<std::pair<int, std::vector<int64_t>>> s;
      for (const plan::StateBinding& b : p.states()) s.insert({b.state(), {b.offsets().begin(), b.offsets().end()}});
      return s;
    };
    if (pieces(r) != pieces(*decode[r.rank()]))
      return invalidInput("prefill: rank ", r.rank(), " binds other state pieces than its decode program");
    for (const plan::StateBinding& b : r.states()) {
      const plan::StateBinding* d = nullptr;
      for (const plan::StateBinding& x : decode[r.rank()]->states())
        if (x.state() == b.state()) d = &x;
      const plan::TensorDesc& mine = r.buffers(b.buffer()).desc();
      const plan::TensorDesc& theirs = decode[r.rank()]->buffers(d->buffer()).desc();
      if (mine.SerializeAsString() != theirs.SerializeAsString())
        return invalidInput("prefill: rank ", r.rank(), ": its piece of state ", b.state(),
                            " differs in type from the decode program's");
    }
  }
  return Status::OK();
}

}  // namespace

Status validatePlan(const plan::Plan& plan) {
  if (plan.kernels_size() > 0) {
    const std::string& lib = plan.cpu_library().file();
    if (lib.rfind("kernels/", 0) != 0 || lib.find("..") != std::string::npos)
      return invalidInput("the kernel table has no CPU library under kernels/ ('", lib, "')");
    for (int i = 0; i < plan.kernels_size(); ++i) {
      const plan::Kernel& k = plan.kernels(i);
      std::string ctx = strCat("kernel ", i, " '", k.name(), "'");
      if (k.name().empty() || k.name().find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        return invalidInput(ctx, ": not a kernel symbol");
      for (const plan::TensorDesc& d : k.inputs()) RETURN_IF_ERROR(checkDesc(d, ctx));
      for (const plan::TensorDesc& d : k.outputs()) RETURN_IF_ERROR(checkDesc(d, ctx));
      for (const plan::CudaImage& c : k.cuda())
        for (const std::string& f : {c.ptx_file(), c.cubin_file()})
          if (f.rfind("kernels/", 0) != 0 || f.find("..") != std::string::npos)
            return invalidInput(ctx, ": CUDA image '", f, "' is not under kernels/");
    }
  }
  for (int k = 0; k < plan.inputs_size(); ++k)
    RETURN_IF_ERROR(checkDesc(plan.inputs(k).desc(), strCat("input ", k, " '", plan.inputs(k).name(), "'")));
  for (int k = 0; k < plan.outputs_size(); ++k)
    RETURN_IF_ERROR(checkDesc(plan.outputs(k).desc(), strCat("output ", k, " '", plan.outputs(k).name(), "'")));
  // The mesh, the ranks and the groups agree.
  const plan::Mesh& m = plan.mesh();
  if (m.pp() < 1 || m.dp() < 1 || m.tp() < 1)
    return invalidInput("mesh pp=", m.pp(), " dp=", m.dp(), " tp=", m.tp(), " has an extent below 1");
  const int64_t n = plan.ranks_size();
  const MeshShape mesh{m.pp(), m.dp(), m.tp()};
  if (n == 0) return invalidInput("the plan has no rank programs");
  if (mesh.pp * mesh.dp * mesh.tp != n)  // each extent is an int32: no overflow in int64
    return invalidInput("mesh pp=", m.pp(), " dp=", m.dp(), " tp=", m.tp(), " has ", mesh.pp * mesh.dp * mesh.tp,
                        " ranks, the plan has ", n, " rank programs");
  std::vector<const plan::RankProgram*> byRank(n, nullptr);
  for (const plan::RankProgram& r : plan.ranks()) {
    if (r.rank() < 0 || r.rank() >= n || byRank[r.rank()])
      return invalidInput("rank ", r.rank(), " is out of range or repeated (", n, " ranks)");
    byRank[r.rank()] = &r;
    std::array<int64_t, 3> c = mesh.coord(r.rank());
    if (r.mesh_coord_size() != 3 || r.mesh_coord(0) != c[0] || r.mesh_coord(1) != c[1] || r.mesh_coord(2) != c[2])
      return invalidInput("rank ", r.rank(), ": mesh_coord is not (", c[0], ", ", c[1], ", ", c[2],
                          "), its place in the mesh");
  }
  // Session state (generation plans): every piece lies inside its state and
  // is read and written through buffers of its own type.
  const plan::Generation& gen = plan.generation();
  for (int s = 0; s < gen.states_size(); ++s)
    RETURN_IF_ERROR(checkDesc(gen.states(s).desc(), strCat("state ", s, " '", gen.states(s).name(), "'")));
  for (const plan::RankProgram& r : plan.ranks()) {
    std::set<int> bound;
    for (const plan::StateBinding& sb : r.states()) {
      const std::string ctx = strCat("rank ", r.rank(), ": state binding of state ", sb.state());
      if (sb.state() < 0 || sb.state() >= gen.states_size()) return invalidInput(ctx, ": no such state");
      if (!bound.insert(sb.state()).second) return invalidInput(ctx, ": the rank binds it twice");
      auto buf = [&](int id) -> const plan::Buffer* {
        return id >= 0 && id < r.buffers_size() ? &r.buffers(id) : nullptr;
      };
      const plan::Buffer *in = buf(sb.buffer()), *out = buf(sb.out_buffer());
      if (!in || !out) return invalidInput(ctx, ": buffer ", sb.buffer(), " or ", sb.out_buffer(), " does not exist");
      if (in->desc().dtype() != out->desc().dtype() ||
          !std::equal(in->desc().shape().begin(), in->desc().shape().end(), out->desc().shape().begin(),
                      out->desc().shape().end()))
        return invalidInput(ctx, ": buffers ", sb.buffer(), " and ", sb.out_buffer(), " differ in type");
      const plan::TensorDesc& whole = gen.states(sb.state()).desc();
      if (in->desc().dtype() != whole.dtype() || sb.offsets_size() != whole.shape_size() ||
          in->desc().shape_size() != whole.shape_size())
        return invalidInput(ctx, ": the piece does not match the state's type");
      for (int d = 0; d < whole.shape_size(); ++d)
        if (sb.offsets(d) < 0 || sb.offsets(d) > whole.shape(d) || in->desc().shape(d) > whole.shape(d) - sb.offsets(d))
          return invalidInput(ctx, ": the piece leaves the state along dim ", d);
    }
  }
  for (int g = 0; g < plan.groups_size(); ++g) {
    const plan::Group& grp = plan.groups(g);
    int axis = static_cast<int>(std::find(std::begin(kAxes), std::end(kAxes), grp.axis()) - std::begin(kAxes));
    if (axis == 3) return invalidInput("group ", g, ": unknown axis '", grp.axis(), "' (pp, dp or tp)");
    std::vector<int64_t> want;
    if (grp.ranks_size() > 0 && grp.ranks(0) >= 0 && grp.ranks(0) < n) {
      std::array<int64_t, 3> c = mesh.coord(grp.ranks(0));
      int64_t extent = axis == 0 ? mesh.pp : axis == 1 ? mesh.dp : mesh.tp;
      for (int64_t i = 0; i < extent; ++i) {
        c[axis] = i;
        want.push_back(mesh.rankOf(c));
      }
    }
    if (!std::equal(grp.ranks().begin(), grp.ranks().end(), want.begin(), want.end())) {
      std::string got;
      for (int r : grp.ranks()) got += strCat(got.empty() ? "" : ",", r);
      return invalidInput("group ", g, " (", grp.axis(), "): ranks [", got, "] are not a ", grp.axis(),
                          " group of mesh pp=", m.pp(), " dp=", m.dp(), " tp=", m.tp());
    }
  }
  for (const plan::RankProgram& r : plan.ranks()) {
    RETURN_IF_ERROR(checkProgram(plan, r, strCat("rank ", r.rank()), n, false));
    // Transfers match run by run: every rank runs its program as often.
    if (std::max(1, r.microbatches()) != std::max(1, plan.ranks(0).microbatches()))
      return invalidInput("rank ", r.rank(), " runs ", std::max(1, r.microbatches()), " micro-batches but rank ",
                          plan.ranks(0).rank(), " runs ", std::max(1, plan.ranks(0).microbatches()));
  }
  if (plan.has_reference()) RETURN_IF_ERROR(checkProgram(plan, plan.reference(), "reference program", 1, true));

  // Transfers between each pair of ranks match in program order: the k-th
  // SEND from a to b and the k-th RECV on b from a carry the same type.
  std::map<std::pair<int, int>, std::vector<const plan::TensorDesc*>> sends, recvs;
  for (const plan::RankProgram& r : plan.ranks()) {
    std::map<int, const plan::TensorDesc*> desc;
    for (const plan::Buffer& b : r.buffers()) desc[b.id()] = &b.desc();
    for (const plan::Instruction& ins : r.instructions()) {
      if (ins.kind() == plan::Instruction::SEND) sends[{r.rank(), ins.peer()}].push_back(desc.at(ins.inputs(0)));
      if (ins.kind() == plan::Instruction::RECV) recvs[{ins.peer(), r.rank()}].push_back(desc.at(ins.outputs(0)));
    }
  }
  auto pairName = [](const std::pair<int, int>& p) { return strCat("rank ", p.first, " to rank ", p.second); };
  for (const auto& [pair, s] : sends) {
    const auto& r = recvs[pair];
    if (s.size() != r.size())
      return invalidInput("transfers from ", pairName(pair), ": ", s.size(), " SEND(s) but ", r.size(), " RECV(s)");
    for (size_t k = 0; k < s.size(); ++k)
      if (!sameDesc(*s[k], *r[k]))
        return invalidInput("transfer ", k, " from ", pairName(pair), ": SEND and RECV differ in type");
  }
  for (const auto& [pair, r] : recvs)
    if (!r.empty() && !sends.count(pair))
      return invalidInput("transfers from ", pairName(pair), ": ", r.size(), " RECV(s) but no SEND");
  RETURN_IF_ERROR(checkCollectivesMatch(plan));
  if (!plan.generation().has_prefill()) {
    if (plan.generation().shorter_prefills_size() > 0)
      return invalidInput("generation: shorter prefill programs without a prefill program");
    return Status::OK();
  }
  RETURN_IF_ERROR(checkPrefill(plan, -1));
  for (int k = 0; k < plan.generation().shorter_prefills_size(); ++k) RETURN_IF_ERROR(checkPrefill(plan, k));
  return Status::OK();
}

namespace {

/// Calls `f(where, string)` for every string field of the plan that libprotobuf
/// checks as UTF-8.
template <typename F>
void forEachString(const plan::Plan& p, F&& f) {
  for (int k = 0; k < p.inputs_size(); ++k) f(strCat("input ", k), p.inputs(k).name());
  for (int k = 0; k < p.outputs_size(); ++k) f(strCat("output ", k), p.outputs(k).name());
  f(std::string("the model path"), p.model());
  f(std::string("the producer"), p.producer());
  for (const std::string& s : p.notes()) f(std::string("a partitioning note"), s);
  for (const std::string& s : p.tensor_parallel()) f(std::string("a tensor-parallel choice"), s);
  for (int g = 0; g < p.groups_size(); ++g) f(strCat("group ", g, " axis"), p.groups(g).axis());
  auto prog = [&](const plan::RankProgram& r, const std::string& who) {
    f(who + ": weight file", r.weight_file());
    for (const plan::Weight& w : r.weights()) f(who + ": weight name", w.name());
    for (const plan::Buffer& b : r.buffers()) f(strCat(who, ": buffer ", b.id(), " name"), b.name());
    std::function<void(const google::protobuf::RepeatedPtrField<plan::Instruction>&)> code =
        [&](const google::protobuf::RepeatedPtrField<plan::Instruction>& list) {
          for (const plan::Instruction& ins : list) {
            f(who + ": node name", ins.node());
            f(who + ": op", ins.op());
            for (const plan::Attr& a : ins.attrs()) {
              f(who + ": attribute name", a.name());
              if (a.has_s()) f(strCat(who, ": attribute '", a.name(), "'"), a.s());
              if (a.has_strings())
                for (const std::string& s : a.strings().v()) f(strCat(who, ": attribute '", a.name(), "'"), s);
            }
            for (const plan::Body& b : ins.bodies()) {  // REGION bodies
              f(who + ": body name", b.name());
              for (const plan::Buffer& buf : b.buffers()) f(strCat(who, ": body buffer ", buf.id(), " name"), buf.name());
              code(b.instructions());
            }
          }
        };
    code(r.instructions());
  };
  for (const plan::RankProgram& r : p.ranks()) prog(r, strCat("rank ", r.rank()));
  if (p.has_reference()) prog(p.reference(), "reference program");
}

}  // namespace

std::string utf8OrEscaped(const std::string& s) {
  return invalidUtf8At(s) == std::string::npos ? s : escaped(s);
}

Status checkPlanStrings(const plan::Plan& plan) {
  Status first;
  forEachString(plan, [&](const std::string& where, const std::string& s) {
    if (!first.ok()) return;
    size_t at = invalidUtf8At(s);
    if (at != std::string::npos)
      first = invalidInput(where, " '", escaped(s), "' is not valid UTF-8 (byte ", at,
                           "); a plan holds names as UTF-8: rename it in the model");
  });
  return first;
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
  {
    ProtobufLogCapture capture;
    if (!lp.plan.ParseFromArray(planFile->data(), static_cast<int>(planFile->size())))
      return invalidInput(planPath, ": cannot parse as a pcc plan", ProtobufLogCapture::said());
  }
  if (lp.plan.schema_version() > 0 && lp.plan.schema_version() < kPlanSchemaVersion)
    return invalidInput(planPath, ": plan schema version ", lp.plan.schema_version(),
                        " is older than this runtime's ", kPlanSchemaVersion, " (it has no ",
                        lp.plan.schema_version() == 1   ? "memory plan"
                        : lp.plan.schema_version() == 2 ? "checksum of plan.pb"
                        : lp.plan.schema_version() == 3 ? "REGION instruction for If, Loop and Scan"
                        : lp.plan.schema_version() == 4 ? "micro-batch count of pipeline stages"
                        : lp.plan.schema_version() == 5 ? "LAUNCH instruction for generated kernels"
                        : lp.plan.schema_version() == 6 ? "ALL_TO_ALL instruction"
                                                        : "session state of generation plans",
                        "); recompile the model with this pcc");
  if (lp.plan.schema_version() != kPlanSchemaVersion)
    return invalidInput(planPath, ": plan schema version ", lp.plan.schema_version(),
                        " is not supported by this runtime (supports ", kPlanSchemaVersion, ")");
  // The checksum: the file ends in field 12 over every byte before it.
  const uint8_t* bytes = planFile->data();
  size_t n = planFile->size();
  if (n < kPlanCrcTrailer || bytes[n - kPlanCrcTrailer] != kPlanCrcTag)
    return invalidInput(planPath, ": does not end in its checksum (plan_crc32); the file is truncated or was "
                        "not written by pcc");
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(bytes[n - 4 + i]) << (8 * i);
  uint32_t computed = crc32Of(bytes, n - kPlanCrcTrailer);
  if (stored != computed)
    return invalidInput(planPath, ": checksum mismatch (stored ", hex32(stored), ", computed ", hex32(computed),
                        "): the plan is corrupt or was edited");
  if (Status st = validatePlan(lp.plan); !st.ok()) return st.withContext(planPath);
  auto openFile = [&](const plan::RankProgram& prog, const std::string& who) -> Status {
    const std::string& name = prog.weight_file();
    if (name.empty() || lp.files.count(name)) return Status::OK();
    ASSIGN_OR_RETURN(std::string path, confinedPath(dir, name, strCat(planPath, ": ", who, ": weight file")));
    if (!fs::is_regular_file(path, ec))
      return invalidInput(joinPath(dir, name), ": weight file of ", who, " is missing");
    ASSIGN_OR_RETURN(lp.files[name], MappedFile::open(path));
    return Status::OK();
  };
  for (const plan::RankProgram& prog : lp.plan.ranks())
    RETURN_IF_ERROR(openFile(prog, strCat("rank ", prog.rank())));
  for (const plan::RankProgram& prog : lp.plan.generation().prefill().ranks())
    RETURN_IF_ERROR(openFile(prog, strCat("prefill rank ", prog.rank())));
  for (const plan::Prefill& shorter : lp.plan.generation().shorter_prefills())
    for (const plan::RankProgram& prog : shorter.ranks())
      RETURN_IF_ERROR(openFile(prog, strCat("prefill (", shorter.max_prompt(), " tokens) rank ", prog.rank())));
  if (lp.plan.has_reference()) RETURN_IF_ERROR(openFile(lp.plan.reference(), "the reference program"));
  if (lp.plan.kernels_size() > 0) {
    ASSIGN_OR_RETURN(lp.kernels, KernelLibrary::read(dir, lp.plan));
  }
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
