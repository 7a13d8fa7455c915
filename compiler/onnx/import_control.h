// Import of ONNX control flow: If, Loop and Scan, whose bodies are
// graph-valued attributes reading outer values by name.
//
// By default the importer removes them where it can: an If whose condition is
// a constant (after binding shapes and folding constants) becomes the branch
// it takes; a Loop whose trip count and conditions are constants, and every
// Scan, is unrolled, up to kMaxUnrolledNodes nodes (and iterations) per loop
// and kMaxUnrolledIterations iterations over the whole model, nested loops
// included (so that loops nested in unrolled loops cannot multiply the work).
// What remains (a condition or trip count computed at run time, a loop too
// large to unroll, every loop met once the model's budget is spent)
// stays a region node (If, Loop, Scan with bodies, compiler/ir/regions.h),
// replicated on every rank and run by the runtime on CPU ranks; every output
// type must be static (an If's branches agree, a Loop run at run time has
// no scan outputs unless it runs exactly M times), else the node is refused
// with an 'unsupported' error. ImportOptions::keepControlFlow keeps every
// If, Loop and Scan (opset 9+) as a region node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/onnx/import_context.h"

namespace pcc {

/// A Loop or Scan is unrolled into at most this many nodes (and iterations).
inline constexpr int64_t kMaxUnrolledNodes = 65536;
/// At most this many iterations are unrolled over the whole model, nested
/// loops and abandoned unrollings included; past it every Loop and Scan
/// (opset 9+) stays a region node run at run time, and a Scan-8 is refused.
inline constexpr int64_t kMaxUnrolledIterations = 2 * kMaxUnrolledNodes;

/// Imports ONNX node `n`, number `index` of its graph, through `ctx`:
/// legacy (opset < 7) broadcasting rewritten first, then the op table or,
/// for If, Loop and Scan, importControlFlow. Defined in importer.cpp.
Status importOnnxNode(ImportContext& ctx, const onnx::NodeProto& n, int index);

/// \returns true for the ops importControlFlow handles (If, Loop, Scan).
bool isControlFlowOp(std::string_view opType);
/// Imports the current node of `ctx`, an If, Loop or Scan.
Status importControlFlow(ImportContext& ctx);

/// \returns the names that nodes of `g` (and of bodies nested in it) read and
/// that `g` does not define: its captures of outer values, in first-use order.
std::vector<std::string> freeNames(const onnx::GraphProto& g);

}  // namespace pcc
