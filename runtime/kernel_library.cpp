// KernelLibrary: check, then load, a bundle's generated CPU kernels.
//
// Algorithm:
//  1. read: every kernel of the plan's table must be named as the compiler
//     names them ("pcc_k_" and 16 hex digits), so no name can be a function
//     of the C library or of any other library the loader knows.
//  2. Resolve the library's name inside the bundle; open it without
//     blocking and refuse anything but a regular file (a FIFO would block
//     the read forever); read the whole file and compare its size and crc32
//     with the plan's.
//  3. Check that the bytes are a whole ELF64 shared object for this machine:
//     the header, the program headers and every loadable segment's bytes,
//     and the section headers, all within the file (a truncated library,
//     re-signed, would make dlopen fault on the missing pages).
//  4. cpuEntry, first call: copy the checked bytes into an anonymous memory
//     file (memfd_create) and dlopen it through /proc/self/fd, so a bundle
//     replaced on disk meanwhile cannot change what runs and two bundles'
//     libraries never share a name in the loader's list.
//  5. Look up each kernel's symbol (dlsym), and keep it only when it lies in
//     the library itself (dladdr1's link map is the library's, not one of
//     its dependencies').
#include "runtime/kernel_library.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "runtime/plan_io.h"
#include "runtime/support/confined_path.h"

namespace pcc {

namespace {

#if defined(__x86_64__)
constexpr uint16_t kElfMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kElfMachine = EM_AARCH64;
#else
#error "no ELF machine known for this processor"
#endif

/// \returns whether [offset, offset + count * size) lies within `total` bytes (no overflow).
bool within(uint64_t offset, uint64_t count, uint64_t size, uint64_t total) {
  if (offset > total) return false;
  if (size != 0 && count > (total - offset) / size) return false;
  return true;
}


/// Step 1. \returns whether `name` is a symbol the compiler gives a kernel:
/// "pcc_k_" and 16 lower-case hex digits (KernelTable::add).
bool isKernelSymbol(const std::string& name) {
  constexpr std::string_view kPrefix = "pcc_k_";
  if (name.size() != kPrefix.size() + 16 || name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  return name.find_first_not_of("0123456789abcdef", kPrefix.size()) == std::string::npos;
}

}  // namespace

/// Step 3. \returns OK when `b` is a whole ELF64 shared object for this
/// machine, else an invalid-input error naming `shown` and the flaw.
Status checkSharedObject(const std::string& b, const std::string& shown) {
  auto bad = [&](const auto&... why) {
    return invalidInput(shown, ": not a whole shared object for this machine (", why..., ")");
  };
  Elf64_Ehdr h;
  if (b.size() < sizeof h) return bad("only ", b.size(), " bytes");
  std::memcpy(&h, b.data(), sizeof h);
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return bad("no ELF magic");
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB) return bad("not ELF64 little-endian");
  if (h.e_type != ET_DYN || h.e_machine != kElfMachine) return bad("type ", h.e_type, ", machine ", h.e_machine);
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 ||
      !within(h.e_phoff, h.e_phnum, sizeof(Elf64_Phdr), b.size()))
    return bad("program headers outside the file");
  bool loads = false;
  for (uint16_t i = 0; i < h.e_phnum; ++i) {
    Elf64_Phdr p;
    std::memcpy(&p, b.data() + h.e_phoff + uint64_t{i} * sizeof p, sizeof p);
    if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC) continue;
    loads = loads || p.p_type == PT_LOAD;
    if (!within(p.p_offset, 1, p.p_filesz, b.size()) || p.p_filesz > p.p_memsz)
      return bad("segment ", i, " at ", p.p_offset, " + ", p.p_filesz, " bytes, the file has ", b.size());
  }
  if (!loads) return bad("no loadable segment");
  if (h.e_shnum != 0 &&
      (h.e_shentsize != sizeof(Elf64_Shdr) || !within(h.e_shoff, h.e_shnum, sizeof(Elf64_Shdr), b.size())))
    return bad("section headers outside the file");
  return Status::OK();
}

StatusOr<std::shared_ptr<KernelLibrary>> KernelLibrary::read(const std::string& dir, const plan::Plan& plan) {
  const plan::KernelLibrary& lib = plan.cpu_library();
  std::string shown = dir + "/" + lib.file();
  // Step 1.
  for (int i = 0; i < plan.kernels_size(); ++i)
    if (!isKernelSymbol(plan.kernels(i).name()))
      return invalidInput(dir, "/plan.pb: kernel ", i, " '", plan.kernels(i).name(),
                          "' is not a generated kernel's symbol (pcc_k_ and 16 hex digits)");
  // Step 2.
  ASSIGN_OR_RETURN(std::string path, confinedPath(dir, lib.file(), strCat(dir, "/plan.pb: kernel library")));
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return invalidInput(shown, ": the plan's generated kernels are missing (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalidInput(shown, ": not a regular file");
  }
  std::shared_ptr<KernelLibrary> k(new KernelLibrary);
  k->path_ = shown;
  if (static_cast<uint64_t>(st.st_size) != lib.nbytes()) {
    ::close(fd);
    return invalidInput(shown, ": is ", st.st_size, " bytes, the plan records ", lib.nbytes());
  }
  k->bytes_.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < k->bytes_.size()) {
    ssize_t r = ::read(fd, k->bytes_.data() + got, k->bytes_.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  k->bytes_.resize(got);
  if (k->bytes_.size() != lib.nbytes())
    return invalidInput(shown, ": is ", k->bytes_.size(), " bytes, the plan records ", lib.nbytes());
  uint32_t crc = crc32Of(k->bytes_.data(), k->bytes_.size());
  if (crc != lib.crc32())
    return invalidInput(shown, ": checksum mismatch (stored ", lib.crc32(), ", computed ", crc,
                        "): the generated kernels are corrupt or were edited");
  RETURN_IF_ERROR(checkSharedObject(k->bytes_, shown));
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
    // Step 4.
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
  // Step 5.
  if (index < 0 || index >= static_cast<int>(names_.size()))
    return invalidInput(path_, ": no kernel ", index, " (the plan has ", names_.size(), ")");
  void* sym = dlsym(handle_, names_[index].c_str());
  if (!sym) return invalidInput(path_, ": lacks kernel '", names_[index], "' of the plan's table");
  // dlsym also searches the library's dependencies: keep only its own symbols.
  struct link_map* own = nullptr;
  struct link_map* holder = nullptr;
  Dl_info info{};
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &own) != 0 || !own ||
      dladdr1(sym, &info, reinterpret_cast<void**>(&holder), RTLD_DL_LINKMAP) == 0 || holder != own)
    return invalidInput(path_, ": kernel '", names_[index], "' of the plan's table is not defined in the library",
                        holder && holder->l_name && *holder->l_name ? strCat(" but in ", holder->l_name) : "");
  return reinterpret_cast<CpuKernelEntry>(sym);
}

}  // namespace pcc
