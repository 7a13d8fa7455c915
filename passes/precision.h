// Precision conversion (--precision fp16|bf16|fp32; docs/precision.md): the
// graph's floating-point values are given the target type, except where a
// rule keeps a node in float32; weights are stored in the type their readers
// compute in, and casts are inserted where two types meet. Inputs and outputs
// keep the model's types (casts at the edges), except the ones named in
// PrecisionOptions::ioTypes (a generation plan's cache states).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <set>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

struct PrecisionOptions {
  /// The type activations and weights are converted to: kF32, kF16 or kBF16.
  DType target = DType::kUndefined;
  /// The default rules (defaultKeepOps, the graph outputs' producers, the
  /// measured ranges); off only to show what they prevent (--no-precision-rules).
  bool rules = true;
  /// Op names (--keep-fp32) and node names (--keep-fp32-node) that compute in
  /// float32, besides the rules'.
  std::set<std::string> keepOps, keepNodes;
  /// Graph inputs and outputs, by name, whose type becomes the one given
  /// instead of staying the model's (the KV cache states, --kv-cache-dtype).
  std::map<std::string, DType> ioTypes;
  /// The largest magnitude measured of each value (by name) on the
  /// calibration inputs (measureRanges, compiler/precision_error.h), or null.
  /// A node reading or writing a value beyond rangeLimit(target), or writing
  /// one whose every element lies below smallestNormal(target), computes in
  /// float32; a constant beyond largestFinite(target) is reported and kept.
  const std::map<std::string, double>* ranges = nullptr;
};

/// Why a node computes in float32.
struct KeptNode {
  std::string node, op, reason;
};

struct PrecisionSummary {
  DType target = DType::kUndefined;
  int64_t nodesConverted = 0;  ///< nodes computing in the target type
  std::vector<KeptNode> kept;  ///< nodes computing in float32 (or their own type), and why
  int64_t casts = 0;           ///< Cast nodes inserted
  /// Constants whose values lie beyond the target's range: kept in their own
  /// type (their readers compute in float32), never clipped.
  std::vector<std::string> overflowingConstants;
  /// The bytes of the constants, before and after the conversion.
  int64_t weightBytesBefore = 0, weightBytesAfter = 0;
};

/// The ops that compute in float32 by rule: the normalizations' statistics,
/// Softmax and LogSoftmax, Exp, Log and Pow, the log-sum and square-sum
/// reductions, the losses.
const std::set<std::string>& defaultKeepOps();

/// \returns the magnitude above which a value is out of range for `t`: a
/// quarter of float16's largest finite value (65504 / 4) for kF16, leaving
/// headroom for inputs larger than the calibration's; infinity otherwise.
double rangeLimit(DType t);

/// \returns the largest finite value of float type `t` (65504 for kF16): a
/// constant beyond it is reported and kept in its own type.
double largestFinite(DType t);

/// \returns the smallest normal magnitude of `t` for the range rule: 2^-14
/// (6.1e-5) for kF16, whose subnormals below it keep fewer significant bits;
/// 0 otherwise (bfloat16 has float32's exponent range). A node output whose
/// every measured element lies below it computes in float32.
double smallestNormal(DType t);

/// Converts `g` in place as `opts` says. Nodes with bodies (If, Loop, Scan)
/// and the quantization ops keep their own types. \returns what it did, or an
/// error (an unknown op name in keepOps).
StatusOr<PrecisionSummary> convertPrecision(Graph& g, const PrecisionOptions& opts);

/// Weight-only quantization (--quantize int8|int4): each MatMul whose B is a
/// constant [K, N], and each Gemm with a constant B, alpha 1, no transA and a
/// C that is a bias of N (or none), becomes MatMulNBits
/// (runtime/ops/nbits.h): its weight symmetric in blocks of `group` along K
/// (0: one block per output column), scales in A's type.
struct QuantizeOptions {
  int bits = 0;        ///< 8 or 4
  int64_t group = 0;   ///< values per block along K; 0: per output channel
  std::set<std::string> skipNodes;  ///< --keep-fp32-node: left as they are
  /// The quantized weights by source (data pointer, type, transposed), shared
  /// by every program compiled from the same weights (a generation plan's
  /// decode step and prefill programs), so that the plan stores them once.
  std::shared_ptr<std::map<std::tuple<const void*, int, bool>, std::pair<Tensor, Tensor>>> cache;
};

struct QuantizeSummary {
  int64_t nodes = 0;                  ///< MatMul/Gemm nodes quantized
  int64_t bytesBefore = 0, bytesAfter = 0;  ///< their weights' bytes
};

/// Quantizes the weights of `g` as `opts` says (reads each weight it
/// quantizes). \returns what it did.
StatusOr<QuantizeSummary> quantizeWeights(Graph& g, const QuantizeOptions& opts);

/// \returns "fp32", "fp16" or "bf16" for kF32, kF16, kBF16.
std::string precisionName(DType t);
/// \returns the type of a --precision value ("fp32", "fp16", "bf16", also
/// "f32", "f16", "float16", "bfloat16", "float32"), or nullopt.
std::optional<DType> precisionFromName(std::string_view name);

}  // namespace pcc
