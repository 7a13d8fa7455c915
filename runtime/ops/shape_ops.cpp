// Ops that change only a tensor's shape or make one from a shape: Reshape,
// Flatten, Squeeze, Unsqueeze, Transpose, Shape, ConstantOfShape, Expand.
// They move bytes by element size and so work for every dtype.
#include <algorithm>
#include <cstring>

#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

/// Compute for ops whose output is the input's bytes under the inferred shape.
template <InferFn kInfer>
Status computeReshapeLike(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                          std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, kInfer(argsFromTensors(in, attrs)));
  out.push_back(in[0]->clone().reshaped(types[0].shape));
  return Status::OK();
}

// ---- Reshape -----------------------------------------------------------------

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

// ---- Flatten -----------------------------------------------------------------

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

// ---- Squeeze / Unsqueeze ---------------------------------------------------------

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

// ---- Transpose ---------------------------------------------------------------

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

StatusOr<std::vector<TensorType>> inferTranspose(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, transposePerm(x, attrsOf(args)));
  Dims out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  return std::vector<TensorType>{{x.dtype, out}};
}

Status computeTranspose(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                        std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, transposePerm(x.type(), attrs));
  std::vector<int64_t> inStrides = stridesOf(x.shape()), strides;
  Dims shape;
  for (int64_t p : perm) {
    shape.push_back(x.shape()[p]);
    strides.push_back(inStrides[p]);
  }
  Tensor r = Tensor::zeros(x.dtype(), shape);
  copyStrided(x.raw(), 0, strides, shape, r.mutableData(), dtypeSize(x.dtype()));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Shape -------------------------------------------------------------------

/// \returns the [start, end) range of dims Shape reports (opset-15 clamping).
std::pair<int64_t, int64_t> shapeRange(int64_t rank, const AttrMap& attrs) {
  auto clampDim = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampDim(attrs.getInt("start", 0));
  int64_t end = clampDim(attrs.getInt("end", rank));
  return {start, std::max(start, end)};
}

StatusOr<std::vector<TensorType>> inferShape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  auto [start, end] = shapeRange(args.inputs[0].rank(), attrsOf(args));
  return std::vector<TensorType>{{DType::kI64, {end - start}}};
}

Status computeShape(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  auto [start, end] = shapeRange(in[0]->rank(), attrs);
  std::vector<int64_t> dims(in[0]->shape().begin() + start, in[0]->shape().begin() + end);
  out.push_back(Tensor::fromVector(DType::kI64, {end - start}, dims));
  return Status::OK();
}

// ---- ConstantOfShape -------------------------------------------------------------

StatusOr<Tensor> fillValue(const AttrMap& attrs) {
  const Tensor* v = attrs.getTensor("value");
  if (!v) return Tensor::fromVector<float>(DType::kF32, {1}, {0.0f});
  if (v->numel() != 1) return invalidInput("attribute 'value' ", v->type().str(), " must have one element");
  return *v;
}

StatusOr<std::vector<TensorType>> inferConstantOfShape(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, constInts(args, 0, "shape"));
  for (int64_t d : shape)
    if (d < 0) return invalidInput("shape ", dimsToString(shape), " has a negative dim");
  ASSIGN_OR_RETURN(Tensor v, fillValue(attrsOf(args)));
  return std::vector<TensorType>{{v.dtype(), shape}};
}

Status computeConstantOfShape(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                              std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Tensor v, fillValue(attrs));
  Tensor r = Tensor::zeros(v.dtype(), in[0]->toInts());
  size_t es = dtypeSize(v.dtype());
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t i = 0; i < r.numel(); ++i) std::memcpy(o + i * es, v.raw(), es);
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Expand ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferExpand(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, constInts(args, 1, "shape"));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(x.shape, shape));
  return std::vector<TensorType>{{x.dtype, out}};
}

Status computeExpand(const std::vector<const Tensor*>& in, const AttrMap&,
                     std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(x.shape(), in[1]->toInts()));
  Tensor r = Tensor::zeros(x.dtype(), shape);
  copyStrided(x.raw(), 0, broadcastStrides(x.shape(), shape), shape, r.mutableData(),
              dtypeSize(x.dtype()));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerShapeOps(OpRegistry& r) {
  r.add({"Reshape", &inferReshape, &computeReshapeLike<&inferReshape>, /*viewOfInput0=*/true});
  r.add({"Flatten", &inferFlatten, &computeReshapeLike<&inferFlatten>, /*viewOfInput0=*/true});
  r.add({"Squeeze", &inferSqueeze, &computeReshapeLike<&inferSqueeze>, /*viewOfInput0=*/true});
  r.add({"Unsqueeze", &inferUnsqueeze, &computeReshapeLike<&inferUnsqueeze>, /*viewOfInput0=*/true});
  r.add({"Transpose", &inferTranspose, &computeTranspose});
  r.add({"Shape", &inferShape, &computeShape});
  r.add({"ConstantOfShape", &inferConstantOfShape, &computeConstantOfShape});
  r.add({"Expand", &inferExpand, &computeExpand});
}

}  // namespace pcc
