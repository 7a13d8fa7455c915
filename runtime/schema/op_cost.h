// The work one op does, from its types and attributes alone: floating-point
// operations and bytes moved. The partition report (report/) counts it per
// rank from a plan; the cost model (passes/partition/cost_model.h) turns it
// into time on a device. One definition, so the two always agree.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/support/attribute.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// What runs the op's arithmetic on a GPU: the matrix units (tensor cores:
/// MatMul, Gemm, Conv, Attention, ...) or the vector units (everything else).
enum class WorkUnit { kMatrix, kVector };

struct OpWork {
  /// Floating-point (or integer) operations: 2 per multiply-add for the
  /// contractions, one per output element (times a per-op factor for the
  /// transcendental ones) otherwise; 0 for ops that only move data.
  int64_t flops = 0;
  /// Bytes read and written, each operand once: the sum of the present inputs'
  /// and the outputs' sizes. A view (Reshape, Squeeze, ...) still counts them;
  /// callers that know an op runs in place may discount it.
  int64_t bytes = 0;
  WorkUnit unit = WorkUnit::kVector;
};

/// \returns the work of op `op` (ONNX op_type, canonical form) with input
/// types `inputs` (dtype kUndefined: absent optional input), output types
/// `outputs` and attributes `attrs`. Unknown ops count one operation per output
/// element. Saturates at INT64_MAX instead of overflowing.
OpWork opWork(std::string_view op, const std::vector<TensorType>& inputs, const std::vector<TensorType>& outputs,
              const AttrMap& attrs);

}  // namespace pcc
