// Paths named inside a file (external data of a model or tensor file, weight
// files of a plan) are resolved only inside that file's folder.
#pragma once

#include <string>

#include "runtime/support/status.h"

namespace pcc {

/// \returns `dir`/`name` as an absolute, symlink-free path, or an error when
/// `name` is empty, absolute, holds a `..` component, or resolves (through
/// symlinks) to a place outside `dir`. `dir` empty means the working folder.
/// `what` names the reference in the message ("external data location").
StatusOr<std::string> confinedPath(const std::string& dir, const std::string& name, const std::string& what);

}  // namespace pcc
