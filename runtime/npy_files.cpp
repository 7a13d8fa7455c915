#include "runtime/npy_files.h"

#include <zip.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include <unistd.h>

#include <xtensor/xnpy.hpp>

namespace pcc {
namespace {

namespace fs = std::filesystem;

struct NpyType {
  const char* descr;
  DType dtype;
};
// The .npy dtypes taken, as numpy writes them on a little-endian machine.
constexpr NpyType kTypes[] = {
    {"<f4", DType::kF32}, {"<f2", DType::kF16}, {"<f8", DType::kF64}, {"<i8", DType::kI64},
    {"<i4", DType::kI32}, {"<i2", DType::kI16}, {"<u8", DType::kU64}, {"<u4", DType::kU32},
    {"<u2", DType::kU16}, {"|i1", DType::kI8},  {"|u1", DType::kU8},  {"|b1", DType::kBool},
};

const char* descrOf(DType t) {
  for (const NpyType& n : kTypes)
    if (n.dtype == t) return n.descr;
  return nullptr;
}

/// \returns `s` without spaces.
std::string noSpaces(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

/// \returns the header dictionary xtensor writes for (descr, C order, shape),
/// without its spaces, padding and newline.
std::string canonicalHeader(const std::string& descr, bool fortran, const std::vector<size_t>& shape) {
  std::ostringstream out;
  xt::detail::write_header(out, descr, fortran, shape);
  std::string h = out.str();
  size_t open = h.find('{'), close = h.rfind('}');
  return open == std::string::npos || close == std::string::npos ? "" : noSpaces(h.substr(open, close - open + 1));
}

uint32_t littleEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// The largest header taken (numpy itself refuses more than 10000 bytes by default).
constexpr uint32_t kMaxHeaderBytes = 1 << 20;

StatusOr<std::string> readWholeFile(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return invalidInput(path, ": is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalidInput(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return invalidInput(path, ": cannot read");
  return ss.str();
}

Status writeWholeFile(const std::string& path, const std::string& bytes) {
  // A temporary file beside the target, renamed over it once complete.
  std::string tmp = strCat(path, ".tmp", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return invalidInput(path, ": cannot write: ", std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return invalidInput(path, ": cannot write: ", std::strerror(errno));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return invalidInput(path, ": cannot write: ", ec.message());
  }
  return Status::OK();
}

std::string zipMessage(zip_error_t* e) {
  const char* s = zip_error_strerror(e);
  return s ? s : "unknown zip error";
}

bool keptInName(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

}  // namespace

StatusOr<Tensor> decodeNpy(std::string_view bytes, const std::string& what) {
  // The fixed prefix: magic, version, header length (1.0: 2 bytes, 2.0: 4).
  constexpr size_t kMagic = xt::detail::magic_string_length;
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagic + 4)
    return invalidInput(what, ": truncated .npy header (", bytes.size(), " bytes)");
  if (std::memcmp(bytes.data(), xt::detail::magic_string, kMagic) != 0)
    return invalidInput(what, ": not an .npy file (no \\x93NUMPY magic)");
  const int major = u[kMagic], minor = u[kMagic + 1];
  if (!((major == 1 || major == 2) && minor == 0))
    return invalidInput(what, ": .npy format version ", major, ".", minor, " is not read (1.0 and 2.0 are)");
  const size_t lenBytes = major == 1 ? 2 : 4;
  if (bytes.size() < kMagic + 2 + lenBytes)
    return invalidInput(what, ": truncated .npy header (", bytes.size(), " bytes)");
  const uint32_t headerLen = littleEndian(u + kMagic + 2, static_cast<int>(lenBytes));
  const size_t dataStart = kMagic + 2 + lenBytes + static_cast<size_t>(headerLen);
  if (headerLen > kMaxHeaderBytes) return invalidInput(what, ": .npy header of ", headerLen, " bytes (too long)");
  if (bytes.size() < dataStart)
    return invalidInput(what, ": truncated .npy header (", headerLen, " header bytes announced, ",
                        bytes.size() - (kMagic + 2 + lenBytes), " present)");
  std::string header(bytes.substr(kMagic + 2 + lenBytes, headerLen));
  // The dictionary, read by xtensor; the checks before it keep its parser to
  // the form it takes (a '{...}' ending in a newline, a 'shape' tuple).
  const std::string flat = noSpaces(header);
  if (flat.size() < 3 || flat.back() != '\n' || flat.front() != '{' || flat[flat.size() - 2] != '}' ||
      flat.find("'shape'") == std::string::npos || flat.find("'shape'") != flat.find("'shape':("))
    return invalidInput(what, ": .npy header is not numpy's {'descr': ..., 'fortran_order': ..., 'shape': (...)}");
  if (flat.find("'descr':'|O'") != std::string::npos)
    return invalidInput(what, ": object arrays ('|O') are not read: only numbers and bools");
  std::string descr;
  bool fortran = false;
  std::vector<size_t> shape;
  try {
    xt::detail::parse_header(header, descr, &fortran, shape);
  } catch (const std::exception& e) {
    return invalidInput(what, ": .npy header: ", e.what(), " in ", flat.substr(0, flat.size() - 1));
  }
  // One spelling: the dictionary must be the one written back for what was read
  // (this refuses shapes like (abc,) or (-1,) the reader would take for numbers).
  if (flat.substr(0, flat.size() - 1) != canonicalHeader(descr, fortran, shape))
    return invalidInput(what, ": .npy header is not numpy's dictionary: ", flat.substr(0, flat.size() - 1));
  if (fortran) return invalidInput(what, ": Fortran-order array: write it in C order (numpy.ascontiguousarray)");
  DType dtype = DType::kUndefined;
  for (const NpyType& n : kTypes)
    if (descr == n.descr) dtype = n.dtype;
  if (dtype == DType::kUndefined) {
    if (!descr.empty() && descr[0] == '>')
      return invalidInput(what, ": big-endian dtype '", descr, "' (write it little-endian: a.astype('<", descr.substr(1),
                          "'))");
    return invalidInput(what, ": dtype '", descr, "' is not read (float32, float16, float64, int64, int32, int16, "
                        "uint64, uint32, uint16, int8, uint8, bool)");
  }
  Dims dims;
  uint64_t count = 1;
  const uint64_t avail = bytes.size() - dataStart, elem = dtypeSize(dtype);
  bool tooBig = false, empty = false;
  for (size_t d : shape) {
    if (d > static_cast<size_t>(std::numeric_limits<int64_t>::max())) tooBig = true;
    empty |= d == 0;
    dims.push_back(static_cast<int64_t>(std::min<size_t>(d, std::numeric_limits<int64_t>::max())));
  }
  if (empty) {
    count = 0;
  } else {
    for (size_t d : shape) {
      if (tooBig || count > avail / elem / d) {  // more elements than the data could hold (no overflow)
        tooBig = true;
        break;
      }
      count *= d;
    }
  }
  const std::string typeText = TensorType{dtype, dims}.str();
  if (tooBig) return invalidInput(what, ": truncated data: ", typeText, " needs more than the ", avail, " bytes present");
  const uint64_t need = count * elem;
  if (avail < need) return invalidInput(what, ": truncated data: ", typeText, " needs ", need, " bytes, ", avail, " present");
  if (avail > need) return invalidInput(what, ": ", avail - need, " bytes after the data of ", typeText);
  Tensor t = Tensor::zeros(dtype, dims);
  if (need) std::memcpy(t.mutableData(), bytes.data() + dataStart, need);
  if (dtype == DType::kBool) {
    const auto* b = static_cast<const unsigned char*>(t.raw());
    for (uint64_t i = 0; i < count; ++i)
      if (b[i] > 1) return invalidInput(what, ": bool element ", i, " holds ", int(b[i]), ", not 0 or 1");
  }
  return t;
}

StatusOr<std::string> encodeNpy(const Tensor& t) {
  const char* descr = descrOf(t.dtype());
  if (!descr) return invalidInput("a ", dtypeName(t.dtype()), " tensor has no .npy form");
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  std::ostringstream out;
  xt::detail::write_header(out, descr, false, shape);
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  return out.str();
}

StatusOr<Tensor> readNpyFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, readWholeFile(path));
  return decodeNpy(bytes, path);
}

StatusOr<NamedTensors> readNpz(const std::string& path, std::map<std::string, std::string>* sources) {
  ASSIGN_OR_RETURN(std::string bytes, readWholeFile(path));
  // libzip takes an empty file for an empty archive; numpy writes none.
  if (bytes.empty()) return invalidInput(path, ": not a valid .npz (zip) archive: an empty file");
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  if (!src) {
    std::string m = zipMessage(&ze);
    zip_error_fini(&ze);
    return invalidInput(path, ": cannot read the .npz archive: ", m);
  }
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  if (!za) {
    std::string m = zipMessage(&ze);
    zip_error_fini(&ze);
    zip_source_free(src);
    return invalidInput(path, ": not a valid .npz (zip) archive: ", m);
  }
  zip_error_fini(&ze);
  std::unique_ptr<zip_t, void (*)(zip_t*)> archive(za, [](zip_t* z) { zip_discard(z); });
  NamedTensors out;
  const zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME))
      return invalidInput(path, ": entry ", i, ": ", zip_strerror(za));
    std::string entry = st.name;
    const std::string what = strCat(path, ":", entry);
    if (entry.size() <= 4 || entry.compare(entry.size() - 4, 4, ".npy") != 0)
      return invalidInput(what, ": an .npz entry is NAME.npy (numpy.savez writes them so)");
    std::string name = entry.substr(0, entry.size() - 4);
    if (out.count(name)) return invalidInput(what, ": a second entry for '", name, "'");
    zip_file_t* f = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
    if (!f) return invalidInput(what, ": cannot open the entry: ", zip_strerror(za));
    // Read in pieces, not by the size the directory claims: a damaged archive
    // cannot make this allocate more than the entry really holds. libzip
    // checks the data's CRC and length at its end.
    std::string data;
    char buf[1 << 16];
    zip_int64_t got;
    while ((got = zip_fread(f, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(got));
    std::string err = got < 0 ? zip_file_strerror(f) : "";
    zip_fclose(f);
    if (got < 0) return invalidInput(what, ": damaged entry: ", err);
    if ((st.valid & ZIP_STAT_SIZE) && st.size != data.size())
      return invalidInput(what, ": damaged entry: ", data.size(), " bytes, the archive says ", st.size);
    ASSIGN_OR_RETURN(Tensor t, decodeNpy(data, what));
    out.emplace(name, std::move(t));
    if (sources) (*sources)[name] = what;
  }
  return out;
}

StatusOr<std::string> encodeNpz(const NamedTensors& tensors) {
  // libzip writes no archive at all for no entries.
  if (tensors.empty()) return invalidInput("an .npz archive needs at least one tensor");
  std::vector<std::string> bodies;  // alive until zip_close has read them
  bodies.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (name.empty()) return invalidInput("an .npz entry needs a name");
    auto b = encodeNpy(t);
    if (!b.ok()) return invalidInput("tensor '", name, "': ", b.status().message());
    bodies.push_back(std::move(b).value());
  }
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, &ze);
  if (!src) {
    std::string m = zipMessage(&ze);
    zip_error_fini(&ze);
    return internalError("cannot make an .npz archive: ", m);
  }
  zip_source_keep(src);  // read the archive back after zip_close
  std::unique_ptr<zip_source_t, void (*)(zip_source_t*)> keep(src, [](zip_source_t* s) { zip_source_free(s); });
  zip_t* za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
  if (!za) {
    std::string m = zipMessage(&ze);
    zip_error_fini(&ze);
    return internalError("cannot make an .npz archive: ", m);
  }
  zip_error_fini(&ze);
  size_t k = 0;
  for (const auto& [name, t] : tensors) {
    const std::string& body = bodies[k++];
    zip_source_t* s = zip_source_buffer(za, body.data(), body.size(), 0);
    zip_int64_t idx = s ? zip_file_add(za, (name + ".npy").c_str(), s, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      std::string m = zip_strerror(za);
      if (s) zip_source_free(s);
      zip_discard(za);
      return internalError("cannot add '", name, "' to an .npz archive: ", m);
    }
    zip_set_file_compression(za, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);  // as numpy.savez
  }
  if (zip_close(za) != 0) {
    std::string m = zip_strerror(za);
    zip_discard(za);
    return internalError("cannot write an .npz archive: ", m);
  }
  if (zip_source_open(src) != 0) return internalError("cannot read back an .npz archive");
  std::string out;
  char buf[1 << 16];
  zip_int64_t got;
  while ((got = zip_source_read(src, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(got));
  zip_source_close(src);
  if (got < 0) return internalError("cannot read back an .npz archive");
  return out;
}

StatusOr<std::string> npyFileName(const std::string& name) {
  if (name.empty()) return invalidInput("a tensor without a name has no .npy file name");
  static const char kHex[] = "0123456789ABCDEF";
  std::string file;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (keptInName(c) && !(i == 0 && c == '.')) {
      file += static_cast<char>(c);
    } else {
      file += '%';
      file += kHex[c >> 4];
      file += kHex[c & 15];
    }
  }
  file += ".npy";
  if (file.size() > 255)
    return invalidInput("tensor '", name, "': its file name would be ", file.size(), " bytes (255 at most): use .npz");
  return file;
}

StatusOr<std::string> npyTensorName(const std::string& file) {
  if (file.size() <= 4 || file.compare(file.size() - 4, 4, ".npy") != 0)
    return invalidInput(file, ": not NAME.npy");
  const std::string stem = file.substr(0, file.size() - 4);
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string name;
  for (size_t i = 0; i < stem.size(); ++i) {
    if (stem[i] != '%') {
      name += stem[i];
      continue;
    }
    const int hi = i + 2 < stem.size() ? hex(stem[i + 1]) : -1, lo = hi >= 0 ? hex(stem[i + 2]) : -1;
    if (hi < 0 || lo < 0) return invalidInput(file, ": '%' not followed by two upper-case hex digits");
    name += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  auto again = npyFileName(name);
  if (!again.ok() || *again != file)
    return invalidInput(file, ": not the spelling of tensor '", name, "' (that is ",
                        again.ok() ? *again : std::string("none"), "; see docs/cli.md#tensor-files)");
  return name;
}

bool holdsNpyFiles(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string f = it->path().filename().string();
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".npy") == 0) return true;
  }
  return false;
}

StatusOr<NamedTensors> readNpyFolder(const std::string& dir, std::map<std::string, std::string>* sources) {
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string f = it->path().filename().string();
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".npy") == 0) files.push_back(f);
  }
  if (ec) return invalidInput(dir, ": cannot list the folder: ", ec.message());
  std::sort(files.begin(), files.end());
  NamedTensors out;
  for (const std::string& f : files) {
    const std::string path = (fs::path(dir) / f).string();
    auto name = npyTensorName(f);
    if (!name.ok()) return invalidInput(path, ": ", name.status().message());
    ASSIGN_OR_RETURN(Tensor t, readNpyFile(path));
    out.emplace(*name, std::move(t));
    if (sources) (*sources)[*name] = path;
  }
  return out;
}

StatusOr<NamedTensors> readNamedTensors(const std::string& path, std::map<std::string, std::string>* sources) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return readNpyFolder(path, sources);
  if (!fs::exists(path, ec)) return invalidInput(path, ": no such file or folder");
  return readNpz(path, sources);
}

Status writeNpz(const std::string& path, const NamedTensors& tensors) {
  auto bytes = encodeNpz(tensors);
  if (!bytes.ok()) return bytes.status().withContext(path);
  return writeWholeFile(path, *bytes);
}

Status writeNpyFolder(const std::string& dir, const NamedTensors& tensors) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return invalidInput(dir, ": cannot create directory: ", ec.message());
  for (const auto& [name, t] : tensors) {
    auto file = npyFileName(name);
    if (!file.ok()) return file.status().withContext(dir);
    auto bytes = encodeNpy(t);
    if (!bytes.ok()) return invalidInput(dir, ": tensor '", name, "': ", bytes.status().message());
    RETURN_IF_ERROR(writeWholeFile((fs::path(dir) / *file).string(), *bytes));
  }
  return Status::OK();
}

StatusOr<std::vector<Tensor>> matchNamedTensors(const NamedTensors& got,
                                                const std::vector<std::pair<std::string, TensorType>>& wanted,
                                                const std::string& kind, const std::string& origin,
                                                const std::map<std::string, std::string>& sources) {
  auto source = [&](const std::string& name) {
    auto it = sources.find(name);
    return it == sources.end() ? origin : it->second;
  };
  auto names = [&] {
    std::string s;
    for (const auto& [n, t] : wanted) s += (s.empty() ? "'" : ", '") + n + "'";
    return s;
  };
  std::vector<Tensor> out;
  for (const auto& [name, type] : wanted) {
    auto it = got.find(name);
    if (it == got.end()) {
      auto file = npyFileName(name);
      return invalidInput(origin, ": no tensor for ", kind, " '", name, "' (", type.str(), "; in a folder: ",
                          file.ok() ? *file : std::string("none"), ")");
    }
    if (it->second.type() != type)
      return invalidInput(source(name), ": ", kind, " '", name, "': the plan expects ", type.str(), ", got ",
                          it->second.type().str());
    out.push_back(it->second);
  }
  for (const auto& entry : got) {
    const std::string& name = entry.first;
    bool known = std::any_of(wanted.begin(), wanted.end(), [&](const auto& w) { return w.first == name; });
    if (!known) return invalidInput(source(name), ": '", name, "' is none of the plan's ", kind, "s (", names(), ")");
  }
  return out;
}

}  // namespace pcc
