// Range, CumSum, Trilu, OneHot, EyeLike, CastLike; hand-computed.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsMathGenerate, RangeNeedsConstantsForItsShape) {
  Tensor s = f32({}, {1.f}), l = f32({}, {2.f}), d = f32({}, {0.25f});
  expectTensor(run1("Range", {&s, &l, &d}), DType::kF32, {4}, {1, 1.25, 1.5, 1.75});
  Tensor si = i32({}, {10}), li = i32({}, {4}), di = i32({}, {-3});
  expectTensor(run1("Range", {&si, &li, &di}), DType::kI32, {2}, {10, 7});
  Tensor empty = i64({}, {5}), lim = i64({}, {1}), step = i64({}, {1});
  expectTensor(run1("Range", {&empty, &lim, &step}), DType::kI64, {0}, {});
  auto r = infer("Range", {{DType::kF32, {}}, {DType::kF32, {}}, {DType::kF32, {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be a constant"), std::string::npos) << r.status().message();
  Tensor zero = i64({}, {0});
  EXPECT_NE(runError("Range", {&empty, &lim, &zero}).find("delta must not be 0"), std::string::npos);
}

TEST(OpsMathGenerate, CumSumExclusiveReverse) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor ax1 = i64({}, {1}), ax0 = i32({}, {0}), axNeg = i64({}, {-1});
  expectTensor(run1("CumSum", {&x, &ax1}), DType::kF32, {2, 3}, {1, 3, 6, 4, 9, 15});
  expectTensor(run1("CumSum", {&x, &ax0}), DType::kF32, {2, 3}, {1, 2, 3, 5, 7, 9});
  expectTensor(run1("CumSum", {&x, &axNeg}, attrs({{"exclusive", I(1)}})), DType::kF32, {2, 3},
               {0, 1, 3, 0, 4, 9});
  expectTensor(run1("CumSum", {&x, &ax1}, attrs({{"reverse", I(1)}})), DType::kF32, {2, 3},
               {6, 5, 3, 15, 11, 6});
  expectTensor(run1("CumSum", {&x, &ax1}, attrs({{"reverse", I(1)}, {"exclusive", I(1)}})), DType::kF32,
               {2, 3}, {5, 3, 0, 11, 6, 0});
  Tensor xi = i32({3}, {1, -2, 3}), a = i64({}, {0});
  expectTensor(run1("CumSum", {&xi, &a}), DType::kI32, {3}, {1, -1, 2});
  Tensor bad = i64({}, {2});
  EXPECT_NE(runError("CumSum", {&x, &bad}).find("out of range"), std::string::npos);
}

TEST(OpsMathGenerate, TriluUpperLowerAndK) {
  Tensor x = iota({3, 4}, 1);  // 1..12
  expectTensor(run1("Trilu", {&x}), DType::kF32, {3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  Tensor k1 = i64({}, {1}), km1 = i64({}, {-1});
  expectTensor(run1("Trilu", {&x, &k1}), DType::kF32, {3, 4}, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  AttrMap lower = attrs({{"upper", I(0)}});
  expectTensor(run1("Trilu", {&x}, lower), DType::kF32, {3, 4}, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  expectTensor(run1("Trilu", {&x, &km1}, lower), DType::kF32, {3, 4}, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  Tensor b = boolean({2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});  // batched, any dtype
  expectTensor(run1("Trilu", {&b}, lower), DType::kBool, {2, 2, 2}, {1, 0, 1, 1, 1, 0, 1, 1});
  EXPECT_FALSE(infer("Trilu", {{DType::kF32, {4}}}).ok());
}

TEST(OpsMathGenerate, OneHotAxisAndNegativeIndices) {
  Tensor ind = i64({3}, {0, -1, 5}), depth = i64({}, {3}), vals = f32({2}, {0.f, 7.f});
  // -1 counts from the end; 5 is out of range and gives a row of off values.
  expectTensor(run1("OneHot", {&ind, &depth, &vals}), DType::kF32, {3, 3}, {7, 0, 0, 0, 0, 7, 0, 0, 0});
  Tensor ind2 = f32({2}, {1.7f, 0.f}), d2 = f32({}, {2.f}), v2 = i32({2}, {-1, 1});
  expectTensor(run1("OneHot", {&ind2, &d2, &v2}, attrs({{"axis", I(0)}})), DType::kI32, {2, 2},
               {-1, 1, 1, -1});
  auto r = infer("OneHot", {{DType::kI64, {3}}, {DType::kI64, {}}, {DType::kF32, {2}}});
  EXPECT_FALSE(r.ok());  // depth not constant
  auto s = infer("OneHot", {{DType::kI64, {2, 3}}, {DType::kI64, {}}, {DType::kF32, {2}}}, {nullptr, &depth},
                 attrs({{"axis", I(1)}}));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)[0].str(), "f32[2,3,3]");
}

TEST(OpsMathGenerate, EyeLikeDtypeAndK) {
  Tensor x = f32({2, 3}, {9, 9, 9, 9, 9, 9});
  expectTensor(run1("EyeLike", {&x}), DType::kF32, {2, 3}, {1, 0, 0, 0, 1, 0});
  expectTensor(run1("EyeLike", {&x}, attrs({{"k", I(1)}, {"dtype", I(7)}})), DType::kI64, {2, 3},
               {0, 1, 0, 0, 0, 1});
  expectTensor(run1("EyeLike", {&x}, attrs({{"k", I(-1)}, {"dtype", I(10)}})), DType::kF16, {2, 3},
               {0, 0, 0, 1, 0, 0});
  EXPECT_FALSE(infer("EyeLike", {{DType::kF32, {2}}}).ok());
  expectTensor(run1("EyeLike", {&x}, attrs({{"dtype", I(5)}})), DType::kI16, {2, 3},
               {1, 0, 0, 0, 1, 0});
  EXPECT_EQ(infer("EyeLike", {{DType::kF32, {2, 2}}}, {}, attrs({{"dtype", I(8)}})).status().code(),
            StatusCode::kUnsupported);  // string
}

TEST(OpsMathGenerate, CastLikeTakesTheTypeOfInput1) {
  Tensor x = f32({3}, {1.7f, -2.2f, 0.f}), like = i32({}, {0});
  expectTensor(run1("CastLike", {&x, &like}), DType::kI32, {3}, {1, -2, 0});
  Tensor b = boolean({1}, {1});
  expectTensor(run1("CastLike", {&x, &b}), DType::kBool, {3}, {1, 1, 0});
  Tensor h = Tensor::fromVector<uint16_t>(DType::kF16, {1}, {0});
  expectTensor(run1("CastLike", {&x, &h}), DType::kF16, {3}, {1.7, -2.2, 0}, 1e-3);
}

}  // namespace
}  // namespace pcc::testing
