#include "runtime/ops/op_util.h"

#include <algorithm>
#include <cstring>

namespace pcc::ops {

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

namespace {

/// Copies `n` elements of `elemSize` bytes, `stride` elements apart in `s`, to
/// consecutive places in `d`.
void copyRow(const char* s, int64_t stride, int64_t n, char* d, size_t elemSize) {
  if (stride == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * elemSize);
    return;
  }
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    T* o = reinterpret_cast<T*>(d);
    for (int64_t i = 0; i < n; ++i) std::memcpy(o + i, s + i * stride * static_cast<int64_t>(sizeof(T)), sizeof(T));
  };
  switch (elemSize) {
    case 1: typed(uint8_t{}); break;
    case 2: typed(uint16_t{}); break;
    case 4: typed(uint32_t{}); break;
    case 8: typed(uint64_t{}); break;
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(d + i * elemSize, s + i * stride * static_cast<int64_t>(elemSize), elemSize);
  }
}

}  // namespace

// Algorithm:
//  1. Drop the size-1 dims and merge each dim into the next where their
//     strides chain (stride[k] == stride[k+1] * shape[k+1]): a transpose that
//     keeps the last dims, a slice of whole rows, a broadcast of a row become
//     few long rows.
//  2. Copy row by row: a row of stride 1 is one memcpy, any other a loop of
//     fixed-size element copies.
void copyStrided(const void* src, int64_t base, const std::vector<int64_t>& strides,
                 const Dims& shape, void* dst, size_t elemSize) {
  int64_t n = numElements(shape);
  if (n == 0) return;
  // Step 1.
  Dims dims;
  std::vector<int64_t> st;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!dims.empty() && st.back() == strides[k] * shape[k]) {
      dims.back() *= shape[k];
      st.back() = strides[k];
      continue;
    }
    dims.push_back(shape[k]);
    st.push_back(strides[k]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    st.push_back(0);
  }
  // Step 2.
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const size_t outer = dims.size() - 1;
  const int64_t inner = dims.back(), innerStride = st.back();
  const int64_t es = static_cast<int64_t>(elemSize);
  std::vector<int64_t> idx(outer, 0);
  int64_t off = base;
  for (int64_t row = 0; row < n / inner; ++row) {
    copyRow(s + off * es, innerStride, inner, d + row * inner * es, elemSize);
    for (size_t k = outer; k-- > 0;) {
      off += st[k];
      if (++idx[k] < dims[k]) break;
      off -= st[k] * dims[k];
      idx[k] = 0;
    }
  }
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
  if (half == DType::kUndefined) return fn(ins, attrs, outputs);
  // The f32 results are temporaries; each is narrowed into its planned
  // output where there is one.
  std::vector<Tensor> wide;
  RETURN_IF_ERROR(fn(ins, attrs, wide));
  for (size_t k = 0; k < wide.size(); ++k) {
    const Tensor& o = wide[k];
    if (o.dtype() != DType::kF32) {
      if (planned(outputs, k) && outputs[k].type() == o.type()) {
        Tensor d = outputs[k];
        if (d.nbytes() && d.raw() != o.raw()) std::memmove(d.mutableData(), o.raw(), d.nbytes());
      } else {
        if (outputs.size() <= k) outputs.resize(k + 1);
        outputs[k] = o;
      }
      continue;
    }
    Tensor d = output(outputs, k, half, o.shape());
    const float* s = o.data<float>();
    uint16_t* p = d.mutableData<uint16_t>();
    bool bf = half == DType::kBF16;
    for (int64_t i = 0; i < o.numel(); ++i) p[i] = bf ? floatToBf16(s[i]) : floatToHalf(s[i]);
  }
  return Status::OK();
}

Tensor output(std::vector<Tensor>& out, size_t k, DType dtype, const Dims& shape) {
  if (k < out.size() && out[k].defined() && out[k].dtype() == dtype && out[k].shape() == shape) return out[k];
  if (out.size() <= k) out.resize(k + 1);
  out[k] = Tensor::zeros(dtype, shape);
  return out[k];
}

}  // namespace pcc::ops
