// The target-independent description of a generated kernel: what one fused
// group of elementwise ops computes, independent of CUDA or C++
// (docs/kernels.md). The emitters (codegen/emit_cpp.h, codegen/emit_cuda.h)
// print the same description for each target.
//
// A kernel maps an index space (the shape of its outputs) to its outputs:
// output element i is a scalar expression of the input elements that i
// broadcasts from. Inputs carry one stride per index-space dimension (0 where
// the input is broadcast along it). Adjacent index-space dimensions along
// which every input is either contiguous or broadcast alike are merged, so a
// same-shape group is one flat loop and a bias add is two loops.
//
// A kernel may also reduce (Softmax, LogSoftmax, LayerNormalization,
// RMSNormalization, ReduceSum/Mean/Max over trailing axes): its last merged
// dimension is then the reduction axis, and Expr nodes of kind kReduceSum /
// kReduceMax evaluate their operand at every point of the axis and give one
// value per row (the other dimensions), broadcast back along the axis.
// Outputs lie over the whole index space or over the rows (the space without
// the axis). Nothing below the kernel table changes: a reduction kernel is a
// LAUNCH like any other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "runtime/support/status.h"

namespace pcc {

struct AttentionDesc;  // codegen/attention_kernel.h

/// The scalar operations of an expression. Each is a function `pk_NAME` of
/// the emitted prelude (scalarOpName), the same on every target.
enum class ScalarOp : int8_t {
  kInput,  ///< the element of input `input` at the current index
  kConst,  ///< the literal `value`, of the Expr's dtype
  kCast,   ///< args[0] converted to the Expr's dtype
  kSelect, ///< args[0] ? args[1] : args[2] (Where)
  // Binary
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,
  kEqual, kLess, kLessEq, kGreater, kGreaterEq, kAnd, kOr,
  // Unary
  kNeg, kAbs, kSqrt, kExp, kLog, kErf, kTanh, kSigmoid, kRelu, kReciprocal, kNot,
  kGeluErf, kGeluTanh, kSoftplus,
  // Reductions along the axis of KernelSpec::reduces: args[0] evaluated at
  // every point of the row, summed (float32, compensated) or maxed; the value
  // is the row's, the same at every point of it.
  kReduceSum, kReduceMax,
};

/// \returns whether `t` is a float type a kernel computes on: float32, and
/// float16 and bfloat16, which are loaded as float32, computed on as float32
/// and rounded (to nearest even) only when stored or cast to them.
inline bool isFloatValue(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

/// \returns whether `op` is a reduction along the row (kReduceSum, kReduceMax).
inline bool isReduceOp(ScalarOp op) { return op == ScalarOp::kReduceSum || op == ScalarOp::kReduceMax; }

/// \returns the name of `op` in the emitted source ("add" for pk_add).
const char* scalarOpName(ScalarOp op);

/// One node of a kernel's scalar expression. Exprs are kept in evaluation
/// order: every arg index is smaller than the Expr's own.
struct Expr {
  ScalarOp op = ScalarOp::kConst;
  DType dtype = DType::kF32;  ///< the value's type (float32 math for float types)
  std::vector<int> args;
  int input = -1;             ///< kInput: index into KernelSpec::inputs
  double value = 0;           ///< kConst
};

struct KernelInput {
  TensorType type;               ///< the parameter's type, as the plan gives it
  std::vector<int64_t> strides;  ///< per dimension of KernelSpec::dims, in elements; 0 = broadcast
};

struct KernelOutput {
  TensorType type;  ///< the parameter's type (its element count is the index space's, or the rows')
  int expr = -1;    ///< the Expr it stores
  /// Over the rows only (a reduction kernel's keepdims or dropped-axes
  /// result): one element per row, stored at the row's index.
  bool perRow = false;
};

/// A kernel: the fused group `group` as one loop over `dims`.
struct KernelSpec {
  std::string group;                ///< the fused node's name, for messages
  std::vector<int64_t> dims;        ///< the index space after merging (may be empty: one element)
  std::vector<KernelInput> inputs;  ///< the fused node's inputs, in order
  std::vector<Expr> exprs;
  std::vector<KernelOutput> outputs;  ///< the fused node's outputs, in order
  /// A reduction kernel: dims.back() is the reduction axis (never empty then).
  bool reduces = false;
  /// An Attention kernel (codegen/attention_kernel.h): dims and exprs are
  /// empty, inputs Q, K, V and the mask when there is one (no strides), output Y.
  std::shared_ptr<const AttentionDesc> attention;

  /// \returns the number of points of the index space.
  int64_t numel() const;
  /// \returns the length of a row: dims.back(), or 1 for an empty index space.
  int64_t rowLength() const;
  /// \returns the number of rows: numel() / rowLength() (0 for an empty space).
  int64_t rows() const;
  /// \returns for each Expr whether it varies along the row (reads an input
  /// whose stride along the last dimension is not 0, other than through a
  /// reduction); the rest are the row's.
  std::vector<bool> variesAlongRow() const;
};

/// Describes Fused node `fused` (passes/fuse.cpp) whose body holds only
/// elementwise ops on float32, float16, bfloat16, int32, int64 and bool
/// values, and at most reductions over trailing axes on the three float
/// types (Softmax and LogSoftmax on the
/// last axis, LayerNormalization, RMSNormalization, ReduceSum, ReduceMean,
/// ReduceMax, GlobalAveragePool; all of one input shape and axes).
/// \returns the description, or an unsupported error whose message says why
/// the group cannot be generated (a reduction, a view, an anchor, an op or a
/// dtype the emitters do not know, outputs of different shapes); the plan
/// emitter keeps such a group on the reference kernels and reports the reason.
StatusOr<KernelSpec> describeFused(const Node& fused);

/// Describes the elementwise nodes `nodes` (in evaluation order) as one
/// kernel reading `inputs` and writing `outputs` (values of those nodes),
/// named `group` in messages. A value the nodes read that is neither an input
/// nor computed by them must be a scalar constant. \returns as describeFused.
StatusOr<KernelSpec> describeGroup(const std::vector<const Node*>& nodes, const std::vector<const Value*>& inputs,
                                   const std::vector<const Value*>& outputs, const std::string& group);

/// \returns whether `n` alone could be part of a generated kernel: an
/// elementwise op with a generated form on supported dtypes, or a reduction
/// with one on float types (a cheap test before describeGroup).
bool mayBeGenerated(const Node& n);

/// \returns whether `n` is one of the reductions a kernel can describe
/// (Softmax, LogSoftmax, LayerNormalization, RMSNormalization, ReduceSum,
/// ReduceMean, ReduceMax, GlobalAveragePool), whatever its axes and types.
bool isGeneratedReduction(const Node& n);

/// \returns the operands of `n` a kernel reads as values: all its inputs,
/// except the axes operand of a Reduce* (a constant the description reads).
std::vector<const Value*> kernelOperands(const Node& n);

/// \returns a text form of `spec` that is equal for two specs exactly when
/// they compute the same function on the same types (the kernel's identity;
/// its group name is left out), e.g. for tests and deduplication.
std::string specKey(const KernelSpec& spec);

/// \returns a 64-bit FNV-1a hash of `s` as 16 hex digits.
std::string hashHex(const std::string& s);

}  // namespace pcc
