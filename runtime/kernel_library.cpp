// KernelLibrary: check, then load, a bundle's generated CPU kernels.
//
// Algorithm:
//  1. read: resolve the library's name inside the bundle, read the whole
//     file and compare its size and crc32 with the plan's.
//  2. cpuEntry, first call: copy the checked bytes into an anonymous memory
//     file (memfd_create) and dlopen it through /proc/self/fd, so a bundle
//     replaced on disk meanwhile cannot change what runs and two bundles'
//     libraries never share a name in the loader's list.
//  3. Look up each kernel's symbol (dlsym).
#include "runtime/kernel_library.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/plan_io.h"
#include "runtime/support/confined_path.h"

namespace pcc {

StatusOr<std::shared_ptr<KernelLibrary>> KernelLibrary::read(const std::string& dir, const plan::Plan& plan) {
  const plan::KernelLibrary& lib = plan.cpu_library();
  std::string shown = dir + "/" + lib.file();
  // Step 1.
  ASSIGN_OR_RETURN(std::string path, confinedPath(dir, lib.file(), strCat(dir, "/plan.pb: kernel library")));
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalidInput(shown, ": the plan's generated kernels are missing");
  std::ostringstream s;
  s << f.rdbuf();
  std::shared_ptr<KernelLibrary> k(new KernelLibrary);
  k->path_ = shown;
  k->bytes_ = s.str();
  if (k->bytes_.size() != lib.nbytes())
    return invalidInput(shown, ": is ", k->bytes_.size(), " bytes, the plan records ", lib.nbytes());
  uint32_t crc = crc32Of(k->bytes_.data(), k->bytes_.size());
  if (crc != lib.crc32())
    return invalidInput(shown, ": checksum mismatch (stored ", lib.crc32(), ", computed ", crc,
                        "): the generated kernels are corrupt or were edited");
  for (const plan::Kernel& kn : plan.kernels()) k->names_.push_back(kn.name());
  return k;
}

KernelLibrary::~KernelLibrary() {
  if (handle_) dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<CpuKernelEntry> KernelLibrary::cpuEntry(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tried_) {
    // Step 2.
    tried_ = true;
    fd_ = ::memfd_create("pcc-kernels", MFD_CLOEXEC);
    if (fd_ < 0) {
      loaded_ = environmentError(path_, ": cannot create an in-memory file: ", std::strerror(errno));
    } else {
      size_t done = 0;
      while (done < bytes_.size()) {
        ssize_t w = ::write(fd_, bytes_.data() + done, bytes_.size() - done);
        if (w <= 0) break;
        done += static_cast<size_t>(w);
      }
      std::string fdPath = strCat("/proc/self/fd/", fd_);
      if (done != bytes_.size()) {
        loaded_ = environmentError(path_, ": cannot copy into an in-memory file");
      } else if (!(handle_ = dlopen(fdPath.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        const char* e = dlerror();
        loaded_ = invalidInput(path_, ": cannot load the generated kernels: ", e ? e : "dlopen failed");
      }
    }
    bytes_.clear();
    bytes_.shrink_to_fit();
  }
  RETURN_IF_ERROR(loaded_);
  // Step 3.
  if (index < 0 || index >= static_cast<int>(names_.size()))
    return invalidInput(path_, ": no kernel ", index, " (the plan has ", names_.size(), ")");
  void* sym = dlsym(handle_, names_[index].c_str());
  if (!sym) return invalidInput(path_, ": lacks kernel '", names_[index], "' of the plan's table");
  return reinterpret_cast<CpuKernelEntry>(sym);
}

}  // namespace pcc
