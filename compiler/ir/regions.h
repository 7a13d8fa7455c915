// Nodes that own bodies (regions): If, Loop and Scan. What their bodies must
// look like, and the one way to splice a body into the enclosing graph.
//
// A body reads nothing of the enclosing graph. Values it needs from outside
// (captures) are the node's trailing inputs, passed to every body as its
// trailing parameters:
//   If(cond, captures...)            then/else bodies: (captures...) -> (results...)
//   Loop(M, cond, v..., captures...) body: (iter, cond, v..., captures...) -> (cond, v..., scans...)
//   Scan(s..., xs..., captures...)   body: (s..., x slices..., captures...) -> (s..., y slices...)
// Loop and Scan say how many inputs are captures with the attribute
// `captures` (default 0); If's captures are all inputs after the condition.
// Loop and Scan follow ONNX (opset 11+ Loop, opset 9+ Scan, with Scan's
// `num_scan_inputs` and axis / direction attributes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

//   Fused(xs...)                     body: (xs...) -> (results...), attribute kind =
//                                    "epilogue" | "elementwise" (passes/fuse.cpp)

/// \returns true for ops whose nodes own bodies (If, Loop, Scan, Fused).
bool isRegionOp(OpKind op);
/// \returns how many bodies a node of `op` owns (0 for ordinary ops).
size_t numBodiesOf(OpKind op);
/// \returns the number of trailing inputs of region node `n` that are captures.
int64_t numCaptures(const Node& n);

/// Checks region node `n` against its bodies: body count, parameter and result
/// counts and types, the node's output types (Loop's scan outputs: all but
/// their leading, iteration dim). `what` names the node in messages.
/// \returns OK or an invalid-input error "WHAT: problem".
Status checkRegionNode(const Node& n, const std::string& what);

/// \returns Scan node `n`'s iteration count (the scan axis of its first scan
/// input), or an error when the node is malformed.
StatusOr<int64_t> scanTripCount(const Node& n);
/// Scan axes of Scan node `n`: `inputAxes` (one per scan input, normalized to
/// 0..rank-1) and `outputAxes` (one per scan output, `numScanOutputs` of them,
/// as written: they may be negative), and their directions (true: reverse).
/// \returns an error naming a bad attribute.
struct ScanAxes {
  std::vector<int64_t> inputAxes, outputAxes;
  std::vector<bool> inputReverse, outputReverse;
};
StatusOr<ScanAxes> scanAxes(const Node& n, size_t numScanOutputs);

/// Copies body `bodyIndex` of node `n` (a node of `g`) into `g`, just before
/// `n`: the body's parameters become `args`, its constants constants of `g`,
/// its nodes nodes of `g` (named "NODE/NAME", values renamed where their names
/// are taken). `n` itself is left in place.
/// \returns the values of `g` that hold the body's results.
StatusOr<std::vector<Value*>> inlineBody(Graph& g, const Node* n, size_t bodyIndex, const std::vector<Value*>& args);

}  // namespace pcc
