// Type inference (the op schemas) of NonMaxSuppression, Unique, CenterCropPad,
// MaxUnpool, Col2Im, TensorScatter, Det and Swish. Their reference kernels, and
// what the kernels compute, are runtime/ops/vision_select.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/vision_select.h"

namespace pcc {

namespace ops::vision_select_schema {

StatusOr<std::vector<std::array<int64_t, 3>>> nmsSelect(const std::vector<const Tensor*>& in,
                                                       const AttrMap& attrs) {
  const Tensor &boxesT = *in[0], &scoresT = *in[1];
  int64_t batches = boxesT.shape()[0], numBoxes = boxesT.shape()[1], classes = scoresT.shape()[1];
  auto scalarIn = [&](size_t i) -> const Tensor* {
    const Tensor* t = optionalInput(in, i);
    return t && t->numel() > 0 ? t : nullptr;
  };
  int64_t maxOut = scalarIn(2) ? std::max<int64_t>(scalarIn(2)->getInt(0), 0) : 0;
  double iouThreshold = scalarIn(3) ? scalarIn(3)->getDouble(0) : 0.0;
  const Tensor* scoreThreshold = scalarIn(4);
  bool centerBox = attrs.getInt("center_point_box", 0) != 0;
  std::vector<double> boxes = toDoubles(boxesT), scores = toDoubles(scoresT);

  // A box as (ymin, xmin, ymax, xmax).
  auto corners = [&](int64_t b, int64_t i) {
    const double* p = boxes.data() + (b * numBoxes + i) * 4;
    if (centerBox)
      return std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    return std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]),
                                 std::max(p[1], p[3])};
  };
  auto suppresses = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    double iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    double inter = ih * iw;
    double areaA = (a[2] - a[0]) * (a[3] - a[1]), areaB = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = areaA + areaB - inter;
    if (areaA <= 0 || areaB <= 0 || uni <= 0) return false;
    return inter / uni > iouThreshold;
  };

  std::vector<std::array<int64_t, 3>> selected;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = scores.data() + (b * classes + c) * numBoxes;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < numBoxes; ++i)
        if (!scoreThreshold || s[i] > scoreThreshold->getDouble(0)) cand.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<std::array<double, 4>> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= maxOut) break;
        std::array<double, 4> box = corners(b, i);
        if (std::any_of(kept.begin(), kept.end(), [&](const auto& k) { return suppresses(box, k); })) continue;
        kept.push_back(box);
        selected.push_back({b, c, i});
      }
    }
  return selected;
}

Status checkNmsInputs(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 5));
  const TensorType &boxes = args.inputs[0], &scores = args.inputs[1];
  RETURN_IF_ERROR(checkDType(boxes, kFloatTypes, "NonMaxSuppression boxes"));
  RETURN_IF_ERROR(checkDType(scores, kFloatTypes, "NonMaxSuppression scores"));
  if (boxes.rank() != 3 || boxes.shape[2] != 4 || scores.rank() != 3 || scores.shape[0] != boxes.shape[0] ||
      scores.shape[2] != boxes.shape[1])
    return invalidInput("NonMaxSuppression: expected boxes [B,N,4] and scores [B,C,N], got ", boxes.str(), " and ",
                        scores.str());
  if (args.has(2)) RETURN_IF_ERROR(checkIndexType(args.inputs[2], "max_output_boxes_per_class"));
  for (size_t i = 2; i < 5; ++i)
    if (args.has(i) && args.inputs[i].numel() > 1)
      return invalidInput("NonMaxSuppression: input ", i, " must hold one value, got ", args.inputs[i].str());
  return Status::OK();
}

StatusOr<UniqueResult> uniqueOf(const Tensor& x, const AttrMap& attrs) {
  UniqueResult u;
  int64_t outer = 1, slices = x.numel(), inner = 1;
  if (attrs.has("axis")) {
    ASSIGN_OR_RETURN(u.axis, normalizeAxis(attrs.getInt("axis", 0), x.rank(), "Unique axis"));
    slices = x.shape()[u.axis];
    for (int64_t i = 0; i < u.axis; ++i) outer *= x.shape()[i];
    for (int64_t i = u.axis + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  }
  // Slice s as a vector of values, in row-major order of the other axes.
  std::vector<double> v = toDoubles(x);
  auto key = [&](int64_t s) {
    std::vector<double> k;
    k.reserve(static_cast<size_t>(outer * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) k.push_back(v[static_cast<size_t>((o * slices + s) * inner + i)]);
    return k;
  };
  std::map<std::vector<double>, int64_t> seen;  // slice -> index into first
  std::vector<int64_t> group(static_cast<size_t>(slices));
  for (int64_t s = 0; s < slices; ++s) {
    auto [it, fresh] = seen.emplace(key(s), static_cast<int64_t>(u.first.size()));
    if (fresh) {
      u.first.push_back(s);
      u.counts.push_back(0);
    }
    group[static_cast<size_t>(s)] = it->second;
    ++u.counts[static_cast<size_t>(it->second)];
  }
  // Order of the output: first occurrence, or ascending (map order) if sorted.
  std::vector<int64_t> rank(u.first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (attrs.getInt("sorted", 1) != 0) {
    int64_t pos = 0;
    for (const auto& kv : seen) rank[static_cast<size_t>(kv.second)] = pos++;
    std::vector<int64_t> first(u.first.size()), counts(u.first.size());
    for (size_t g = 0; g < u.first.size(); ++g) {
      first[static_cast<size_t>(rank[g])] = u.first[g];
      counts[static_cast<size_t>(rank[g])] = u.counts[g];
    }
    u.first = std::move(first);
    u.counts = std::move(counts);
  }
  for (int64_t s = 0; s < slices; ++s) u.inverse.push_back(rank[static_cast<size_t>(group[static_cast<size_t>(s)])]);
  return u;
}

std::vector<TensorType> uniqueTypes(const TensorType& x, const UniqueResult& u, int64_t numOutputs) {
  auto n = static_cast<int64_t>(u.first.size());
  Dims y = {n};
  if (u.axis >= 0) {
    y = x.shape;
    y[u.axis] = n;
  }
  std::vector<TensorType> t = {{x.dtype, y},
                               {DType::kI64, {n}},
                               {DType::kI64, {static_cast<int64_t>(u.inverse.size())}},
                               {DType::kI64, {n}}};
  t.resize(static_cast<size_t>(numOutputs));
  return t;
}

StatusOr<int64_t> uniqueOutputs(const AttrMap& attrs) {
  int64_t n = attrs.getInt("num_outputs", 4);
  if (n < 1 || n > 4) return invalidInput("Unique: num_outputs must be 1 to 4, got ", n);
  return n;
}

StatusOr<std::vector<std::vector<int64_t>>> centerCropPadMaps(const TensorType& x, const std::vector<int64_t>& shape,
                                                              const AttrMap& attrs) {
  std::vector<int64_t> axes = attrs.getInts("axes", {});
  if (!attrs.has("axes")) {
    axes.resize(static_cast<size_t>(x.rank()));
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (shape.size() != axes.size())
    return invalidInput("CenterCropPad: shape ", dimsToString(shape), " must have one value per axis (",
                        axes.size(), " axes) of input ", x.str());
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(x.rank()));
  for (int64_t a = 0; a < x.rank(); ++a) {
    maps[static_cast<size_t>(a)].resize(static_cast<size_t>(x.shape[a]));
    std::iota(maps[static_cast<size_t>(a)].begin(), maps[static_cast<size_t>(a)].end(), 0);
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t a, normalizeAxis(axes[i], x.rank(), "CenterCropPad axis"));
    int64_t dim = x.shape[a], want = shape[i];
    if (want < 0) return invalidInput("CenterCropPad: negative target size ", want);
    // Cropping drops (dim - want) / 2 leading elements, padding adds (want - dim) / 2.
    int64_t shift = want <= dim ? (dim - want) / 2 : -((want - dim) / 2);
    auto& m = maps[static_cast<size_t>(a)];
    m.resize(static_cast<size_t>(want));
    for (int64_t o = 0; o < want; ++o) {
      int64_t s = o + shift;
      m[static_cast<size_t>(o)] = s >= 0 && s < dim ? s : -1;
    }
  }
  return maps;
}

StatusOr<Dims> unpoolShape(const TensorType& x, const AttrMap& attrs) {
  int64_t n = x.rank() - 2;
  Dims k = attrs.getInts("kernel_shape", {});
  Dims s = attrs.getInts("strides", Dims(static_cast<size_t>(n), 1));
  Dims p = attrs.getInts("pads", Dims(static_cast<size_t>(2 * n), 0));
  if (n < 1 || static_cast<int64_t>(k.size()) != n || static_cast<int64_t>(s.size()) != n ||
      static_cast<int64_t>(p.size()) != 2 * n)
    return invalidInput("MaxUnpool: kernel_shape, strides (", n, " values) and pads (", 2 * n,
                        ") must fit input ", x.str());
  Dims out = {x.shape[0], x.shape[1]};
  for (int64_t i = 0; i < n; ++i) out.push_back((x.shape[i + 2] - 1) * s[i] - p[i] - p[i + n] + k[i]);
  return out;
}

StatusOr<std::vector<TensorType>> inferMaxUnpool(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const TensorType &x = args.inputs[0], &idx = args.inputs[1];
  RETURN_IF_ERROR(checkDType(x, kNumericTypes, "MaxUnpool input X"));
  if (idx.dtype != DType::kI64 || idx.shape != x.shape)
    return invalidInput("MaxUnpool: indices ", idx.str(), " must be i64 of X's shape ", x.str());
  ASSIGN_OR_RETURN(Dims out, unpoolShape(x, attrsOrEmpty(args)));
  if (args.has(2)) {
    if (!args.constInputs[2]) return notConstant("MaxUnpool", "input 'output_shape'");
    Dims given = args.constInputs[2]->toInts();
    if (given.size() != out.size())
      return invalidInput("MaxUnpool: output_shape ", dimsToString(given), " must have rank ", out.size());
    out = given;
  }
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<Col2ImGeometry> col2imGeometry(const InferArgs& args) {
  const TensorType& x = args.inputs[0];
  for (size_t i : {size_t(1), size_t(2)}) {
    RETURN_IF_ERROR(checkIndexType(args.inputs[i], i == 1 ? "Col2Im image_shape" : "Col2Im block_shape"));
    if (!args.constInputs[i]) return notConstant("Col2Im", i == 1 ? "input 'image_shape'" : "input 'block_shape'");
  }
  Col2ImGeometry g;
  g.image = args.constInputs[1]->toInts();
  g.block = args.constInputs[2]->toInts();
  auto n = g.image.size();
  const AttrMap& a = attrsOrEmpty(args);
  g.dil = a.getInts("dilations", Dims(n, 1));
  g.pads = a.getInts("pads", Dims(2 * n, 0));
  g.strides = a.getInts("strides", Dims(n, 1));
  if (n == 0 || g.block.size() != n || g.dil.size() != n || g.pads.size() != 2 * n || g.strides.size() != n)
    return invalidInput("Col2Im: image_shape ", dimsToString(g.image), ", block_shape ", dimsToString(g.block),
                        ", dilations, pads and strides do not agree in rank");
  int64_t blockSize = numElements(g.block), total = 1;
  for (size_t i = 0; i < n; ++i) {
    int64_t span = g.dil[i] * (g.block[i] - 1) + 1;
    if (g.strides[i] <= 0 || g.dil[i] <= 0 || g.block[i] <= 0)
      return invalidInput("Col2Im: block sizes, strides and dilations must be positive");
    int64_t b = (g.image[i] + g.pads[i] + g.pads[i + n] - span) / g.strides[i] + 1;
    g.blocks.push_back(b);
    total *= b;
  }
  if (x.rank() != 3 || blockSize == 0 || x.shape[1] % blockSize != 0 || x.shape[2] != total)
    return invalidInput("Col2Im: input ", x.str(), " must be [N, C*", blockSize, ", ", total, "] for image ",
                        dimsToString(g.image), " and block ", dimsToString(g.block));
  return g;
}

StatusOr<std::vector<TensorType>> inferCol2Im(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, 3));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kNumericTypes, "Col2Im input"));
  ASSIGN_OR_RETURN(Col2ImGeometry g, col2imGeometry(args));
  const TensorType& x = args.inputs[0];
  Dims out = {x.shape[0], x.shape[1] / numElements(g.block)};
  out.insert(out.end(), g.image.begin(), g.image.end());
  return std::vector<TensorType>{{x.dtype, out}};
}

StatusOr<std::vector<TensorType>> inferTensorScatter(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 3));
  const TensorType &cache = args.inputs[0], &update = args.inputs[1];
  RETURN_IF_ERROR(checkDType(cache, {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kU8,
                                     DType::kI32, DType::kI64, DType::kBool},
                             "TensorScatter past_cache"));
  const AttrMap& a = attrsOrEmpty(args);
  std::string mode = a.getString("mode", "linear");
  if (mode != "linear" && mode != "circular") return invalidInput("TensorScatter: unknown mode '", mode, "'");
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a.getInt("axis", -2), cache.rank(), "TensorScatter axis"));
  if (axis == 0) return invalidInput("TensorScatter: axis must not be the batch axis 0");
  bool fits = update.dtype == cache.dtype && update.rank() == cache.rank();
  for (int64_t i = 0; fits && i < cache.rank(); ++i)
    fits = i == axis ? update.shape[i] <= cache.shape[i] : update.shape[i] == cache.shape[i];
  if (!fits)
    return invalidInput("TensorScatter: update ", update.str(), " does not fit past_cache ", cache.str(), " on axis ",
                        axis);
  if (args.has(2)) {
    RETURN_IF_ERROR(checkIndexType(args.inputs[2], "TensorScatter write_indices"));
    if (args.inputs[2].shape != Dims{cache.shape[0]})
      return invalidInput("TensorScatter: write_indices ", args.inputs[2].str(), " must be [", cache.shape[0], "]");
  }
  return std::vector<TensorType>{cache};
}

StatusOr<std::vector<TensorType>> inferDet(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "Det input X"));
  if (x.rank() < 2 || x.shape[x.rank() - 1] != x.shape[x.rank() - 2])
    return invalidInput("Det: input must be [..., M, M], got ", x.str());
  return std::vector<TensorType>{{x.dtype, Dims(x.shape.begin(), x.shape.end() - 2)}};
}

StatusOr<std::vector<TensorType>> inferSwish(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0], kFloatTypes, "Swish input X"));
  return std::vector<TensorType>{args.inputs[0]};
}

}  // namespace ops::vision_select_schema

namespace {
using namespace ops;
using namespace ops::vision_select_schema;

StatusOr<std::vector<TensorType>> inferNonMaxSuppression(const InferArgs& args) {
  RETURN_IF_ERROR(checkNmsInputs(args));
  std::vector<const Tensor*> in;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.has(i) && !args.constInputs[i])
      return notConstant("NonMaxSuppression", "every input (the count of selected boxes depends on them)");
    in.push_back(args.has(i) ? args.constInputs[i] : nullptr);
  }
  ASSIGN_OR_RETURN(auto sel, nmsSelect(in, attrsOrEmpty(args)));
  return std::vector<TensorType>{{DType::kI64, {static_cast<int64_t>(sel.size()), 3}}};
}

StatusOr<std::vector<TensorType>> inferUnique(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 1, 1));
  RETURN_IF_ERROR(checkDType(args.inputs[0],
                             {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kU8,
                              DType::kI32, DType::kI64, DType::kBool},
                             "Unique input X"));
  ASSIGN_OR_RETURN(int64_t n, uniqueOutputs(attrsOrEmpty(args)));
  if (!args.constInputs[0]) return notConstant("Unique", "input X (the count of unique values depends on it)");
  ASSIGN_OR_RETURN(UniqueResult u, uniqueOf(*args.constInputs[0], attrsOrEmpty(args)));
  return uniqueTypes(args.inputs[0], u, n);
}

StatusOr<std::vector<TensorType>> inferCenterCropPad(const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkIndexType(args.inputs[1], "CenterCropPad shape"));
  if (!args.constInputs[1]) return notConstant("CenterCropPad", "input 'shape'");
  ASSIGN_OR_RETURN(auto maps, centerCropPadMaps(args.inputs[0], args.constInputs[1]->toInts(), attrsOrEmpty(args)));
  Dims out;
  for (const auto& m : maps) out.push_back(static_cast<int64_t>(m.size()));
  return std::vector<TensorType>{{args.inputs[0].dtype, out}};
}

}  // namespace

void registerVisionSelectSchemas(SchemaRegistry& r) {
  r.add(OpKind::NonMaxSuppression, &inferNonMaxSuppression);
  r.add(OpKind::Unique, &inferUnique);
  r.add(OpKind::CenterCropPad, &inferCenterCropPad);
  r.add(OpKind::MaxUnpool, &inferMaxUnpool);
  r.add(OpKind::Col2Im, &inferCol2Im);
  r.add(OpKind::TensorScatter, &inferTensorScatter);
  r.add(OpKind::Det, &inferDet);
  r.add(OpKind::Swish, &inferSwish);
}

}  // namespace pcc
