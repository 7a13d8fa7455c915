// Reference kernels of the reduce_norm op family: the registration hook and
// the axis helpers shared by the reduce_norm*.cpp kernel files.
#include "runtime/ops/reduce_norm.h"

namespace pcc {
namespace ops {

void splitAround(const Dims& shape, int64_t axis, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  n = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
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

}  // namespace ops

void registerReduceNormOps(OpRegistry& r) {
  registerReductionOps(r);
  registerSelectionOps(r);
  registerNormalizationOps(r);
  registerEinsumOps(r);
  registerAttentionOps(r);
}

}  // namespace pcc
