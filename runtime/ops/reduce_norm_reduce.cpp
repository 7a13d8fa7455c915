// Reductions over a set of axes (ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
// ReduceSumSquare) and the index reductions over one axis (ArgMax, ArgMin).
//
// One kernel serves every Reduce*: it walks the input once in row-major order
// with the keepdims-shaped output broadcast over it, so each input element
// knows its output slot, and folds the element into that slot's accumulator.
// Sums accumulate in double. A reduction over no elements yields the identity
// of its fold: 0 for sums, 1 for products, -inf (or the lowest integer) for
// ReduceMax and ReduceLogSum(Exp), +inf (or the highest integer) for ReduceMin,
// NaN (0 for integers) for ReduceMean.
// Their type inference is runtime/schema/reduce_norm_reduce.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/ops/reduce_norm.h"
#include "runtime/schema/reduce_norm_reduce.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::reduce_norm_reduce_schema;

/// Folds every element of `x` into `outN` slots (`slot(i)` of element i) with
/// the max (kMax) or min of T; NaN wins, as in numpy.
template <typename T, bool kMax>
std::vector<T> foldMinMax(const Tensor& x, const Dims& kept, int64_t outN, bool isBool) {
  T init;
  if constexpr (std::is_floating_point_v<T>) {
    init = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    init = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    if (isBool) init = kMax ? 0 : 1;
  }
  std::vector<T> acc(outN, init);
  const T* px = x.data<T>();
  BroadcastWalker w(x.shape(), {kept});
  for (int64_t i = 0; i < x.numel(); ++i, w.next()) {
    T& a = acc[w.offset(0)];
    T v = px[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) continue;
      if (std::isnan(v)) {
        a = v;
        continue;
      }
    }
    if (kMax ? v > a : v < a) a = v;
  }
  return acc;
}

template <Red kRed>
Status computeReduce(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeReduce<kRed>, in, attrs, out);
  const Tensor& x = *in[0];
  InferArgs args = argsFromTensors(in, attrs);
  ASSIGN_OR_RETURN(std::vector<bool> red, reducedDims(args));
  bool keep = attrs.getInt("keepdims", 1) != 0;
  if (red.empty()) {  // noop_with_empty_axes: the input unchanged
    Tensor r = output(out, 0, x.type());
    if (r.raw() != x.raw() && r.nbytes()) std::memmove(r.mutableData(), x.raw(), r.nbytes());
    return Status::OK();
  }
  Dims kept = reducedShape(x.shape(), red, true);
  int64_t outN = numElements(kept);
  int64_t count = outN ? x.numel() / outN : 0;
  Tensor r = output(out, 0, x.dtype(), reducedShape(x.shape(), red, keep));
  RETURN_IF_ERROR(visitNumeric(x.dtype(), [&]<typename T>() -> Status {
    T* py = r.mutableData<T>();
    if constexpr (kRed == Red::kMax || kRed == Red::kMin) {
      std::vector<T> acc = foldMinMax<T, kRed == Red::kMax>(x, kept, outN, x.dtype() == DType::kBool);
      for (int64_t i = 0; i < outN; ++i) py[i] = acc[i];
      return Status::OK();
    }
    const T* px = x.data<T>();
    // body(i, o) for each input element i in order, o its output slot. When
    // the reduced dims come last (kept dims of 1 aside), slot o holds the
    // run of `count` elements from o * count: no walker.
    bool trailing = true, seenReduced = false;
    for (size_t d = 0; d < red.size(); ++d) {
      if (red[d]) seenReduced = true;
      else if (seenReduced && x.shape()[d] != 1) trailing = false;
    }
    auto each = [&](auto&& body) {
      if (trailing) {
        for (int64_t o = 0, i = 0; o < outN; ++o)
          for (int64_t j = 0; j < count; ++j, ++i) body(i, o);
        return;
      }
      BroadcastWalker w(x.shape(), {kept});
      for (int64_t i = 0; i < x.numel(); ++i, w.next()) body(i, w.offset(0));
    };
    // LogSumExp subtracts each slot's (finite) max before exponentiating.
    std::vector<double> shift(outN, 0.0);
    if constexpr (kRed == Red::kLogSumExp) {
      std::vector<double> mx(outN, -INFINITY);
      each([&](int64_t i, int64_t o) {
        if (std::isfinite(static_cast<double>(px[i]))) mx[o] = std::max(mx[o], static_cast<double>(px[i]));
      });
      for (int64_t i = 0; i < outN; ++i) shift[i] = std::isfinite(mx[i]) ? mx[i] : 0.0;
    }
    std::vector<double> acc(outN, kRed == Red::kProd ? 1.0 : 0.0);
    each([&](int64_t i, int64_t o) {
      double v = static_cast<double>(px[i]);
      switch (kRed) {
        case Red::kProd: acc[o] *= v; break;
        case Red::kL1: acc[o] += std::fabs(v); break;
        case Red::kL2:
        case Red::kSumSquare: acc[o] += v * v; break;
        case Red::kLogSumExp: acc[o] += std::exp(v - shift[o]); break;
        default: acc[o] += v; break;
      }
    });
    for (int64_t i = 0; i < outN; ++i) {
      double a = acc[i];
      switch (kRed) {
        case Red::kMean:
          // The mean of no elements is NaN; integers have no NaN and get 0.
          a = count ? a / count : (std::is_floating_point_v<T> ? std::nan("") : 0.0);
          break;
        case Red::kL2: a = std::sqrt(a); break;
        case Red::kLogSum: a = std::log(a); break;
        case Red::kLogSumExp: a = std::log(a) + shift[i]; break;
        default: break;
      }
      if constexpr (!std::is_floating_point_v<T>) {
        // Integer results of log/sqrt truncate like a cast; -inf has no integer.
        if (!std::isfinite(a)) a = a < 0 ? static_cast<double>(std::numeric_limits<T>::lowest()) : 0.0;
      }
      py[i] = static_cast<T>(a);
    }
    return Status::OK();
  }));
  return Status::OK();
}

template <bool kMax>
Status computeArg(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeArg<kMax>, in, attrs, out);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, inferArg(argsFromTensors(in, attrs)));
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", 0), x.rank()));
  bool last = attrs.getInt("select_last_index", 0) != 0;
  int64_t outer, n, inner;
  splitAround(x.shape(), axis, outer, n, inner);
  Tensor r = Tensor::zeros(types[0]);
  int64_t* py = r.mutableData<int64_t>();
  RETURN_IF_ERROR(visitNumeric(x.dtype(), [&]<typename T>() -> Status {
    const T* px = x.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* xs = px + o * n * inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) {
          T v = xs[j * inner], b = xs[best * inner];
          bool better = kMax ? (v > b || (last && v == b)) : (v < b || (last && v == b));
          if (better) best = j;
        }
        py[o * inner + i] = best;
      }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerReductionOps(OpRegistry& r) {
  r.add(OpKind::ReduceSum, &computeReduce<Red::kSum>, kWritesOutputs);
  r.add(OpKind::ReduceMean, &computeReduce<Red::kMean>, kWritesOutputs);
  r.add(OpKind::ReduceMax, &computeReduce<Red::kMax>, kWritesOutputs);
  r.add(OpKind::ReduceMin, &computeReduce<Red::kMin>, kWritesOutputs);
  r.add(OpKind::ReduceProd, &computeReduce<Red::kProd>, kWritesOutputs);
  r.add(OpKind::ReduceL1, &computeReduce<Red::kL1>, kWritesOutputs);
  r.add(OpKind::ReduceL2, &computeReduce<Red::kL2>, kWritesOutputs);
  r.add(OpKind::ReduceLogSum, &computeReduce<Red::kLogSum>, kWritesOutputs);
  r.add(OpKind::ReduceLogSumExp, &computeReduce<Red::kLogSumExp>, kWritesOutputs);
  r.add(OpKind::ReduceSumSquare, &computeReduce<Red::kSumSquare>, kWritesOutputs);
  r.add(OpKind::ArgMax, &computeArg<true>);
  r.add(OpKind::ArgMin, &computeArg<false>);
}

}  // namespace pcc
