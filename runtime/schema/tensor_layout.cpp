// Type inference (the op schemas) of Pad, Tile, DepthToSpace, SpaceToDepth,
// ReverseSequence, Compress, NonZero and Size. Their reference kernels, and
// what the kernels compute, are runtime/ops/tensor_layout.cpp.
#include <algorithm>
#include <cstring>

#include "runtime/schema/checked_int.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/tensor_layout.h"

namespace pcc {

namespace ops::tensor_layout_schema {

StatusOr<PadPlan> padPlan(const InferArgs& args) {
  const TensorType& x = args.inputs[0];
  int64_t rank = x.rank();
  PadPlan p{Dims(rank, 0), Dims(rank, 0), attrsOrEmpty(args).getString("mode", "constant")};
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge" && p.mode != "wrap")
    return invalidInput("unknown mode '", p.mode, "' (expected constant, reflect, edge or wrap)");
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, constInts(args, 1, "pads"));
  std::vector<int64_t> axes;
  if (args.has(3)) {
    ASSIGN_OR_RETURN(axes, constInts(args, 3, "axes"));
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size())
    return invalidInput("pads ", dimsToString(pads), " must have 2 values per padded axis (",
                        axes.size(), " axes) of ", x.str());
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t ax, normalizeAxis(axes[i], rank));
    if (seen[ax]) return invalidInput("axes ", dimsToString(axes), " repeat axis ", axes[i]);
    seen[ax] = true;
    p.begin[ax] = pads[i];
    p.end[ax] = pads[i + axes.size()];
    CheckedInt size = CheckedInt(x.shape[ax]) + p.begin[ax] + p.end[ax];
    if (size.overflowed())
      return invalidInput("pads ", dimsToString(pads), " overflow int64 on dim ", ax, " of ", x.str());
    if (size.value() < 0)
      return invalidInput("pads ", dimsToString(pads), " remove more than dim ", ax, " of ", x.str());
    if (p.mode != "constant" && x.shape[ax] == 0 && (p.begin[ax] > 0 || p.end[ax] > 0))
      return invalidInput("cannot pad the empty dim ", ax, " of ", x.str(), " in mode ", p.mode);
  }
  if (args.has(2)) {
    const TensorType& v = args.inputs[2];
    if (v.dtype != x.dtype || v.numel() != 1)
      return invalidInput("constant_value ", v.str(), " must be one element of the type of ", x.str());
  }
  return p;
}

StatusOr<std::vector<TensorType>> inferTile(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  TensorType out = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, constInts(args, 1, "repeats"));
  if (static_cast<int64_t>(repeats.size()) != out.rank())
    return invalidInput("repeats ", dimsToString(repeats), " must have one value per dim of ",
                        out.str());
  for (int64_t d = 0; d < out.rank(); ++d) {
    if (repeats[d] < 0) return invalidInput("repeats ", dimsToString(repeats), " has a negative value");
    CheckedInt size = CheckedInt(out.shape[d]) * repeats[d];
    if (size.overflowed())
      return invalidInput("repeats ", dimsToString(repeats), " overflow int64 on dim ", d, " of ", args.inputs[0].str());
    out.shape[d] = size.value();
  }
  return std::vector<TensorType>{out};
}

StatusOr<int64_t> blockSize(const InferArgs& args) {
  const TensorType& x = args.inputs[0];
  if (x.rank() != 4) return invalidInput("input must be 4-D [N,C,H,W], got ", x.str());
  if (!attrsOrEmpty(args).has("blocksize")) return invalidInput("missing attribute 'blocksize'");
  int64_t b = attrsOrEmpty(args).getInt("blocksize", 0);
  if (b <= 0) return invalidInput("blocksize ", b, " must be positive");
  return b;
}

StatusOr<std::vector<TensorType>> inferDepthToSpace(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const TensorType& x = args.inputs[0];
  std::string mode = attrsOrEmpty(args).getString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return invalidInput("unknown mode '", mode, "' (expected DCR or CRD)");
  CheckedInt b2 = CheckedInt(b) * b, h = CheckedInt(x.shape[2]) * b, w = CheckedInt(x.shape[3]) * b;
  if (b2.overflowed() || h.overflowed() || w.overflowed())
    return invalidInput("blocksize ", b, " makes the output of ", x.str(), " overflow int64");
  if (x.shape[1] % b2.value() != 0)
    return invalidInput("channels of ", x.str(), " are not divisible by blocksize^2 = ", b2.value());
  return std::vector<TensorType>{{x.dtype, {x.shape[0], x.shape[1] / b2.value(), h.value(), w.value()}}};
}

StatusOr<std::vector<TensorType>> inferSpaceToDepth(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const TensorType& x = args.inputs[0];
  if (x.shape[2] % b != 0 || x.shape[3] % b != 0)
    return invalidInput("spatial dims of ", x.str(), " are not divisible by blocksize ", b);
  CheckedInt c = CheckedInt(x.shape[1]) * b * b;
  if (c.overflowed()) return invalidInput("blocksize ", b, " makes the channels of ", x.str(), " overflow int64");
  return std::vector<TensorType>{{x.dtype, {x.shape[0], c.value(), x.shape[2] / b, x.shape[3] / b}}};
}

StatusOr<std::vector<TensorType>> inferReverseSequence(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &x = args.inputs[0], &lens = args.inputs[1];
  RETURN_IF_ERROR(checkDType(lens, {DType::kI64}, "sequence_lens"));
  if (x.rank() < 2) return invalidInput("input must have rank >= 2, got ", x.str());
  int64_t t = attrsOrEmpty(args).getInt("time_axis", 0), b = attrsOrEmpty(args).getInt("batch_axis", 1);
  if (!((t == 0 && b == 1) || (t == 1 && b == 0)))
    return invalidInput("time_axis ", t, " and batch_axis ", b, " must be 0 and 1 in some order");
  if (lens.rank() != 1 || lens.shape[0] != x.shape[b])
    return invalidInput("sequence_lens ", lens.str(), " must be 1-D with the batch size of ", x.str());
  return std::vector<TensorType>{x};
}

Status dataDependentSize(const char* op, const char* input) {
  return unsupported(op, ": output size depends on run-time data; unsupported with pcc's static shapes unless "
                     "input '", input, "' is known: it must be a constant (folded at import, or given with --freeze)");
}

StatusOr<std::vector<TensorType>> inferCompress(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &x = args.inputs[0], &cond = args.inputs[1];
  RETURN_IF_ERROR(checkDType(cond, {DType::kBool}, "condition"));
  if (cond.rank() != 1) return invalidInput("condition must be 1-D, got ", cond.str());
  const Tensor* c = args.constInputs.size() > 1 ? args.constInputs[1] : nullptr;
  if (!c) return dataDependentSize("Compress", "condition");
  const AttrMap& a = attrsOrEmpty(args);
  int64_t limit = x.numel();
  int64_t axis = -1;
  if (a.has("axis")) {
    ASSIGN_OR_RETURN(axis, normalizeAxis(a.getInt("axis", 0), x.rank()));
    limit = x.shape[axis];
  }
  if (cond.shape[0] > limit)
    return invalidInput("condition ", cond.str(), " is longer than the selected dim of ", x.str());
  int64_t kept = 0;
  for (int64_t i = 0; i < c->numel(); ++i) kept += c->data<uint8_t>()[i] != 0;
  TensorType out{x.dtype, {kept}};
  if (axis >= 0) {
    out.shape = x.shape;
    out.shape[axis] = kept;
  }
  return std::vector<TensorType>{out};
}

int64_t countNonZero(const Tensor& x) {
  int64_t n = 0;
  for (int64_t i = 0; i < x.numel(); ++i) n += x.getDouble(i) != 0;
  return n;
}

StatusOr<std::vector<TensorType>> inferNonZero(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const Tensor* x = args.constInputs.empty() ? nullptr : args.constInputs[0];
  if (!x) return dataDependentSize("NonZero", "X");
  // A scalar is treated as 1-D, as numpy does.
  return std::vector<TensorType>{{DType::kI64, {std::max<int64_t>(1, x->rank()), countNonZero(*x)}}};
}

}  // namespace ops::tensor_layout_schema

namespace {
using namespace ops;
using namespace ops::tensor_layout_schema;

StatusOr<std::vector<TensorType>> inferPad(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 4));
  ASSIGN_OR_RETURN(PadPlan p, padPlan(args));
  TensorType out = args.inputs[0];
  // padPlan checked that each padded size fits int64.
  for (int64_t d = 0; d < out.rank(); ++d) out.shape[d] = (CheckedInt(out.shape[d]) + p.begin[d] + p.end[d]).value();
  return std::vector<TensorType>{out};
}

// ---- Size --------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferSize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  return std::vector<TensorType>{{DType::kI64, {}}};
}

}  // namespace

void registerTensorLayoutSchemas(SchemaRegistry& r) {
  r.add(OpKind::Pad, &inferPad);
  r.add(OpKind::Tile, &inferTile);
  r.add(OpKind::DepthToSpace, &inferDepthToSpace);
  r.add(OpKind::SpaceToDepth, &inferSpaceToDepth);
  r.add(OpKind::ReverseSequence, &inferReverseSequence);
  r.add(OpKind::Compress, &inferCompress);
  r.add(OpKind::NonZero, &inferNonZero);
  r.add(OpKind::Size, &inferSize);
}

}  // namespace pcc
