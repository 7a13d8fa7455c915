// Reference kernels of the losses, windows and spectral op family: the
// registration hook of the family and the helpers its files share.
#include "runtime/ops/signal.h"

namespace pcc {
namespace ops {

StatusOr<int64_t> constScalarInt(const InferArgs& args, size_t i, const char* name) {
  const Tensor* t = i < args.constInputs.size() ? args.constInputs[i] : nullptr;
  if (!t)
    return invalidInput("input ", i, " ('", name, "') must be a constant: the output shape depends on its value");
  if (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)
    return invalidInput("input ", i, " ('", name, "') must be i32 or i64, got ", t->type().str());
  if (t->numel() != 1) return invalidInput("input ", i, " ('", name, "') must hold one value, got ", t->type().str());
  return t->getInt(0);
}

StatusOr<DType> generatorOutputType(const InferArgs& args) {
  int64_t code = args.attrs ? args.attrs->getInt("output_datatype", 1) : 1;
  auto t = static_cast<DType>(code);
  switch (t) {
    case DType::kF32:
    case DType::kF64:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI8:
    case DType::kU8:
    case DType::kI32:
    case DType::kI64:
      return t;
    default:
      return unsupported("output_datatype ", code, " is not supported (f32, f64, f16, bf16, i8, u8, i32, i64 are)");
  }
}

}  // namespace ops

void registerSignalOps(OpRegistry& r) {
  registerLossOps(r);
  registerWindowOps(r);
  registerSpectralOps(r);
}

}  // namespace pcc
