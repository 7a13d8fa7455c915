// Einsum: a general Einstein summation, computed directly.
//
// 1. The equation is parsed into one label list per operand and one for the
//    output. Letters are labels; an ellipsis stands for the operand's leading
//    unnamed dims, which are broadcast across operands right-aligned and get
//    labels of their own. Without "->" the output is the ellipsis dims followed
//    by the letters used exactly once, in alphabetical order.
// 2. Each label gets one size; a size-1 dim broadcasts against a larger one.
// 3. An odometer walks every combination of label values, output labels
//    outermost; each operand's element offset is the sum of the strides of its
//    labels, so a label repeated within one operand walks its diagonal.
// Their type inference is runtime/schema/reduce_norm_einsum.cpp.
#include <algorithm>
#include <array>
#include <string>

#include "runtime/ops/reduce_norm.h"
#include "runtime/schema/reduce_norm_einsum.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::reduce_norm_einsum_schema;

Status computeEinsum(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeEinsum, in, attrs, out);
  std::vector<Dims> shapes;
  for (const Tensor* t : in) shapes.push_back(t->shape());
  ASSIGN_OR_RETURN(EinsumPlan p, planEinsum(attrs.getString("equation", ""), shapes));
  // Walk order: output labels, then the summed ones.
  std::vector<int> order = p.output;
  std::vector<bool> isOut(p.numLabels, false);
  for (int l : p.output) isOut[l] = true;
  for (const auto& ls : p.operands)
    for (int l : ls)
      if (!isOut[l] && std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  // Stride of each walked label in each operand (0 where broadcast or absent).
  size_t nOps = in.size(), nWalk = order.size();
  std::vector<std::vector<int64_t>> strides(nOps, std::vector<int64_t>(nWalk, 0));
  for (size_t k = 0; k < nOps; ++k) {
    std::vector<int64_t> st = stridesOf(shapes[k]);
    for (size_t d = 0; d < p.operands[k].size(); ++d) {
      if (shapes[k][d] == 1) continue;
      size_t w = std::find(order.begin(), order.end(), p.operands[k][d]) - order.begin();
      strides[k][w] += st[d];
    }
  }
  Dims walk;
  for (int l : order) walk.push_back(p.sizes[l]);
  Dims outShape(walk.begin(), walk.begin() + p.output.size());
  int64_t outN = numElements(outShape), total = numElements(walk);
  int64_t perOut = outN ? total / outN : 0;
  Tensor r = Tensor::zeros(in[0]->dtype(), outShape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    T* py = r.mutableData<T>();
    std::vector<int64_t> idx(nWalk, 0), off(nOps, 0);
    for (int64_t o = 0; o < outN; ++o) {
      double acc = 0;
      for (int64_t s = 0; s < perOut; ++s) {
        double prod = 1;
        for (size_t k = 0; k < nOps; ++k) prod *= static_cast<double>(in[k]->data<T>()[off[k]]);
        acc += prod;
        for (size_t d = nWalk; d-- > 0;) {  // odometer step
          for (size_t k = 0; k < nOps; ++k) off[k] += strides[k][d];
          if (++idx[d] < walk[d]) break;
          for (size_t k = 0; k < nOps; ++k) off[k] -= strides[k][d] * walk[d];
          idx[d] = 0;
        }
      }
      py[o] = static_cast<T>(acc);
    }
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

void registerEinsumOps(OpRegistry& r) {
  r.add(OpKind::Einsum, &computeEinsum);
}

}  // namespace pcc
