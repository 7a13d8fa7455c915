#include "runtime/support/confined_path.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace pcc {

namespace fs = std::filesystem;

StatusOr<std::string> confinedPath(const std::string& dir, const std::string& name, const std::string& what) {
  if (name.empty()) return invalidInput(what, " is empty");
  if (name.find('\0') != std::string::npos) return invalidInput(what, " holds a NUL byte");
  fs::path rel(name);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    return invalidInput(what, " '", name, "' is absolute; it must be relative to the folder holding the file");
  for (const fs::path& part : rel)
    if (part == "..") return invalidInput(what, " '", name, "' climbs out of its folder with '..'");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::absolute(dir.empty() ? fs::path(".") : fs::path(dir), ec), ec);
  if (ec) return invalidInput(what, " '", name, "': cannot resolve the folder '", dir, "': ", ec.message());
  // Symlinks are followed as far as the path exists; the result must stay under `base`.
  fs::path full = fs::weakly_canonical(base / rel, ec);
  if (ec) return invalidInput(what, " '", name, "': cannot resolve it: ", ec.message());
  auto [b, f] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (b != base.end())
    return invalidInput(what, " '", name, "' resolves to ", full.string(), ", outside ", base.string(),
                        " (through a symbolic link)");
  return full.string();
}

}  // namespace pcc
