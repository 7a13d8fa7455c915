// Concat, Split, Slice, Gather.
#include <limits>

#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsConcat, AxesAndDtypes) {
  Tensor a = f32({2, 1}, {1, 2}), b = f32({2, 2}, {3, 4, 5, 6});
  expectTensor(run1("Concat", {&a, &b}, attrs({{"axis", I(1)}})), DType::kF32, {2, 3},
               {1, 3, 4, 2, 5, 6});
  expectTensor(run1("Concat", {&a, &b}, attrs({{"axis", I(-1)}})), DType::kF32, {2, 3},
               {1, 3, 4, 2, 5, 6});
  Tensor c = i64({1, 2}, {7, 8}), d = i64({2, 2}, {1, 2, 3, 4});
  expectTensor(run1("Concat", {&c, &d, &c}, attrs({{"axis", I(0)}})), DType::kI64, {4, 2},
               {7, 8, 1, 2, 3, 4, 7, 8});
  EXPECT_FALSE(infer("Concat", {a.type(), b.type()}, {}, attrs({{"axis", I(0)}})).ok());
  EXPECT_FALSE(infer("Concat", {a.type(), c.type()}, {}, attrs({{"axis", I(0)}})).ok());
  EXPECT_FALSE(infer("Concat", {a.type(), b.type()}).ok());  // axis missing
}

TEST(OpsSplit, ExplicitSizes) {
  Tensor x = iota({2, 5});
  Tensor sp = ints({2, 3});
  std::vector<Tensor> r = run("Split", {&x, &sp}, attrs({{"axis", I(-1)}}));
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], DType::kF32, {2, 2}, {0, 1, 5, 6});
  expectTensor(r[1], DType::kF32, {2, 3}, {2, 3, 4, 7, 8, 9});
  Tensor bad = ints({2, 2});
  EXPECT_FALSE(infer("Split", {x.type(), bad.type()}, {nullptr, &bad}, attrs({{"axis", I(1)}})).ok());
}

TEST(OpsSplit, NumOutputsUneven) {
  Tensor x = iota({7});  // ceil(7/3) = 3: sizes 3, 3, 1
  std::vector<Tensor> r = run("Split", {&x}, attrs({{"num_outputs", I(3)}}));
  ASSERT_EQ(r.size(), 3u);
  expectTensor(r[0], DType::kF32, {3}, {0, 1, 2});
  expectTensor(r[1], DType::kF32, {3}, {3, 4, 5});
  expectTensor(r[2], DType::kF32, {1}, {6});
  Tensor y = i64({4, 1}, {1, 2, 3, 4});
  std::vector<Tensor> r2 = run("Split", {&y}, attrs({{"num_outputs", I(2)}}));
  ASSERT_EQ(r2.size(), 2u);
  expectTensor(r2[1], DType::kI64, {2, 1}, {3, 4});
  EXPECT_FALSE(infer("Split", {{DType::kF32, {2}}}, {}, attrs({{"num_outputs", I(4)}})).ok());
  EXPECT_FALSE(infer("Split", {{DType::kF32, {6}}}).ok());  // neither split nor num_outputs
}

TEST(OpsSlice, BasicAndAxes) {
  Tensor x = iota({3, 4});
  Tensor st = ints({1, 1}), en = ints({3, 3});
  expectTensor(run1("Slice", {&x, &st, &en}), DType::kF32, {2, 2}, {5, 6, 9, 10});
  // Only axis -1, step 2, end past the dim is clamped.
  Tensor st1 = ints({0}), en1 = ints({100}), ax = ints({-1}), step = ints({2});
  expectTensor(run1("Slice", {&x, &st1, &en1, &ax, &step}), DType::kF32, {3, 2},
               {0, 2, 4, 6, 8, 10});
  // Negative start counts from the end.
  Tensor st2 = ints({-2}), en2 = ints({std::numeric_limits<int64_t>::max()}), ax0 = ints({0});
  expectTensor(run1("Slice", {&x, &st2, &en2, &ax0}), DType::kF32, {2, 4},
               {4, 5, 6, 7, 8, 9, 10, 11});
  // Empty result when start >= end.
  Tensor st3 = ints({3}), en3 = ints({1});
  EXPECT_EQ(run1("Slice", {&x, &st3, &en3, &ax0}).shape(), (Dims{0, 4}));
}

TEST(OpsSlice, NegativeSteps) {
  Tensor x = iota({6});
  Tensor st = ints({-1}), en = ints({std::numeric_limits<int64_t>::min()}), ax = ints({0}), step = ints({-1});
  expectTensor(run1("Slice", {&x, &st, &en, &ax, &step}), DType::kF32, {6}, {5, 4, 3, 2, 1, 0});
  Tensor st2 = ints({4}), en2 = ints({0}), step2 = ints({-2});
  expectTensor(run1("Slice", {&x, &st2, &en2, &ax, &step2}), DType::kF32, {2}, {4, 2});
  Tensor st3 = ints({100}), en3 = ints({-100}), step3 = ints({-3});  // clamped to [5, -1)
  expectTensor(run1("Slice", {&x, &st3, &en3, &ax, &step3}), DType::kF32, {2}, {5, 2});
  // With a negative step the start clamps to [0, dim-1] and the end to [-1, dim-1]
  // (onnxruntime agrees): start -100 -> 0, end -100 -> -1 keeps element 0.
  Tensor st4 = ints({-100}), en4 = ints({-100});
  expectTensor(run1("Slice", {&x, &st4, &en4, &ax, &step}), DType::kF32, {1}, {0});
  Tensor en5 = ints({0});
  expectTensor(run1("Slice", {&x, &st4, &en5, &ax, &step}), DType::kF32, {0}, {});
  Tensor b = boolean({2, 2}, {1, 0, 0, 0}), st5 = ints({-1}), en6 = ints({-3}), ax1 = ints({1});
  expectTensor(run1("Slice", {&b, &st5, &en6, &ax1, &step}), DType::kBool, {2, 2}, {0, 1, 0, 0});
}

TEST(OpsSlice, InferErrors) {
  TensorType x{DType::kF32, {3, 4}};
  Tensor st = ints({0}), en = ints({1}), zero = ints({0}), en2 = ints({1, 2}), ax = ints({0, 0});
  auto r = infer("Slice", {x, st.type(), en.type()}, {nullptr, &st, nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 2 ('ends') must be a constant"), std::string::npos);
  EXPECT_FALSE(infer("Slice", {x, st.type(), en.type(), st.type(), zero.type()},
                     {nullptr, &st, &en, &st, &zero}).ok());  // step 0
  EXPECT_FALSE(infer("Slice", {x, st.type(), en2.type()}, {nullptr, &st, &en2}).ok());
  EXPECT_FALSE(infer("Slice", {x, en2.type(), en2.type(), ax.type()}, {nullptr, &en2, &en2, &ax}).ok());
}

TEST(OpsGather, AxesAndNegativeIndices) {
  Tensor x = iota({3, 2});
  Tensor idx = i64({2}, {2, -3});
  expectTensor(run1("Gather", {&x, &idx}), DType::kF32, {2, 2}, {4, 5, 0, 1});
  Tensor idx2 = i32({2, 2}, {1, 0, 0, 0});
  expectTensor(run1("Gather", {&x, &idx2}, attrs({{"axis", I(-1)}})), DType::kF32, {3, 2, 2},
               {1, 0, 0, 0, 3, 2, 2, 2, 5, 4, 4, 4});
  Tensor s = i64({}, {1});  // scalar index drops the axis
  expectTensor(run1("Gather", {&x, &s}), DType::kF32, {2}, {2, 3});
  Tensor oob = i64({1}, {3});
  EXPECT_NE(runError("Gather", {&x, &oob}).find("out of range"), std::string::npos);
  EXPECT_FALSE(infer("Gather", {x.type(), {DType::kF32, {1}}}).ok());
  EXPECT_FALSE(infer("Gather", {x.type(), idx.type()}, {}, attrs({{"axis", I(2)}})).ok());
}

}  // namespace
}  // namespace pcc::testing
