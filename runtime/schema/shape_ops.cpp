// Type inference (the op schemas) of Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Shape, ConstantOfShape and Expand. Their reference kernels, and
// what the kernels compute, are runtime/ops/shape_ops.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/shape_ops.h"

namespace pcc {

namespace ops::shape_ops_schema {

StatusOr<std::vector<TensorType>> inferReshape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, constInts(args, 1, "shape"));
  bool allowZero = attrsOf(args).getInt("allowzero", 0) != 0;
  Dims out(shape.size());
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == -1) {
      if (inferred >= 0) return invalidInput("shape ", dimsToString(shape), " has more than one -1");
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (d == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= x.rank())
        return invalidInput("shape ", dimsToString(shape), " copies dim ", i, " of input ",
                            x.str(), " which has no such dim");
      d = x.shape[i];
    }
    if (d < 0) return invalidInput("shape ", dimsToString(shape), " has invalid dim ", d);
    out[i] = d;
    known *= d;
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return invalidInput("cannot reshape ", x.str(), " to ", dimsToString(shape));
    out[inferred] = x.numel() / known;
  }
  if (numElements(out) != x.numel())
    return invalidInput("cannot reshape ", x.str(), " to ", dimsToString(shape), " (",
                        numElements(out), " elements)");
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferFlatten(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  int64_t axis = attrsOf(args).getInt("axis", 1);
  if (axis < -x.rank() || axis > x.rank())
    return invalidInput("axis ", axis, " out of range for ", x.str());
  if (axis < 0) axis += x.rank();
  int64_t a = 1;
  for (int64_t i = 0; i < axis; ++i) a *= x.shape[i];
  int64_t b = 1;
  for (int64_t i = axis; i < x.rank(); ++i) b *= x.shape[i];
  return std::vector<TensorType>{{x.dtype, {a, b}}};
}

StatusOr<std::vector<TensorType>> inferSqueeze(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 2));
  const TensorType& x = args.inputs[0];
  std::vector<bool> drop(x.rank(), false);
  if (args.has(1)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, constInts(args, 1, "axes"));
    for (int64_t a : axes) {
      ASSIGN_OR_RETURN(int64_t ax, normalizeAxis(a, x.rank()));
      if (x.shape[ax] != 1)
        return invalidInput("cannot squeeze axis ", a, " of ", x.str(), ": size is not 1");
      drop[ax] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) drop[i] = x.shape[i] == 1;
  }
  Dims out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.shape[i]);
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferUnsqueeze(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, constInts(args, 1, "axes"));
  int64_t rank = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> isNew(rank, false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t ax, normalizeAxis(a, rank));
    if (isNew[ax]) return invalidInput("axes ", dimsToString(axes), " repeat axis ", a);
    isNew[ax] = true;
  }
  Dims out;
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(isNew[i] ? 1 : x.shape[j++]);
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<int64_t>> transposePerm(const TensorType& x, const AttrMap& attrs) {
  std::vector<int64_t> perm;
  if (attrs.has("perm")) {
    perm = attrs.getInts("perm");
  } else {
    for (int64_t i = x.rank(); i-- > 0;) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != x.rank())
    return invalidInput("perm ", dimsToString(perm), " does not match ", x.str());
  std::vector<bool> seen(x.rank(), false);
  for (int64_t& p : perm) {
    ASSIGN_OR_RETURN(p, normalizeAxis(p, x.rank(), "perm entry"));
    if (seen[p]) return invalidInput("perm ", dimsToString(perm), " is not a permutation");
    seen[p] = true;
  }
  return perm;
}

std::pair<int64_t, int64_t> shapeRange(int64_t rank, const AttrMap& attrs) {
  auto clampDim = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampDim(attrs.getInt("start", 0));
  int64_t end = clampDim(attrs.getInt("end", rank));
  return {start, std::max(start, end)};
}

StatusOr<Tensor> fillValue(const AttrMap& attrs) {
  const Tensor* v = attrs.getTensor("value");
  if (!v) return Tensor::fromVector<float>(DType::kF32, {1}, {0.0f});
  if (v->numel() != 1) return invalidInput("attribute 'value' ", v->type().str(), " must have one element");
  return *v;
}

}  // namespace ops::shape_ops_schema

namespace {
using namespace ops;
using namespace ops::shape_ops_schema;

StatusOr<std::vector<TensorType>> inferTranspose(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, transposePerm(x, attrsOf(args)));
  Dims out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferShape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  auto [start, end] = shapeRange(args.inputs[0].rank(), attrsOf(args));
  return std::vector<TensorType>{{DType::kI64, {end - start}}};
}

StatusOr<std::vector<TensorType>> inferConstantOfShape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, constInts(args, 0, "shape"));
  for (int64_t d : shape)
    if (d < 0) return invalidInput("shape ", dimsToString(shape), " has a negative dim");
  ASSIGN_OR_RETURN(Tensor v, fillValue(attrsOf(args)));
  return std::vector<TensorType>{{v.dtype(), shape}};
}

// ---- Expand ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferExpand(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, constInts(args, 1, "shape"));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(x.shape, shape));
  return std::vector<TensorType>{{x.dtype, out}};
}

}  // namespace

void registerShapeSchemas(SchemaRegistry& r) {
  r.add(OpKind::Reshape, &inferReshape);
  r.add(OpKind::Flatten, &inferFlatten);
  r.add(OpKind::Squeeze, &inferSqueeze);
  r.add(OpKind::Unsqueeze, &inferUnsqueeze);
  r.add(OpKind::Transpose, &inferTranspose);
  r.add(OpKind::Shape, &inferShape);
  r.add(OpKind::ConstantOfShape, &inferConstantOfShape);
  r.add(OpKind::Expand, &inferExpand);
}

}  // namespace pcc
