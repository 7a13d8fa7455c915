// Kernels of the window generators, MelWeightMatrix, DFT and STFT.
#include <cmath>

#include "ops_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(OpsSignalWindow, PeriodicAndSymmetric) {
  Tensor n = i64({}, {4});
  expectTensor(run1("HannWindow", {&n}), DType::kF32, {4}, {0, 0.5, 1, 0.5});
  expectTensor(run1("HannWindow", {&n}, attrs({{"periodic", I(0)}})), DType::kF32, {4}, {0, 0.75, 0.75, 0});
  double a = 25.0 / 46.0, b = 1 - a;
  expectTensor(run1("HammingWindow", {&n}), DType::kF32, {4}, {a - b, a, a + b, a});
  expectTensor(run1("BlackmanWindow", {&n}), DType::kF32, {4}, {0, 0.34, 1, 0.34});
  Tensor n3 = i32({}, {3});
  expectTensor(run1("BlackmanWindow", {&n3}, attrs({{"periodic", I(0)}})), DType::kF32, {3}, {0, 1, 0});
}

TEST(OpsSignalWindow, OutputDatatype) {
  Tensor n = i64({}, {4});
  expectTensor(run1("HannWindow", {&n}, attrs({{"output_datatype", I(11)}})), DType::kF64, {4}, {0, 0.5, 1, 0.5});
  // Integer outputs truncate, as a cast of the float window does.
  expectTensor(run1("HannWindow", {&n}, attrs({{"output_datatype", I(6)}})), DType::kI32, {4}, {0, 0, 1, 0});
  std::string e = runError("HannWindow", {&n}, attrs({{"output_datatype", I(5)}}));
  EXPECT_NE(e.find("output_datatype 5"), std::string::npos) << e;
}

TEST(OpsSignalWindow, SizeMustBeConstant) {
  auto r = infer("HammingWindow", {{DType::kI64, {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos) << r.status().message();
  EXPECT_FALSE(infer("HammingWindow", {{DType::kF32, {}}}).ok());
}

TEST(OpsSignalWindow, MelWeightMatrixTriangles) {
  // 2 bands between 100 and 500 Hz over a 32-point DFT at 1 kHz: the 4 mel
  // points fall in DFT bins 3, 6, 9 and 12, so band 0 rises over bins 3-6 and
  // falls over 6-9, band 1 rises over 6-9 and falls over 9-12.
  Tensor bins = i64({}, {2}), len = i64({}, {32}), rate = i64({}, {1000});
  Tensor lo = f32({}, {100}), hi = f32({}, {500});
  std::vector<double> want(17 * 2, 0.0);
  for (int j = 3; j <= 6; ++j) want[j * 2] = (j - 3) / 3.0;
  for (int j = 6; j < 9; ++j) want[j * 2] = (9 - j) / 3.0;
  for (int j = 6; j <= 9; ++j) want[j * 2 + 1] = (j - 6) / 3.0;
  for (int j = 9; j < 12; ++j) want[j * 2 + 1] = (12 - j) / 3.0;
  expectTensor(run1("MelWeightMatrix", {&bins, &len, &rate, &lo, &hi}), DType::kF32, {17, 2}, want);
  auto r = infer("MelWeightMatrix", {{DType::kI64, {}}, {DType::kI64, {}}, {DType::kI64, {}}, {DType::kF32, {}},
                                     {DType::kF32, {}}},
                 {&bins, nullptr, nullptr, nullptr, nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dft_length') must be a constant"), std::string::npos) << r.status().message();
}

TEST(OpsSignalDft, RealForwardAlongAxis1) {
  Tensor x = f32({1, 4, 1}, {1, 2, 3, 4}), axis = i64({}, {1});
  // X = (10, -2+2i, -2, -2-2i).
  expectTensor(run1("DFT", {&x, nullptr, &axis}), DType::kF32, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  // The default axis is -2, the same axis here.
  expectTensor(run1("DFT", {&x}), DType::kF32, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  expectTensor(run1("DFT", {&x, nullptr, &axis}, attrs({{"onesided", I(1)}})), DType::kF32, {1, 3, 2},
               {10, 0, -2, 2, -2, 0});
}

TEST(OpsSignalDft, InverseRoundTrip) {
  Tensor spec = f32({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}), axis = i64({}, {-2});
  expectTensor(run1("DFT", {&spec, nullptr, &axis}, attrs({{"inverse", I(1)}})), DType::kF32, {1, 4, 2},
               {1, 0, 2, 0, 3, 0, 4, 0});
}

TEST(OpsSignalDft, DftLengthTruncatesOrPads) {
  Tensor x = f64({1, 4, 1}, {1, 2, 3, 4});
  Tensor two = i64({}, {2}), six = i32({}, {6});
  expectTensor(run1("DFT", {&x, &two}), DType::kF64, {1, 2, 2}, {3, 0, -1, 0});
  Tensor y = run1("DFT", {&x, &six});
  ASSERT_EQ(y.shape(), (Dims{1, 6, 2}));
  EXPECT_NEAR(y.getDouble(0), 10, 1e-12);
  // X[3] of (1, 2, 3, 4, 0, 0) = 1 - 2 + 3 - 4 = -2.
  EXPECT_NEAR(y.getDouble(6), -2, 1e-12);
  EXPECT_NEAR(y.getDouble(7), 0, 1e-12);
}

TEST(OpsSignalDft, InnerAxisWithTrailingDims) {
  // x [2, 3, 1]: transform along axis 0 pairs x[0, j] with x[1, j].
  Tensor x = f32({2, 3, 1}, {1, 2, 3, 4, 5, 6}), axis = i64({}, {0});
  expectTensor(run1("DFT", {&x, nullptr, &axis}), DType::kF32, {2, 3, 2},
               {5, 0, 7, 0, 9, 0, -3, 0, -3, 0, -3, 0});
}

TEST(OpsSignalDft, Errors) {
  Tensor x = f32({1, 4, 1}, {1, 2, 3, 4}), last = i64({}, {-1});
  EXPECT_NE(runError("DFT", {&x, nullptr, &last}).find("out of range"), std::string::npos);
  Tensor x3 = f32({1, 4, 3}, std::vector<float>(12, 0));
  EXPECT_NE(runError("DFT", {&x3}).find("last dim of 1 (real) or 2 (complex)"), std::string::npos);
  auto r = infer("DFT", {{DType::kF32, {1, 4, 1}}, {}, {DType::kI64, {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos);
}

TEST(OpsSignalStft, FramesWithAndWithoutWindow) {
  Tensor x = f32({1, 4, 1}, {1, 2, 3, 4}), step = i64({}, {2}), len = i64({}, {2});
  // Frames (1, 2) and (3, 4): DFTs (3, -1) and (7, -1); onesided keeps 2 bins.
  expectTensor(run1("STFT", {&x, &step, nullptr, &len}), DType::kF32, {1, 2, 2, 2}, {3, 0, -1, 0, 7, 0, -1, 0});
  Tensor w = f32({2}, {1, 0});
  expectTensor(run1("STFT", {&x, &step, &w}), DType::kF32, {1, 2, 2, 2}, {1, 0, 1, 0, 3, 0, 3, 0});
  Tensor three = i64({}, {3});
  // Not onesided, frame length 3, step 2: one frame (1, 2, 3), X[0] = 6.
  Tensor y = run1("STFT", {&x, &step, nullptr, &three}, attrs({{"onesided", I(0)}}));
  ASSERT_EQ(y.shape(), (Dims{1, 1, 3, 2}));
  EXPECT_NEAR(y.getDouble(0), 6, 1e-5);
}

TEST(OpsSignalStft, Errors) {
  Tensor x = f32({1, 4, 1}, {1, 2, 3, 4}), step = i64({}, {2}), len = i64({}, {3}), w = f32({2}, {1, 1});
  EXPECT_NE(runError("STFT", {&x, &step, &w, &len}).find("differs from frame_length"), std::string::npos);
  auto r = infer("STFT", {{DType::kF32, {1, 4, 1}}, {DType::kI64, {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("frame_step') must be a constant"), std::string::npos);
}

}  // namespace
}  // namespace pcc
