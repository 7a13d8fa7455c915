// Selection along one axis: TopK (the k largest or smallest elements and their
// indices) and Hardmax (one-hot of the first maximum).
// Their type inference is runtime/schema/reduce_norm_select.cpp.
#include <algorithm>
#include <numeric>

#include "runtime/ops/reduce_norm.h"
#include "runtime/schema/reduce_norm_select.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::reduce_norm_select_schema;

Status computeTopK(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeTopK, in, attrs, out);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferTopK(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", -1), x.rank()));
  bool largest = attrs.getInt("largest", 1) != 0;
  int64_t k = types[0].shape[axis];
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor values = Tensor::zeros(types[0]), indices = Tensor::zeros(types[1]);
  RETURN_IF_ERROR(visitNumeric(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    T* pv = values.mutableData<T>();
    int64_t* pi = indices.mutableData<int64_t>();
    std::vector<int64_t> order(n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* xs = px + o * n * inner + i;
        std::iota(order.begin(), order.end(), 0);
        // A stable sort keeps equal values in index order: ties go to the lower index.
        // The output is sorted whether or not `sorted` asks for it (any order is allowed).
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? xs[a * inner] > xs[b * inner] : xs[a * inner] < xs[b * inner];
        });
        for (int64_t j = 0; j < k; ++j) {
          int64_t dst = (o * k + j) * inner + i;
          pv[dst] = xs[order[j] * inner];
          pi[dst] = order[j];
        }
      }
    return Status::OK();
  }));
  out.push_back(std::move(values));
  out.push_back(std::move(indices));
  return Status::OK();
}

Status computeHardmax(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeHardmax, in, attrs, out);
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", -1), x.rank()));
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitFloat(x.dtype(), [&]<typename T>() -> Status {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* xs = x.data<T>() + o * n * inner + i;
        if (n == 0) continue;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j)
          if (xs[j * inner] > xs[best * inner]) best = j;
        r.mutableData<T>()[(o * n + best) * inner + i] = T(1);
      }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerSelectionOps(OpRegistry& r) {
  r.add(OpKind::TopK, &computeTopK);
  r.add(OpKind::Hardmax, &computeHardmax);
}

}  // namespace pcc
