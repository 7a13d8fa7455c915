// Reference kernels of the tensor op family (indexing, padding, resizing): the
// family's registration hook and the helpers its files share.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/ops/tensor_util.h"

namespace pcc {

void registerTensorOps(OpRegistry& r) {
  ops::registerTensorLayoutOps(r);
  ops::registerTensorIndexOps(r);
  ops::registerTensorResizeOps(r);
}

namespace ops {

namespace {
/// \returns `v` rounded half to even and clamped to the range of T.
template <typename T>
T saturate(double v) {
  if (std::isnan(v)) return T(0);
  v = std::nearbyint(v);
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (v <= lo) return std::numeric_limits<T>::lowest();
  if (v >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
}  // namespace

void storeDouble(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.mutableData<float>()[i] = static_cast<float>(v); break;
    case DType::kF64: t.mutableData<double>()[i] = v; break;
    case DType::kF16: t.mutableData<uint16_t>()[i] = floatToHalf(static_cast<float>(v)); break;
    case DType::kBF16: t.mutableData<uint16_t>()[i] = floatToBf16(static_cast<float>(v)); break;
    case DType::kI8: t.mutableData<int8_t>()[i] = saturate<int8_t>(v); break;
    case DType::kU8: t.mutableData<uint8_t>()[i] = saturate<uint8_t>(v); break;
    case DType::kI32: t.mutableData<int32_t>()[i] = saturate<int32_t>(v); break;
    case DType::kI64: t.mutableData<int64_t>()[i] = saturate<int64_t>(v); break;
    case DType::kI16: t.mutableData<int16_t>()[i] = saturate<int16_t>(v); break;
    case DType::kU16: t.mutableData<uint16_t>()[i] = saturate<uint16_t>(v); break;
    case DType::kU32: t.mutableData<uint32_t>()[i] = saturate<uint32_t>(v); break;
    case DType::kU64: t.mutableData<uint64_t>()[i] = saturate<uint64_t>(v); break;
    case DType::kI4: t.mutableData<int8_t>()[i] = std::clamp<int8_t>(saturate<int8_t>(v), -8, 7); break;
    case DType::kU4: t.mutableData<uint8_t>()[i] = std::min<uint8_t>(saturate<uint8_t>(v), 15); break;
    case DType::kBool: t.mutableData<uint8_t>()[i] = v != 0; break;
    case DType::kUndefined: break;
    default: t.setDouble(i, v); break;  // narrow floats
  }
}

Tensor scalarOf(DType t, double v) {
  Tensor r = Tensor::zeros(t, {});
  storeDouble(r, 0, v);
  return r;
}

Tensor gatherAxisMaps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps,
                      const Tensor& fill) {
  size_t rank = maps.size();
  Dims shape;
  for (const auto& m : maps) shape.push_back(static_cast<int64_t>(m.size()));
  Tensor r = Tensor::zeros(x.dtype(), shape);
  int64_t n = r.numel();
  if (n == 0) return r;
  size_t es = dtypeSize(x.dtype());
  std::vector<int64_t> strides = stridesOf(x.shape()), idx(rank, 0);
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(r.mutableData());
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      int64_t m = maps[d][idx[d]];
      outside |= m < 0;
      off += m * strides[d];
    }
    std::memcpy(dst + i * es, outside ? fill.raw() : src + off * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

}  // namespace ops
}  // namespace pcc
