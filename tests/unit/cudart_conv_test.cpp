// ONNX Conv as cuDNN descriptor values (runtime/cuda/conv_desc.h): each
// description is run here by a direct convolution that reads it the way
// cuDNN does (packed NC(D)HW tensors, KCRS filter, symmetric pads, cross-
// correlation, groups), and compared with a convolution written from ONNX's
// definition, whose pads the test computes itself (auto_pad included).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/cuda/conv_desc.h"

namespace pcc::cuda {
namespace {

std::vector<float> values(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 11) - 5.0f + 0.25f * seed;
  return v;
}

/// y = conv(x, w) + b as cuDNN computes it from `d` (4-d or 5-d).
std::vector<float> runCudnnStyle(const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& w,
                                 const std::vector<float>* b) {
  const int s = d.nbDims - 2;
  EXPECT_EQ(static_cast<int>(d.xDims.size()), d.nbDims);
  EXPECT_EQ(static_cast<int>(d.pads.size()), s);
  int64_t yCount = 1;
  for (int v : d.yDims) yCount *= v;
  std::vector<float> y(static_cast<size_t>(yCount));
  const int N = d.yDims[0], K = d.yDims[1], Cg = d.wDims[1], Kg = K / d.groups;
  std::vector<int> o(s), r(s);
  for (int64_t yi = 0; yi < yCount; ++yi) {
    int64_t rest = yi;
    for (int i = s - 1; i >= 0; --i) {
      o[i] = static_cast<int>(rest % d.yDims[2 + i]);
      rest /= d.yDims[2 + i];
    }
    const int k = static_cast<int>(rest % K), nb = static_cast<int>(rest / K);
    (void)N;
    const int g = k / Kg;
    double acc = 0;
    int64_t wCount = 1;
    for (int i = 0; i < s; ++i) wCount *= d.wDims[2 + i];
    for (int c = 0; c < Cg; ++c)
      for (int64_t wi = 0; wi < wCount; ++wi) {
        int64_t q = wi;
        for (int i = s - 1; i >= 0; --i) {
          r[i] = static_cast<int>(q % d.wDims[2 + i]);
          q /= d.wDims[2 + i];
        }
        int64_t xo = int64_t{nb} * d.xStrides[0] + int64_t{g * Cg + c} * d.xStrides[1];
        bool inside = true;
        for (int i = 0; i < s && inside; ++i) {
          const int at = o[i] * d.strides[i] - d.pads[i] + r[i] * d.dilations[i];
          inside = at >= 0 && at < d.xDims[2 + i];
          xo += int64_t{at} * d.xStrides[2 + i];
        }
        if (!inside) continue;
        acc += double(x[xo]) * w[(int64_t{k} * Cg + c) * wCount + wi];
      }
    if (b) acc += (*b)[k];
    y[yi] = static_cast<float>(acc);
  }
  return y;
}

/// The ONNX Conv of 2-D x [N,C,H,W] and w [K,C/g,R,S] with explicit
/// (possibly asymmetric) pads {top, left, bottom, right}.
std::vector<float> onnxConv2d(const Dims& xs, const Dims& ws, int64_t g, const Dims& pads, const Dims& strides,
                              const Dims& dil, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>* b, Dims* yShape) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], K = ws[0], R = ws[2], S = ws[3], Cg = C / g;
  const int64_t OH = (H + pads[0] + pads[2] - ((R - 1) * dil[0] + 1)) / strides[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - ((S - 1) * dil[1] + 1)) / strides[1] + 1;
  *yShape = {N, K, OH, OW};
  std::vector<float> y(static_cast<size_t>(N * K * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b ? (*b)[k] : 0.0;
          const int64_t gi = k / (K / g);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t ih = oh * strides[0] - pads[0] + r * dil[0], iw = ow * strides[1] - pads[1] + s * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(x[((n * C + gi * Cg + c) * H + ih) * W + iw]) * w[((k * Cg + c) * R + r) * S + s];
              }
          y[((n * K + k) * OH + oh) * OW + ow] = static_cast<float>(acc);
        }
  return y;
}

struct Case {
  Dims x, w;
  int64_t group;
  Dims pads, strides, dilations;  ///< the pads the test expects ONNX to apply
  std::string autoPad;            ///< "" (explicit pads) or an auto_pad value
  bool bias;
};

void check(const Case& c) {
  AttrMap attrs;
  attrs.set("group", Attribute(c.group));
  attrs.set("strides", Attribute(c.strides));
  attrs.set("dilations", Attribute(c.dilations));
  if (c.autoPad.empty())
    attrs.set("pads", Attribute(c.pads));
  else
    attrs.set("auto_pad", Attribute(c.autoPad));
  TensorType b = c.bias ? TensorType{DType::kF32, {c.w[0]}} : TensorType{};
  auto d = convDesc({DType::kF32, c.x}, {DType::kF32, c.w}, b, attrs);
  ASSERT_TRUE(d.ok()) << d.status().message();
  auto x = values(numElements(c.x), 1), w = values(numElements(c.w), 2), bv = values(c.w[0], 3);
  Dims yShape;
  auto want = onnxConv2d(c.x, c.w, c.group, c.pads, c.strides, c.dilations, x, w, c.bias ? &bv : nullptr, &yShape);
  EXPECT_EQ(d->yDims, std::vector<int>(yShape.begin(), yShape.end()));
  EXPECT_EQ(d->hasBias, c.bias);
  EXPECT_EQ(runCudnnStyle(*d, x, w, c.bias ? &bv : nullptr), want);
}

TEST(CudaConv, TwoDimensional) {
  check({{2, 3, 7, 6}, {4, 3, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, "", true});
  check({{1, 2, 9, 8}, {3, 2, 3, 2}, 1, {2, 1, 2, 1}, {2, 3}, {1, 1}, "", false});
}

TEST(CudaConv, DilationsAndStrides) {
  check({{1, 2, 11, 10}, {2, 2, 3, 3}, 1, {2, 1, 2, 1}, {1, 2}, {2, 3}, "", true});
}

TEST(CudaConv, GroupsAndDepthwise) {
  check({{1, 4, 6, 6}, {6, 2, 3, 3}, 2, {1, 1, 1, 1}, {1, 1}, {1, 1}, "", true});
  check({{2, 5, 7, 7}, {5, 1, 3, 3}, 5, {1, 1, 1, 1}, {2, 2}, {1, 1}, "", true});  // depthwise
}

TEST(CudaConv, AutoPad) {
  // SAME with an even total: (out - 1) * stride + span - in = 2, one each side.
  check({{1, 2, 8, 8}, {3, 2, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, "SAME_UPPER", true});
  check({{1, 2, 8, 8}, {3, 2, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, "SAME_LOWER", false});
  // Stride 2 on 9: out 5, total (5 - 1) * 2 + 3 - 9 = 2.
  check({{1, 2, 9, 9}, {3, 2, 3, 3}, 1, {1, 1, 1, 1}, {2, 2}, {1, 1}, "SAME_UPPER", false});
  check({{1, 2, 8, 7}, {3, 2, 3, 3}, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, "VALID", true});
}

TEST(CudaConv, OneDimensionalIsTwoDimensionalOfHeightOne) {
  AttrMap attrs;
  attrs.set("pads", Attribute(Dims{2, 2}));
  attrs.set("strides", Attribute(Dims{2}));
  attrs.set("dilations", Attribute(Dims{2}));
  auto d = convDesc({DType::kF32, {2, 3, 11}}, {DType::kF32, {4, 3, 3}}, {DType::kF32, {4}}, attrs);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->nbDims, 4);
  EXPECT_EQ(d->xDims, (std::vector<int>{2, 3, 1, 11}));
  EXPECT_EQ(d->wDims, (std::vector<int>{4, 3, 1, 3}));
  EXPECT_EQ(d->pads, (std::vector<int>{0, 2}));
  EXPECT_EQ(d->strides, (std::vector<int>{1, 2}));
  EXPECT_EQ(d->dilations, (std::vector<int>{1, 2}));
  EXPECT_EQ(d->biasDims, (std::vector<int>{1, 4, 1, 1}));
  // The same numbers as the 2-D ONNX Conv of height 1.
  auto x = values(2 * 3 * 11, 4), w = values(4 * 3 * 3, 5), b = values(4, 6);
  Dims yShape;
  auto want = onnxConv2d({2, 3, 1, 11}, {4, 3, 1, 3}, 1, {0, 2, 0, 2}, {1, 2}, {1, 2}, x, w, &b, &yShape);
  EXPECT_EQ(runCudnnStyle(*d, x, w, &b), want);
}

TEST(CudaConv, ThreeDimensional) {
  AttrMap attrs;
  attrs.set("pads", Attribute(Dims{1, 0, 1, 1, 0, 1}));
  auto d = convDesc({DType::kF32, {1, 2, 4, 5, 6}}, {DType::kF32, {3, 2, 3, 2, 3}}, {}, attrs);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->nbDims, 5);
  EXPECT_EQ(d->yDims, (std::vector<int>{1, 3, 4, 4, 6}));
  EXPECT_EQ(d->xStrides, (std::vector<int>{240, 120, 30, 6, 1}));
  EXPECT_EQ(d->pads, (std::vector<int>{1, 0, 1}));
}

TEST(CudaConv, WhatCudnnDoesNotTakeIsRefusedWithTheReason) {
  AttrMap asym;
  asym.set("pads", Attribute(Dims{0, 1, 1, 1}));
  auto a = convDesc({DType::kF32, {1, 2, 8, 8}}, {DType::kF32, {3, 2, 3, 3}}, {}, asym);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(a.status().message().find("symmetrically"), std::string::npos) << a.status().message();
  // SAME_UPPER with an odd total (stride 2 on 8: out 4, total 1) pads the end only.
  AttrMap same;
  same.set("auto_pad", Attribute(std::string("SAME_UPPER")));
  same.set("strides", Attribute(Dims{2, 2}));
  EXPECT_EQ(convDesc({DType::kF32, {1, 2, 8, 8}}, {DType::kF32, {3, 2, 3, 3}}, {}, same).status().code(),
            StatusCode::kUnsupported);
  auto i8 = convDesc({DType::kI8, {1, 2, 8, 8}}, {DType::kI8, {3, 2, 3, 3}}, {}, AttrMap());
  EXPECT_EQ(i8.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(i8.status().message().find("f32 and f16"), std::string::npos);
  EXPECT_EQ(convDesc({DType::kF32, {1, 2, 2, 2, 2, 2}}, {DType::kF32, {3, 2, 1, 1, 1, 1}}, {}, AttrMap())
                .status().code(),
            StatusCode::kUnsupported);
  // Operands that make no convolution are invalid input, not a fallback.
  AttrMap g2;
  g2.set("group", Attribute(int64_t{2}));
  EXPECT_EQ(convDesc({DType::kF32, {1, 3, 8, 8}}, {DType::kF32, {4, 3, 3, 3}}, {}, g2).status().code(),
            StatusCode::kInvalidInput);
}

TEST(CudaConv, Float16KeepsItsTypeAndTheKeyNamesTheShape) {
  auto h = convDesc({DType::kF16, {1, 2, 8, 8}}, {DType::kF16, {3, 2, 3, 3}}, {}, AttrMap());
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->dtype, DType::kF16);
  // With a bias, float16 would round twice (convolution, then cudnnAddTensor).
  auto hb = convDesc({DType::kF16, {1, 2, 8, 8}}, {DType::kF16, {3, 2, 3, 3}}, {DType::kF16, {3}}, AttrMap());
  EXPECT_EQ(hb.status().code(), StatusCode::kUnsupported);
  auto f = convDesc({DType::kF32, {1, 2, 8, 8}}, {DType::kF32, {3, 2, 3, 3}}, {DType::kF32, {3}}, AttrMap());
  auto f2 = convDesc({DType::kF32, {2, 2, 8, 8}}, {DType::kF32, {3, 2, 3, 3}}, {DType::kF32, {3}}, AttrMap());
  ASSERT_TRUE(f.ok() && f2.ok());
  EXPECT_NE(h->key(), f->key());
  EXPECT_NE(f->key(), f2->key());
  EXPECT_EQ(f->key(), convDesc({DType::kF32, {1, 2, 8, 8}}, {DType::kF32, {3, 2, 3, 3}}, {DType::kF32, {3}},
                               AttrMap())->key());
}

}  // namespace
}  // namespace pcc::cuda
