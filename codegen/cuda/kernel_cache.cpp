#include "codegen/cuda/kernel_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/cuda/sha256.h"

namespace pcc::cuda {

namespace fs = std::filesystem;

namespace {

// Entry layout: magic, then six fields each as a little-endian u64 length and
// its bytes (key, name, arch, ptx, cubin, log), then the SHA-256 of all that.
constexpr char kMagic[8] = {'P', 'C', 'C', 'K', 'R', 'N', 'L', '1'};
constexpr size_t kDigestBytes = 32;
// Bumped whenever the entry layout or the key's fields change.
constexpr const char* kKeyVersion = "pcc-kernel-cache-v1";

void putField(std::string& out, std::string_view s) {
  uint64_t n = s.size();
  for (int i = 0; i < 8; ++i) out.push_back(char(uint8_t(n >> (8 * i))));
  out.append(s);
}

/// Reads one field at `pos` of `in`; \returns false when it runs past the end.
bool getField(const std::string& in, size_t end, size_t& pos, std::string& out) {
  if (end - pos < 8) return false;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(in[pos + i])) << (8 * i);
  pos += 8;
  if (n > end - pos) return false;
  out.assign(in, pos, n);
  pos += n;
  return true;
}

std::string digestOf(const char* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  auto d = h.finish();
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)) {}

std::string KernelCache::defaultDir() {
  if (const char* env = std::getenv("PCC_CACHE_DIR"); env && *env) return env;
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache/pcc/kernels").string();
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  return ((ec ? fs::path("/tmp") : tmp) / "pcc-kernels").string();
}

StatusOr<std::string> KernelCache::key(const std::string& source, const std::string& name, const std::string& arch,
                                       const CudaCompileOptions& opts) const {
  ASSIGN_OR_RETURN(std::string version, nvrtcVersionString());
  Sha256 h;
  h.updateField(kKeyVersion);
  h.updateField(version);
  h.updateField(name);
  h.updateField(arch);
  h.updateField(source);
  // The full option list, not the struct: it also covers the include path
  // and any default flag the compiler adds.
  for (const std::string& o : nvrtcOptions(arch, opts)) h.updateField(o);
  return h.finishHex();
}

std::string KernelCache::pathFor(const std::string& key) const { return (fs::path(dir_) / (key + ".pcck")).string(); }

std::string KernelCache::lastWriteError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastWriteError_;
}

bool KernelCache::load(const std::string& path, const std::string& key, const std::string& name,
                       const std::string& arch, CompiledKernel& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;  // simply not cached
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto reject = [&] {
    ++corrupt_;
    return false;
  };
  if (!f.good() && !f.eof()) return reject();
  if (data.size() < sizeof(kMagic) + kDigestBytes || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    return reject();
  size_t end = data.size() - kDigestBytes;
  if (digestOf(data.data(), end) != data.substr(end)) return reject();

  size_t pos = sizeof(kMagic);
  std::string storedKey, cubin;
  CompiledKernel k;
  if (!getField(data, end, pos, storedKey) || !getField(data, end, pos, k.name) || !getField(data, end, pos, k.arch) ||
      !getField(data, end, pos, k.ptx) || !getField(data, end, pos, cubin) || !getField(data, end, pos, k.log) ||
      pos != end)
    return reject();
  // An intact file under the right name but for other inputs: never trust it.
  if (storedKey != key || k.name != name || k.arch != arch || cubin.empty() || k.ptx.empty()) return reject();
  k.cubin.assign(cubin.begin(), cubin.end());
  out = std::move(k);
  return true;
}

Status KernelCache::store(const std::string& path, const std::string& key, const CompiledKernel& k) const {
  std::string data(kMagic, sizeof(kMagic));
  putField(data, key);
  putField(data, k.name);
  putField(data, k.arch);
  putField(data, k.ptx);
  putField(data, std::string_view(k.cubin.data(), k.cubin.size()));
  putField(data, k.log);
  data += digestOf(data.data(), data.size());

  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return internalError("kernel cache: cannot create directory '", dir_, "': ", ec.message());
  // Unique per process and per call, so concurrent writers never share a
  // temporary; rename() then replaces the entry atomically.
  std::string tmp = strCat(path, ".tmp.", ::getpid(), ".", tmpCounter_++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), std::streamsize(data.size()));
    f.close();
    if (!f) {
      fs::remove(tmp, ec);
      return internalError("kernel cache: cannot write '", tmp, "'");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return internalError("kernel cache: cannot rename '", tmp, "' to '", path, "': ", ec.message());
  }
  return Status::OK();
}

StatusOr<std::vector<CompiledKernel>> KernelCache::getOrCompile(const std::string& source, const std::string& name,
                                                                const CudaCompileOptions& opts) {
  std::vector<CompiledKernel> out(opts.arches.size());
  std::vector<std::string> keys(opts.arches.size());
  std::vector<size_t> missing;
  for (size_t i = 0; i < opts.arches.size(); ++i) {
    ASSIGN_OR_RETURN(keys[i], key(source, name, opts.arches[i], opts));
    if (!load(pathFor(keys[i]), keys[i], name, opts.arches[i], out[i])) missing.push_back(i);
  }
  if (missing.empty() && !opts.arches.empty()) {
    ++hits_;
    return out;
  }
  ++misses_;

  // Compile only what the cache lacked; validation of names and arches is
  // compileCuda's.
  CudaCompileOptions sub = opts;
  sub.arches.clear();
  for (size_t i : missing) sub.arches.push_back(opts.arches[i]);
  ASSIGN_OR_RETURN(std::vector<CompiledKernel> fresh, compileCuda(source, name, sub));
  for (size_t j = 0; j < missing.size(); ++j) {
    size_t i = missing[j];
    out[i] = std::move(fresh[j]);
    Status s = store(pathFor(keys[i]), keys[i], out[i]);
    if (!s.ok()) {
      ++writeFailures_;
      std::lock_guard<std::mutex> lock(mu_);
      lastWriteError_ = s.message();
    }
  }
  return out;
}

}  // namespace pcc::cuda
