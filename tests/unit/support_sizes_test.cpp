// Element counts and byte sizes: overflow-safe, bounded by kMaxTensorBytes.
#include <gtest/gtest.h>

#include <limits>
#include <new>

#include "runtime/support/dtype.h"
#include "runtime/support/tensor.h"

namespace pcc {
namespace {

constexpr int64_t k32 = int64_t(1) << 32;

TEST(Sizes, NumElementsSaturatesInsteadOfWrapping) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  // 2^32 * 2^32 wraps a plain int64 product to 0.
  EXPECT_EQ(numElements({k32, k32}), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(numElements({k32, k32, 0}), 0);
  EXPECT_EQ(numElements({3, -1}), -1);
}

TEST(Sizes, CheckedNumElements) {
  EXPECT_EQ(checkedNumElements({2, 3}), 6u);
  EXPECT_EQ(checkedNumElements({}), 1u);
  EXPECT_EQ(checkedNumElements({0, k32, k32}), 0u);
  EXPECT_FALSE(checkedNumElements({k32, k32}));
  EXPECT_FALSE(checkedNumElements({-2, 3}));
  EXPECT_EQ(checkedNumElements({10}, 10), 10u);
  EXPECT_FALSE(checkedNumElements({11}, 10));
  // Overflow of uint64 itself, not only the limit.
  EXPECT_FALSE(checkedNumElements({k32, k32, k32}, std::numeric_limits<uint64_t>::max()));
}

TEST(Sizes, CheckTensorSizeAtTheLimit) {
  EXPECT_TRUE(checkTensorSize({DType::kF32, {int64_t(1) << 38}}).ok());  // exactly 2^40 bytes
  Status over = checkTensorSize({DType::kF32, {(int64_t(1) << 38) + 1}});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.code(), StatusCode::kInvalidInput);
  EXPECT_NE(over.message().find("f32[274877906945]"), std::string::npos) << over.message();
  EXPECT_NE(over.message().find("1024 GiB"), std::string::npos) << over.message();
  EXPECT_TRUE(checkTensorSize({DType::kI8, {int64_t(1) << 40}}).ok());
  EXPECT_FALSE(checkTensorSize({DType::kI8, {k32, k32}}).ok());
  EXPECT_FALSE(checkTensorSize({DType::kF32, {-1, 2}}).ok());
}

TEST(Sizes, ZerosOverTheLimitIsAnAllocationFailure) {
  EXPECT_THROW(Tensor::zeros(DType::kF32, {k32, k32}), std::bad_alloc);
  EXPECT_THROW(Tensor::zeros(DType::kF64, {int64_t(1) << 38}), std::bad_alloc);
  EXPECT_EQ(Tensor::zeros(DType::kF32, {0, k32, k32}).numel(), 0);
}

TEST(Sizes, StatusCodeOfEnvironmentFaults) {
  EXPECT_EQ(environmentError("peer gone").exitCode(), 4);
  EXPECT_EQ(internalError("bug").exitCode(), 3);
}

}  // namespace
}  // namespace pcc
