// sliceBlock, the one tensor slicer, against an element-by-element copy.
#include <gtest/gtest.h>

#include "runtime/support/random.h"
#include "runtime/support/tensor_block.h"

namespace pcc {
namespace {

// The element of `t` at multi-index `idx`, as a double.
double at(const Tensor& t, const Dims& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off = off * t.shape()[d] + idx[d];
  return t.getDouble(off);
}

void expectBlock(DType dt, const Dims& shape, const Dims& start, const Dims& extent) {
  Tensor t = pseudoRandomTensor({dt, shape}, 11);
  auto b = sliceBlock(t, start, extent);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->shape(), extent);
  ASSERT_EQ(b->dtype(), dt);
  Dims idx(extent.size(), 0), src(extent.size());
  for (int64_t i = 0; i < b->numel(); ++i) {
    for (size_t d = 0; d < idx.size(); ++d) src[d] = start[d] + idx[d];
    ASSERT_EQ(b->getDouble(i), at(t, src)) << "element " << i;
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < extent[d]) break;
      idx[d] = 0;
    }
  }
}

TEST(SupportTensorBlock, MatchesAnElementwiseCopy) {
  expectBlock(DType::kF32, {6, 5}, {2, 0}, {3, 5});         // rows: one run
  expectBlock(DType::kF32, {6, 5}, {0, 1}, {6, 3});         // columns
  expectBlock(DType::kI64, {4, 3, 5}, {1, 1, 2}, {2, 2, 3});
  expectBlock(DType::kBF16, {4, 3, 5}, {0, 2, 0}, {4, 1, 5});
  expectBlock(DType::kBool, {3, 4}, {1, 0}, {2, 4});
  expectBlock(DType::kF64, {2, 3}, {0, 0}, {2, 3});         // whole
  expectBlock(DType::kF32, {}, {}, {});                     // scalar
  expectBlock(DType::kF32, {4, 0, 2}, {1, 0, 0}, {2, 0, 2}); // empty
}

TEST(SupportTensorBlock, RefusesABlockOutside) {
  Tensor t = pseudoRandomTensor({DType::kF32, {4, 4}}, 1);
  auto r = sliceBlock(t, {2, 0}, {3, 4});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside f32[4,4]"), std::string::npos) << r.status().message();
  EXPECT_FALSE(sliceBlock(t, {0}, {4}).ok());  // rank mismatch
}

}  // namespace
}  // namespace pcc
