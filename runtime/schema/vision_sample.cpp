// Type inference (the op schemas) of GridSample, AffineGrid, RoiAlign and
// DeformConv. Their reference kernels, and what the kernels compute, are
// runtime/ops/vision_sample.cpp.
#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/vision_sample.h"

namespace pcc {

namespace ops::vision_sample_schema {

StatusOr<GridSampleParams> gridSampleParams(const AttrMap& attrs) {
  GridSampleParams p;
  std::string mode = attrs.getString("mode", "linear");
  if (mode == "nearest") p.interp = Interp::kNearest;
  else if (mode == "linear") p.interp = Interp::kLinear;
  else if (mode == "cubic") p.interp = Interp::kCubic;
  else return invalidInput("GridSample: unknown mode '", mode, "' (expected linear, nearest or cubic)");
  std::string pad = attrs.getString("padding_mode", "zeros");
  if (pad == "zeros") p.padding = Padding::kZeros;
  else if (pad == "border") p.padding = Padding::kBorder;
  else if (pad == "reflection") p.padding = Padding::kReflection;
  else return invalidInput("GridSample: unknown padding_mode '", pad, "' (expected zeros, border or reflection)");
  p.alignCorners = attrs.getInt("align_corners", 0) != 0;
  return p;
}

StatusOr<std::vector<TensorType>> inferGridSample(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType &x = args.inputs[0], &grid = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "GridSample input X"));
  RETURN_IF_ERROR(checkDType(grid, kFloatTypes, "GridSample grid"));
  RETURN_IF_ERROR(gridSampleParams(attrsOrEmpty(args)).status());
  int64_t r = x.rank() - 2;
  if (r < 1 || grid.rank() != r + 2 || grid.shape[0] != x.shape[0] || grid.shape.back() != r)
    return invalidInput("GridSample: grid ", grid.str(), " must be [N, D1_out..Dr_out, r] for input ", x.str());
  Dims out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), grid.shape.begin() + 1, grid.shape.end() - 1);
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferAffineGrid(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  const TensorType& theta = args.inputs[0];
  RETURN_IF_ERROR(checkDType(theta, kFloatTypes, "AffineGrid theta"));
  RETURN_IF_ERROR(checkIndexType(args.inputs[1], "AffineGrid size"));
  if (!args.constInputs[1]) return notConstant("AffineGrid", "input 'size'");
  std::vector<int64_t> size = args.constInputs[1]->toInts();
  if (size.size() != 4 && size.size() != 5)
    return invalidInput("AffineGrid: size must be [N,C,H,W] or [N,C,D,H,W], got ", dimsToString(size));
  int64_t r = static_cast<int64_t>(size.size()) - 2;
  if (theta.shape != Dims{size[0], r, r + 1})
    return invalidInput("AffineGrid: theta ", theta.str(), " must be [", size[0], ",", r, ",", r + 1, "] for size ",
                        dimsToString(size));
  for (int64_t d : size)
    if (d < 0) return invalidInput("AffineGrid: negative size ", dimsToString(size));
  Dims out = {size[0]};
  out.insert(out.end(), size.begin() + 2, size.end());
  out.push_back(r);
  return std::vector<TensorType>{{theta.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferRoiAlign(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  const TensorType &x = args.inputs[0], &rois = args.inputs[1], &bi = args.inputs[2];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "RoiAlign input X"));
  if (rois.dtype != x.dtype) return invalidInput("RoiAlign: rois ", rois.str(), " must have the type of X ", x.str());
  RETURN_IF_ERROR(checkIndexType(bi, "RoiAlign batch_indices"));
  if (x.rank() != 4 || rois.rank() != 2 || rois.shape[1] != 4 || bi.shape != Dims{rois.shape[0]})
    return invalidInput("RoiAlign: expected X [N,C,H,W], rois [R,4], batch_indices [R], got ", x.str(), ", ",
                        rois.str(), ", ", bi.str());
  const AttrMap& a = attrsOrEmpty(args);
  std::string mode = a.getString("mode", "avg"), ctm = a.getString("coordinate_transformation_mode", "half_pixel");
  if (mode != "avg" && mode != "max") return invalidInput("RoiAlign: unknown mode '", mode, "'");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return invalidInput("RoiAlign: unknown coordinate_transformation_mode '", ctm, "'");
  int64_t oh = a.getInt("output_height", 1), ow = a.getInt("output_width", 1);
  if (oh <= 0 || ow <= 0) return invalidInput("RoiAlign: output_height and output_width must be positive");
  return std::vector<TensorType>{{x.dtype, {rois.shape[0], x.shape[1], oh, ow}}};
}

StatusOr<DeformGeometry> deformGeometry(const InferArgs& args) {
  const TensorType &x = args.inputs[0], &w = args.inputs[1], &off = args.inputs[2];
  if (x.rank() != 4 || w.rank() != 4)
    return unsupported("DeformConv: only 2-D inputs [N,C,H,W] are supported, got X ", x.str(), " and W ", w.str());
  const AttrMap& a = attrsOrEmpty(args);
  DeformGeometry d;
  d.group = a.getInt("group", 1);
  d.offsetGroup = a.getInt("offset_group", 1);
  int64_t c = x.shape[1], m = w.shape[0];
  if (d.group <= 0 || d.offsetGroup <= 0 || m % d.group != 0 || w.shape[1] * d.group != c || c % d.offsetGroup != 0)
    return invalidInput("DeformConv: W ", w.str(), ", group ", d.group, " and offset_group ", d.offsetGroup,
                        " do not fit input ", x.str());
  Dims kernel(w.shape.begin() + 2, w.shape.end());
  if (a.has("kernel_shape") && a.getInts("kernel_shape") != kernel)
    return invalidInput("DeformConv: kernel_shape ", dimsToString(a.getInts("kernel_shape")), " differs from W ",
                        w.str());
  ASSIGN_OR_RETURN(d.g, windowGeometry(Dims(x.shape.begin() + 2, x.shape.end()), kernel, a, false));
  int64_t taps = kernel[0] * kernel[1];
  Dims want = {x.shape[0], d.offsetGroup * 2 * taps, d.g.out[0], d.g.out[1]};
  if (off.shape != want) return invalidInput("DeformConv: offset ", off.str(), " must be ", dimsToString(want));
  if (args.has(3) && args.inputs[3].shape != Dims{m})
    return invalidInput("DeformConv: bias ", args.inputs[3].str(), " must be [", m, "]");
  want[1] = d.offsetGroup * taps;
  if (args.has(4) && args.inputs[4].shape != want)
    return invalidInput("DeformConv: mask ", args.inputs[4].str(), " must be ", dimsToString(want));
  return d;
}

StatusOr<std::vector<TensorType>> inferDeformConv(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 5));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "DeformConv input X"));
  for (size_t i = 1; i < args.inputs.size(); ++i)
    if (args.has(i) && args.inputs[i].dtype != x.dtype)
      return invalidInput("DeformConv: input ", i, " ", args.inputs[i].str(), " must have the type of X ", x.str());
  ASSIGN_OR_RETURN(DeformGeometry d, deformGeometry(args));
  return std::vector<TensorType>{{x.dtype, {x.shape[0], args.inputs[1].shape[0], d.g.out[0], d.g.out[1]}}};
}

}  // namespace ops::vision_sample_schema

namespace {
using namespace ops;
using namespace ops::vision_sample_schema;

}  // namespace

void registerVisionSampleSchemas(SchemaRegistry& r) {
  r.add(OpKind::GridSample, &inferGridSample);
  r.add(OpKind::AffineGrid, &inferAffineGrid);
  r.add(OpKind::RoiAlign, &inferRoiAlign);
  r.add(OpKind::DeformConv, &inferDeformConv);
}

}  // namespace pcc
