// Type inference (the op schemas) of BlackmanWindow, HannWindow, HammingWindow
// and MelWeightMatrix. Their reference kernels, and what the kernels compute,
// are runtime/ops/signal_window.cpp.
#include <cmath>
#include <numbers>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/signal_window.h"

namespace pcc {

namespace ops::signal_window_schema {

StatusOr<std::vector<TensorType>> inferWindow(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kI32, DType::kI64}, "input size"));
  ASSIGN_OR_RETURN(int64_t size, constScalarInt(args, 0, "size"));
  if (size < 0) return invalidInput("window size must be >= 0, got ", size);
  ASSIGN_OR_RETURN(DType dt, generatorOutputType(args));
  return std::vector<TensorType>{{dt, {size}}};
}

StatusOr<std::vector<TensorType>> inferMel(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 5, 5));
  for (size_t i = 0; i < 3; ++i)
    RETURN_IF_ERROR(checkDType(args.inputs[i], {DType::kI32, DType::kI64}, "integer inputs 0-2"));
  for (size_t i = 3; i < 5; ++i) RETURN_IF_ERROR(checkDType(args.inputs[i], kFloatTypes, "edge frequencies"));
  ASSIGN_OR_RETURN(int64_t bins, constScalarInt(args, 0, "num_mel_bins"));
  ASSIGN_OR_RETURN(int64_t dftLength, constScalarInt(args, 1, "dft_length"));
  if (bins <= 0 || dftLength <= 0)
    return invalidInput("num_mel_bins and dft_length must be positive, got ", bins, " and ", dftLength);
  ASSIGN_OR_RETURN(DType dt, generatorOutputType(args));
  return std::vector<TensorType>{{dt, {dftLength / 2 + 1, bins}}};
}

}  // namespace ops::signal_window_schema

namespace {
using namespace ops;
using namespace ops::signal_window_schema;

}  // namespace

void registerWindowSchemas(SchemaRegistry& r) {
  r.add(OpKind::BlackmanWindow, &inferWindow);
  r.add(OpKind::HannWindow, &inferWindow);
  r.add(OpKind::HammingWindow, &inferWindow);
  r.add(OpKind::MelWeightMatrix, &inferMel);
}

}  // namespace pcc
