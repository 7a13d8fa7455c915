// Overflow-checked int64 arithmetic for the sizes type inference computes
// from model-given integers (pads, repeats, strides, dilations, output
// padding, concatenated extents). A formula is written as usual on CheckedInt
// values; a step that would wrap around int64 marks the result overflowed
// instead, and the shape function refuses the node (docs/security.md): a
// wrapped size could otherwise pass every later check as a small, wrong one.
#pragma once

#include <cstdint>

namespace pcc::ops {

class CheckedInt {
 public:
  constexpr CheckedInt(int64_t v) : v_(v) {}  // NOLINT(google-explicit-constructor): formulas mix both

  /// \returns `v` truncated toward zero, overflowed when it is not finite or
  /// lies outside int64 (where a plain cast is undefined behaviour).
  static CheckedInt truncate(double v) {
    CheckedInt r(0);
    if (v > -9223372036854775808.0 && v < 9223372036854775808.0) r.v_ = static_cast<int64_t>(v);
    else r.overflow_ = true;  // also NaN
    return r;
  }

  /// The value; meaningful only when !overflowed().
  constexpr int64_t value() const { return v_; }
  /// True when some step of the computation leading here overflowed int64.
  constexpr bool overflowed() const { return overflow_; }

  friend CheckedInt operator+(CheckedInt a, CheckedInt b) {
    CheckedInt r(0);
    r.overflow_ = a.overflow_ || b.overflow_ || __builtin_add_overflow(a.v_, b.v_, &r.v_);
    return r;
  }
  friend CheckedInt operator-(CheckedInt a, CheckedInt b) {
    CheckedInt r(0);
    r.overflow_ = a.overflow_ || b.overflow_ || __builtin_sub_overflow(a.v_, b.v_, &r.v_);
    return r;
  }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) {
    CheckedInt r(0);
    r.overflow_ = a.overflow_ || b.overflow_ || __builtin_mul_overflow(a.v_, b.v_, &r.v_);
    return r;
  }

 private:
  int64_t v_;
  bool overflow_ = false;
};

}  // namespace pcc::ops
