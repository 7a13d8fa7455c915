// The memory account: tensors and charges made on a thread that names an
// account are counted there until released, on whichever thread; other
// threads charge nothing.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/support/memory_account.h"
#include "runtime/support/tensor.h"

namespace pcc {
namespace {

TEST(MemoryAccount, TensorsAreChargedWhileTheyLive) {
  std::shared_ptr<MemoryAccount> a = MemoryAccount::make();
  {
    ScopedMemoryAccount charging(a.get());
    Tensor x = Tensor::zeros(DType::kF32, {10});  // 40 bytes: one 64-byte block
    EXPECT_EQ(a->current(), 64);
    {
      Tensor y = Tensor::zeros(DType::kF32, {100});  // 400 -> 448
      Tensor view = y.reshaped({10, 10});            // shares y's block
      EXPECT_EQ(a->current(), 64 + 448);
    }
    EXPECT_EQ(a->current(), 64);
    EXPECT_EQ(a->peak(), 64 + 448);
    Tensor copy = x.clone();
    EXPECT_EQ(a->current(), 128);
  }
  EXPECT_EQ(a->current(), 0);
  EXPECT_EQ(a->peak(), 64 + 448);
  a->resetPeak();
  EXPECT_EQ(a->peak(), 0);
}

TEST(MemoryAccount, NoAccountNoCharge) {
  std::shared_ptr<MemoryAccount> a = MemoryAccount::make();
  EXPECT_EQ(currentMemoryAccount(), nullptr);
  Tensor x = Tensor::zeros(DType::kF32, {1000});
  {
    ScopedMemoryAccount charging(a.get());
    EXPECT_EQ(currentMemoryAccount(), a.get());
    {
      ScopedMemoryAccount none(nullptr);  // nested: none, then back
      Tensor y = Tensor::zeros(DType::kF32, {1000});
    }
    EXPECT_EQ(currentMemoryAccount(), a.get());
  }
  EXPECT_EQ(currentMemoryAccount(), nullptr);
  EXPECT_EQ(a->peak(), 0);
}

TEST(MemoryAccount, ReleasedOnAnotherThreadAndNotChargedByIt) {
  std::shared_ptr<MemoryAccount> a = MemoryAccount::make();
  Tensor held;
  {
    ScopedMemoryAccount charging(a.get());
    held = Tensor::zeros(DType::kF64, {16});  // 128 bytes
    std::thread other([&] {
      Tensor mine = Tensor::zeros(DType::kF64, {1024});  // the other thread names no account
      EXPECT_EQ(currentMemoryAccount(), nullptr);
    });
    other.join();
  }
  EXPECT_EQ(a->current(), 128);
  std::thread releaser([&] { held = Tensor(); });
  releaser.join();
  EXPECT_EQ(a->current(), 0);
  EXPECT_EQ(a->peak(), 128);
}

TEST(MemoryAccount, ChargesAndTheAccountOutlivingItsOwner) {
  std::shared_ptr<MemoryAccount> a = MemoryAccount::make();
  MemoryAccount* raw = a.get();
  MemoryCharge kept;
  Tensor t;
  {
    ScopedMemoryAccount charging(raw);
    MemoryCharge c(1000);
    EXPECT_EQ(raw->current(), 1000);
    kept = std::move(c);
    t = Tensor::zeros(DType::kU8, {64});
  }
  EXPECT_EQ(raw->current(), 1064);
  a.reset();  // the charge and the tensor keep the account alive
  kept.reset();
  EXPECT_EQ(raw->current(), 64);
  t = Tensor();  // releases the last reference without a crash
  MemoryCharge none(500);  // no account on this thread: nothing to release
  none.reset();
}

TEST(MemoryAccount, PeakRss) {
  int64_t rss = processPeakRss();
  EXPECT_GT(rss, 0);  // Linux: /proc/self/status has VmHWM
}

}  // namespace
}  // namespace pcc
