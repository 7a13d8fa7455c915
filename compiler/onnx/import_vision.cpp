// Importers of the vision op family: sampling, detection, quantized
// convolution and matrix products.
//
// Opset differences resolved here:
//   - GridSample 16 names its modes bilinear and bicubic; from opset 20 they
//     are linear and cubic (and any number of spatial dims is allowed);
//   - RoiAlign 10 has no coordinate_transformation_mode: it computes what
//     output_half_pixel names from opset 16 on (whose default is half_pixel);
//   - Unique gets `num_outputs`, the count of its ONNX outputs (1 to 4).
#include "compiler/onnx/import_util.h"

namespace pcc {

namespace {

Status importGridSample(C& c) {
  AttrMap a = c.keep({"align_corners", "padding_mode"});
  std::string mode = c.attrs().getString("mode", c.opset() >= 20 ? "linear" : "bilinear");
  if (c.opset() < 20) {
    if (mode == "bilinear") mode = "linear";
    else if (mode == "bicubic") mode = "cubic";
    else if (mode != "nearest") return c.invalid("unknown mode '", mode, "' (expected bilinear, nearest or bicubic)");
  }
  a.set("mode", mode);
  return c.emitNode(OpKind::GridSample, allInputs(c), a);
}

Status importRoiAlign(C& c) {
  AttrMap a = c.keep({"coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio",
                      "spatial_scale"});
  if (c.opset() < 16) a.set("coordinate_transformation_mode", std::string("output_half_pixel"));
  return c.emitNode(OpKind::RoiAlign, allInputs(c), a);
}

Status importUnique(C& c) {
  AttrMap a = c.keep({"axis", "sorted"});
  a.set("num_outputs", static_cast<int64_t>(std::max<size_t>(c.numOutputs(), 1)));
  return c.emitNode(OpKind::Unique, allInputs(c), a);
}

}  // namespace

std::vector<ImporterEntry> visionImporters() {
  return {
      {"GridSample", 16, importGridSample},
      {"RoiAlign", 10, importRoiAlign},
      {"Unique", 11, importUnique},
  };
}

}  // namespace pcc
