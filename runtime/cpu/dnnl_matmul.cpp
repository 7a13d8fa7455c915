// MatMul and Gemm on dnnl::matmul.
//
// MatMul (numpy semantics):
//   1. Promote 1-D operands to matrices ([k] -> [1,k] for A, [k] -> [k,1] for B);
//      the output shape drops those dims again, which leaves its layout alone.
//   2. When B has no batch (every batch dim 1), fold A's batch into its rows:
//      one [batch*m, k] x [k, n] product, the case of every Linear layer.
//   3. Otherwise pad both batch shapes with leading 1s to the same rank and let
//      oneDNN broadcast the size-1 batch dims.
// Gemm: A and B are described with strides, so transA/transB need no copy;
// alpha is oneDNN's output scale; beta*C is a sum post-op over an output that
// is first filled with C broadcast to [M, N].
// A primitive is made once per input shapes and kept by the instruction's kernel;
// a product of fewer than kSerialWork multiply-adds runs on one thread.
//
// Constant weights (MatMul's 2-D B, Gemm's B; packsConstantWeight) are packed: the
// primitive is made with the weights layout oneDNN prefers for the product,
// and the first call reorders the plan's plain weight into a copy the kernel
// keeps (charged to the rank's memory account, as the Conv kernel keeps its
// reordered weights). Unpacked, oneDNN copies panels of B on every call, and
// a plain [768, 3072] weight runs at a third of the packed speed on one thread.
#include <cstring>

#include "runtime/cpu/dnnl_epilogue.h"
#include "runtime/cpu/dnnl_kernels.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/support/memory_account.h"
#include "runtime/support/weight_packing.h"

namespace pcc::cpu {
namespace {

using dnnl::memory;

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

/// A matmul primitive with the descriptors it was made for.
struct Prepared {
  ShapeKey key;         ///< input shapes it was made for
  bool supported = false;
  BoundPrimitive prim;
  memory::desc a, b, c;
  Dims out;             ///< the op's output shape
  /// Packed weights: the layout the primitive takes B in (b stays the plan's
  /// layout), and the kept copy with the plan buffer it was made from.
  bool packed = false;
  memory::desc packedB;
  memory packedCopy;
  const void* packedFrom = nullptr;
  MemoryCharge packedCharge;
};

/// \returns a primitive for a x b -> c with `attr`, or supported = false when
/// oneDNN has no implementation for it.
/// `work`: the product's multiply-adds; below kSerialWork it is made (and
/// runs) on the calling thread alone.
/// `packB`: B is a constant the kernel may keep in the primitive's preferred layout.
void makePrimitive(Prepared& p, const dnnl::primitive_attr& attr, int64_t work, bool packB,
                   const EpiloguePostOps* epilogue = nullptr) {
  try {
    const int threads = work < kSerialWork ? 1 : 0;
    ScopedThreads scoped(threads);
    memory::desc b = packB ? memory::desc(p.b.dims(), memory::data_type::f32, memory::format_tag::any) : p.b;
    dnnl::matmul::desc d(p.a, b, p.c);
    dnnl::matmul::primitive_desc pd(d, attr, cpuEngine());
    if (epilogue && isReferenceImpl(pd.impl_info_str())) {
      p.supported = false;
      return;
    }
    // Packed means a copy the kernel owns, even where oneDNN keeps B's layout,
    // so that what the rank holds is what the compiler's estimate counts.
    p.packed = packB;
    p.packedB = pd.weights_desc();
    p.prim = BoundPrimitive(dnnl::matmul(pd), threads);
    p.prim.bind(DNNL_ARG_SRC, p.a);
    p.prim.bind(DNNL_ARG_WEIGHTS, p.packed ? p.packedB : p.b);
    p.prim.bind(DNNL_ARG_DST, p.c);
    if (epilogue) epilogue->bind(p.prim);
    p.supported = true;
  } catch (const dnnl::error&) {
    p.supported = false;
  }
}

/// Points the primitive's weights at `b`: the plan's buffer, or for a packed
/// primitive the kept copy, made (or remade, when the constant moved) here.
Status setWeights(Prepared& p, const Tensor& b) {
  if (!p.packed) {
    p.prim.set(DNNL_ARG_WEIGHTS, b.raw());
    return Status::OK();
  }
  if (p.packedFrom != b.raw()) {
    try {
      MemoryCharge charge(static_cast<int64_t>(p.packedB.get_size()));
      memory copy(p.packedB, cpuEngine());
      memory plain = wrap(p.b, b);
      dnnl::reorder(plain, copy).execute(threadStream(), plain, copy);
      threadStream().wait();
      p.packedCopy = copy;
      p.packedFrom = b.raw();
      p.packedCharge = std::move(charge);
    } catch (const dnnl::error& e) {
      return dnnlError("matmul weight packing", e);
    }
  }
  p.prim.set(DNNL_ARG_WEIGHTS, p.packedCopy.get_data_handle());
  return Status::OK();
}

class MatMulKernel : public KernelOverride {
 public:
  explicit MatMulKernel(bool constB, EpilogueInputs e = {}) : constB_(constB), e_(std::move(e)) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (in.size() != (e_.any() ? e_.shapes.size() : 2) || !in[0] || !in[1] || !allF32(in)) return false;
    const Tensor &a = *in[0], &b = *in[1];
    if (!p_.key.matches({&a.shape(), &b.shape()})) prepare(a.shape(), b.shape());
    if (!p_.supported) return false;
    Tensor& y = outputRef(out, 0, p_.out);
    p_.prim.set(DNNL_ARG_SRC, a.raw());
    RETURN_IF_ERROR(setWeights(p_, b));
    p_.prim.set(DNNL_ARG_DST, y.mutableData());
    post_.set(p_.prim, in);
    RETURN_IF_ERROR(p_.prim.run("matmul"));
    return true;
  }

  /// \returns whether oneDNN runs the shapes the kernel was made with. The
  /// primitive is made again by the first call: oneDNN fixes a primitive's
  /// thread count when it makes it, and this runs on the thread loading the plan.
  bool prepareEpilogue() {
    prepare(e_.shapes[0], e_.shapes[1]);
    p_.key = ShapeKey();  // made again by the first call, under the thread count it runs with
    return p_.supported;
  }

 private:
  void prepare(const Dims& shapeA, const Dims& shapeB) {
    p_ = Prepared{};
    p_.key.set({&shapeA, &shapeB});
    Dims sa = shapeA, sb = shapeB;
    bool vecA = sa.size() == 1, vecB = sb.size() == 1;
    if (vecA) sa.insert(sa.begin(), 1);
    if (vecB) sb.push_back(1);
    int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    Dims batchA(sa.begin(), sa.end() - 2), batchB(sb.begin(), sb.end() - 2);
    size_t r = std::max(batchA.size(), batchB.size());
    batchA.insert(batchA.begin(), r - batchA.size(), 1);
    batchB.insert(batchB.begin(), r - batchB.size(), 1);
    Dims batch(r);
    // numpy broadcasting: a dim of 1 takes the other's, which may be 0 (an
    // empty batch stays empty; max() would make [0] with [1] a batch of 1).
    for (size_t i = 0; i < r; ++i) batch[i] = batchA[i] == 1 ? batchB[i] : batchA[i];
    p_.out = batch;
    if (!vecA) p_.out.push_back(m);
    if (!vecB) p_.out.push_back(n);
    if (m == 0 || k == 0 || n == 0 || product(batch, 0, r) == 0) return;  // the reference does these
    bool unbatchedB = product(batchB, 0, r) == 1;
    if (unbatchedB) {
      int64_t rows = product(batchA, 0, r) * m;
      p_.a = plainDesc({rows, k});
      p_.b = plainDesc({k, n});
      p_.c = plainDesc({rows, n});
    } else {
      if (r + 2 > DNNL_MAX_NDIMS) return;
      Dims da = batchA, db = batchB, dc = batch;
      da.insert(da.end(), {m, k});
      db.insert(db.end(), {k, n});
      dc.insert(dc.end(), {m, n});
      p_.a = plainDesc(da);
      p_.b = plainDesc(db);
      p_.c = plainDesc(dc);
    }
    dnnl::primitive_attr attr;
    post_ = EpiloguePostOps();
    if (e_.any()) {
      dnnl::post_ops po;
      if (vecA || vecB || !post_.append(e_.epilogue, e_.shapes, p_.out, p_.c.dims(), po)) return;
      attr.set_post_ops(po);
    }
    makePrimitive(p_, attr, product(batch, 0, r) * m * k * n,
                  constB_ && shapeB.size() == 2 && packsConstantWeight(k, n), e_.any() ? &post_ : nullptr);
  }

  bool constB_;
  EpilogueInputs e_;
  EpiloguePostOps post_;
  Prepared p_;
};

class GemmKernel : public KernelOverride {
 public:
  GemmKernel(const AttrMap& attrs, bool constB, EpilogueInputs e = {})
      : constB_(constB),
        e_(std::move(e)),
        transA_(attrs.getInt("transA", 0) != 0),
        transB_(attrs.getInt("transB", 0) != 0),
        alpha_(attrs.getFloat("alpha", 1.0f)),
        beta_(attrs.getFloat("beta", 1.0f)) {}

  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    if (in.size() < 2 || !in[0] || !in[1] || !allF32(in)) return false;
    if (e_.any() && in.size() != e_.shapes.size()) return false;
    const size_t own = e_.any() ? e_.own : in.size();
    const Tensor &a = *in[0], &b = *in[1];
    const Tensor* c = own > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
    if (!p_.key.matches({&a.shape(), &b.shape(), c ? &c->shape() : nullptr}))
      prepare(a.shape(), b.shape(), c ? &c->shape() : nullptr);
    if (!p_.supported) return false;
    int64_t m = p_.out[0], n = p_.out[1];
    float* y = outputRef(out, 0, p_.out).mutableData<float>();
    if (c) fillBroadcast(*c, m, n, y);
    p_.prim.set(DNNL_ARG_SRC, a.raw());
    RETURN_IF_ERROR(setWeights(p_, b));
    p_.prim.set(DNNL_ARG_DST, y);
    post_.set(p_.prim, in);
    RETURN_IF_ERROR(p_.prim.run("gemm"));
    return true;
  }

  /// \returns whether oneDNN runs the shapes the kernel was made with. The
  /// primitive is made again by the first call: oneDNN fixes a primitive's
  /// thread count when it makes it, and this runs on the thread loading the plan.
  bool prepareEpilogue() {
    const bool withC = e_.own > 2 && e_.present[2];
    prepare(e_.shapes[0], e_.shapes[1], withC ? &e_.shapes[2] : nullptr);
    p_.key = ShapeKey();  // made again by the first call, under the thread count it runs with
    return p_.supported;
  }

 private:
  /// Writes C, broadcast from [], [n], [1|m, 1|n] to [m, n], into y.
  static void fillBroadcast(const Tensor& c, int64_t m, int64_t n, float* y) {
    const float* pc = c.data<float>();
    Dims s = c.shape();
    while (s.size() < 2) s.insert(s.begin(), 1);
    bool rows = s[0] == m && m != 1, cols = s[1] == n && n != 1;
    for (int64_t i = 0; i < m; ++i) {
      const float* src = pc + (rows ? i * s[1] : 0);
      float* dst = y + i * n;
      if (cols) {
        std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      } else {
        for (int64_t j = 0; j < n; ++j) dst[j] = src[0];
      }
    }
  }

  void prepare(const Dims& sa, const Dims& sb, const Dims* sc) {
    p_ = Prepared{};
    p_.key.set({&sa, &sb, sc});
    bool withC = sc != nullptr;
    int64_t m = transA_ ? sa[1] : sa[0], k = transA_ ? sa[0] : sa[1];
    int64_t n = transB_ ? sb[0] : sb[1];
    p_.out = {m, n};
    if (m == 0 || k == 0 || n == 0) return;
    // A stored [M,K] or, transposed, [K,M]; the same for B.
    p_.a = transA_ ? stridedDesc({m, k}, {1, m}) : stridedDesc({m, k}, {k, 1});
    p_.b = transB_ ? stridedDesc({k, n}, {1, k}) : stridedDesc({k, n}, {n, 1});
    p_.c = plainDesc({m, n});
    dnnl::primitive_attr attr;
    if (alpha_ != 1.0f) attr.set_output_scales(0, {alpha_});
    dnnl::post_ops po;
    if (withC) po.append_sum(beta_);
    post_ = EpiloguePostOps();
    if (e_.any() && !post_.append(e_.epilogue, e_.shapes, p_.out, p_.c.dims(), po)) return;
    if (po.len() > 0) attr.set_post_ops(po);
    makePrimitive(p_, attr, m * k * n, constB_ && packsConstantWeight(k, n), e_.any() ? &post_ : nullptr);
  }

  bool constB_;
  EpilogueInputs e_;
  EpiloguePostOps post_;
  bool transA_, transB_;
  float alpha_, beta_;
  Prepared p_;
};

}  // namespace

std::unique_ptr<KernelOverride> makeMatMulKernel(const AttrMap&, const std::vector<bool>& constant) {
  return std::make_unique<MatMulKernel>(constant.size() > 1 && constant[1]);
}

std::unique_ptr<KernelOverride> makeGemmKernel(const AttrMap& attrs, const std::vector<bool>& constant) {
  return std::make_unique<GemmKernel>(attrs, constant.size() > 1 && constant[1]);
}

std::unique_ptr<KernelOverride> makeMatMulEpilogueKernel(const std::vector<bool>& constant,
                                                         const std::vector<TensorType>& inputs, size_t ownInputs,
                                                         const Epilogue& e) {
  if (ownInputs != 2) return nullptr;
  auto k = std::make_unique<MatMulKernel>(constant.size() > 1 && constant[1], EpilogueInputs(e, inputs, ownInputs));
  return k->prepareEpilogue() ? std::move(k) : nullptr;
}

std::unique_ptr<KernelOverride> makeGemmEpilogueKernel(const AttrMap& attrs, const std::vector<bool>& constant,
                                                       const std::vector<TensorType>& inputs, size_t ownInputs,
                                                       const Epilogue& e) {
  if (ownInputs < 2 || ownInputs > 3) return nullptr;
  auto k = std::make_unique<GemmKernel>(attrs, constant.size() > 1 && constant[1], EpilogueInputs(e, inputs, ownInputs));
  return k->prepareEpilogue() ? std::move(k) : nullptr;
}

}  // namespace pcc::cpu
