// GatherElements, GatherND, ScatterElements, ScatterND.
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsGatherElements, AxesAndNegativeIndices) {
  Tensor d = f32({2, 2}, {1, 2, 3, 4}), idx = i64({2, 2}, {0, 0, 1, 0});
  expectTensor(run1("GatherElements", {&d, &idx}, attrs({{"axis", I(1)}})), DType::kF32, {2, 2},
               {1, 1, 4, 3});
  Tensor d3 = i32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor i3 = i32({2, 3}, {1, 2, 0, -1, 0, 0});
  expectTensor(run1("GatherElements", {&d3, &i3}), DType::kI32, {2, 3}, {4, 8, 3, 7, 2, 3});
  Tensor oob = i64({1, 1}, {3});
  EXPECT_NE(runError("GatherElements", {&d3, &oob}).find("out of range"), std::string::npos);
  Tensor rank1 = i64({2}, {0, 1});
  EXPECT_FALSE(runOp("GatherElements", {&d3, &rank1}, {}).ok());
  Tensor fidx = f32({1, 1}, {0});
  EXPECT_FALSE(runOp("GatherElements", {&d3, &fidx}, {}).ok());
}

TEST(OpsGatherND, TuplesSlicesAndBatchDims) {
  Tensor d = i64({2, 2}, {0, 1, 2, 3});
  Tensor full = i64({2, 2}, {0, 0, 1, 1}), part = i64({2, 1}, {1, 0});
  expectTensor(run1("GatherND", {&d, &full}), DType::kI64, {2}, {0, 3});
  expectTensor(run1("GatherND", {&d, &part}), DType::kI64, {2, 2}, {2, 3, 0, 1});
  Tensor d3 = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), b = i64({2, 1}, {1, 0});
  expectTensor(run1("GatherND", {&d3, &b}, attrs({{"batch_dims", I(1)}})), DType::kF32, {2, 2},
               {2, 3, 4, 5});
  Tensor neg = i64({1, 2}, {-1, -2});
  expectTensor(run1("GatherND", {&d, &neg}), DType::kI64, {1}, {2});
  Tensor tooLong = i64({1, 3}, {0, 0, 0});
  EXPECT_FALSE(runOp("GatherND", {&d, &tooLong}, {}).ok());
}

TEST(OpsScatterElements, AxesReductionsNegative) {
  Tensor d = f32({3, 3}, std::vector<float>(9, 0.f));
  Tensor idx = i64({2, 3}, {1, 0, 2, 0, 2, 1});
  Tensor upd = f32({2, 3}, {1, 1.1f, 1.2f, 2, 2.1f, 2.2f});
  expectTensor(run1("ScatterElements", {&d, &idx, &upd}), DType::kF32, {3, 3},
               {2, 1.1, 0, 1, 0, 2.2, 0, 2.1, 1.2});
  Tensor row = f32({1, 5}, {1, 2, 3, 4, 5}), ri = i64({1, 2}, {1, -3}), ru = f32({1, 2}, {1.1f, 2.1f});
  expectTensor(run1("ScatterElements", {&row, &ri, &ru}, attrs({{"axis", I(1)}})), DType::kF32, {1, 5},
               {1, 1.1, 2.1, 4, 5});
  Tensor dup = i64({1, 2}, {1, 1});
  expectTensor(run1("ScatterElements", {&row, &dup, &ru}, attrs({{"axis", I(1)}, {"reduction", S("add")}})),
               DType::kF32, {1, 5}, {1, 5.2, 3, 4, 5});
  expectTensor(run1("ScatterElements", {&row, &dup, &ru}, attrs({{"axis", I(1)}, {"reduction", S("max")}})),
               DType::kF32, {1, 5}, {1, 2.1, 3, 4, 5});
  expectTensor(run1("ScatterElements", {&row, &dup, &ru}, attrs({{"axis", I(1)}, {"reduction", S("min")}})),
               DType::kF32, {1, 5}, {1, 1.1, 3, 4, 5});
  EXPECT_NE(runError("ScatterElements", {&row, &dup, &ru}, attrs({{"axis", I(1)}, {"reduction", S("avg")}}))
                .find("unknown reduction"),
            std::string::npos);
  Tensor badUpd = f32({1, 3}, {1, 2, 3});
  EXPECT_FALSE(runOp("ScatterElements", {&row, &dup, &badUpd}, attrs({{"axis", I(1)}})).ok());
}

TEST(OpsScatterND, SlicesAndReductions) {
  Tensor d = f32({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor idx = i64({4, 1}, {4, 3, 1, 7}), upd = f32({4}, {9, 10, 11, 12});
  expectTensor(run1("ScatterND", {&d, &idx, &upd}), DType::kF32, {8}, {1, 11, 3, 10, 9, 6, 7, 12});
  Tensor m = i32({2, 2}, {1, 2, 3, 4}), row = i64({1, 1}, {-1}), ru = i32({1, 2}, {7, 8});
  expectTensor(run1("ScatterND", {&m, &row, &ru}), DType::kI32, {2, 2}, {1, 2, 7, 8});
  Tensor v = i64({3}, {1, 2, 3}), twice = i64({2, 1}, {0, 0}), u2 = i64({2}, {5, 6});
  expectTensor(run1("ScatterND", {&v, &twice, &u2}, attrs({{"reduction", S("add")}})), DType::kI64, {3},
               {12, 2, 3});
  expectTensor(run1("ScatterND", {&v, &twice, &u2}, attrs({{"reduction", S("mul")}})), DType::kI64, {3},
               {30, 2, 3});
  Tensor onesIdx = i64({2, 1}, {1, 1}), u3 = i64({2}, {0, 7});
  expectTensor(run1("ScatterND", {&v, &onesIdx, &u3}, attrs({{"reduction", S("max")}})), DType::kI64, {3},
               {1, 7, 3});
  expectTensor(run1("ScatterND", {&v, &onesIdx, &u3}, attrs({{"reduction", S("min")}})), DType::kI64, {3},
               {1, 0, 3});
  // f16 reductions are done in f32.
  auto h = [](std::vector<float> f) {
    std::vector<uint16_t> b;
    for (float x : f) b.push_back(floatToHalf(x));
    return Tensor::fromVector<uint16_t>(DType::kF16, {static_cast<int64_t>(b.size())}, b);
  };
  Tensor hd = h({1, 2, 3}), hu = h({0.5f, 0.25f});
  expectTensor(run1("ScatterND", {&hd, &twice, &hu}, attrs({{"reduction", S("add")}})), DType::kF16, {3},
               {1.75, 2, 3});
  Tensor wrongShape = i64({3}, {1, 2, 3});
  EXPECT_NE(runError("ScatterND", {&v, &twice, &wrongShape}).find("updates"), std::string::npos);
}

}  // namespace
}  // namespace pcc::testing
