// Helpers of type inference shared by the op families (infer_util.h).
#include "runtime/schema/infer_util.h"

#include <algorithm>
#include <cstring>

#include "runtime/schema/checked_int.h"

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

InferArgs argsFromTensors(const std::vector<const Tensor*>& inputs, const AttrMap& attrs) {
  InferArgs a;
  a.attrs = &attrs;
  for (const Tensor* t : inputs) {
    a.inputs.push_back(t && t->defined() ? t->type() : TensorType{});
    a.constInputs.push_back(t && t->defined() ? t : nullptr);
  }
  return a;
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
    // Kernel, strides, dilations and pads are model-given: every size below
    // is computed overflow-checked (one check covers the whole formula).
    CheckedInt spanC = (CheckedInt(k) - 1) * d + 1;  // extent of one dilated window
    if (spanC.overflowed())
      return invalidInput("kernel ", k, " with dilation ", d, " in spatial dim ", i, " overflows int64");
    int64_t span = spanC.value();
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      g.out[i] = in == 0 ? 0 : (in - 1) / s + 1;
      CheckedInt need = (CheckedInt(g.out[i]) - 1) * s + span - in;
      if (need.overflowed())
        return invalidInput("stride ", s, " and window ", span, " in spatial dim ", i, " overflow int64");
      int64_t total = std::max<int64_t>(0, need.value());
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
    CheckedInt paddedC = CheckedInt(in) + g.padBegin[i] + g.padEnd[i];
    if (paddedC.overflowed())
      return invalidInput("pads ", dimsToString(pads), " overflow int64 in spatial dim ", i);
    int64_t padded = paddedC.value();
    if (padded < span)
      return invalidInput("window of extent ", span, " larger than padded input size ", padded,
                          " in spatial dim ", i);
    // padded >= span: no overflow below (o - 1 <= (padded - span) / s + 1).
    int64_t o = ceil ? (padded - span == 0 ? 0 : (padded - span - 1) / s + 1) + 1 : (padded - span) / s + 1;
    // A ceil-mode window may not start inside the end padding.
    CheckedInt start = (CheckedInt(o) - 1) * s;  // of the last window; past int64 it is past the end too
    if (ceil && (start.overflowed() || start.value() >= in + g.padBegin[i])) --o;
    g.out[i] = o;
  }
  return g;
}

Status checkSameDType(const InferArgs& args) {
  for (size_t i = 1; i < args.inputs.size(); ++i)
    if (args.has(i) && args.inputs[i].dtype != args.inputs[0].dtype)
      return invalidInput("input types differ: ", args.inputs[0].str(), " and ",
                          args.inputs[i].str(), " (input ", i, ")");
  return Status::OK();
}

StatusOr<std::vector<bool>> reducedDims(const InferArgs& args) {
  const TensorType& x = args.inputs[0];
  const AttrMap& attrs = attrsOf(args);
  std::vector<int64_t> axes;
  if (args.has(1)) {
    ASSIGN_OR_RETURN(axes, constInts(args, 1, "axes"));
  } else if (attrs.has("axes")) {
    axes = attrs.getInts("axes");
  }
  if (axes.empty()) {
    if (attrs.getInt("noop_with_empty_axes", 0) != 0) return std::vector<bool>{};
    return std::vector<bool>(x.rank(), true);
  }
  std::vector<bool> red(x.rank(), false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t ax, normalizeAxis(a, x.rank(), "reduction axis"));
    if (red[ax]) return invalidInput("reduction axis ", a, " given twice");
    red[ax] = true;
  }
  return red;
}

Dims reducedShape(const Dims& in, const std::vector<bool>& red, bool keep) {
  if (red.empty()) return in;
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!red[i]) out.push_back(in[i]);
    else if (keep) out.push_back(1);
  }
  return out;
}

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

const AttrMap& attrsOrEmpty(const InferArgs& args) {
  static const AttrMap kNoAttrs;
  return args.attrs ? *args.attrs : kNoAttrs;
}

StatusOr<int64_t> normalizeIndex(int64_t i, int64_t dim, const char* what) {
  if (i < -dim || i >= dim)
    return invalidInput(what, " ", i, " out of range for a dim of size ", dim, " (must be in [",
                        -dim, ", ", dim - 1, "])");
  return i < 0 ? i + dim : i;
}

Status checkIndexType(const TensorType& t, const char* what) {
  return checkDType(t, {DType::kI64, DType::kI32}, what);
}

Status notConstant(const char* op, const char* what) {
  return invalidInput(op, ": ", what, " must be a constant (it decides the output shape)");
}

std::vector<double> toDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.getDouble(i);
  return v;
}

}  // namespace pcc::ops
