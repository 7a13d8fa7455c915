// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Shape, ConstantOfShape, Expand.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsReshape, ZeroAndMinusOne) {
  Tensor x = iota({2, 3, 4});
  Tensor s = ints({0, -1, 2});
  Tensor y = run1("Reshape", {&x, &s});
  expectTensor(y, DType::kF32, {2, 6, 2}, values(x));
  Tensor s2 = ints({-1});
  EXPECT_EQ(run1("Reshape", {&x, &s2}).shape(), (Dims{24}));
  // allowzero=1: 0 is a real zero-sized dim.
  Tensor e = f32({0, 3}, {}), z = ints({3, 0});
  EXPECT_EQ(run1("Reshape", {&e, &z}, attrs({{"allowzero", I(1)}})).shape(), (Dims{3, 0}));
  Tensor b = boolean({2, 2}, {1, 0, 0, 1}), sb = ints({4});
  expectTensor(run1("Reshape", {&b, &sb}), DType::kBool, {4}, {1, 0, 0, 1});
}

TEST(OpsReshape, InferErrors) {
  TensorType x{DType::kF32, {2, 3, 4}};
  auto r = infer("Reshape", {x, {DType::kI64, {2}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 1 ('shape') must be a constant"), std::string::npos);
  Tensor bad = ints({5, -1}), two = ints({-1, -1}), big = ints({2, 3, 5}), far = ints({1, 1, 1, 0});
  EXPECT_FALSE(infer("Reshape", {x, bad.type()}, {nullptr, &bad}).ok());
  EXPECT_FALSE(infer("Reshape", {x, two.type()}, {nullptr, &two}).ok());
  EXPECT_FALSE(infer("Reshape", {x, big.type()}, {nullptr, &big}).ok());
  EXPECT_FALSE(infer("Reshape", {x, far.type()}, {nullptr, &far}).ok());
}

TEST(OpsFlatten, Axes) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(run1("Flatten", {&x}).shape(), (Dims{2, 12}));
  EXPECT_EQ(run1("Flatten", {&x}, attrs({{"axis", I(0)}})).shape(), (Dims{1, 24}));
  EXPECT_EQ(run1("Flatten", {&x}, attrs({{"axis", I(3)}})).shape(), (Dims{24, 1}));
  EXPECT_EQ(run1("Flatten", {&x}, attrs({{"axis", I(-1)}})).shape(), (Dims{6, 4}));
  expectTensor(run1("Flatten", {&x}, attrs({{"axis", I(2)}})), DType::kF32, {6, 4}, values(x));
  EXPECT_FALSE(infer("Flatten", {x.type()}, {}, attrs({{"axis", I(4)}})).ok());
}

TEST(OpsSqueezeUnsqueeze, Axes) {
  Tensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(run1("Squeeze", {&x}).shape(), (Dims{3, 2}));
  Tensor a = ints({-2});
  expectTensor(run1("Squeeze", {&x, &a}), DType::kF32, {1, 3, 2}, values(x));
  Tensor bad = ints({1});
  EXPECT_NE(runError("Squeeze", {&x, &bad}).find("size is not 1"), std::string::npos);
  Tensor y = iota({3, 2});
  Tensor u = ints({0, -1});  // negative axes count in the output rank
  EXPECT_EQ(run1("Unsqueeze", {&y, &u}).shape(), (Dims{1, 3, 2, 1}));
  Tensor u2 = ints({1, 3});
  expectTensor(run1("Unsqueeze", {&y, &u2}), DType::kF32, {3, 1, 2, 1}, values(y));
  Tensor dup = ints({0, 0}), out = ints({3});
  EXPECT_FALSE(infer("Unsqueeze", {y.type(), dup.type()}, {nullptr, &dup}).ok());
  EXPECT_FALSE(infer("Unsqueeze", {y.type(), out.type()}, {nullptr, &out}).ok());
  EXPECT_FALSE(infer("Unsqueeze", {y.type(), out.type()}).ok());  // not constant
}

TEST(OpsTranspose, PermAndDefault) {
  Tensor x = iota({2, 3});
  expectTensor(run1("Transpose", {&x}), DType::kF32, {3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor y = iota({2, 3, 4});
  Tensor t = run1("Transpose", {&y}, attrs({{"perm", Is({1, 2, 0})}}));
  ASSERT_EQ(t.shape(), (Dims{3, 4, 2}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k)
        EXPECT_EQ(t.data<float>()[(i * 4 + j) * 2 + k], static_cast<float>(k * 12 + i * 4 + j));
  Tensor xi = i64({2, 2}, {1, 2, 3, 4});
  expectTensor(run1("Transpose", {&xi}), DType::kI64, {2, 2}, {1, 3, 2, 4});
  EXPECT_FALSE(infer("Transpose", {y.type()}, {}, attrs({{"perm", Is({0, 0, 1})}})).ok());
  EXPECT_FALSE(infer("Transpose", {y.type()}, {}, attrs({{"perm", Is({1, 0})}})).ok());
}

TEST(OpsShape, StartEnd) {
  Tensor x = iota({2, 3, 4, 5});
  expectTensor(run1("Shape", {&x}), DType::kI64, {4}, {2, 3, 4, 5});
  expectTensor(run1("Shape", {&x}, attrs({{"start", I(1)}, {"end", I(-1)}})), DType::kI64, {2}, {3, 4});
  expectTensor(run1("Shape", {&x}, attrs({{"start", I(-10)}, {"end", I(10)}})), DType::kI64, {4},
               {2, 3, 4, 5});
  expectTensor(run1("Shape", {&x}, attrs({{"start", I(3)}, {"end", I(1)}})), DType::kI64, {0}, {});
  Tensor s = f32({}, {1});
  expectTensor(run1("Shape", {&s}), DType::kI64, {0}, {});
}

TEST(OpsConstantOfShape, ValueAndDefault) {
  Tensor shape = ints({2, 3});
  expectTensor(run1("ConstantOfShape", {&shape}), DType::kF32, {2, 3}, std::vector<double>(6, 0));
  AttrMap a;
  a.set("value", i64({1}, {7}));
  expectTensor(run1("ConstantOfShape", {&shape}, a), DType::kI64, {2, 3}, std::vector<double>(6, 7));
  Tensor empty = ints({});
  expectTensor(run1("ConstantOfShape", {&empty}, a), DType::kI64, {}, {7});
  EXPECT_FALSE(infer("ConstantOfShape", {shape.type()}).ok());  // not constant
  Tensor neg = ints({-1});
  EXPECT_FALSE(infer("ConstantOfShape", {neg.type()}, {&neg}).ok());
}

TEST(OpsExpand, Bidirectional) {
  Tensor x = f32({3, 1}, {1, 2, 3});
  Tensor s = ints({2, 1, 2});  // [3,1] with [2,1,2] -> [2,3,2]
  expectTensor(run1("Expand", {&x, &s}), DType::kF32, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  Tensor s1 = ints({1});  // a smaller shape keeps the input's
  expectTensor(run1("Expand", {&x, &s1}), DType::kF32, {3, 1}, {1, 2, 3});
  Tensor b = boolean({1}, {1}), s3 = ints({3});
  expectTensor(run1("Expand", {&b, &s3}), DType::kBool, {3}, {1, 1, 1});
  Tensor bad = ints({2, 2});
  EXPECT_FALSE(infer("Expand", {x.type(), bad.type()}, {nullptr, &bad}).ok());
}

}  // namespace
}  // namespace pcc::testing
