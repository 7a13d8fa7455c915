// Ops that generate or rearrange values along an axis or a diagonal: Range,
// CumSum, Trilu, OneHot, EyeLike; and CastLike, which is Cast with the target
// type taken from a second input.
// Their type inference is runtime/schema/math_generate.cpp.
#include <cmath>
#include <cstring>

#include "runtime/ops/math.h"
#include "runtime/schema/math_generate.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_generate_schema;

Status computeCastLike(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                       std::vector<Tensor>& out) {
  // One conversion routine for both ops: Cast's kernel with `to` set, and
  // CastLike's saturate and round_mode passed on.
  const KernelEntry* cast = referenceKernel(OpKind::Cast);
  if (!cast || !cast->compute) return internalError("CastLike needs the Cast kernel");
  AttrMap a = attrs;
  a.set("to", static_cast<int64_t>(in[1]->dtype()));
  return cast->compute({in[0]}, a, out);
}

Status computeRange(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  DType dt = in[0]->dtype();
  ASSIGN_OR_RETURN(int64_t n, rangeCount(in[0]->getDouble(0), in[1]->getDouble(0), in[2]->getDouble(0)));
  Tensor r = Tensor::zeros(dt, {n});
  RETURN_IF_ERROR(visitNumeric(dt, [&]<typename T>() -> Status {
    T start = in[0]->data<T>()[0], delta = in[2]->data<T>()[0];
    T* o = r.mutableData<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

/// \returns (outer, extent, inner): the element counts before, along and after `axis`.
std::tuple<int64_t, int64_t, int64_t> splitAtAxis(const Dims& shape, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  return {outer, shape[axis], inner};
}

Status computeCumSum(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeCumSum, in, attrs, out);
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(in[1]->getInt(0), x.rank()));
  bool exclusive = attrs.getInt("exclusive", 0) != 0;
  bool reverse = attrs.getInt("reverse", 0) != 0;
  // Plain variables: clang 14 cannot capture structured bindings in a lambda.
  auto split = splitAtAxis(x.shape(), axis);
  int64_t outer = std::get<0>(split), extent = std::get<1>(split), inner = std::get<2>(split);
  Tensor r = Tensor::zeros(x.type());
  RETURN_IF_ERROR(visitNumeric(x.dtype(), [&]<typename T>() -> Status {
    const T* p = x.data<T>();
    T* o = r.mutableData<T>();
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t b = 0; b < inner; ++b) {
        T acc = T(0);
        for (int64_t s = 0; s < extent; ++s) {
          int64_t k = reverse ? extent - 1 - s : s;
          int64_t idx = (a * extent + k) * inner + b;
          if (exclusive) {
            o[idx] = acc;
            acc = static_cast<T>(acc + p[idx]);
          } else {
            acc = static_cast<T>(acc + p[idx]);
            o[idx] = acc;
          }
        }
      }
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeTrilu(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                    std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  int64_t k = in.size() > 1 && in[1] ? in[1]->getInt(0) : 0;
  bool upper = attrs.getInt("upper", 1) != 0;
  int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
  size_t es = dtypeSize(x.dtype());
  Tensor r = Tensor::zeros(x.type());  // dropped elements stay zero
  const char* p = static_cast<const char*>(x.raw());
  char* o = static_cast<char*>(r.mutableData());
  int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) continue;
        int64_t idx = (m * rows + i) * cols + j;
        std::memcpy(o + idx * es, p + idx * es, es);
      }
    }
  }
  out.push_back(std::move(r));
  return Status::OK();
}

Status computeOneHot(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                     std::vector<Tensor>& out) {
  const Tensor &ind = *in[0], &vals = *in[2];
  int64_t depth = static_cast<int64_t>(in[1]->getDouble(0));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis", -1), ind.rank() + 1));
  Dims shape = ind.shape();
  shape.insert(shape.begin() + axis, depth);
  Tensor r = Tensor::zeros(vals.dtype(), shape);
  size_t es = dtypeSize(vals.dtype());
  const char* off = static_cast<const char*>(vals.raw());
  const char* on = off + es;
  char* o = static_cast<char*>(r.mutableData());
  // Output index (a, d, b) where (a, b) is the index split at `axis`.
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= ind.shape()[i];
  for (int64_t i = axis; i < ind.rank(); ++i) inner *= ind.shape()[i];
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < inner; ++b) {
      // Float indices truncate toward zero; negative ones count from the end.
      int64_t hot = static_cast<int64_t>(ind.getDouble(a * inner + b));
      if (hot < 0) hot += depth;
      for (int64_t d = 0; d < depth; ++d)
        std::memcpy(o + ((a * depth + d) * inner + b) * es, d == hot ? on : off, es);
    }
  }
  out.push_back(std::move(r));
  return Status::OK();
}

/// \returns the bytes of the value 1 in dtype `t` (at most 8).
std::vector<char> oneOf(DType t) {
  Tensor one = Tensor::zeros(t, {});
  if (t != DType::kUndefined) one.setDouble(0, 1.0);
  const char* p = static_cast<const char*>(one.raw());
  return std::vector<char>(p, p + one.nbytes());
}

Status computeEyeLike(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                      std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(DType dt, eyeLikeType(&attrs, in[0]->dtype()));
  int64_t rows = in[0]->shape()[0], cols = in[0]->shape()[1];
  int64_t k = attrs.getInt("k", 0);
  Tensor r = Tensor::zeros(dt, in[0]->shape());
  std::vector<char> one = oneOf(dt);
  char* o = static_cast<char*>(r.mutableData());
  for (int64_t i = 0; i < rows; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < cols) std::memcpy(o + (i * cols + j) * one.size(), one.data(), one.size());
  }
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerMathGenerateOps(OpRegistry& r) {
  r.add(OpKind::CastLike, &computeCastLike);
  r.add(OpKind::Range, &computeRange);
  r.add(OpKind::CumSum, &computeCumSum);
  r.add(OpKind::Trilu, &computeTrilu);
  r.add(OpKind::OneHot, &computeOneHot);
  r.add(OpKind::EyeLike, &computeEyeLike);
}

}  // namespace pcc
