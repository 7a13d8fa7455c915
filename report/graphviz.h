// Graphviz's `dot` program, run as a child process to draw a graph as SVG.
// pcc does not link Graphviz: the HTML report works without it (it then
// embeds the dot source).
#pragma once

#include <string>

#include "runtime/support/status.h"

namespace pcc {

/// Runs `dot -Tsvg` (the first `dot` on PATH) on `dotSource`, written to a
/// temporary file, with no shell in between.
/// \param timeoutSeconds how long `dot` may run before it is killed.
/// \returns the SVG document, or an environment error saying why there is
/// none: `dot` is not installed, it failed (with the first line it printed),
/// or it ran too long.
StatusOr<std::string> renderDotToSvg(const std::string& dotSource, int timeoutSeconds = 120);

}  // namespace pcc
