// Broadcasting binary and variadic ops: And, Or, Xor; Less, LessOrEqual,
// Greater, GreaterOrEqual; Mod; BitShift, BitwiseAnd/Or/Xor; Min, Max, Sum, Mean.
// Their type inference is runtime/schema/math_binary.cpp.
#include <cmath>
#include <type_traits>

#include "runtime/ops/math.h"
#include "runtime/schema/math_binary.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::math_binary_schema;

template <Logic kOp>
Status computeLogic(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, DType::kBool, shape);
  broadcastMap<uint8_t, uint8_t, uint8_t>(*in[0], *in[1], r, [](uint8_t a, uint8_t b) -> uint8_t {
    bool x = a != 0, y = b != 0;
    if constexpr (kOp == Logic::kAnd) return x && y;
    else if constexpr (kOp == Logic::kOr) return x || y;
    else return x != y;
  });
  return Status::OK();
}

template <Cmp kOp>
Status computeCmp(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeCmp<kOp>, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, DType::kBool, shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    broadcastMap<T, T, uint8_t>(*in[0], *in[1], r, [](T a, T b) -> uint8_t {
      if constexpr (kOp == Cmp::kLess) return a < b;
      else if constexpr (kOp == Cmp::kLessOrEqual) return a <= b;
      else if constexpr (kOp == Cmp::kGreater) return a > b;
      else return a >= b;
    });
    return Status::OK();
  }));
  return Status::OK();
}

Status computeMod(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeMod, in, attrs, out);
  bool cStyle = attrs.getInt("fmod", 0) != 0;
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, in[0]->dtype(), shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_integral_v<T>) {
      const T* pb = in[1]->data<T>();
      for (int64_t i = 0; i < in[1]->numel(); ++i)
        if (pb[i] == 0) return invalidInput("integer modulo by zero");
      broadcastMap<T, T, T>(*in[0], *in[1], r, [cStyle](T a, T b) -> T {
        if constexpr (std::is_signed_v<T>) {
          if (b == T(-1)) return T(0);  // INT_MIN % -1 traps on the machine; any a mod -1 is 0
        }
        T m = static_cast<T>(a % b);  // sign of the dividend, as C's fmod
        // Python-style: the result takes the sign of the divisor.
        if (!cStyle && m != 0 && ((m < 0) != (b < 0))) m = static_cast<T>(m + b);
        return m;
      });
    } else {
      broadcastMap<T, T, T>(*in[0], *in[1], r, [](T a, T b) { return std::fmod(a, b); });
    }
    return Status::OK();
  }));
  return Status::OK();
}

template <Bit kOp>
Status computeBit(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  bool left = attrs.getString("direction", "") == "LEFT";
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = output(out, 0, in[0]->dtype(), shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_integral_v<T>) {
      broadcastMap<T, T, T>(*in[0], *in[1], r, [left](T a, T b) -> T {
        (void)left;  // read by the shifts only
        if constexpr (kOp == Bit::kAnd) return static_cast<T>(a & b);
        else if constexpr (kOp == Bit::kOr) return static_cast<T>(a | b);
        else if constexpr (kOp == Bit::kXor) return static_cast<T>(a ^ b);
        else {
          // Shifting by the bit width or more is undefined in C++; every bit goes.
          using U = std::make_unsigned_t<T>;
          if (static_cast<uint64_t>(b) >= sizeof(T) * 8) return T(0);
          U ua = static_cast<U>(a);
          return static_cast<T>(left ? static_cast<U>(ua << b) : static_cast<U>(ua >> b));
        }
      });
      return Status::OK();
    } else {
      return internalError("bitwise op on a float type");
    }
  }));
  return Status::OK();
}

template <Fold kOp>
Status computeFold(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                   std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeFold<kOp>, in, attrs, out);
  Dims shape = in[0]->shape();
  for (size_t i = 1; i < in.size(); ++i) {
    ASSIGN_OR_RETURN(shape, broadcastShapes(shape, in[i]->shape()));
  }
  // Fold left to right: acc = f(acc, in[i]), starting from in[0] broadcast.
  // The last step writes the output; the steps before it temporaries (so
  // that input 0 is read whole before an output over it is written).
  size_t n = in.size();
  Tensor acc = n == 1 ? output(out, 0, in[0]->dtype(), shape) : Tensor::zeros(in[0]->dtype(), shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    Tensor zero = Tensor::zeros(in[0]->dtype(), {});
    broadcastMap<T, T, T>(*in[0], zero, acc, [](T a, T) { return a; });
    for (size_t i = 1; i < n; ++i) {
      Tensor next = i + 1 == n ? output(out, 0, in[0]->dtype(), shape) : Tensor::zeros(in[0]->dtype(), shape);
      broadcastMap<T, T, T>(acc, *in[i], next, [](T a, T b) -> T {
        if constexpr (kOp == Fold::kSum || kOp == Fold::kMean) {
          return static_cast<T>(a + b);
        } else {
          // NaN wins, as numpy's minimum/maximum propagate it.
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
          }
          if constexpr (kOp == Fold::kMin) return b < a ? b : a;
          else return b > a ? b : a;
        }
      });
      acc = std::move(next);
    }
    if constexpr (kOp == Fold::kMean) {
      T* p = acc.mutableData<T>();
      for (int64_t i = 0; i < acc.numel(); ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(in.size()));
    }
    return Status::OK();
  }));
  return Status::OK();
}

}  // namespace

void registerMathBinaryOps(OpRegistry& r) {
  r.add(OpKind::And, &computeLogic<Logic::kAnd>, kWritesOutputs);
  r.add(OpKind::Or, &computeLogic<Logic::kOr>, kWritesOutputs);
  r.add(OpKind::Xor, &computeLogic<Logic::kXor>, kWritesOutputs);
  r.add(OpKind::Less, &computeCmp<Cmp::kLess>, kWritesOutputs);
  r.add(OpKind::LessOrEqual, &computeCmp<Cmp::kLessOrEqual>, kWritesOutputs);
  r.add(OpKind::Greater, &computeCmp<Cmp::kGreater>, kWritesOutputs);
  r.add(OpKind::GreaterOrEqual, &computeCmp<Cmp::kGreaterOrEqual>, kWritesOutputs);
  r.add(OpKind::Mod, &computeMod, kWritesOutputs);
  r.add(OpKind::BitShift, &computeBit<Bit::kShift>, kWritesOutputs);
  r.add(OpKind::BitwiseAnd, &computeBit<Bit::kAnd>, kWritesOutputs);
  r.add(OpKind::BitwiseOr, &computeBit<Bit::kOr>, kWritesOutputs);
  r.add(OpKind::BitwiseXor, &computeBit<Bit::kXor>, kWritesOutputs);
  r.add(OpKind::Min, &computeFold<Fold::kMin>, kWritesOutputs);
  r.add(OpKind::Max, &computeFold<Fold::kMax>, kWritesOutputs);
  r.add(OpKind::Sum, &computeFold<Fold::kSum>, kWritesOutputs);
  r.add(OpKind::Mean, &computeFold<Fold::kMean>, kWritesOutputs);
}

}  // namespace pcc
