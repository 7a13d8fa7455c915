// Type inference (the op schemas) of DFT and STFT. Their reference kernels, and
// what the kernels compute, are runtime/ops/signal_spectral.cpp.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/signal_spectral.h"

namespace pcc {

namespace ops::signal_spectral_schema {

Status checkSignal(const TensorType& x, int64_t minRank, const char* what) {
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, what));
  if (x.rank() < minRank || (x.shape.back() != 1 && x.shape.back() != 2))
    return invalidInput(what, " must have rank >= ", minRank, " and a last dim of 1 (real) or 2 (complex), got ",
                        x.str());
  return Status::OK();
}

StatusOr<DftShape> dftShape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 3));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkSignal(x, 2, "input"));
  const AttrMap& attrs = attrsOf(args);
  DftShape s;
  int64_t r = x.rank();
  int64_t axis = -2;
  if (args.has(2)) {
    RETURN_IF_ERROR(checkDType(args.inputs[2], {DType::kI32, DType::kI64}, "input axis"));
    ASSIGN_OR_RETURN(axis, constScalarInt(args, 2, "axis"));
  }
  // The last dim holds the components, so signal axes are [-r, -2] and [0, r-2].
  if (axis < -r || axis > r - 2 || axis == -1)
    return invalidInput("axis ", axis, " is out of range [-", r, ", -2] or [0, ", r - 2, "] for input ", x.str());
  s.axis = axis < 0 ? axis + r : axis;
  s.n = x.shape[s.axis];
  if (args.has(1)) {
    RETURN_IF_ERROR(checkDType(args.inputs[1], {DType::kI32, DType::kI64}, "input dft_length"));
    ASSIGN_OR_RETURN(s.n, constScalarInt(args, 1, "dft_length"));
  }
  if (s.n <= 0) return invalidInput("dft_length must be positive, got ", s.n);
  s.out = {x.dtype, x.shape};
  s.out.shape[s.axis] = attrs.getInt("onesided", 0) != 0 ? s.n / 2 + 1 : s.n;
  s.out.shape.back() = 2;
  return s;
}

StatusOr<StftShape> stftShape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 4));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkSignal(x, 3, "signal"));
  if (x.rank() != 3) return invalidInput("signal must be [batch, length, 1 or 2], got ", x.str());
  StftShape s;
  RETURN_IF_ERROR(checkDType(args.inputs[1], {DType::kI32, DType::kI64}, "input frame_step"));
  ASSIGN_OR_RETURN(s.step, constScalarInt(args, 1, "frame_step"));
  if (s.step <= 0) return invalidInput("frame_step must be positive, got ", s.step);
  int64_t windowLength = -1;
  if (args.has(2)) {
    const TensorType& w = args.inputs[2];
    if (w.dtype != x.dtype || w.rank() != 1)
      return invalidInput("window must be a 1-D ", dtypeName(x.dtype), " tensor, got ", w.str());
    windowLength = w.shape[0];
  }
  if (args.has(3)) {
    RETURN_IF_ERROR(checkDType(args.inputs[3], {DType::kI32, DType::kI64}, "input frame_length"));
    ASSIGN_OR_RETURN(s.frameLength, constScalarInt(args, 3, "frame_length"));
    if (windowLength >= 0 && windowLength != s.frameLength)
      return invalidInput("window length ", windowLength, " differs from frame_length ", s.frameLength);
  } else {
    s.frameLength = windowLength >= 0 ? windowLength : x.shape[1];
  }
  if (s.frameLength <= 0 || s.frameLength > x.shape[1])
    return invalidInput("frame length ", s.frameLength, " must be in [1, ", x.shape[1], "] (the signal length)");
  s.frames = 1 + (x.shape[1] - s.frameLength) / s.step;
  bool onesided = attrsOf(args).getInt("onesided", 1) != 0;
  s.out = {x.dtype, {x.shape[0], s.frames, onesided ? s.frameLength / 2 + 1 : s.frameLength, 2}};
  return s;
}

}  // namespace ops::signal_spectral_schema

namespace {
using namespace ops;
using namespace ops::signal_spectral_schema;

StatusOr<std::vector<TensorType>> inferDft(const InferArgs& args) {
  ASSIGN_OR_RETURN(DftShape s, dftShape(args));
  return std::vector<TensorType>{s.out};
}

StatusOr<std::vector<TensorType>> inferStft(const InferArgs& args) {
  ASSIGN_OR_RETURN(StftShape s, stftShape(args));
  return std::vector<TensorType>{s.out};
}

}  // namespace

void registerSpectralSchemas(SchemaRegistry& r) {
  r.add(OpKind::DFT, &inferDft);
  r.add(OpKind::STFT, &inferStft);
}

}  // namespace pcc
