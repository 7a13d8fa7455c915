// The compiler's options as command-line flags, one table for every front
// end: `pcc` adds them to its command line, and pcc.compile (the Python
// package) parses its keywords through the same table, each keyword the flag
// of its name (max_context=4096 is --max-context=4096).
#pragma once

#include <CLI/CLI.hpp>

#include "compiler/options.h"

namespace pcc {

/// Adds every compile option to `app`, each storing into `opts` (which must
/// outlive the parse): the options that shape the plan, not those of the
/// tool around it (the model, -o, --emit, --progress, --version).
void addCompileFlags(CLI::App& app, CompileOptions& opts);

}  // namespace pcc
