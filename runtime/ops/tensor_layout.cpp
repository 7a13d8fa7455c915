// Ops that rearrange or select whole elements: Pad, Tile, DepthToSpace,
// SpaceToDepth, ReverseSequence, Compress, NonZero and Size. They copy by
// element size and so work for every dtype.
#include <algorithm>
#include <cstring>

#include "runtime/ops/tensor_util.h"

namespace pcc {
namespace {
using namespace ops;

// ---- Pad ---------------------------------------------------------------------

/// Per-axis begin/end pads of all `rank` axes (zero on axes not listed).
struct PadPlan {
  Dims begin, end;
  std::string mode;
};

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
    if (x.shape[ax] + p.begin[ax] + p.end[ax] < 0)
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

StatusOr<std::vector<TensorType>> inferPad(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 4));
  ASSIGN_OR_RETURN(PadPlan p, padPlan(args));
  TensorType out = args.inputs[0];
  for (int64_t d = 0; d < out.rank(); ++d) out.shape[d] += p.begin[d] + p.end[d];
  return std::vector<TensorType>{out};
}

/// \returns the input index that output position `o` of a padded axis reads,
/// or -1 for the constant. `n` is the input dim, `begin` its begin pad.
int64_t padSource(int64_t o, int64_t n, int64_t begin, const std::string& mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == "wrap") return ((i % n) + n) % n;
  // reflect: mirror without repeating the edge; the pattern has period 2(n-1).
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1);
  int64_t k = ((i % period) + period) % period;
  return k < n ? k : period - k;
}

Status computePad(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(PadPlan p, padPlan(argsFromTensors(in, attrs)));
  std::vector<std::vector<int64_t>> maps(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t n = x.shape()[d], size = n + p.begin[d] + p.end[d];
    for (int64_t o = 0; o < size; ++o) maps[d].push_back(padSource(o, n, p.begin[d], p.mode));
  }
  Tensor fill = in.size() > 2 && in[2] ? *in[2] : Tensor::zeros(x.dtype(), {});
  out.push_back(gatherAxisMaps(x, maps, fill));
  return Status::OK();
}

// ---- Tile --------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferTile(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  TensorType out = args.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, constInts(args, 1, "repeats"));
  if (static_cast<int64_t>(repeats.size()) != out.rank())
    return invalidInput("repeats ", dimsToString(repeats), " must have one value per dim of ",
                        out.str());
  for (int64_t d = 0; d < out.rank(); ++d) {
    if (repeats[d] < 0) return invalidInput("repeats ", dimsToString(repeats), " has a negative value");
    out.shape[d] *= repeats[d];
  }
  return std::vector<TensorType>{out};
}

Status computeTile(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferTile(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  std::vector<std::vector<int64_t>> maps(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    for (int64_t o = 0; o < types[0].shape[d]; ++o) maps[d].push_back(o % x.shape()[d]);
  out.push_back(gatherAxisMaps(x, maps, Tensor::zeros(x.dtype(), {})));
  return Status::OK();
}

// ---- DepthToSpace / SpaceToDepth ---------------------------------------------------

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
  if (x.shape[1] % (b * b) != 0)
    return invalidInput("channels of ", x.str(), " are not divisible by blocksize^2 = ", b * b);
  return std::vector<TensorType>{
      {x.dtype, {x.shape[0], x.shape[1] / (b * b), x.shape[2] * b, x.shape[3] * b}}};
}

/// Copies `x` viewed with the 6-D shape `view` and transposed by `perm` into a
/// tensor of shape `outShape` (same element count).
Tensor permuteView(const Tensor& x, const Dims& view, const std::vector<int64_t>& perm,
                   const Dims& outShape) {
  std::vector<int64_t> viewStrides = stridesOf(view), strides;
  Dims shape;
  for (int64_t p : perm) {
    shape.push_back(view[p]);
    strides.push_back(viewStrides[p]);
  }
  Tensor r = Tensor::zeros(x.dtype(), outShape);
  copyStrided(x.raw(), 0, strides, shape, r.mutableData(), dtypeSize(x.dtype()));
  return r;
}

Status computeDepthToSpace(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                           std::vector<Tensor>& out) {
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferDepthToSpace(args));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const Tensor& x = *in[0];
  int64_t n = x.shape()[0], c = x.shape()[1] / (b * b), h = x.shape()[2], w = x.shape()[3];
  // DCR: depth is split as (b, b, C'); CRD: as (C', b, b).
  if (attrs.getString("mode", "DCR") == "DCR")
    out.push_back(permuteView(x, {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, types[0].shape));
  else
    out.push_back(permuteView(x, {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, types[0].shape));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> inferSpaceToDepth(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const TensorType& x = args.inputs[0];
  if (x.shape[2] % b != 0 || x.shape[3] % b != 0)
    return invalidInput("spatial dims of ", x.str(), " are not divisible by blocksize ", b);
  return std::vector<TensorType>{
      {x.dtype, {x.shape[0], x.shape[1] * b * b, x.shape[2] / b, x.shape[3] / b}}};
}

Status computeSpaceToDepth(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                           std::vector<Tensor>& out) {
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferSpaceToDepth(args));
  ASSIGN_OR_RETURN(int64_t b, blockSize(args));
  const Tensor& x = *in[0];
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2] / b, w = x.shape()[3] / b;
  out.push_back(permuteView(x, {n, c, h, b, w, b}, {0, 3, 5, 1, 2, 4}, types[0].shape));
  return Status::OK();
}

// ---- ReverseSequence -------------------------------------------------------------

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

Status computeReverseSequence(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                              std::vector<Tensor>& out) {
  RETURN_IF_ERROR(inferReverseSequence(argsFromTensors(in, attrs)).status());
  const Tensor &x = *in[0], &lensT = *in[1];
  int64_t tAx = attrs.getInt("time_axis", 0), bAx = attrs.getInt("batch_axis", 1);
  int64_t steps = x.shape()[tAx];
  std::vector<int64_t> lens = lensT.toInts();
  for (int64_t& l : lens) {
    if (l < 0 || l > steps)
      return invalidInput("sequence length ", l, " out of range [0, ", steps, "]");
  }
  Tensor r = Tensor::zeros(x.type());
  if (x.numel() == 0) {
    out.push_back(std::move(r));
    return Status::OK();
  }
  // Rows of `inner` contiguous elements after the first two axes.
  int64_t inner = x.numel() / std::max<int64_t>(1, x.shape()[0] * x.shape()[1]);
  size_t row = inner * dtypeSize(x.dtype());
  std::vector<int64_t> strides = stridesOf(x.shape());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (int64_t b = 0; b < x.shape()[bAx]; ++b)
    for (int64_t t = 0; t < steps; ++t) {
      int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      int64_t o = b * strides[bAx] + t * strides[tAx], i = b * strides[bAx] + from * strides[tAx];
      std::memcpy(dst + o / inner * row, src + i / inner * row, row);
    }
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Compress / NonZero ------------------------------------------------------------

/// The error for ops whose output size depends on the values of a run-time input.
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

Status computeCompress(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                       std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferCompress(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &cond = *in[1];
  // Without an axis the input is flattened: one "axis" of numel elements.
  int64_t axis = attrs.has("axis") ? attrs.getInt("axis", 0) : -1;
  if (axis < 0 && attrs.has("axis")) axis += x.rank();
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (axis >= 0) {
    dim = x.shape()[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  }
  size_t chunk = inner * dtypeSize(x.dtype());
  Tensor r = Tensor::zeros(types[0]);
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < cond.numel(); ++i)
      if (cond.data<uint8_t>()[i]) {
        std::memcpy(dst, src + (o * dim + i) * chunk, chunk);
        dst += chunk;
      }
  out.push_back(std::move(r));
  return Status::OK();
}

/// \returns the count of non-zero elements of `x` (any dtype; -0.0 is zero).
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

Status computeNonZero(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                      std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferNonZero(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  int64_t rank = x.rank(), nnz = types[0].shape[1];
  Tensor r = Tensor::zeros(types[0]);
  int64_t* o = r.mutableData<int64_t>();
  std::vector<int64_t> idx(rank, 0);
  int64_t k = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.getDouble(i) != 0) {
      for (int64_t d = 0; d < rank; ++d) o[d * nnz + k] = idx[d];
      ++k;
    }
    for (int64_t d = rank; d-- > 0;) {
      if (++idx[d] < x.shape()[d]) break;
      idx[d] = 0;
    }
  }
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Size --------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferSize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  return std::vector<TensorType>{{DType::kI64, {}}};
}

Status computeSize(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  out.push_back(Tensor::scalarI64(in[0]->numel()));
  return Status::OK();
}

}  // namespace

namespace ops {
void registerTensorLayoutOps(OpRegistry& r) {
  r.add({"Pad", &inferPad, &computePad});
  r.add({"Tile", &inferTile, &computeTile});
  r.add({"DepthToSpace", &inferDepthToSpace, &computeDepthToSpace});
  r.add({"SpaceToDepth", &inferSpaceToDepth, &computeSpaceToDepth});
  r.add({"ReverseSequence", &inferReverseSequence, &computeReverseSequence});
  r.add({"Compress", &inferCompress, &computeCompress});
  r.add({"NonZero", &inferNonZero, &computeNonZero});
  r.add({"Size", &inferSize, &computeSize});
}
}  // namespace ops

}  // namespace pcc
