// Memory accounting: the bytes one rank holds, counted where they are
// allocated. A MemoryAccount is a pair of atomic counters (bytes held now and
// their peak). A thread names the account it charges with a
// ScopedMemoryAccount; from then on every tensor it allocates
// (Tensor::zeros and what is built on it), every block the cpu backend
// allocates (the arena, model outputs) and every MemoryCharge it makes is
// added to that account, and taken off again when the memory is released,
// whichever thread releases it. With no account named (the default), an
// allocation costs one thread-local read. What is counted and what is not:
// docs/runtime.md#memory-accounting.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace pcc {

class MemoryAccount : public std::enable_shared_from_this<MemoryAccount> {
 public:
  /// \returns a new account holding 0 bytes.
  static std::shared_ptr<MemoryAccount> make() { return std::shared_ptr<MemoryAccount>(new MemoryAccount); }

  /// Adds `bytes` held (and raises the peak when it passes it).
  void add(int64_t bytes);
  /// Takes `bytes` off (memory released).
  void sub(int64_t bytes) { current_.fetch_sub(bytes, std::memory_order_relaxed); }
  /// \returns the bytes held now.
  int64_t current() const { return current_.load(std::memory_order_relaxed); }
  /// \returns the most bytes held at once since the account was made or the
  /// peak was last reset.
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  /// Sets the peak to the bytes held now.
  void resetPeak() { peak_.store(current(), std::memory_order_relaxed); }

 private:
  MemoryAccount() = default;
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

/// \returns the account the calling thread charges, or nullptr (none).
MemoryAccount* currentMemoryAccount();

/// Makes `account` (nullptr: none) the calling thread's account for the
/// guard's lifetime; the one before is restored after.
class ScopedMemoryAccount {
 public:
  explicit ScopedMemoryAccount(MemoryAccount* account);
  ~ScopedMemoryAccount();
  ScopedMemoryAccount(const ScopedMemoryAccount&) = delete;
  ScopedMemoryAccount& operator=(const ScopedMemoryAccount&) = delete;

 private:
  MemoryAccount* previous_;
};

/// `bytes` charged to the account of the thread that made the charge (none
/// when it had none) until the charge is destroyed or reset: for memory that
/// is not a tensor (a communicator's staging vector, a oneDNN reorder buffer).
class MemoryCharge {
 public:
  MemoryCharge() = default;
  /// Charges `bytes` to the calling thread's account, if it has one.
  explicit MemoryCharge(int64_t bytes);
  ~MemoryCharge() { reset(); }
  MemoryCharge(MemoryCharge&& o) noexcept : account_(std::move(o.account_)), bytes_(o.bytes_) { o.bytes_ = 0; }
  MemoryCharge& operator=(MemoryCharge&& o) noexcept;
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  /// Releases the charge.
  void reset();

 private:
  std::shared_ptr<MemoryAccount> account_;
  int64_t bytes_ = 0;
};

/// \returns a deleter-side hook for a block of `bytes` just allocated: the
/// calling thread's account with `bytes` added, or nullptr when it has none.
/// The owner of the block calls sub(bytes) on it when it frees the block.
std::shared_ptr<MemoryAccount> chargeAllocation(int64_t bytes);

/// \returns this process's peak resident set size in bytes (VmHWM of
/// /proc/self/status), or -1 where it cannot be read.
int64_t processPeakRss();

}  // namespace pcc
