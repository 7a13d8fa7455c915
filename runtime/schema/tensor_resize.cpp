// Type inference (the op schemas) of Resize. Their reference kernels, and what
// the kernels compute, are runtime/ops/tensor_resize.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/schema/checked_int.h"
#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/tensor_resize.h"

namespace pcc {

namespace ops::tensor_resize_schema {

StatusOr<std::vector<double>> optionalConstValues(const InferArgs& args, size_t i, const char* name) {
  if (!args.has(i) || args.inputs[i].numel() == 0) return std::vector<double>{};
  const Tensor* t = i < args.constInputs.size() ? args.constInputs[i] : nullptr;
  if (!t)
    return invalidInput("input ", i, " ('", name,
                        "') must be a constant: the output shape depends on its values");
  if (t->rank() != 1) return invalidInput("input ", i, " ('", name, "') must be 1-D, got ", t->type().str());
  std::vector<double> v(t->numel());
  for (int64_t k = 0; k < t->numel(); ++k) v[k] = t->getDouble(k);
  return v;
}

bool oneOf(const std::string& s, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (s == o) return true;
  return false;
}

StatusOr<ResizePlan> resizePlan(const InferArgs& args) {
  const TensorType& x = args.inputs[0];
  const AttrMap& a = attrsOrEmpty(args);
  int64_t rank = x.rank();
  ResizePlan p;
  p.mode = a.getString("mode", "nearest");
  p.ctm = a.getString("coordinate_transformation_mode", "half_pixel");
  p.nearestMode = a.getString("nearest_mode", "round_prefer_floor");
  p.cubicA = a.getFloat("cubic_coeff_a", -0.75f);
  p.extrapolation = a.getFloat("extrapolation_value", 0.f);
  p.excludeOutside = a.getInt("exclude_outside", 0) != 0;
  p.antialias = a.getInt("antialias", 0) != 0;
  std::string policy = a.getString("keep_aspect_ratio_policy", "stretch");
  if (!oneOf(p.mode, {"nearest", "linear", "cubic"}))
    return invalidInput("unknown mode '", p.mode, "' (expected nearest, linear or cubic)");
  if (!oneOf(p.ctm, {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                     "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"}))
    return invalidInput("unknown coordinate_transformation_mode '", p.ctm, "'");
  if (!oneOf(p.nearestMode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}))
    return invalidInput("unknown nearest_mode '", p.nearestMode, "'");
  if (!oneOf(policy, {"stretch", "not_larger", "not_smaller"}))
    return invalidInput("unknown keep_aspect_ratio_policy '", policy, "'");
  if (p.mode != "nearest" && x.dtype == DType::kBool)
    return invalidInput("mode ", p.mode, " cannot interpolate ", x.str());

  std::vector<int64_t> axes = a.getInts("axes");
  if (!a.has("axes"))
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  std::vector<bool> seen(rank, false);
  for (int64_t& ax : axes) {
    ASSIGN_OR_RETURN(ax, normalizeAxis(ax, rank));
    if (seen[ax]) return invalidInput("axes ", dimsToString(a.getInts("axes")), " repeat an axis");
    seen[ax] = true;
  }
  size_t n = axes.size();
  ASSIGN_OR_RETURN(std::vector<double> roi, optionalConstValues(args, 1, "roi"));
  ASSIGN_OR_RETURN(std::vector<double> scales, optionalConstValues(args, 2, "scales"));
  ASSIGN_OR_RETURN(std::vector<double> sizes, optionalConstValues(args, 3, "sizes"));
  if (scales.empty() == sizes.empty())
    return invalidInput("exactly one of 'scales' and 'sizes' must be given (non-empty)");
  if (!scales.empty() && scales.size() != n)
    return invalidInput("scales has ", scales.size(), " values for ", n, " resized axes of ", x.str());
  if (!sizes.empty() && sizes.size() != n)
    return invalidInput("sizes has ", sizes.size(), " values for ", n, " resized axes of ", x.str());

  p.roiStart.assign(rank, 0.0);
  p.roiEnd.assign(rank, 1.0);
  if (p.ctm == "tf_crop_and_resize") {
    if (roi.size() != 2 * n)
      return invalidInput("tf_crop_and_resize needs a constant roi of ", 2 * n, " values, got ",
                          roi.size());
    for (size_t i = 0; i < n; ++i) {
      p.roiStart[axes[i]] = roi[i];
      p.roiEnd[axes[i]] = roi[n + i];
    }
  }

  p.scale.assign(rank, 1.0);
  p.outShape = x.shape;
  p.resized.assign(rank, false);
  if (!scales.empty()) {
    for (size_t i = 0; i < n; ++i) {
      int64_t ax = axes[i];
      if (!(scales[i] > 0)) return invalidInput("scale ", scales[i], " must be positive");
      p.scale[ax] = scales[i];
      double span = p.ctm == "tf_crop_and_resize" ? p.roiEnd[ax] - p.roiStart[ax] : 1.0;
      CheckedInt size = CheckedInt::truncate(std::floor(x.shape[ax] * span * scales[i]));
      if (size.overflowed())
        return invalidInput("scale ", scales[i], " makes dim ", ax, " of ", x.str(), " overflow int64");
      p.outShape[ax] = size.value();
    }
  } else {
    for (size_t i = 0; i < n; ++i)
      if (sizes[i] < 0) return invalidInput("sizes has a negative value ", sizes[i]);
    if (policy == "stretch") {
      for (size_t i = 0; i < n; ++i) {
        int64_t ax = axes[i];
        CheckedInt size = CheckedInt::truncate(sizes[i]);
        if (size.overflowed()) return invalidInput("sizes value ", sizes[i], " overflows int64");
        p.outShape[ax] = size.value();
        p.scale[ax] = x.shape[ax] == 0 ? 1.0 : sizes[i] / static_cast<double>(x.shape[ax]);
      }
    } else {
      // One scale for all listed axes: the largest that fits (not_larger) or the
      // smallest that covers (not_smaller); sizes round half up.
      double s = policy == "not_larger" ? INFINITY : 0.0;
      for (size_t i = 0; i < n; ++i) {
        double r = sizes[i] / static_cast<double>(x.shape[axes[i]]);
        s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (int64_t ax : axes) {
        p.scale[ax] = s;
        CheckedInt size = CheckedInt::truncate(std::floor(s * x.shape[ax] + 0.5));
        if (size.overflowed())
          return invalidInput("sizes make dim ", ax, " of ", x.str(), " overflow int64 (scale ", s, ")");
        p.outShape[ax] = size.value();
      }
    }
  }
  p.width.resize(rank);
  for (int64_t d = 0; d < rank; ++d) {
    p.width[d] = p.scale[d] * static_cast<double>(x.shape[d]);
    bool identity = p.outShape[d] == x.shape[d] && p.scale[d] == 1.0 &&
                    (p.ctm != "tf_crop_and_resize" || (p.roiStart[d] == 0 && p.roiEnd[d] == 1)) &&
                    p.ctm != "tf_half_pixel_for_nn";
    p.resized[d] = !identity;
    if (p.resized[d] && x.shape[d] == 0 && p.outShape[d] > 0)
      return invalidInput("cannot resize the empty dim ", d, " of ", x.str());
  }
  return p;
}

}  // namespace ops::tensor_resize_schema

namespace {
using namespace ops;
using namespace ops::tensor_resize_schema;

StatusOr<std::vector<TensorType>> inferResize(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 4));
  ASSIGN_OR_RETURN(ResizePlan p, resizePlan(args));
  return std::vector<TensorType>{{args.inputs[0].dtype, p.outShape}};
}

}  // namespace

void registerTensorResizeSchemas(SchemaRegistry& r) {
  r.add(OpKind::Resize, &inferResize);
}

}  // namespace pcc
