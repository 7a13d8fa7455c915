// Pad, Tile, DepthToSpace, SpaceToDepth, ReverseSequence, Compress, NonZero, Size.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsPad, ModesOn1D) {
  Tensor x = f32({3}, {1, 2, 3}), pads = ints({2, 2}), v = f32({}, {9});
  expectTensor(run1("Pad", {&x, &pads, &v}), DType::kF32, {7}, {9, 9, 1, 2, 3, 9, 9});
  expectTensor(run1("Pad", {&x, &pads}), DType::kF32, {7}, {0, 0, 1, 2, 3, 0, 0});
  expectTensor(run1("Pad", {&x, &pads}, attrs({{"mode", S("reflect")}})), DType::kF32, {7},
               {3, 2, 1, 2, 3, 2, 1});
  expectTensor(run1("Pad", {&x, &pads}, attrs({{"mode", S("edge")}})), DType::kF32, {7},
               {1, 1, 1, 2, 3, 3, 3});
  expectTensor(run1("Pad", {&x, &pads}, attrs({{"mode", S("wrap")}})), DType::kF32, {7},
               {2, 3, 1, 2, 3, 1, 2});
  // Reflect further than the input is long keeps mirroring.
  Tensor big = ints({5, 0});
  expectTensor(run1("Pad", {&x, &big}, attrs({{"mode", S("reflect")}})), DType::kF32, {8},
               {2, 1, 2, 3, 2, 1, 2, 3});
}

TEST(OpsPad, NegativePadsAxesAndDtypes) {
  Tensor x = i64({4}, {1, 2, 3, 4}), crop = ints({-1, 1});
  expectTensor(run1("Pad", {&x, &crop}), DType::kI64, {4}, {2, 3, 4, 0});
  Tensor m = f32({2, 2}, {1, 2, 3, 4}), pads = ints({1, 0}), axes = ints({-1});
  expectTensor(run1("Pad", {&m, &pads, nullptr, &axes}), DType::kF32, {2, 3}, {0, 1, 2, 0, 3, 4});
  Tensor h = Tensor::fromVector<uint16_t>(DType::kF16, {2}, {floatToHalf(1.5f), floatToHalf(-2)});
  Tensor hv = Tensor::fromVector<uint16_t>(DType::kF16, {}, {floatToHalf(7)});
  Tensor p1 = ints({1, 1});
  expectTensor(run1("Pad", {&h, &p1, &hv}), DType::kF16, {4}, {7, 1.5, -2, 7});
  Tensor b = boolean({2}, {1, 0});
  expectTensor(run1("Pad", {&b, &p1}, attrs({{"mode", S("edge")}})), DType::kBool, {4}, {1, 1, 0, 0});
}

TEST(OpsPad, Errors) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4}), odd = ints({1, 1, 1}), wrongV = i64({}, {1});
  EXPECT_NE(runError("Pad", {&x, &odd}).find("2 values per padded axis"), std::string::npos);
  Tensor pads = ints({0, 0, 0, 0});
  EXPECT_NE(runError("Pad", {&x, &pads, &wrongV}).find("constant_value"), std::string::npos);
  EXPECT_NE(runError("Pad", {&x, &pads}, attrs({{"mode", S("mirror")}})).find("unknown mode"),
            std::string::npos);
  // pads must be known to infer the shape.
  EXPECT_FALSE(infer("Pad", {x.type(), pads.type()}).ok());
  Tensor tooMuch = ints({-3, 0, 0, 0});
  EXPECT_FALSE(runOp("Pad", {&x, &tooMuch}, {}).ok());
}

TEST(OpsTile, RepeatsAndErrors) {
  Tensor x = f32({1, 2}, {1, 2}), r = ints({2, 2});
  expectTensor(run1("Tile", {&x, &r}), DType::kF32, {2, 4}, {1, 2, 1, 2, 1, 2, 1, 2});
  Tensor y = i32({2}, {5, 6}), r3 = ints({3});
  expectTensor(run1("Tile", {&y, &r3}), DType::kI32, {6}, {5, 6, 5, 6, 5, 6});
  Tensor r0 = ints({0, 1});
  expectTensor(run1("Tile", {&x, &r0}), DType::kF32, {0, 2}, {});
  Tensor bad = ints({2});
  EXPECT_NE(runError("Tile", {&x, &bad}).find("one value per dim"), std::string::npos);
}

TEST(OpsDepthToSpace, DcrAndCrd) {
  Tensor x = iota({1, 8, 1, 1});
  // DCR: channel c of block (b1, b2) is input channel (b1 * 2 + b2) * 2 + c.
  expectTensor(run1("DepthToSpace", {&x}, attrs({{"blocksize", I(2)}})), DType::kF32, {1, 2, 2, 2},
               {0, 2, 4, 6, 1, 3, 5, 7});
  // CRD: input channel c * 4 + b1 * 2 + b2.
  expectTensor(run1("DepthToSpace", {&x}, attrs({{"blocksize", I(2)}, {"mode", S("CRD")}})),
               DType::kF32, {1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor y = iota({1, 3, 1, 1});
  EXPECT_NE(runError("DepthToSpace", {&y}, attrs({{"blocksize", I(2)}})).find("divisible"),
            std::string::npos);
  EXPECT_FALSE(infer("DepthToSpace", {x.type()}).ok());  // blocksize missing
}

TEST(OpsSpaceToDepth, HandCaseAndRoundTrip) {
  Tensor x = iota({1, 2, 2, 2});
  expectTensor(run1("SpaceToDepth", {&x}, attrs({{"blocksize", I(2)}})), DType::kF32, {1, 8, 1, 1},
               {0, 4, 1, 5, 2, 6, 3, 7});
  Tensor big = iota({2, 3, 4, 6});
  AttrMap a = attrs({{"blocksize", I(2)}});
  Tensor s = run1("SpaceToDepth", {&big}, a);
  Tensor back = run1("DepthToSpace", {&s}, a);
  expectTensor(back, DType::kF32, {2, 3, 4, 6}, values(big));
  Tensor odd = iota({1, 1, 3, 2});
  EXPECT_FALSE(runOp("SpaceToDepth", {&odd}, a).ok());
}

TEST(OpsReverseSequence, TimeAndBatchMajor) {
  Tensor x = iota({4, 4}), lens = ints({4, 3, 2, 1});
  expectTensor(run1("ReverseSequence", {&x, &lens}, attrs({{"time_axis", I(0)}, {"batch_axis", I(1)}})),
               DType::kF32, {4, 4}, {12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15});
  Tensor y = iota({2, 3, 2}), l2 = ints({2, 3});
  // Batch-major: row b reverses its first lens[b] steps; rows are pairs.
  expectTensor(run1("ReverseSequence", {&y, &l2}, attrs({{"time_axis", I(1)}, {"batch_axis", I(0)}})),
               DType::kF32, {2, 3, 2}, {2, 3, 0, 1, 4, 5, 10, 11, 8, 9, 6, 7});
  Tensor bad = ints({5, 1, 1, 1});
  EXPECT_FALSE(runOp("ReverseSequence", {&x, &bad}, {}).ok());
}

TEST(OpsCompress, AxesAndFlattened) {
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor c0 = boolean({3}, {0, 1, 1}), c1 = boolean({2}, {0, 1}), cf = boolean({5}, {0, 1, 0, 0, 1});
  expectTensor(run1("Compress", {&x, &c0}, attrs({{"axis", I(0)}})), DType::kF32, {2, 2}, {3, 4, 5, 6});
  expectTensor(run1("Compress", {&x, &c1}, attrs({{"axis", I(-1)}})), DType::kF32, {3, 1}, {2, 4, 6});
  expectTensor(run1("Compress", {&x, &cf}), DType::kF32, {2}, {2, 5});
  auto r = infer("Compress", {x.type(), c0.type()}, {}, attrs({{"axis", I(0)}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("depends on run-time data"), std::string::npos);
}

TEST(OpsNonZero, ConstantAndRuntimeInput) {
  Tensor x = f32({2, 2}, {1, 0, 1, 1});
  expectTensor(run1("NonZero", {&x}), DType::kI64, {2, 3}, {0, 1, 1, 0, 0, 1});
  Tensor b = boolean({3}, {0, 0, 0});
  expectTensor(run1("NonZero", {&b}), DType::kI64, {1, 0}, {});
  auto r = infer("NonZero", {x.type()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(r.status().message().rfind("NonZero: output size depends on run-time data; ", 0), 0u)
      << r.status().message();
  EXPECT_NE(r.status().message().find("unsupported"), std::string::npos);
}

TEST(OpsSize, ScalarI64) {
  Tensor x = iota({2, 3});
  expectTensor(run1("Size", {&x}), DType::kI64, {}, {6});
  Tensor e = Tensor::zeros(DType::kI32, {0, 4});
  expectTensor(run1("Size", {&e}), DType::kI64, {}, {0});
}

}  // namespace
}  // namespace pcc::testing
