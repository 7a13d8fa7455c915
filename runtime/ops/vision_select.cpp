// Ops that select or place elements, most with a data-dependent output shape:
// NonMaxSuppression, Unique, CenterCropPad, MaxUnpool, Col2Im, TensorScatter;
// and Det and Swish, which have no better home.
//
// Where the output shape depends on input values, the InferFn needs those
// inputs to be constants and computes the op to learn the shape.
// Their type inference is runtime/schema/vision_select.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "runtime/ops/vision.h"
#include "runtime/schema/vision_select.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::vision_select_schema;

Status computeNonMaxSuppression(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                                std::vector<Tensor>& out) {
  RETURN_IF_ERROR(checkNmsInputs(argsFromTensors(in, attrs)));
  ASSIGN_OR_RETURN(auto sel, nmsSelect(in, attrs));
  Tensor r = Tensor::zeros(DType::kI64, {static_cast<int64_t>(sel.size()), 3});
  for (size_t i = 0; i < sel.size(); ++i)
    std::copy(sel[i].begin(), sel[i].end(), r.mutableData<int64_t>() + i * 3);
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeUnique(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(int64_t n, uniqueOutputs(attrs));
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(UniqueResult u, uniqueOf(x, attrs));
  std::vector<TensorType> types = uniqueTypes(x.type(), u, n);
  // Y: the first occurrence of each kept slice, copied as raw elements.
  Tensor y = Tensor::zeros(types[0]);
  size_t es = dtypeSize(x.dtype());
  int64_t outer = 1, inner = 1, slices = x.numel();
  if (u.axis >= 0) {
    slices = x.shape()[u.axis];
    for (int64_t i = 0; i < u.axis; ++i) outer *= x.shape()[i];
    for (int64_t i = u.axis + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  }
  auto kept = static_cast<int64_t>(u.first.size());
  const auto* src = static_cast<const char*>(x.raw());
  auto* dst = static_cast<char*>(y.mutableData());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < kept; ++k)
      std::memcpy(dst + static_cast<size_t>((o * kept + k) * inner) * es,
                  src + static_cast<size_t>((o * slices + u.first[static_cast<size_t>(k)]) * inner) * es,
                  static_cast<size_t>(inner) * es);
  out.push_back(std::move(y));
  const std::vector<int64_t>* lists[] = {&u.first, &u.inverse, &u.counts};
  for (int64_t i = 1; i < n; ++i)
    out.push_back(Tensor::fromVector<int64_t>(DType::kI64, types[static_cast<size_t>(i)].shape, *lists[i - 1]));
  return Status::OK();
}

Status computeCenterCropPad(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(auto maps, centerCropPadMaps(in[0]->type(), in[1]->toInts(), attrs));
  out.push_back(gatherAxisMaps(*in[0], maps, Tensor::zeros(in[0]->dtype(), {})));
  return Status::OK();
}

Status computeMaxUnpool(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferMaxUnpool(argsFromTensors(in, attrs)));
  const Tensor &x = *in[0], &idx = *in[1];
  // Indices are flat offsets into the [N, C, out...] tensor that the pooling
  // attributes give; a larger output_shape holds that tensor at its origin
  // (what the ONNX reference and its test data do).
  ASSIGN_OR_RETURN(Dims natural, unpoolShape(x.type(), attrs));
  Tensor y = Tensor::zeros(x.dtype(), natural);
  size_t es = dtypeSize(x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t j = idx.getInt(i);
    if (j < 0 || j >= y.numel())
      return invalidInput("MaxUnpool: index ", j, " is outside the output ", dtypeName(x.dtype()),
                          dimsToString(natural));
    std::memcpy(static_cast<char*>(y.mutableData()) + static_cast<size_t>(j) * es,
                static_cast<const char*>(x.raw()) + static_cast<size_t>(i) * es, es);
  }
  if (natural != types[0].shape) {
    std::vector<std::vector<int64_t>> maps;
    for (size_t d = 0; d < natural.size(); ++d) {
      std::vector<int64_t> m(static_cast<size_t>(types[0].shape[d]), -1);
      for (int64_t o = 0; o < std::min(natural[d], types[0].shape[d]); ++o) m[static_cast<size_t>(o)] = o;
      maps.push_back(std::move(m));
    }
    y = gatherAxisMaps(y, maps, Tensor::zeros(x.dtype(), {}));
  }
  out.push_back(std::move(y));
  return Status::OK();
}

Status computeCol2Im(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferCol2Im(args));
  ASSIGN_OR_RETURN(Col2ImGeometry g, col2imGeometry(args));
  std::vector<double> x = toDoubles(*in[0]);
  auto n = static_cast<int64_t>(g.image.size());
  int64_t batch = types[0].shape[0], channels = types[0].shape[1];
  int64_t blockSize = numElements(g.block), positions = numElements(g.blocks), imageSize = numElements(g.image);
  std::vector<int64_t> imageStrides = stridesOf(g.image);
  std::vector<double> y(static_cast<size_t>(numElements(types[0].shape)), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < blockSize; ++k)
        for (int64_t p = 0; p < positions; ++p) {
          // The image element tap k of block position p lands on, if any.
          int64_t off = 0, kr = k, pr = p;
          bool inside = true;
          for (int64_t i = n - 1; i >= 0; --i) {
            int64_t ki = kr % g.block[i], pi = pr % g.blocks[i];
            kr /= g.block[i];
            pr /= g.blocks[i];
            int64_t pos = pi * g.strides[i] - g.pads[i] + ki * g.dil[i];
            if (pos < 0 || pos >= g.image[i]) inside = false;
            off += pos * imageStrides[i];
          }
          if (!inside) continue;
          y[static_cast<size_t>((b * channels + c) * imageSize + off)] +=
              x[static_cast<size_t>(((b * channels + c) * blockSize + k) * positions + p)];
        }
  out.push_back(fromDoubles(types[0].dtype, types[0].shape, y));
  return Status::OK();
}

Status computeTensorScatter(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferTensorScatter(argsFromTensors(in, attrs)));
  const Tensor &cache = *in[0], &update = *in[1];
  const Tensor* writeIdx = optionalInput(in, 2);
  bool circular = attrs.getString("mode", "linear") == "circular";
  int64_t axis = attrs.getInt("axis", -2);
  if (axis < 0) axis += cache.rank();
  // The output may be the cache itself (a generation plan's KV cache state,
  // written in place): then only the update's positions are written.
  Tensor r = ops::output(out, 0, types[0]);
  if (r.raw() != cache.raw()) std::memcpy(r.mutableData(), cache.raw(), cache.type().bytes());
  size_t es = dtypeSize(cache.dtype());
  int64_t outer = 1, inner = 1, maxLen = cache.shape()[axis], len = update.shape()[axis];
  for (int64_t i = 0; i < axis; ++i) outer *= cache.shape()[i];
  for (int64_t i = axis + 1; i < cache.rank(); ++i) inner *= cache.shape()[i];
  if (outer == 0 || inner == 0 || len == 0) return Status::OK();
  int64_t perBatch = outer / cache.shape()[0];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t start = writeIdx ? writeIdx->getInt(o / perBatch) : 0;
    for (int64_t s = 0; s < len; ++s) {
      int64_t pos = start + s;
      if (circular) pos = ((pos % maxLen) + maxLen) % maxLen;
      if (pos < 0 || pos >= maxLen)
        return invalidInput("TensorScatter: write position ", pos, " is outside the cache length ", maxLen);
      std::memcpy(static_cast<char*>(r.mutableData()) + static_cast<size_t>((o * maxLen + pos) * inner) * es,
                  static_cast<const char*>(update.raw()) + static_cast<size_t>((o * len + s) * inner) * es,
                  static_cast<size_t>(inner) * es);
    }
  }
  return Status::OK();
}

Status computeDet(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferDet(argsFromTensors(in, attrs)));
  std::vector<double> x = toDoubles(*in[0]);
  int64_t m = in[0]->shape().back(), count = numElements(types[0].shape);
  std::vector<double> y(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    // Gaussian elimination with partial pivoting; each row swap flips the sign.
    std::vector<double> a(x.begin() + b * m * m, x.begin() + (b + 1) * m * m);
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(a[static_cast<size_t>(r * m + col)]) > std::fabs(a[static_cast<size_t>(piv * m + col)])) piv = r;
      double p = a[static_cast<size_t>(piv * m + col)];
      if (p == 0) {
        det = 0;
        break;
      }
      if (piv != col) {
        for (int64_t k = 0; k < m; ++k) std::swap(a[static_cast<size_t>(piv * m + k)], a[static_cast<size_t>(col * m + k)]);
        det = -det;
      }
      det *= p;
      for (int64_t r = col + 1; r < m; ++r) {
        double f = a[static_cast<size_t>(r * m + col)] / p;
        for (int64_t k = col; k < m; ++k) a[static_cast<size_t>(r * m + k)] -= f * a[static_cast<size_t>(col * m + k)];
      }
    }
    y[static_cast<size_t>(b)] = det;
  }
  out.push_back(fromDoubles(types[0].dtype, types[0].shape, y));
  return Status::OK();
}

/// Swish(x) = x * sigmoid(alpha * x).
Status computeSwish(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  RETURN_IF_ERROR(inferSwish(argsFromTensors(in, attrs)).status());
  double alpha = attrs.getFloat("alpha", 1.0f);
  std::vector<double> x = toDoubles(*in[0]);
  for (double& v : x) v = v / (1 + std::exp(-alpha * v));
  out.push_back(fromDoubles(in[0]->dtype(), in[0]->shape(), x));
  return Status::OK();
}

}  // namespace

void registerVisionSelectOps(OpRegistry& r) {
  r.add(OpKind::NonMaxSuppression, &computeNonMaxSuppression);
  r.add(OpKind::Unique, &computeUnique);
  r.add(OpKind::CenterCropPad, &computeCenterCropPad);
  r.add(OpKind::MaxUnpool, &computeMaxUnpool);
  r.add(OpKind::Col2Im, &computeCol2Im);
  r.add(OpKind::TensorScatter, &computeTensorScatter, kWritesOutputs);
  r.add(OpKind::Det, &computeDet);
  r.add(OpKind::Swish, &computeSwish);
}

}  // namespace pcc
