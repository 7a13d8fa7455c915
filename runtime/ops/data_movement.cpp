// Ops that move elements between tensors: Concat, Split, Slice, Gather. They
// copy by element size and so work for every dtype.
#include <algorithm>
#include <cstring>

#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

/// Element counts before and after `axis` in `shape`.
void outerInner(const Dims& shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
}

// ---- Concat ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferConcat(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, SIZE_MAX));
  const TensorType& first = args.inputs[0];
  if (!args.attrs || !args.attrs->has("axis")) return invalidInput("missing attribute 'axis'");
  if (first.rank() == 0) return invalidInput("cannot concatenate scalars");
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(args.attrs->getInt("axis", 0), first.rank()));
  Dims out = first.shape;
  out[axis] = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorType& t = args.inputs[i];
    bool ok = t.dtype == first.dtype && t.rank() == first.rank();
    for (int64_t d = 0; ok && d < t.rank(); ++d) ok = d == axis || t.shape[d] == first.shape[d];
    if (!ok)
      return invalidInput("inputs ", typesToString(args.inputs), " differ outside axis ", axis);
    out[axis] += t.shape[axis];
  }
  return std::vector<TensorType>{{first.dtype, out}};
}

Status computeConcat(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferConcat(argsFromTensors(in, attrs)));
  int64_t axis = attrs.getInt("axis", 0);
  if (axis < 0) axis += in[0]->rank();
  Tensor r = Tensor::zeros(types[0]);
  size_t es = dtypeSize(r.dtype());
  int64_t outer, inner;
  outerInner(r.shape(), axis, outer, inner);
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t b = 0; b < outer; ++b)
    for (const Tensor* t : in) {
      size_t chunk = t->shape()[axis] * inner * es;
      std::memcpy(o, static_cast<const char*>(t->raw()) + b * chunk, chunk);
      o += chunk;
    }
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Split -------------------------------------------------------------------

/// \returns the size of each output along the split axis.
StatusOr<std::vector<int64_t>> splitSizes(const InferArgs& args, int64_t axis) {
  int64_t dim = args.inputs[0].shape[axis];
  if (args.has(1)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> split, constInts(args, 1, "split"));
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return invalidInput("split ", dimsToString(split), " has a negative size");
      sum += s;
    }
    if (split.empty() || sum != dim)
      return invalidInput("split ", dimsToString(split), " does not sum to dim ", axis, " of ",
                          args.inputs[0].str());
    return split;
  }
  int64_t n = attrsOf(args).getInt("num_outputs", 0);
  if (n <= 0) return invalidInput("needs a 'split' input or a positive 'num_outputs' attribute");
  // Opset 18: chunks of ceil(dim / n), the last one smaller.
  int64_t chunk = (dim + n - 1) / n;
  if (chunk * (n - 1) >= dim && !(dim == 0))
    return invalidInput("cannot split dim ", axis, " of ", args.inputs[0].str(), " into ", n,
                        " non-empty chunks of ", chunk);
  std::vector<int64_t> sizes(n, chunk);
  sizes.back() = dim - chunk * (n - 1);
  return sizes;
}

StatusOr<std::vector<TensorType>> inferSplit(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 2));
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrsOf(args).getInt("axis", 0), x.rank()));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, splitSizes(args, axis));
  std::vector<TensorType> outs;
  for (int64_t s : sizes) {
    TensorType t = x;
    t.shape[axis] = s;
    outs.push_back(t);
  }
  return outs;
}

Status computeSplit(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferSplit(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), x.rank()));
  size_t es = dtypeSize(x.dtype());
  int64_t outer, inner;
  outerInner(x.shape(), axis, outer, inner);
  size_t rowBytes = x.shape()[axis] * inner * es;
  int64_t start = 0;
  for (const TensorType& t : types) {
    Tensor r = Tensor::zeros(t);
    size_t chunk = t.shape[axis] * inner * es;
    const char* src = static_cast<const char*>(x.raw()) + start * inner * es;
    for (int64_t b = 0; b < outer; ++b)
      std::memcpy(static_cast<char*>(r.mutableData()) + b * chunk, src + b * rowBytes, chunk);
    start += t.shape[axis];
    out.push_back(std::move(r));
  }
  return Status::OK();
}

// ---- Slice -------------------------------------------------------------------

/// Per output dim: first input index, step and extent.
struct SlicePlan {
  Dims start, step, size;
};

StatusOr<SlicePlan> slicePlan(const InferArgs& args) {
  const TensorType& x = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> starts, constInts(args, 1, "starts"));
  ASSIGN_OR_RETURN(std::vector<int64_t> ends, constInts(args, 2, "ends"));
  std::vector<int64_t> axes, steps;
  if (args.has(3)) {
    ASSIGN_OR_RETURN(axes, constInts(args, 3, "axes"));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (args.has(4)) {
    ASSIGN_OR_RETURN(steps, constInts(args, 4, "steps"));
  } else {
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return invalidInput("starts ", dimsToString(starts), ", ends ", dimsToString(ends), ", axes ",
                        dimsToString(axes), " and steps ", dimsToString(steps),
                        " must have equal lengths");
  SlicePlan p{Dims(x.rank(), 0), Dims(x.rank(), 1), x.shape};
  std::vector<bool> seen(x.rank(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t ax, normalizeAxis(axes[i], x.rank()));
    if (seen[ax]) return invalidInput("axes ", dimsToString(axes), " repeat axis ", axes[i]);
    seen[ax] = true;
    int64_t dim = x.shape[ax], step = steps[i];
    if (step == 0) return invalidInput("slice step must not be 0");
    // Negative positions count from the end; then clamp per the step's direction.
    auto norm = [dim](int64_t v) { return v < 0 ? v + dim : v; };
    int64_t s = norm(starts[i]), e = norm(ends[i]);
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, std::max<int64_t>(0, dim - 1));
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // Elements in [s, e) (or (e, s] going down): 1 + (distance - 1) / |step|,
    // in unsigned arithmetic so that steps near INT64_MIN or INT64_MAX cannot
    // overflow (a step beyond the extent takes the first element alone).
    int64_t n = 0;
    if (dim > 0 && (step > 0 ? e > s : s > e)) {
      uint64_t distance = static_cast<uint64_t>(step > 0 ? e - s : s - e);
      uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
      n = static_cast<int64_t>(1 + (distance - 1) / magnitude);
    }
    p.start[ax] = s;
    p.step[ax] = n > 1 ? step : 1;  // one element: the step is never taken
    p.size[ax] = n;
  }
  return p;
}

StatusOr<std::vector<TensorType>> inferSlice(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 5));
  ASSIGN_OR_RETURN(SlicePlan p, slicePlan(args));
  return std::vector<TensorType>{{args.inputs[0].dtype, p.size}};
}

Status computeSlice(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(SlicePlan p, slicePlan(argsFromTensors(in, attrs)));
  std::vector<int64_t> inStrides = stridesOf(x.shape()), strides(x.rank());
  int64_t base = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (p.size[d] > 0) base += p.start[d] * inStrides[d];
    strides[d] = inStrides[d] * p.step[d];
  }
  Tensor r = Tensor::zeros(x.dtype(), p.size);
  copyStrided(x.raw(), base, strides, p.size, r.mutableData(), dtypeSize(x.dtype()));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Gather ------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferGather(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &x = args.inputs[0], &idx = args.inputs[1];
  RETURN_IF_ERROR(checkDType(idx, {DType::kI64, DType::kI32}, "indices"));
  if (x.rank() < 1) return invalidInput("data must have rank >= 1, got ", x.str());
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrsOf(args).getInt("axis", 0), x.rank()));
  Dims out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  return std::vector<TensorType>{{x.dtype, out}};
}

Status computeGather(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferGather(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &idx = *in[1];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), x.rank()));
  int64_t outer, inner, dim = x.shape()[axis];
  outerInner(x.shape(), axis, outer, inner);
  std::vector<int64_t> ids = idx.toInts();
  for (int64_t& i : ids) {
    if (i < -dim || i >= dim)
      return invalidInput("index ", i, " out of range for axis ", axis, " of size ", dim);
    if (i < 0) i += dim;
  }
  Tensor r = Tensor::zeros(types[0]);
  size_t chunk = inner * dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t i : ids) {
      std::memcpy(o, src + (b * dim + i) * chunk, chunk);
      o += chunk;
    }
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerDataMovementOps(OpRegistry& r) {
  r.add({"Concat", &inferConcat, &computeConcat});
  r.add({"Split", &inferSplit, &computeSplit});
  r.add({"Slice", &inferSlice, &computeSlice});
  r.add({"Gather", &inferGather, &computeGather});
}

}  // namespace pcc
