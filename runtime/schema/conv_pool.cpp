// Type inference (the op schemas) of Conv, MaxPool, AveragePool, LpPool,
// GlobalAveragePool, GlobalMaxPool and ConvTranspose. Their reference kernels,
// and what the kernels compute, are runtime/ops/conv_pool.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "runtime/schema/checked_int.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/conv_pool.h"

namespace pcc {

namespace ops::conv_pool_schema {

Status checkSpatialInput(const TensorType& x, const char* what) {
  if (x.rank() < 3 || x.rank() > 5)
    return unsupported(what, " must be [N,C,D1..Dn] with 1 to 3 spatial dims, got ", x.str());
  return Status::OK();
}

Dims spatialOf(const Dims& shape) { return Dims(shape.begin() + 2, shape.end()); }

StatusOr<WindowGeometry> convGeometry(const TensorType& x, const TensorType& w,
                                      const AttrMap& attrs) {
  RETURN_IF_ERROR(checkSpatialInput(x, "input X"));
  if (w.rank() != x.rank())
    return invalidInput("weight ", w.str(), " must have the rank of input ", x.str());
  int64_t group = attrs.getInt("group", 1);
  int64_t c = x.shape[1], m = w.shape[0];
  if (group <= 0 || c % group != 0 || m % group != 0)
    return invalidInput("group ", group, " must divide input channels ", c,
                        " and output channels ", m);
  CheckedInt channels = CheckedInt(w.shape[1]) * group;
  if (channels.overflowed() || channels.value() != c)
    return invalidInput("weight ", w.str(), " expects ", w.shape[1], " x ", group,
                        " input channels, input is ", x.str(), " with group ", group);
  Dims kernel = spatialOf(w.shape);
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != kernel)
    return invalidInput("kernel_shape ", dimsToString(attrs.getInts("kernel_shape")),
                        " differs from weight ", w.str());
  return windowGeometry(spatialOf(x.shape), kernel, attrs, false);
}

StatusOr<WindowGeometry> convTransposeGeometry(const TensorType& x, const TensorType& w,
                                               const AttrMap& attrs) {
  RETURN_IF_ERROR(checkSpatialInput(x, "input X"));
  if (w.rank() != x.rank())
    return invalidInput("weight ", w.str(), " must have the rank of input ", x.str());
  int64_t group = attrs.getInt("group", 1);
  if (group <= 0 || x.shape[1] % group != 0 || w.shape[0] != x.shape[1])
    return invalidInput("weight ", w.str(), " must be [C, M/group, k...] for input ", x.str(),
                        " and group ", group);
  int64_t n = x.rank() - 2;
  WindowGeometry g;
  g.spatial = n;
  g.out = spatialOf(x.shape);
  g.kernel = spatialOf(w.shape);
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != g.kernel)
    return invalidInput("kernel_shape ", dimsToString(attrs.getInts("kernel_shape")),
                        " differs from weight ", w.str());
  g.strides = attrs.getInts("strides", Dims(n, 1));
  g.dilations = attrs.getInts("dilations", Dims(n, 1));
  Dims pads = attrs.getInts("pads", Dims(2 * n, 0));
  Dims outPad = attrs.getInts("output_padding", Dims(n, 0));
  Dims outShape = attrs.getInts("output_shape", {});
  if (outShape.size() == static_cast<size_t>(n + 2)) outShape.erase(outShape.begin(), outShape.begin() + 2);
  if (static_cast<int64_t>(g.strides.size()) != n || static_cast<int64_t>(g.dilations.size()) != n ||
      static_cast<int64_t>(pads.size()) != 2 * n || static_cast<int64_t>(outPad.size()) != n ||
      (!outShape.empty() && static_cast<int64_t>(outShape.size()) != n))
    return invalidInput("strides, dilations, output_padding, output_shape need ", n, " values and pads ",
                        2 * n, " for ", n, " spatial dims");
  std::string autoPad = attrs.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return invalidInput("unknown auto_pad '", autoPad, "'");
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  g.in.resize(n);
  g.padBegin.resize(n);
  g.padEnd.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = g.strides[i], d = g.dilations[i], k = g.kernel[i];
    if (s <= 0 || d <= 0 || k <= 0)
      return invalidInput("kernel ", k, ", stride ", s, " and dilation ", d, " must be positive");
    // Output size before padding is removed; strides, dilations, pads and
    // output padding are model-given, so every size is overflow-checked.
    CheckedInt fullC = CheckedInt(s) * (CheckedInt(g.out[i]) - 1) + outPad[i] + (CheckedInt(k) - 1) * d + 1;
    if (fullC.overflowed())
      return invalidInput("strides, dilations and output_padding overflow int64 in spatial dim ", i);
    int64_t full = fullC.value();
    if (!outShape.empty() || same) {
      // The output size is given (or in * stride); the padding making it up is
      // split evenly, the odd unit at the end for SAME_UPPER, else at the start.
      CheckedInt given = outShape.empty() ? CheckedInt(g.out[i]) * s : CheckedInt(outShape[i]);
      CheckedInt totalC = CheckedInt(full) - given;
      if (totalC.overflowed()) return invalidInput("output_shape or strides overflow int64 in spatial dim ", i);
      g.in[i] = given.value();
      int64_t total = totalC.value();
      // Halves round down, also for a negative total (output larger than full).
      int64_t halfDown = total >= 0 ? total / 2 : -((1 - total) / 2);
      g.padBegin[i] = autoPad == "SAME_UPPER" ? halfDown : total - halfDown;
      g.padEnd[i] = total - g.padBegin[i];
    } else {
      bool valid = autoPad == "VALID";
      g.padBegin[i] = valid ? 0 : pads[i];
      g.padEnd[i] = valid ? 0 : pads[i + n];
      CheckedInt in = CheckedInt(full) - g.padBegin[i] - g.padEnd[i];
      if (in.overflowed()) return invalidInput("pads ", dimsToString(pads), " overflow int64 in spatial dim ", i);
      g.in[i] = in.value();
    }
    if (g.in[i] < 0) return invalidInput("output size ", g.in[i], " in spatial dim ", i, " is negative");
  }
  return g;
}

StatusOr<std::vector<TensorType>> inferConvTranspose(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const TensorType &x = args.inputs[0], &w = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (w.dtype != x.dtype) return invalidInput("weight type ", w.str(), " differs from X ", x.str());
  static const AttrMap kNoAttrs;
  const AttrMap& attrs = args.attrs ? *args.attrs : kNoAttrs;
  ASSIGN_OR_RETURN(WindowGeometry g, convTransposeGeometry(x, w, attrs));
  CheckedInt mC = CheckedInt(w.shape[1]) * attrs.getInt("group", 1);
  if (mC.overflowed()) return invalidInput("group ", attrs.getInt("group", 1), " times ", w.str(), " overflows int64");
  int64_t m = mC.value();
  if (args.has(2)) {
    const TensorType& b = args.inputs[2];
    if (b.dtype != x.dtype || b.shape != Dims{m})
      return invalidInput("bias ", b.str(), " must be ", dtypeName(x.dtype), "[", m, "]");
  }
  Dims out = {x.shape[0], m};
  out.insert(out.end(), g.in.begin(), g.in.end());
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<WindowGeometry> poolGeometry(const TensorType& x, const AttrMap& attrs) {
  RETURN_IF_ERROR(checkSpatialInput(x, "input X"));
  if (!attrs.has("kernel_shape")) return invalidInput("missing attribute 'kernel_shape'");
  return windowGeometry(spatialOf(x.shape), attrs.getInts("kernel_shape"), attrs, true);
}

}  // namespace ops::conv_pool_schema

namespace {
using namespace ops;
using namespace ops::conv_pool_schema;

StatusOr<std::vector<TensorType>> inferConv(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const TensorType &x = args.inputs[0], &w = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (w.dtype != x.dtype) return invalidInput("weight type ", w.str(), " differs from X ", x.str());
  static const AttrMap kNoAttrs;
  ASSIGN_OR_RETURN(WindowGeometry g, convGeometry(x, w, args.attrs ? *args.attrs : kNoAttrs));
  if (args.has(2)) {
    const TensorType& b = args.inputs[2];
    if (b.dtype != x.dtype || b.shape != Dims{w.shape[0]})
      return invalidInput("bias ", b.str(), " must be ", dtypeName(x.dtype), "[", w.shape[0], "]");
  }
  Dims out = {x.shape[0], w.shape[0]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  static const AttrMap kNoAttrs;
  ASSIGN_OR_RETURN(WindowGeometry g, poolGeometry(x, args.attrs ? *args.attrs : kNoAttrs));
  Dims out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return std::vector<TensorType>{{x.dtype, out}};
}

/// MaxPool's node carries num_outputs (1, or 2 when the importer saw Indices
/// used): Indices are int64 flat positions in X, over the whole tensor.
StatusOr<std::vector<TensorType>> inferMaxPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0],
                             {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                              DType::kU8, DType::kI32, DType::kI64},
                             "input X"));
  const AttrMap& a = attrsOf(args);
  int64_t outputs = a.getInt("num_outputs", 1), order = a.getInt("storage_order", 0);
  if (outputs != 1 && outputs != 2) return invalidInput("num_outputs must be 1 or 2, got ", outputs);
  if (order != 0 && order != 1) return invalidInput("storage_order must be 0 or 1, got ", order);
  ASSIGN_OR_RETURN(std::vector<TensorType> t, inferPool(args));
  if (outputs == 2) t.push_back({DType::kI64, t[0].shape});
  return t;
}

StatusOr<std::vector<TensorType>> inferAveragePool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input X"));
  return inferPool(args);
}

StatusOr<std::vector<TensorType>> inferLpPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "input X"));
  if (args.attrs && args.attrs->getInt("p", 2) <= 0)
    return invalidInput("p must be positive, got ", args.attrs->getInt("p", 2));
  return inferPool(args);
}

StatusOr<std::vector<TensorType>> inferGlobalPool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "input X"));
  if (x.rank() < 3) return invalidInput("input X must be [N,C,D1..Dn], got ", x.str());
  Dims out = x.shape;
  std::fill(out.begin() + 2, out.end(), 1);
  return std::vector<TensorType>{{x.dtype, out}};
}

}  // namespace

void registerConvPoolSchemas(SchemaRegistry& r) {
  r.add(OpKind::Conv, &inferConv);
  r.add(OpKind::MaxPool, &inferMaxPool);
  r.add(OpKind::AveragePool, &inferAveragePool);
  r.add(OpKind::LpPool, &inferLpPool);
  r.add(OpKind::GlobalAveragePool, &inferGlobalPool);
  r.add(OpKind::GlobalMaxPool, &inferGlobalPool);
  r.add(OpKind::ConvTranspose, &inferConvTranspose);
}

}  // namespace pcc
