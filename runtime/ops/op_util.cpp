#include "runtime/ops/op_util.h"

#include <algorithm>
#include <cstring>

namespace pcc::ops {

const AttrMap& attrsOf(const InferArgs& args) {
  static const AttrMap kNoAttrs;
  return args.attrs ? *args.attrs : kNoAttrs;
}

StatusOr<std::vector<TensorType>> inferFloatAlongAxis(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input"));
  if (x.rank() < 1) return invalidInput("input must have rank >= 1, got ", x.str());
  RETURN_IF_ERROR(normalizeAxis(attrsOf(args).getInt("axis", -1), x.rank()).status());
  return std::vector<TensorType>{x};
}

Status checkArity(const InferArgs& args, size_t minIn, size_t maxIn) {
  size_t n = args.inputs.size();
  if (n < minIn || n > maxIn)
    return invalidInput("expects ", minIn == maxIn ? strCat(minIn) : strCat(minIn, " to ", maxIn),
                        " inputs, got ", n);
  for (size_t i = 0; i < minIn; ++i)
    if (!args.has(i)) return invalidInput("required input ", i, " is missing");
  return Status::OK();
}

StatusOr<int64_t> normalizeAxis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return invalidInput(what, " ", axis, " out of range for rank ", rank, " (must be in [", -rank,
                        ", ", rank - 1, "])");
  return axis < 0 ? axis + rank : axis;
}

StatusOr<std::vector<int64_t>> constInts(const InferArgs& args, size_t i, const char* name) {
  const Tensor* t = i < args.constInputs.size() ? args.constInputs[i] : nullptr;
  if (!t) return invalidInput("input ", i, " ('", name, "') must be a constant");
  if (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)
    return invalidInput("input ", i, " ('", name, "') must be i64 or i32, got ", t->type().str());
  if (t->rank() > 1)
    return invalidInput("input ", i, " ('", name, "') must be 1-D, got ", t->type().str());
  return t->toInts();
}

StatusOr<Dims> broadcastShapes(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      return invalidInput("shapes ", dimsToString(a), " and ", dimsToString(b),
                          " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> stridesOf(const Dims& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::vector<int64_t> broadcastStrides(const Dims& in, const Dims& out) {
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> inStrides = stridesOf(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[lead + i] = in[i] == 1 ? 0 : inStrides[i];
  return s;
}

BroadcastWalker::BroadcastWalker(const Dims& out, const std::vector<Dims>& ins)
    : out_(out), idx_(out.size(), 0), off_(ins.size(), 0) {
  for (const Dims& d : ins) strides_.push_back(broadcastStrides(d, out));
}

void BroadcastWalker::next() {
  for (size_t d = out_.size(); d-- > 0;) {
    ++idx_[d];
    for (size_t k = 0; k < off_.size(); ++k) off_[k] += strides_[k][d];
    if (idx_[d] < out_[d]) return;
    for (size_t k = 0; k < off_.size(); ++k) off_[k] -= strides_[k][d] * out_[d];
    idx_[d] = 0;
  }
}

void copyStrided(const void* src, int64_t base, const std::vector<int64_t>& strides,
                 const Dims& shape, void* dst, size_t elemSize) {
  int64_t n = numElements(shape);
  if (n == 0) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  size_t rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t off = base;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(d + i * elemSize, s + off * elemSize, elemSize);
    for (size_t k = rank; k-- > 0;) {
      off += strides[k];
      if (++idx[k] < shape[k]) break;
      off -= strides[k] * shape[k];
      idx[k] = 0;
    }
  }
}

InferArgs argsFromTensors(const std::vector<const Tensor*>& inputs, const AttrMap& attrs) {
  InferArgs a;
  a.attrs = &attrs;
  for (const Tensor* t : inputs) {
    a.inputs.push_back(t && t->defined() ? t->type() : TensorType{});
    a.constInputs.push_back(t && t->defined() ? t : nullptr);
  }
  return a;
}

Tensor halfToF32(const Tensor& t) {
  Tensor r = Tensor::zeros(DType::kF32, t.shape());
  const uint16_t* s = t.data<uint16_t>();
  float* d = r.mutableData<float>();
  bool bf = t.dtype() == DType::kBF16;
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = bf ? bf16ToFloat(s[i]) : halfToFloat(s[i]);
  return r;
}

Tensor f32ToHalf(const Tensor& t, DType to) {
  Tensor r = Tensor::zeros(to, t.shape());
  const float* s = t.data<float>();
  uint16_t* d = r.mutableData<uint16_t>();
  bool bf = to == DType::kBF16;
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = bf ? floatToBf16(s[i]) : floatToHalf(s[i]);
  return r;
}

bool anyHalf(const std::vector<const Tensor*>& inputs) {
  for (const Tensor* t : inputs)
    if (t && isHalf(t->dtype())) return true;
  return false;
}

Status computeViaF32(ComputeFn fn, const std::vector<const Tensor*>& inputs, const AttrMap& attrs,
                     std::vector<Tensor>& outputs) {
  DType half = DType::kUndefined;
  std::vector<Tensor> widened(inputs.size());
  std::vector<const Tensor*> ins(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = inputs[i];
    if (t && isHalf(t->dtype())) {
      if (half == DType::kUndefined) half = t->dtype();
      widened[i] = halfToF32(*t);
      ins[i] = &widened[i];
    } else {
      ins[i] = t;
    }
  }
  RETURN_IF_ERROR(fn(ins, attrs, outputs));
  if (half == DType::kUndefined) return Status::OK();
  for (Tensor& o : outputs)
    if (o.dtype() == DType::kF32) o = f32ToHalf(o, half);
  return Status::OK();
}

std::string typesToString(const std::vector<TensorType>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i)
    s += strCat(i ? ", " : "", ts[i].dtype == DType::kUndefined ? std::string("none") : ts[i].str());
  return s;
}

Status checkDType(const TensorType& t, std::initializer_list<DType> allowed, const char* what) {
  for (DType d : allowed)
    if (t.dtype == d) return Status::OK();
  std::string names;
  for (DType d : allowed) names += strCat(names.empty() ? "" : ", ", dtypeName(d));
  return invalidInput(what, " has unsupported type ", t.str(), " (supported: ", names, ")");
}

StatusOr<WindowGeometry> windowGeometry(const Dims& inSpatial, const Dims& kernel,
                                        const AttrMap& attrs, bool allowCeil) {
  WindowGeometry g;
  int64_t n = static_cast<int64_t>(inSpatial.size());
  g.spatial = n;
  g.in = inSpatial;
  g.kernel = kernel;
  if (static_cast<int64_t>(kernel.size()) != n)
    return invalidInput("kernel_shape ", dimsToString(kernel), " does not match ", n,
                        " spatial dims");
  g.strides = attrs.getInts("strides", Dims(n, 1));
  g.dilations = attrs.getInts("dilations", Dims(n, 1));
  Dims pads = attrs.getInts("pads", Dims(2 * n, 0));
  if (static_cast<int64_t>(g.strides.size()) != n)
    return invalidInput("strides ", dimsToString(g.strides), " must have ", n, " values");
  if (static_cast<int64_t>(g.dilations.size()) != n)
    return invalidInput("dilations ", dimsToString(g.dilations), " must have ", n, " values");
  if (static_cast<int64_t>(pads.size()) != 2 * n)
    return invalidInput("pads ", dimsToString(pads), " must have ", 2 * n, " values");
  std::string autoPad = attrs.getString("auto_pad", "NOTSET");
  bool ceil = allowCeil && attrs.getInt("ceil_mode", 0) != 0;
  g.out.resize(n);
  g.padBegin.resize(n);
  g.padEnd.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = g.strides[i], d = g.dilations[i], k = kernel[i], in = inSpatial[i];
    if (s <= 0 || d <= 0 || k <= 0)
      return invalidInput("kernel ", k, ", stride ", s, " and dilation ", d, " must be positive");
    int64_t span = (k - 1) * d + 1;  // extent of one dilated window
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      g.out[i] = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + span - in);
      int64_t small = total / 2;
      g.padBegin[i] = autoPad == "SAME_UPPER" ? small : total - small;
      g.padEnd[i] = total - g.padBegin[i];
      continue;
    }
    if (autoPad == "VALID") {
      g.padBegin[i] = g.padEnd[i] = 0;
    } else if (autoPad == "NOTSET") {
      g.padBegin[i] = pads[i];
      g.padEnd[i] = pads[i + n];
      if (pads[i] < 0 || pads[i + n] < 0)
        return invalidInput("pads ", dimsToString(pads), " must be non-negative");
    } else {
      return invalidInput("unknown auto_pad '", autoPad, "'");
    }
    int64_t padded = in + g.padBegin[i] + g.padEnd[i];
    if (padded < span)
      return invalidInput("window of extent ", span, " larger than padded input size ", padded,
                          " in spatial dim ", i);
    int64_t o = ceil ? (padded - span + s - 1) / s + 1 : (padded - span) / s + 1;
    // A ceil-mode window may not start inside the end padding.
    if (ceil && (o - 1) * s >= in + g.padBegin[i]) --o;
    g.out[i] = o;
  }
  return g;
}

}  // namespace pcc::ops
