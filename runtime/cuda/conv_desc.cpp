// ONNX Conv -> cuDNN convolution descriptor values (conv_desc.h).
//
// Algorithm:
//  1. Check dtypes (f32, f16 without bias; the bias the same), ranks (3 to 5: 1 to 3
//     spatial dims), channels (C = group * w's C/group, K divisible by group)
//     and kernel_shape against w.
//  2. The window geometry (pads from auto_pad or `pads`, output sizes) from
//     the shared sliding-window arithmetic the shape inference uses.
//  3. cuDNN pads symmetrically: a dim whose two pads differ is unsupported.
//  4. A 1-D convolution becomes 2-D with a height of 1.
//  5. Dims, packed strides, the bias as [1, K, 1, ...]; every value must fit
//     an int (cuDNN's descriptors take ints).
#include "runtime/cuda/conv_desc.h"

#include <climits>

#include "runtime/schema/infer_util.h"

namespace pcc::cuda {

namespace {

/// \returns the packed (row-major) strides of `dims`.
std::vector<int> packed(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

/// \returns `v` as ints, or false when one does not fit (or the product does not).
bool toInts(const Dims& v, std::vector<int>* out) {
  int64_t product = 1;
  out->clear();
  for (int64_t d : v) {
    if (d < 0 || d > INT_MAX) return false;
    product *= d > 0 ? d : 1;
    if (product > INT_MAX) return false;
    out->push_back(static_cast<int>(d));
  }
  return true;
}

}  // namespace

std::string ConvDesc::key() const {
  std::string k = strCat(dtypeName(dtype), " g", groups, hasBias ? " b" : "");
  auto add = [&k](const char* name, const std::vector<int>& v) {
    k += strCat(" ", name);
    for (int x : v) k += strCat(",", x);
  };
  add("x", xDims);
  add("w", wDims);
  add("y", yDims);
  add("p", pads);
  add("s", strides);
  add("d", dilations);
  return k;
}

StatusOr<ConvDesc> convDesc(const TensorType& x, const TensorType& w, const TensorType& b, const AttrMap& attrs) {
  // Step 1.
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16)
    return unsupported("cuDNN Conv takes f32 and f16 only, got ", x.str());
  if (w.dtype != x.dtype || (b.dtype != DType::kUndefined && b.dtype != x.dtype))
    return invalidInput("Conv of ", x.str(), " with weight ", w.str(), " and bias ", b.str(), ": dtypes differ");
  if (x.rank() < 3 || x.rank() > 5)
    return unsupported("cuDNN Conv takes 1 to 3 spatial dims, got input ", x.str());
  if (w.rank() != x.rank()) return invalidInput("Conv of ", x.str(), " with weight ", w.str(), ": ranks differ");
  const int64_t n = x.rank() - 2;
  const int64_t group = attrs.getInt("group", 1);
  const int64_t C = x.shape[1], K = w.shape[0];
  if (group < 1 || C != w.shape[1] * group || K % group != 0)
    return invalidInput("Conv of ", x.str(), " with weight ", w.str(), " and group ", group, ": channels do not match");
  if (b.dtype != DType::kUndefined && b.shape != Dims{K})
    return invalidInput("Conv bias ", b.str(), " must be [", K, "]");
  // The bias is a second call (cudnnAddTensor) on y as stored: float16 would
  // round twice where the reference rounds once.
  if (b.dtype == DType::kF16)
    return unsupported("a float16 Conv with bias would round twice on cuDNN (the convolution, then the bias)");
  Dims kernel(w.shape.begin() + 2, w.shape.end());
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != kernel)
    return invalidInput("Conv kernel_shape ", dimsToString(attrs.getInts("kernel_shape")), " differs from weight ",
                        w.str());
  // Step 2.
  Dims spatial(x.shape.begin() + 2, x.shape.end());
  ASSIGN_OR_RETURN(ops::WindowGeometry g, ops::windowGeometry(spatial, kernel, attrs, false));
  // Step 3.
  for (int64_t i = 0; i < n; ++i)
    if (g.padBegin[i] != g.padEnd[i])
      return unsupported("cuDNN pads symmetrically; Conv pads ", g.padBegin[i], " and ", g.padEnd[i],
                         " in spatial dim ", i);
  // Step 4.
  Dims xd = x.shape, wd = w.shape, yd{x.shape[0], K};
  yd.insert(yd.end(), g.out.begin(), g.out.end());
  Dims pads = g.padBegin, strides = g.strides, dilations = g.dilations;
  if (n == 1) {
    xd.insert(xd.begin() + 2, 1);
    wd.insert(wd.begin() + 2, 1);
    yd.insert(yd.begin() + 2, 1);
    pads.insert(pads.begin(), 0);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
  }
  // Step 5.
  ConvDesc d;
  d.dtype = x.dtype;
  d.nbDims = static_cast<int>(xd.size());
  d.groups = static_cast<int>(group);
  if (!toInts(xd, &d.xDims) || !toInts(wd, &d.wDims) || !toInts(yd, &d.yDims) || !toInts(pads, &d.pads) ||
      !toInts(strides, &d.strides) || !toInts(dilations, &d.dilations) || group > INT_MAX)
    return unsupported("cuDNN Conv: a dim of ", x.str(), " or ", w.str(), " does not fit an int");
  d.xStrides = packed(d.xDims);
  d.yStrides = packed(d.yDims);
  if (b.dtype != DType::kUndefined) {
    d.hasBias = true;
    d.biasDims.assign(static_cast<size_t>(d.nbDims), 1);
    d.biasDims[1] = static_cast<int>(K);
    d.biasStrides = packed(d.biasDims);
  }
  return d;
}

}  // namespace pcc::cuda
