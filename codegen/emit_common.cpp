// What the C++ and CUDA emitters share: C types, the scalar prelude and the
// expression printer.
//
// Algorithm of exprLines / exprStatements:
//  1. Mark the Exprs the roots (the outputs) need, walking args back from
//     each root but not into the Exprs already in scope (`have`: a row's
//     reductions, computed by the emitter's own loops).
//  2. Print each marked Expr not in scope in order as one `const T vN = ...;`:
//     an input is its load (a float16 or bfloat16 one widened to float by
//     pk_from_f16 / pk_from_bf16), a constant a literal of its type (floats
//     in hexadecimal, so they are exact), a cast to float16 or bfloat16 the
//     float rounded to that type (pk_round_f16 / pk_round_bf16), anything
//     else a call of its pk_ helper. float16 and bfloat16 values are floats
//     in the code: math on them is float32.
//  3. Print one store per output (pk_to_f16 / pk_to_bf16 round a float16
//     or bfloat16 one to its storage type).
//
// Text of a model (a node's or a value's name) reaches the source only in
// comments, and only through sourceSafeText: every byte outside a small
// printable set is percent-encoded, so no name can end its comment (a line
// break, a backslash before one, a trigraph, "*/") or open a string.
#include <cstdio>
#include <string_view>

#include "codegen/kernel_emit.h"

namespace pcc {

namespace {

std::string literal(double v, DType t) {
  char buf[64];
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      if (v != v) return "(0.0f / 0.0f)";
      if (v > 3.5e38) return "(1.0f / 0.0f)";
      if (v < -3.5e38) return "(-1.0f / 0.0f)";
      std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
      return buf;
    case DType::kBool: return v != 0 ? "true" : "false";
    case DType::kI32: std::snprintf(buf, sizeof buf, "%d", static_cast<int>(v)); return buf;
    default: std::snprintf(buf, sizeof buf, "%lldLL", static_cast<long long>(v)); return buf;
  }
}

/// Bytes sourceSafeText keeps as they are: letters, digits, space and
/// punctuation that can neither end a comment or a string literal nor start
/// an escape, a line splice or a trigraph (no backslash, quote, '*', '?' or
/// '%', the escape character itself).
bool keptInSource(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  static constexpr std::string_view kPunct = " _-.,:;/()[]{}<>+=#@!&|^~$";
  return kPunct.find(static_cast<char>(c)) != std::string_view::npos;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string sourceSafeText(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string s;
  s.reserve(text.size());
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (keptInSource(c)) {
      s += ch;
    } else {
      s += '%';
      s += kHex[c >> 4];
      s += kHex[c & 15];
    }
  }
  return s;
}

std::string fromSourceSafeText(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int hi = -1, lo = -1;
    if (text[i] == '%' && i + 2 < text.size() && (hi = hexValue(text[i + 1])) >= 0 &&
        (lo = hexValue(text[i + 2])) >= 0) {
      s += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      s += text[i];
    }
  }
  return s;
}

std::string cTypeOf(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: return "float";
    case DType::kI32: return "int";
    case DType::kI64: return "long long";
    case DType::kBool: return "bool";
    default: return "void";
  }
}

std::string storageTypeOf(DType t, bool cuda) {
  if (t == DType::kF16) return cuda ? "__half" : "unsigned short";
  if (t == DType::kBF16) return cuda ? "__nv_bfloat16" : "unsigned short";
  return cTypeOf(t);
}

std::string loadAs(DType t, const std::string& element) {
  if (t == DType::kF16) return strCat("pk_from_f16(", element, ")");
  if (t == DType::kBF16) return strCat("pk_from_bf16(", element, ")");
  return element;
}

std::string storeAs(DType t, const std::string& value) {
  if (t == DType::kF16) return strCat("pk_to_f16(", value, ")");
  if (t == DType::kBF16) return strCat("pk_to_bf16(", value, ")");
  return value;
}

bool usesHalfTypes(const KernelSpec& spec) {
  for (const Expr& e : spec.exprs)
    if (e.dtype == DType::kF16 || e.dtype == DType::kBF16) return true;
  for (const KernelInput& in : spec.inputs)
    if (in.type.dtype == DType::kF16 || in.type.dtype == DType::kBF16) return true;
  for (const KernelOutput& o : spec.outputs)
    if (o.type.dtype == DType::kF16 || o.type.dtype == DType::kBF16) return true;
  return false;
}

std::string halfConversionsCpp() {
  // The same arithmetic as halfToFloat, floatToHalf, bf16ToFloat and
  // floatToBf16 (runtime/support/tensor.cpp), bit for bit: round to nearest
  // even, overflow to infinity, float16 subnormals kept, NaN stays NaN.
  return R"(static inline float pk_bits_to_float(unsigned int b) { float f; memcpy(&f, &b, 4); return f; }
static inline unsigned int pk_float_to_bits(float f) { unsigned int b; memcpy(&b, &f, 4); return b; }
static inline float pk_from_f16(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (ex == 0) {
    if (man == 0) return pk_bits_to_float(sign);
    int e = -1;
    do { ++e; man <<= 1; } while (!(man & 0x400u));
    return pk_bits_to_float(sign | (unsigned int)(127 - 15 - e) << 23 | (man & 0x3ffu) << 13);
  }
  if (ex == 31) return pk_bits_to_float(sign | 0x7f800000u | man << 13);
  return pk_bits_to_float(sign | (ex + 127 - 15) << 23 | man << 13);
}
static inline unsigned short pk_to_f16(float f) {
  const unsigned int x = pk_float_to_bits(f), sign = (x >> 16) & 0x8000u, man = x & 0x7fffffu;
  const int ex = (int)((x >> 23) & 0xffu) - 127 + 15;
  if (((x >> 23) & 0xffu) == 0xffu) return (unsigned short)(sign | 0x7c00u | (man ? 0x200u : 0u));
  if (ex >= 31) return (unsigned short)(sign | 0x7c00u);
  if (ex <= 0) {
    if (ex < -10) return (unsigned short)sign;
    const unsigned int m = man | 0x800000u, shift = (unsigned int)(14 - ex);
    unsigned int h = m >> shift;
    const unsigned int rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (h & 1u))) ++h;
    return (unsigned short)(sign | h);
  }
  unsigned int h = sign | (unsigned int)ex << 10 | man >> 13;
  const unsigned int rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return (unsigned short)h;
}
static inline float pk_from_bf16(unsigned short h) { return pk_bits_to_float((unsigned int)h << 16); }
static inline unsigned short pk_to_bf16(float f) {
  const unsigned int x = pk_float_to_bits(f);
  if (f != f) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static inline float pk_round_f16(float f) { return pk_from_f16(pk_to_f16(f)); }
static inline float pk_round_bf16(float f) { return pk_from_bf16(pk_to_bf16(f)); }
)";
}

std::string halfConversionsCuda() {
  // cuda_fp16.h and cuda_bf16.h round to nearest even too; NaN stays NaN
  // (its payload may differ from the C++ form's).
  return R"(#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float pk_from_f16(__half h) { return __half2float(h); }
__device__ __forceinline__ __half pk_to_f16(float f) { return __float2half_rn(f); }
__device__ __forceinline__ float pk_from_bf16(__nv_bfloat16 h) { return __bfloat162float(h); }
__device__ __forceinline__ __nv_bfloat16 pk_to_bf16(float f) { return __float2bfloat16_rn(f); }
__device__ __forceinline__ float pk_round_f16(float f) { return __half2float(__float2half_rn(f)); }
__device__ __forceinline__ float pk_round_bf16(float f) { return __bfloat162float(__float2bfloat16_rn(f)); }
)";
}

std::string vectorMathPrelude(const std::string& q) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  // A select that leaves no arithmetic in a branch: with FP traps assumed
  // (the default), the compiler would not vectorize a ?: whose arm computes.
  line(q + " float pk_fsel(bool c, float a, float b) {");
  line("  union { float f; int i; } ua, ub;");
  line("  ua.f = a;");
  line("  ub.f = b;");
  line("  const int m = -(int)c;");
  line("  ua.i = (ua.i & m) | (ub.i & ~m);");
  line("  return ua.f;");
  line("}");
  // exp(x) = 2^n * e^r with n = round(x / ln 2) (the 1.5 * 2^23 trick rounds
  // to nearest), ln 2 split in two for an exact r, e^r by a degree-6
  // polynomial (Cephes' expf coefficients), 2^n as 2^(n-1) * 2 built from its
  // exponent bits so that n = 128 stays representable. Relative error about
  // 1e-7; inf, -inf and NaN as expf; results below FLT_MIN flush to 0.
  line(q + " float pk_exp(float x) {");
  line("  const float hi = 88.72283935546875f, lo = -87.33654022216797f;");
  line("  const float xc = pk_fsel(x < lo, lo, pk_fsel(x > hi, hi, x));");
  line("  const float n = (xc * 1.44269502162933349609375f + 12582912.0f) - 12582912.0f;");
  line("  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;");
  line("  float p = 1.9875691500e-4f;");
  line("  p = p * r + 1.3981999507e-3f;");
  line("  p = p * r + 8.3334519073e-3f;");
  line("  p = p * r + 4.1665795894e-2f;");
  line("  p = p * r + 1.6666665459e-1f;");
  line("  p = p * r + 5.0000001201e-1f;");
  line("  p = p * r * r + r + 1.0f;");
  line("  union { int i; float f; } e;");
  line("  e.i = ((int)n + 126) << 23;");
  line("  const float y = p * e.f * 2.0f;");
  line("  return pk_fsel(x > hi, 1.0f / 0.0f, pk_fsel(x < lo, 0.0f, y));");
  line("}");
  // tanh: an odd polynomial below 0.625 (Cephes' tanhf), 1 - 2 / (e^2|x| + 1) above.
  line(q + " float pk_tanh(float x) {");
  line("  const float a = fabsf(x), z = x * x;");
  line("  float p = -5.70498872745e-3f;");
  line("  p = p * z + 2.06390887954e-2f;");
  line("  p = p * z - 5.37397155531e-2f;");
  line("  p = p * z + 1.33314422036e-1f;");
  line("  p = p * z - 3.33332819422e-1f;");
  line("  const float big = 1.0f - 2.0f / (pk_exp(2.0f * a) + 1.0f);");
  line("  return pk_fsel(a < 0.625f, x + x * z * p, pk_fsel(x < 0.0f, -big, big));");
  line("}");
  line(q + " float pk_sigmoid(float x) { return 1.0f / (1.0f + pk_exp(-x)); }");
  // erf below |x| = 1: x * P(x^2); above: 1 - erfc(|x|) with the sign of x,
  // erfc(a) = e^(-a^2) / a * Q(1 / a^2). P and Q are least-squares fits (in
  // double, rounded to float) of erf(x) / x on [0, 1] and of
  // erfc(a) e^(a^2) a on [1, 10]. Measured against double erf over float
  // inputs: erf within 2.8e-7 relative, erfc above 1 within 4.2e-6 (the
  // rounding of a^2 in e^(-a^2)); gelu_erf takes 1 + erf(z) as erfc(-z) for
  // z < -1, without cancellation.
  line(q + " float pk_erf_small(float z) {  // erf(x) / x at z = x^2, |x| < 1");
  line("  float p = 7.93349391e-05f;");
  line("  p = p * z - 0.00080348464f;");
  line("  p = p * z + 0.00519121857f;");
  line("  p = p * z - 0.0268553998f;");
  line("  p = p * z + 0.112836257f;");
  line("  p = p * z - 0.376126289f;");
  line("  return p * z + 1.12837923f;");
  line("}");
  line(q + " float pk_erfc_big(float a) {  // erfc(a), a >= 1");
  line("  const float z = a * a, u = 1.0f / z;");
  line("  float p = -0.28268829f;");
  line("  p = p * u + 1.43987298f;");
  line("  p = p * u - 3.17816329f;");
  line("  p = p * u + 4.02217531f;");
  line("  p = p * u - 3.28691411f;");
  line("  p = p * u + 1.89827132f;");
  line("  p = p * u - 0.880039275f;");
  line("  p = p * u + 0.412692606f;");
  line("  p = p * u - 0.281812131f;");
  line("  p = p * u + 0.564187288f;");
  line("  return pk_exp(-z) * p / a;");
  line("}");
  line(q + " float pk_erf(float x) {");
  line("  const float a = fabsf(x);");
  line("  return pk_fsel(a < 1.0f, x * pk_erf_small(x * x), copysignf(1.0f - pk_erfc_big(a), x));");
  line("}");
  line(q + " float pk_gelu_erf(float x) {");
  line("  const float z = x * 0.70710678118654752f, a = fabsf(z), e = pk_erfc_big(a);");
  line("  const float onePlusErf = pk_fsel(a < 1.0f, 1.0f + z * pk_erf_small(z * z), pk_fsel(z < 0.0f, e, 2.0f - e));");
  line("  return 0.5f * x * onePlusErf;");
  line("}");
  // 0.5 * (1 + tanh(u)) = 1 / (1 + e^-2u): no cancellation where tanh(u) is near -1.
  line(q + " float pk_gelu_tanh(float x) {");
  line("  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);");
  line("  return x / (1.0f + pk_exp(-2.0f * u));");
  line("}");
  return s;
}

std::string scalarPrelude(const std::string& q, bool vectorMath) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  if (vectorMath) s += vectorMathPrelude(q);
  line("template <class T> " + q + " T pk_add(T a, T b) { return a + b; }");
  line("template <class T> " + q + " T pk_sub(T a, T b) { return a - b; }");
  line("template <class T> " + q + " T pk_mul(T a, T b) { return a * b; }");
  line("template <class T> " + q + " T pk_div(T a, T b) { return a / b; }");
  // NaN wins, as in the reference kernels.
  line("template <class T> " + q + " T pk_max(T a, T b) { return (a != a || a > b) ? a : b; }");
  line("template <class T> " + q + " T pk_min(T a, T b) { return (a != a || a < b) ? a : b; }");
  line("template <class T> " + q + " bool pk_eq(T a, T b) { return a == b; }");
  line("template <class T> " + q + " bool pk_lt(T a, T b) { return a < b; }");
  line("template <class T> " + q + " bool pk_le(T a, T b) { return a <= b; }");
  line("template <class T> " + q + " bool pk_gt(T a, T b) { return a > b; }");
  line("template <class T> " + q + " bool pk_ge(T a, T b) { return a >= b; }");
  line(q + " bool pk_and(bool a, bool b) { return a && b; }");
  line(q + " bool pk_or(bool a, bool b) { return a || b; }");
  line(q + " bool pk_not(bool a) { return !a; }");
  line(q + " float pk_pow(float a, float b) { return powf(a, b); }");
  line(q + " float pk_neg(float x) { return -x; }");
  line(q + " float pk_abs(float x) { return fabsf(x); }");
  line(q + " float pk_sqrt(float x) { return sqrtf(x); }");
  if (!vectorMath) line(q + " float pk_exp(float x) { return expf(x); }");
  line(q + " float pk_log(float x) { return logf(x); }");
  if (!vectorMath) line(q + " float pk_erf(float x) { return erff(x); }");
  if (!vectorMath) line(q + " float pk_tanh(float x) { return tanhf(x); }");
  if (!vectorMath) line(q + " float pk_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }");
  line(q + " float pk_relu(float x) { return x < 0.0f ? 0.0f : x; }");
  line(q + " float pk_recip(float x) { return 1.0f / x; }");
  if (!vectorMath) line(q + " float pk_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }");
  if (!vectorMath) line(q + " float pk_gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))); }");
  line(q + " float pk_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }");
  return s;
}

std::string exprLines(const KernelSpec& spec, const std::vector<int>& roots, const std::vector<bool>& have,
                      const std::string& indent, const std::function<std::string(int)>& load) {
  // Step 1.
  std::vector<bool> live(spec.exprs.size(), false);
  for (int r : roots) live[r] = true;
  for (size_t i = spec.exprs.size(); i-- > 0;)
    if (live[i] && !have[i])
      for (int a : spec.exprs[i].args) live[a] = true;
  // Step 2.
  std::string s;
  for (size_t i = 0; i < spec.exprs.size(); ++i) {
    if (!live[i] || have[i]) continue;
    const Expr& e = spec.exprs[i];
    std::string rhs;
    auto arg = [&](size_t k) { return strCat("v", e.args.at(k)); };
    switch (e.op) {
      case ScalarOp::kInput: rhs = loadAs(spec.inputs[e.input].type.dtype, load(e.input)); break;
      case ScalarOp::kConst: rhs = literal(e.value, e.dtype); break;
      case ScalarOp::kCast:
        if (e.dtype == DType::kBool) {
          rhs = strCat("(", arg(0), " != 0)");
        } else if (e.dtype == DType::kF16 || e.dtype == DType::kBF16) {
          rhs = strCat(e.dtype == DType::kF16 ? "pk_round_f16" : "pk_round_bf16", "((float)", arg(0), ")");
        } else {
          rhs = strCat("(", cTypeOf(e.dtype), ")", arg(0));
        }
        break;
      case ScalarOp::kSelect: rhs = strCat(arg(0), " ? ", arg(1), " : ", arg(2)); break;
      case ScalarOp::kReduceSum:
      case ScalarOp::kReduceMax: rhs = "0 /* a reduction the emitter did not compute: a bug */"; break;
      default: {
        rhs = strCat("pk_", scalarOpName(e.op), "(");
        for (size_t k = 0; k < e.args.size(); ++k) rhs += (k ? ", " : "") + arg(k);
        rhs += ")";
      }
    }
    s += strCat(indent, "const ", cTypeOf(e.dtype), " v", i, " = ", rhs, ";\n");
  }
  return s;
}

std::string outputValue(const KernelSpec& spec, size_t k) {
  return storeAs(spec.outputs[k].type.dtype, strCat("v", spec.outputs[k].expr));
}

std::string exprStatements(const KernelSpec& spec, const std::string& indent,
                           const std::function<std::string(int)>& load, const std::string& store) {
  std::vector<int> roots;
  for (const KernelOutput& o : spec.outputs) roots.push_back(o.expr);
  std::string s = exprLines(spec, roots, std::vector<bool>(spec.exprs.size(), false), indent, load);
  // Step 3.
  for (size_t k = 0; k < spec.outputs.size(); ++k)
    s += strCat(indent, "out", k, "[", store, "] = ", outputValue(spec, k), ";\n");
  return s;
}

}  // namespace pcc
