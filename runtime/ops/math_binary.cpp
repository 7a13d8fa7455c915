// Broadcasting binary and variadic ops: And, Or, Xor; Less, LessOrEqual,
// Greater, GreaterOrEqual; Mod; BitShift, BitwiseAnd/Or/Xor; Min, Max, Sum, Mean.
#include <cmath>
#include <type_traits>

#include "runtime/ops/math.h"

namespace pcc {
namespace {
using namespace ops;

/// Checks a two-input op whose inputs share one of `allowed` dtypes.
/// \returns the output type: `outType` (or the input dtype when undefined) at the broadcast shape.
StatusOr<std::vector<TensorType>> inferBinary(const InferArgs& args,
                                              std::initializer_list<DType> allowed, DType outType) {
  RETURN_IF_ERROR(checkArity(args, 2, 2));
  RETURN_IF_ERROR(checkDType(args.inputs[0], allowed, "input A"));
  RETURN_IF_ERROR(checkSameDType(args));
  ASSIGN_OR_RETURN(Dims out, broadcastShapes(args.inputs[0].shape, args.inputs[1].shape));
  return std::vector<TensorType>{
      {outType == DType::kUndefined ? args.inputs[0].dtype : outType, out}};
}

// ---- And, Or, Xor ----------------------------------------------------------

enum class Logic { kAnd, kOr, kXor };

template <Logic kOp>
StatusOr<std::vector<TensorType>> inferLogic(const InferArgs& args) {
  return inferBinary(args, {DType::kBool}, DType::kBool);
}

template <Logic kOp>
Status computeLogic(const std::vector<const Tensor*>& in, const AttrMap&, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(DType::kBool, shape);
  broadcastMap<uint8_t, uint8_t, uint8_t>(*in[0], *in[1], r, [](uint8_t a, uint8_t b) -> uint8_t {
    bool x = a != 0, y = b != 0;
    if constexpr (kOp == Logic::kAnd) return x && y;
    else if constexpr (kOp == Logic::kOr) return x || y;
    else return x != y;
  });
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Comparisons -----------------------------------------------------------

enum class Cmp { kLess, kLessOrEqual, kGreater, kGreaterOrEqual };

template <Cmp kOp>
StatusOr<std::vector<TensorType>> inferCmp(const InferArgs& args) {
  return inferBinary(args, kNumericTypes, DType::kBool);
}

template <Cmp kOp>
Status computeCmp(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeCmp<kOp>, in, attrs, out);
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(DType::kBool, shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    broadcastMap<T, T, uint8_t>(*in[0], *in[1], r, [](T a, T b) -> uint8_t {
      if constexpr (kOp == Cmp::kLess) return a < b;
      else if constexpr (kOp == Cmp::kLessOrEqual) return a <= b;
      else if constexpr (kOp == Cmp::kGreater) return a > b;
      else return a >= b;
    });
    return Status::OK();
  }));
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Mod -------------------------------------------------------------------

StatusOr<std::vector<TensorType>> inferMod(const InferArgs& args) {
  ASSIGN_OR_RETURN(std::vector<TensorType> t, inferBinary(args, kNumericTypes, DType::kUndefined));
  int64_t fmod = args.attrs ? args.attrs->getInt("fmod", 0) : 0;
  if (fmod != 0 && fmod != 1) return invalidInput("fmod must be 0 or 1, got ", fmod);
  if (fmod == 0 && isFloat(args.inputs[0].dtype))
    return invalidInput("fmod = 0 is defined for integer types only, got ", args.inputs[0].str());
  return t;
}

Status computeMod(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeMod, in, attrs, out);
  bool cStyle = attrs.getInt("fmod", 0) != 0;
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(in[0]->dtype(), shape);
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
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Bitwise ops -----------------------------------------------------------

enum class Bit { kAnd, kOr, kXor, kShift };

template <Bit kOp>
StatusOr<std::vector<TensorType>> inferBit(const InferArgs& args) {
  if constexpr (kOp == Bit::kShift) {
    // ONNX BitShift is defined on the unsigned types.
    std::string dir = args.attrs ? args.attrs->getString("direction", "") : "";
    if (dir != "LEFT" && dir != "RIGHT")
      return invalidInput("direction must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
    return inferBinary(args, {DType::kU8, DType::kU16, DType::kU32, DType::kU64}, DType::kUndefined);
  } else {
    return inferBinary(args, kIntTypes, DType::kUndefined);
  }
}

template <Bit kOp>
Status computeBit(const std::vector<const Tensor*>& in, const AttrMap& attrs,
                  std::vector<Tensor>& out) {
  bool left = attrs.getString("direction", "") == "LEFT";
  ASSIGN_OR_RETURN(Dims shape, broadcastShapes(in[0]->shape(), in[1]->shape()));
  Tensor r = Tensor::zeros(in[0]->dtype(), shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    if constexpr (std::is_integral_v<T>) {
      broadcastMap<T, T, T>(*in[0], *in[1], r, [left](T a, T b) -> T {
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
  out.push_back(std::move(r));
  return Status::OK();
}

// ---- Min, Max, Sum, Mean (variadic) ----------------------------------------

enum class Fold { kMin, kMax, kSum, kMean };

template <Fold kOp>
StatusOr<std::vector<TensorType>> inferFold(const InferArgs& args) {
  if (args.inputs.empty()) return invalidInput("expects at least 1 input, got 0");
  for (size_t i = 0; i < args.inputs.size(); ++i)
    if (!args.has(i)) return invalidInput("input ", i, " is missing");
  bool floatOnly = kOp == Fold::kSum || kOp == Fold::kMean;
  RETURN_IF_ERROR(checkDType(args.inputs[0], floatOnly ? kFloatTypes : kNumericTypes, "input 0"));
  RETURN_IF_ERROR(checkSameDType(args));
  Dims shape = args.inputs[0].shape;
  for (size_t i = 1; i < args.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(shape, broadcastShapes(shape, args.inputs[i].shape));
  }
  return std::vector<TensorType>{{args.inputs[0].dtype, shape}};
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
  Tensor acc = Tensor::zeros(in[0]->dtype(), shape);
  RETURN_IF_ERROR(visitNumeric(in[0]->dtype(), [&]<typename T>() -> Status {
    Tensor zero = Tensor::zeros(in[0]->dtype(), {});
    broadcastMap<T, T, T>(*in[0], zero, acc, [](T a, T) { return a; });
    for (size_t i = 1; i < in.size(); ++i) {
      Tensor next = Tensor::zeros(in[0]->dtype(), shape);
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
  out.push_back(std::move(acc));
  return Status::OK();
}

}  // namespace

void registerMathBinaryOps(OpRegistry& r) {
  r.add({"And", &inferLogic<Logic::kAnd>, &computeLogic<Logic::kAnd>});
  r.add({"Or", &inferLogic<Logic::kOr>, &computeLogic<Logic::kOr>});
  r.add({"Xor", &inferLogic<Logic::kXor>, &computeLogic<Logic::kXor>});
  r.add({"Less", &inferCmp<Cmp::kLess>, &computeCmp<Cmp::kLess>});
  r.add({"LessOrEqual", &inferCmp<Cmp::kLessOrEqual>, &computeCmp<Cmp::kLessOrEqual>});
  r.add({"Greater", &inferCmp<Cmp::kGreater>, &computeCmp<Cmp::kGreater>});
  r.add({"GreaterOrEqual", &inferCmp<Cmp::kGreaterOrEqual>, &computeCmp<Cmp::kGreaterOrEqual>});
  r.add({"Mod", &inferMod, &computeMod});
  r.add({"BitShift", &inferBit<Bit::kShift>, &computeBit<Bit::kShift>});
  r.add({"BitwiseAnd", &inferBit<Bit::kAnd>, &computeBit<Bit::kAnd>});
  r.add({"BitwiseOr", &inferBit<Bit::kOr>, &computeBit<Bit::kOr>});
  r.add({"BitwiseXor", &inferBit<Bit::kXor>, &computeBit<Bit::kXor>});
  r.add({"Min", &inferFold<Fold::kMin>, &computeFold<Fold::kMin>});
  r.add({"Max", &inferFold<Fold::kMax>, &computeFold<Fold::kMax>});
  r.add({"Sum", &inferFold<Fold::kSum>, &computeFold<Fold::kSum>});
  r.add({"Mean", &inferFold<Fold::kMean>, &computeFold<Fold::kMean>});
}

}  // namespace pcc
