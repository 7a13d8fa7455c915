#include "runtime/support/memory_account.h"

#include <fstream>
#include <sstream>
#include <string>

namespace pcc {

namespace {
thread_local MemoryAccount* tCurrent = nullptr;
}  // namespace

void MemoryAccount::add(int64_t bytes) {
  int64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

MemoryAccount* currentMemoryAccount() { return tCurrent; }

ScopedMemoryAccount::ScopedMemoryAccount(MemoryAccount* account) : previous_(tCurrent) { tCurrent = account; }

ScopedMemoryAccount::~ScopedMemoryAccount() { tCurrent = previous_; }

MemoryCharge::MemoryCharge(int64_t bytes) {
  account_ = chargeAllocation(bytes);
  if (account_) bytes_ = bytes;
}

MemoryCharge& MemoryCharge::operator=(MemoryCharge&& o) noexcept {
  if (this != &o) {
    reset();
    account_ = std::move(o.account_);
    bytes_ = o.bytes_;
    o.bytes_ = 0;
  }
  return *this;
}

void MemoryCharge::reset() {
  if (account_) account_->sub(bytes_);
  account_.reset();
  bytes_ = 0;
}

std::shared_ptr<MemoryAccount> chargeAllocation(int64_t bytes) {
  MemoryAccount* a = tCurrent;
  if (!a) return nullptr;
  a->add(bytes);
  return a->shared_from_this();
}

int64_t processPeakRss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream in(line.substr(6));
    int64_t kib = -1;
    std::string unit;
    if (in >> kib >> unit && unit == "kB") return kib * 1024;
    return -1;
  }
  return -1;
}

}  // namespace pcc
