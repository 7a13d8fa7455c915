// Type inference (the op schemas) of Concat, Split, Slice and Gather. Their
// reference kernels, and what the kernels compute, are
// runtime/ops/data_movement.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/schema/checked_int.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/data_movement.h"

namespace pcc {

namespace ops::data_movement_schema {

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
    CheckedInt sum = CheckedInt(out[axis]) + t.shape[axis];
    if (sum.overflowed()) return invalidInput("inputs ", typesToString(args.inputs), " overflow int64 along axis ", axis);
    out[axis] = sum.value();
  }
  return std::vector<TensorType>{{first.dtype, out}};
}

StatusOr<std::vector<int64_t>> splitSizes(const InferArgs& args, int64_t axis) {
  int64_t dim = args.inputs[0].shape[axis];
  if (args.has(1)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> split, constInts(args, 1, "split"));
    CheckedInt sum = 0;
    for (int64_t s : split) {
      if (s < 0) return invalidInput("split ", dimsToString(split), " has a negative size");
      sum = sum + s;
    }
    if (split.empty() || sum.overflowed() || sum.value() != dim)
      return invalidInput("split ", dimsToString(split), " does not sum to dim ", axis, " of ",
                          args.inputs[0].str());
    return split;
  }
  int64_t n = attrsOf(args).getInt("num_outputs", 0);
  if (n <= 0) return invalidInput("needs a 'split' input or a positive 'num_outputs' attribute");
  // Opset 18: chunks of ceil(dim / n), the last one smaller.
  int64_t chunk = dim == 0 ? 0 : (dim - 1) / n + 1;
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

}  // namespace ops::data_movement_schema

namespace {
using namespace ops;
using namespace ops::data_movement_schema;

StatusOr<std::vector<TensorType>> inferSlice(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 5));
  ASSIGN_OR_RETURN(SlicePlan p, slicePlan(args));
  return std::vector<TensorType>{{args.inputs[0].dtype, p.size}};
}

}  // namespace

void registerDataMovementSchemas(SchemaRegistry& r) {
  r.add(OpKind::Concat, &inferConcat);
  r.add(OpKind::Split, &inferSplit);
  r.add(OpKind::Slice, &inferSlice);
  r.add(OpKind::Gather, &inferGather);
}

}  // namespace pcc
