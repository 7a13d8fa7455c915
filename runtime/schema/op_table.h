// The op table (runtime/schema/Ops.def; docs/adding-an-op.md): the enumeration
// of every operator and its static properties. It sits below both the IR and
// the kernels, so the compiler and the runtime name ops by the same OpKind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pcc {

enum class OpKind : int {
#define PCC_OP(Name, MinIn, MaxIn, NumOut, Kind, ShapeOperands, Shard, Import) Name,
#include "runtime/schema/Ops.def"
#undef PCC_OP
  kNumOps
};
inline constexpr size_t kNumOpKinds = static_cast<size_t>(OpKind::kNumOps);

/// What fusion needs to know of an op (the Kind column of Ops.def).
enum class OpClass : int8_t { kElementwise, kBroadcast, kInjective, kReduction, kOpaque, kCollective };
/// \returns "elementwise", "broadcast", "injective", "reduction", "opaque" or "collective".
std::string_view opClassName(OpClass c);

/// How the partitioner splits an op (the Shard column of Ops.def).
enum class ShardRule : int8_t {
  kDimMap,     ///< passes/partition/dim_map.cpp maps input dims to output dims
  kReplicate,  ///< runs on whole tensors: split inputs are gathered first
};

/// How the ONNX importer reads an op (the Import column of Ops.def).
enum class OnnxImport : int8_t {
  kDirect,  ///< OnnxDirect(Since, "attr", ...): one node of the op, the listed attributes kept; the importer row is made from the column
  kCustom,  ///< OnnxCustom: an import function in compiler/onnx (opsets differ, or the op is rewritten)
  kNone,    ///< NotOnnx: made by pcc (collectives, Fused), never imported
};

struct OpInfo {
  std::string_view name;
  int minInputs, maxInputs, numOutputs;  // -1: variadic / set by the node
  OpClass opClass;
  /// Bit i set: input i is a shape operand (its value decides the output type).
  uint32_t shapeOperands;
  ShardRule shard;
  OnnxImport onnx;
};
/// \returns the static description of `op` from Ops.def.
const OpInfo& opInfo(OpKind op);
inline std::string_view opName(OpKind op) { return opInfo(op).name; }
/// \returns the op named `name`, or nullopt.
std::optional<OpKind> opFromName(std::string_view name);
inline OpClass opClass(OpKind op) { return opInfo(op).opClass; }
/// \returns whether `op` maps each output element from the elements at the
/// same (broadcast) position of its inputs only.
inline bool isElementwiseOp(OpKind op) { return opClass(op) == OpClass::kElementwise; }
inline bool isCollective(OpKind op) { return opClass(op) == OpClass::kCollective; }
/// \returns whether input `i` of `op` is a shape operand (see Ops.def).
inline bool isShapeOperand(OpKind op, size_t i) { return i < 32 && ((opInfo(op).shapeOperands >> i) & 1u); }

}  // namespace pcc
