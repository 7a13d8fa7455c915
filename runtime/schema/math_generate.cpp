// Type inference (the op schemas) of CastLike, Range, CumSum, Trilu, OneHot and
// EyeLike. Their reference kernels, and what the kernels compute, are
// runtime/ops/math_generate.cpp.
#include <cmath>
#include <cstring>

#include "runtime/schema/checked_int.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/math_generate.h"

namespace pcc {

namespace ops::math_generate_schema {

StatusOr<int64_t> rangeCount(double start, double limit, double delta) {
  if (delta == 0) return invalidInput("delta must not be 0");
  double n = std::ceil((limit - start) / delta);
  if (!std::isfinite(n)) return invalidInput("start, limit and delta must be finite");
  CheckedInt count = CheckedInt::truncate(n);
  if (count.overflowed()) return invalidInput("start ", start, ", limit ", limit, " and delta ", delta, " give ", n,
                                              " elements, which overflows int64");
  return std::max<int64_t>(count.value(), 0);
}

StatusOr<DType> eyeLikeType(const AttrMap* attrs, DType input) {
  if (!attrs || !attrs->has("dtype")) return input;
  int64_t code = attrs->getInt("dtype", 0);
  auto t = dtypeFromOnnx(static_cast<int32_t>(code));
  if (!t) return unsupported("EyeLike to ONNX dtype ", code, " is not supported");
  return *t;
}

}  // namespace ops::math_generate_schema

namespace {
using namespace ops;
using namespace ops::math_generate_schema;

// ---- CastLike ----------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferCastLike(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kAllTypes, "input"));
  RETURN_IF_ERROR(checkDType(args.inputs[1], kAllTypes, "target_type"));
  return std::vector<TensorType>{{args.inputs[1].dtype, args.inputs[0].shape}};
}

StatusOr<std::vector<TensorType>> inferRange(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  RETURN_IF_ERROR(checkDType(args.inputs[0], {DType::kF32, DType::kF64, DType::kI32, DType::kI64},
                             "start"));
  RETURN_IF_ERROR(checkSameDType(args));
  const char* names[] = {"start", "limit", "delta"};
  double v[3];
  for (size_t i = 0; i < 3; ++i) {
    if (args.inputs[i].numel() != 1)
      return invalidInput(names[i], " must be a scalar, got ", args.inputs[i].str());
    const Tensor* t = args.constInputs.size() > i ? args.constInputs[i] : nullptr;
    if (!t)
      return invalidInput("input ", i, " ('", names[i],
                          "') must be a constant: the output size depends on its value");
    v[i] = t->getDouble(0);
  }
  ASSIGN_OR_RETURN(int64_t n, rangeCount(v[0], v[1], v[2]));
  return std::vector<TensorType>{{args.inputs[0].dtype, {n}}};
}

// ---- CumSum ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferCumSum(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "input"));
  RETURN_IF_ERROR(checkDType(args.inputs[1], {DType::kI32, DType::kI64}, "axis"));
  if (args.inputs[1].numel() != 1)
    return invalidInput("axis must be a scalar, got ", args.inputs[1].str());
  if (const Tensor* a = args.constInputs.size() > 1 ? args.constInputs[1] : nullptr) {
    RETURN_IF_ERROR(normalizeAxis(a->getInt(0), args.inputs[0].rank()).status());
  }
  return std::vector<TensorType>{args.inputs[0]};
}

// ---- Trilu -------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferTrilu(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kAllTypes, "input"));
  if (args.inputs[0].rank() < 2)
    return invalidInput("input must have rank >= 2, got ", args.inputs[0].str());
  if (args.has(1)) {
    RETURN_IF_ERROR(checkDType(args.inputs[1], {DType::kI64}, "k"));
    if (args.inputs[1].numel() != 1) return invalidInput("k must be a scalar, got ", args.inputs[1].str());
  }
  return std::vector<TensorType>{args.inputs[0]};
}

// ---- OneHot ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferOneHot(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  const TensorType &ind = args.inputs[0], &depthT = args.inputs[1], &vals = args.inputs[2];
  RETURN_IF_ERROR(checkDType(ind, kNumericTypes, "indices"));
  RETURN_IF_ERROR(checkDType(depthT, kNumericTypes, "depth"));
  RETURN_IF_ERROR(checkDType(vals, kAllTypes, "values"));
  if (depthT.numel() != 1) return invalidInput("depth must be a scalar, got ", depthT.str());
  if (vals.rank() != 1 || vals.numel() != 2)
    return invalidInput("values must be [off_value, on_value], got ", vals.str());
  const Tensor* d = args.constInputs.size() > 1 ? args.constInputs[1] : nullptr;
  if (!d) return invalidInput("input 1 ('depth') must be a constant: the output size depends on it");
  int64_t depth = static_cast<int64_t>(d->getDouble(0));
  if (depth <= 0) return invalidInput("depth must be positive, got ", depth);
  int64_t axis = args.attrs ? args.attrs->getInt("axis", -1) : -1;
  ASSIGN_OR_RETURN(axis, normalizeAxis(axis, ind.rank() + 1));
  Dims shape = ind.shape;
  shape.insert(shape.begin() + axis, depth);
  return std::vector<TensorType>{{vals.dtype, shape}};
}

StatusOr<std::vector<TensorType>> inferEyeLike(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kAllTypes, "input"));
  if (args.inputs[0].rank() != 2) return invalidInput("input must be 2-D, got ", args.inputs[0].str());
  ASSIGN_OR_RETURN(DType dt, eyeLikeType(args.attrs, args.inputs[0].dtype));
  return std::vector<TensorType>{{dt, args.inputs[0].shape}};
}

}  // namespace

void registerMathGenerateSchemas(SchemaRegistry& r) {
  r.add(OpKind::CastLike, &inferCastLike);
  r.add(OpKind::Range, &inferRange);
  r.add(OpKind::CumSum, &inferCumSum);
  r.add(OpKind::Trilu, &inferTrilu);
  r.add(OpKind::OneHot, &inferOneHot);
  r.add(OpKind::EyeLike, &inferEyeLike);
}

}  // namespace pcc
