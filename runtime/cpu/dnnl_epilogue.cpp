// EpiloguePostOps::append.
//
//   1. Unary steps are eltwise post-ops (relu with alpha for LeakyRelu,
//      logistic, tanh, gelu_erf, gelu_tanh, abs, sqrt, exp, log, swish;
//      neg is linear(-1, 0)).
//   2. A binary step with a constant: add, sub, mul are linear(alpha, beta)
//      (exact: 1*x + c and c*x + 0 round once); b - x is linear(-1, b);
//      max then min (Clip) is one clip, max or min alone a clip with the
//      largest float as the other bound; div is a binary
//      post-op over a one-element operand the kernel owns (x / c exactly).
//   3. A binary step with an input: a binary post-op whose operand has the
//      destination's rank, each dim the destination's or 1. The input is
//      right-aligned to the op's output; each run of output dims merged into
//      one destination dim must be all broadcast (1) or all full in it,
//      else no post-op describes it. b - x is linear(-1, 0) then add b;
//      b / x has no form.
#include "runtime/cpu/dnnl_epilogue.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

namespace pcc::cpu {

namespace {

using dnnl::algorithm;
using dnnl::memory;

/// \returns for each dim of `out`, the index of the dim of `dst` it is merged
/// into, or an empty vector when `dst` is not `out` with runs merged.
std::vector<size_t> mergedInto(const Dims& out, const memory::dims& dst) {
  if (dst.empty()) return {};
  std::vector<size_t> into(out.size(), 0);
  size_t j = 0;
  int64_t acc = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) {  // belongs to any run: never full, never broadcast
      into[i] = std::min(j, dst.size() - 1);
      continue;
    }
    while (j < dst.size() && acc == dst[j]) {  // run j is complete (or a dim of 1)
      ++j;
      acc = 1;
    }
    if (j >= dst.size()) return {};
    acc *= out[i];
    if (acc > dst[j] || dst[j] % acc != 0) return {};
    into[i] = j;
  }
  if (j < dst.size() && acc != dst[j]) return {};
  for (size_t k = j + 1; k < dst.size(); ++k)
    if (dst[k] != 1) return {};
  return into;
}

}  // namespace

bool EpiloguePostOps::append(const Epilogue& e, const std::vector<Dims>& inputs, const Dims& out,
                             const memory::dims& dst, dnnl::post_ops& po) {
  const float inf = std::numeric_limits<float>::max();  // oneDNN's clip mishandles infinite bounds
  // oneDNN 2.6 applies the parameters of the first eltwise post-op of an
  // algorithm to every later one of it (measured: linear(2, 1) then
  // linear(1, -3) gives 2(2x + 1) + 1), so one algorithm takes one set of
  // parameters per chain; a chain needing two is not folded.
  std::vector<std::tuple<algorithm, float, float>> used;
  bool clash = false;
  auto eltwise = [&](algorithm a, float alpha = 0, float beta = 0) {
    for (const auto& [ua, ualpha, ubeta] : used)
      if (ua == a && (ualpha != alpha || ubeta != beta)) clash = true;
    used.emplace_back(a, alpha, beta);
    po.append_eltwise(1.0f, a, alpha, beta);
  };
  // oneDNN throws past its post-op limit (a chain longer than
  // kMaxEpilogueSteps never gets here): such a chain is not folded.
  try {
    for (size_t i = 0; i < e.steps.size(); ++i) {
      const EpilogueStep& st = e.steps[i];
      if (clash) return false;
      // Clip's max(x, lo) then min(x, hi): one clip.
      if (st.op == EpilogueOp::kMax && st.operand < 0 && i + 1 < e.steps.size() &&
          e.steps[i + 1].op == EpilogueOp::kMin && e.steps[i + 1].operand < 0) {
        eltwise(algorithm::eltwise_clip, st.scalar, e.steps[i + 1].scalar);
        ++i;
        continue;
      }
      switch (st.op) {
        case EpilogueOp::kRelu: eltwise(algorithm::eltwise_relu); continue;
        case EpilogueOp::kLeakyRelu: eltwise(algorithm::eltwise_relu, st.scalar); continue;
        case EpilogueOp::kSigmoid: eltwise(algorithm::eltwise_logistic); continue;
        case EpilogueOp::kTanh: eltwise(algorithm::eltwise_tanh); continue;
        case EpilogueOp::kGeluErf: eltwise(algorithm::eltwise_gelu_erf); continue;
        case EpilogueOp::kGeluTanh: eltwise(algorithm::eltwise_gelu_tanh); continue;
        case EpilogueOp::kAbs: eltwise(algorithm::eltwise_abs); continue;
        case EpilogueOp::kSqrt: eltwise(algorithm::eltwise_sqrt); continue;
        case EpilogueOp::kExp: eltwise(algorithm::eltwise_exp); continue;
        case EpilogueOp::kLog: eltwise(algorithm::eltwise_log); continue;
        case EpilogueOp::kNeg: eltwise(algorithm::eltwise_linear, -1.0f, 0.0f); continue;
        case EpilogueOp::kSwish: eltwise(algorithm::eltwise_swish, st.scalar); continue;
        default: break;
      }
      algorithm bin = st.op == EpilogueOp::kAdd   ? algorithm::binary_add
                      : st.op == EpilogueOp::kSub ? algorithm::binary_sub
                      : st.op == EpilogueOp::kMul ? algorithm::binary_mul
                      : st.op == EpilogueOp::kDiv ? algorithm::binary_div
                      : st.op == EpilogueOp::kMax ? algorithm::binary_max
                                                  : algorithm::binary_min;
      if (st.operand < 0) {  // step 2
        const float c = st.scalar;
        if (st.chainSecond && (st.op == EpilogueOp::kSub || st.op == EpilogueOp::kDiv)) {
          if (st.op == EpilogueOp::kDiv) return false;
          eltwise(algorithm::eltwise_linear, -1.0f, c);
          continue;
        }
        switch (st.op) {
          case EpilogueOp::kAdd: eltwise(algorithm::eltwise_linear, 1.0f, c); continue;
          case EpilogueOp::kSub: eltwise(algorithm::eltwise_linear, 1.0f, -c); continue;
          case EpilogueOp::kMul: eltwise(algorithm::eltwise_linear, c, 0.0f); continue;
          case EpilogueOp::kMax: eltwise(algorithm::eltwise_clip, c, inf); continue;
          case EpilogueOp::kMin: eltwise(algorithm::eltwise_clip, -inf, c); continue;
          default: break;
        }
        memory::desc d = plainDesc(Dims(dst.size(), 1));
        binaries_.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(po.len()) | DNNL_ARG_SRC_1, -1,
                             static_cast<int>(scalars_->size()), d});
        scalars_->push_back(c);
        po.append_binary(bin, d);
        continue;
      }
      // Step 3.
      if (static_cast<size_t>(st.operand) >= inputs.size()) return false;
      const Dims& b = inputs[static_cast<size_t>(st.operand)];
      if (b.size() > out.size()) return false;
      std::vector<size_t> into = mergedInto(out, dst);
      if (into.empty()) return false;
      // 0: not seen yet, 1: broadcast, 2: full, per destination dim.
      std::vector<int> kind(dst.size(), 0);
      const size_t lead = out.size() - b.size();
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == 1) continue;
        int64_t bi = i < lead ? 1 : b[i - lead];
        if (bi != 1 && bi != out[i]) return false;
        int k = bi == 1 ? 1 : 2;
        int& seen = kind[into[i]];
        if (seen != 0 && seen != k) return false;
        seen = k;
      }
      Dims src1(dst.size());
      for (size_t j = 0; j < dst.size(); ++j) src1[j] = kind[j] == 2 ? dst[j] : 1;
      if (st.chainSecond && st.op == EpilogueOp::kDiv) return false;
      if (st.chainSecond && st.op == EpilogueOp::kSub) {
        eltwise(algorithm::eltwise_linear, -1.0f, 0.0f);
        bin = algorithm::binary_add;
      }
      memory::desc d = plainDesc(src1);
      binaries_.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(po.len()) | DNNL_ARG_SRC_1, st.operand, -1, d});
      po.append_binary(bin, d);
    }
  } catch (const dnnl::error&) {
    return false;
  }
  return !clash;
}

void EpiloguePostOps::bind(BoundPrimitive& p) const {
  for (const Binary& b : binaries_) {
    p.bind(b.arg, b.desc);
    if (b.input < 0) p.set(b.arg, scalars_->data() + b.scalar);
  }
}

void EpiloguePostOps::set(BoundPrimitive& p, const std::vector<const Tensor*>& in) const {
  for (const Binary& b : binaries_)
    if (b.input >= 0) p.set(b.arg, in[static_cast<size_t>(b.input)]->raw());
}

bool isReferenceImpl(const char* impl) { return impl && std::strncmp(impl, "ref", 3) == 0; }

}  // namespace pcc::cpu
