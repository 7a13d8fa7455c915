// The generated Attention kernel (docs/kernels.md#attention): its
// description (sizes, layouts, mask strides, tiles), the cases it refuses
// with their reasons, the CUDA form (NVRTC for sm_80 and sm_90 where the
// toolkit is), and the C++ form against the reference Attention (in double)
// over 3-D and 4-D layouts, grouped heads, float and bool masks with their
// broadcasts, rows masked everywhere, causal, sequence lengths that are not
// multiples of the tiles and key lengths other than the query length; and
// plans that launch it on one and two ranks.
//
// Tolerance of the C++ form, as for the runtime's float kernel
// (tests/unit/cpu_attention_test.cpp): inputs in [-1, 1], D <= 32; a score
// is off by about (D + 2) u D scale (u = 2^-24), a weight by twice that
// relatively, Y by at most 2e-5 + T u; the online rescaling adds a few u per
// tile. The check |generated - reference| <= 5e-5 is far below the O(0.1)
// error of a wrong head, row, stride, mask index or a missed rescale.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/attention_kernel.h"
#include "codegen/kernel_build.h"
#include "codegen/kernel_emit.h"
#include "runtime/ops/registry.h"
#include "tests/unit/codegen_kernel_test_util.h"
#include "tests/unit/prerequisite.h"

namespace pcc {
namespace {


using A3 = std::array<int64_t, 3>;
using A4 = std::array<int64_t, 4>;

AttrMap attrs(std::initializer_list<std::pair<const char*, int64_t>> ints, float scale = 0) {
  AttrMap a;
  for (const auto& kv : ints) a.set(kv.first, Attribute(kv.second));
  if (scale != 0) a.set("scale", Attribute(scale));
  return a;
}

std::vector<TensorType> types(const Dims& q, const Dims& k, const Dims& v, DType mask = DType::kUndefined,
                              const Dims& m = {}) {
  std::vector<TensorType> t = {{DType::kF32, q}, {DType::kF32, k}, {DType::kF32, v}};
  if (mask != DType::kUndefined) t.push_back({mask, m});
  return t;
}

TEST(KernelAttention, DescribesLayoutsHeadsAndTiles) {
  // 4-D, grouped heads (4 query heads over 2 key/value heads).
  auto s = describeAttentionTypes(types({1, 4, 9, 16}, {1, 2, 23, 16}, {1, 2, 23, 16}), {}, 1, "a");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(s->attention);
  const AttentionDesc& d = *s->attention;
  EXPECT_EQ(d.qHeads, 4);
  EXPECT_EQ(d.kvHeads, 2);
  EXPECT_EQ(d.qLen, 9);
  EXPECT_EQ(d.kvLen, 23);
  EXPECT_EQ(d.q, (A3{4 * 9 * 16, 9 * 16, 16}));
  EXPECT_EQ(d.k, (A3{2 * 23 * 16, 23 * 16, 16}));
  EXPECT_EQ(d.y, (A3{4 * 9 * 16, 9 * 16, 16}));
  EXPECT_EQ(d.mask, AttentionMask::kNone);
  EXPECT_FALSE(d.causal);
  EXPECT_FLOAT_EQ(d.scale, 0.25f);  // 1 / sqrt(16)
  EXPECT_EQ(d.keyTile, 64);
  EXPECT_EQ(d.queryTile, 32);
  EXPECT_EQ(s->inputs.size(), 3u);
  EXPECT_EQ(s->outputs.at(0).type.str(), "f32[1,4,9,16]");
  EXPECT_EQ(attentionTiles(d), 4);  // 1 batch * 4 heads * 1 query tile

  // 3-D packed: [B, S, H * D] with q_num_heads / kv_num_heads, V's head size 5.
  s = describeAttentionTypes(types({2, 11, 4 * 8}, {2, 19, 2 * 8}, {2, 19, 2 * 5}),
                             attrs({{"q_num_heads", 4}, {"kv_num_heads", 2}, {"is_causal", 1}}, 0.5f), 1, "b");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->attention->q, (A3{11 * 32, 8, 32}));
  EXPECT_EQ(s->attention->k, (A3{19 * 16, 8, 16}));
  EXPECT_EQ(s->attention->v, (A3{19 * 10, 5, 10}));
  EXPECT_EQ(s->attention->y, (A3{11 * 20, 5, 20}));
  EXPECT_EQ(s->outputs.at(0).type.str(), "f32[2,11,20]");
  EXPECT_TRUE(s->attention->causal);
  EXPECT_FLOAT_EQ(s->attention->scale, 0.5f);

  // Head size 128: smaller tiles so K and V rows fit 32 KiB, Q's 8 KiB.
  s = describeAttentionTypes(types({1, 2, 100, 128}, {1, 2, 100, 128}, {1, 2, 100, 128}), {}, 1, "c");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->attention->keyTile, 16);
  EXPECT_EQ(s->attention->queryTile, 16);
  EXPECT_EQ(attentionTiles(*s->attention), 2 * 7);
  EXPECT_EQ(cudaGridFor(*s), 14);
  EXPECT_EQ(cudaBlockFor(*s), kAttentionCudaBlock);
  // The largest head size: the smallest tiles.
  s = describeAttentionTypes(types({1, 1, 3, 512}, {1, 1, 3, 512}, {1, 1, 3, 512}), {}, 1, "d");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->attention->keyTile, 8);
  EXPECT_EQ(s->attention->queryTile, 4);
}

TEST(KernelAttention, MaskStridesFollowTheBroadcast) {
  const Dims q = {2, 3, 5, 8}, k = {2, 3, 19, 8};
  struct Case {
    DType type;
    Dims shape;
    A4 strides;
  };
  for (const Case& c : std::vector<Case>{{DType::kF32, {19}, {0, 0, 0, 1}},
                                         {DType::kF32, {5, 19}, {0, 0, 19, 1}},
                                         {DType::kBool, {2, 1, 1, 19}, {19, 0, 0, 1}},
                                         {DType::kF32, {2, 3, 5, 19}, {3 * 5 * 19, 5 * 19, 19, 1}},
                                         {DType::kBool, {1, 3, 1, 13}, {0, 13, 0, 1}}}) {
    auto s = describeAttentionTypes(types(q, k, k, c.type, c.shape), {}, 1, "m");
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->attention->mask, c.type == DType::kBool ? AttentionMask::kBool : AttentionMask::kFloat);
    EXPECT_EQ(s->attention->maskStrides, c.strides) << TensorType{c.type, c.shape}.str();
    EXPECT_EQ(s->attention->maskLen, c.shape.back());
    EXPECT_EQ(s->inputs.size(), 4u);
  }
}

TEST(KernelAttention, RefusesWithAReason) {
  const Dims q = {1, 2, 4, 8};
  std::vector<TensorType> past = types(q, q, q);
  past.push_back({});  // no mask
  past.push_back({DType::kF32, {1, 2, 3, 8}});
  past.push_back({DType::kF32, {1, 2, 3, 8}});
  AttrMap softcap;
  softcap.set("softcap", Attribute(2.0f));
  std::vector<TensorType> f16 = {{DType::kF16, q}, {DType::kF16, q}, {DType::kF16, q}};
  struct Case {
    std::vector<TensorType> in;
    AttrMap attrs;
    size_t outputs;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {types(q, q, q), attrs({{"num_outputs", 2}}), 2,
            "Attention ('a') with 2 outputs (present key/value, qk_matmul_output)"},
           {past, {}, 1, "Attention ('a') with past key/value"},
           {types(q, q, q), softcap, 1, "Attention ('a') with softcap"},
           {f16, {}, 1, "Attention ('a') input 0 is f16[1,2,4,8], not f32"},
           {types(q, q, q, DType::kI64, {4, 4}), {}, 1, "Attention ('a') mask i64[4,4] is neither f32 nor bool"},
           {types({1, 2, 4, 640}, {1, 2, 4, 640}, {1, 2, 4, 640}), {}, 1,
            "Attention ('a') head sizes 640 and 640 exceed 512, the largest the CUDA tiles hold"},
           {types({1, 2, 0, 8}, q, q), {}, 1, "Attention ('a') with an empty size: f32[1,2,0,8]"},
       }) {
    auto s = describeAttentionTypes(c.in, c.attrs, c.outputs, "a");
    ASSERT_FALSE(s.ok()) << c.reason;
    EXPECT_EQ(s.status().message(), c.reason);
  }
}

TEST(KernelAttention, FloatLiteralsReadBackExactly) {
  EXPECT_EQ(attentionFloatLiteral(1.0f), "1.0f");
  EXPECT_EQ(attentionFloatLiteral(0.125f), "0.125f");
  EXPECT_EQ(attentionFloatLiteral(1e-5f), "9.99999975e-06f");
  EXPECT_EQ(std::stof(attentionFloatLiteral(0.35355339f)), 0.35355339f);
}

TEST(KernelAttention, EqualNodesShareAKernel) {
  auto a = describeAttentionTypes(types({1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}), {}, 1, "a");
  auto b = describeAttentionTypes(types({1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}), {}, 1, "b");
  auto c = describeAttentionTypes(types({1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}), attrs({{"is_causal", 1}}), 1, "c");
  auto e = describeAttentionTypes(types({1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}), {}, 1, "e", 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && e.ok());
  EXPECT_EQ(specKey(*a), specKey(*b));
  EXPECT_NE(specKey(*a), specKey(*c));
  EXPECT_NE(specKey(*a), specKey(*e));  // the tile is part of the code
  KernelTable t;
  EXPECT_EQ(t.add(*a), 0);
  EXPECT_EQ(t.add(*b), 0);
  EXPECT_EQ(t.add(*c), 1);
}

TEST(KernelAttention, CudaFormCompiles) {
  // Every mask kind, causal, grouped, 3-D; and the largest head size.
  std::vector<StatusOr<KernelSpec>> specs;
  specs.push_back(describeAttentionTypes(types({2, 4, 37, 64}, {2, 2, 50, 64}, {2, 2, 50, 64}),
                                         attrs({{"is_causal", 1}}), 1, "causal"));
  specs.push_back(describeAttentionTypes(types({2, 5, 96}, {2, 7, 96}, {2, 7, 96}, DType::kBool, {2, 1, 1, 7}),
                                         attrs({{"q_num_heads", 4}, {"kv_num_heads", 4}}), 1, "bool"));
  specs.push_back(describeAttentionTypes(types({1, 2, 9, 32}, {1, 2, 9, 32}, {1, 2, 9, 16}, DType::kF32, {9, 9}),
                                         attrs({}, 1.0f), 1, "float, scale 1"));
  specs.push_back(describeAttentionTypes(types({1, 1, 3, 512}, {1, 1, 3, 512}, {1, 1, 3, 512}), {}, 1, "large"));
  KernelTable table;
  for (auto& s : specs) {
    ASSERT_TRUE(s.ok()) << s.status().message();
    std::string src = emitCudaKernel("k", *s);
    EXPECT_NE(src.find("__shfl_xor_sync"), std::string::npos);
    EXPECT_NE(src.find("__shared__ float pk_k[BK * KP]"), std::string::npos);
    EXPECT_EQ(src.find("if (j > i) x = NEG;") != std::string::npos, s->attention->causal) << s->group;
    table.add(*s);
  }
  if (!haveCudaCodegen()) PCC_SKIP_UNLESS_REQUIRED("this pcc has no NVRTC (docs/cuda.md)");
  KernelOptions ko;
  ko.target = "cuda";
  auto images = compileCudaKernels(table, ko);
  ASSERT_TRUE(images.ok()) << images.status().message();
  EXPECT_EQ(images->size(), 2 * specs.size());  // sm_80 and sm_90
  for (const CudaImageBytes& im : *images) EXPECT_FALSE(im.cubin.empty()) << im.arch;
}

// ---- The C++ form against the reference -------------------------------------

struct NumericCase {
  const char* what;
  Dims q, k, v;
  AttrMap attrs;
  int keyTile = 0;  ///< 0: the default
  DType maskType = DType::kUndefined;
  Dims mask = {};
};

/// Fills mask `m` [..., L]: floats in [-1, 1) with row 1 all -inf (a row
/// masked everywhere where the rows are query rows); bools true at every
/// third element, with row 2 all false.
Tensor makeMask(DType t, const Dims& shape, uint64_t seed) {
  Tensor m = Tensor::zeros(t, shape);
  const int64_t len = shape.back();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < m.numel(); ++i) {
    const bool deadRow = i / len == (t == DType::kF32 ? 1 : 2);
    if (t == DType::kF32) m.mutableData<float>()[i] = deadRow && shape.size() > 1 ? -INFINITY : u(rng);
    else m.mutableData<uint8_t>()[i] = !deadRow && i % 3 == 0;
  }
  return m;
}

Tensor randomTensor(const Dims& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutableData<float>()[i] = u(rng);
  return t;
}

/// The generated C++ kernels of `specs`, compiled and loaded.
class CompiledKernels {
 public:
  explicit CompiledKernels(const std::vector<KernelSpec>& specs) {
    for (const KernelSpec& s : specs) index_.push_back(table_.add(s));
    plan::Plan plan;
    std::map<std::string, std::string> files;
    KernelOptions ko;
    ko.cacheDir = (std::filesystem::temp_directory_path() / "pcc_kernel_attention_cache").string();
    Status st = buildKernels(table_, ko, plan, &files);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return;
    path_ = (std::filesystem::temp_directory_path() / strCat("pcc_attention_", ::getpid(), ".so")).string();
    std::ofstream(path_, std::ios::binary) << files.at("kernels/cpu.so");
    handle_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_TRUE(handle_) << ::dlerror();
  }
  ~CompiledKernels() {
    if (handle_) ::dlclose(handle_);
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  using Entry = void (*)(const void* const*, void* const*);
  /// \returns the entry of specs[i], or nullptr.
  Entry entry(size_t i) const {
    return handle_ ? reinterpret_cast<Entry>(::dlsym(handle_, table_.name(index_.at(i)).c_str())) : nullptr;
  }

 private:
  KernelTable table_;
  std::vector<int> index_;
  std::string path_;
  void* handle_ = nullptr;
};

TEST(KernelAttentionGenerated, EqualsTheReference) {
  const std::vector<NumericCase> cases = {
      {"4-D, T = 150 over the default 64-key tiles", {1, 2, 37, 16}, {1, 2, 150, 16}, {1, 2, 150, 16}, {}},
      {"4-D, value size != key size", {2, 2, 13, 8}, {2, 2, 21, 8}, {2, 2, 21, 5}, {}, 4},
      {"3-D packed", {2, 11, 4 * 8}, {2, 19, 4 * 8}, {2, 19, 4 * 8}, attrs({{"q_num_heads", 4}, {"kv_num_heads", 4}}),
       8},
      {"grouped query heads", {1, 4, 9, 16}, {1, 2, 23, 16}, {1, 2, 23, 16}, {}, 8},
      {"3-D grouped", {2, 7, 4 * 8}, {2, 10, 2 * 8}, {2, 10, 2 * 8}, attrs({{"q_num_heads", 4}, {"kv_num_heads", 2}}),
       4},
      {"causal, more keys than queries", {2, 2, 9, 8}, {2, 2, 17, 8}, {2, 2, 17, 8}, attrs({{"is_causal", 1}}), 4},
      {"causal, fewer keys than queries", {1, 2, 12, 8}, {1, 2, 7, 8}, {1, 2, 7, 8}, attrs({{"is_causal", 1}}), 4},
      {"scale", {1, 2, 10, 8}, {1, 2, 10, 8}, {1, 2, 10, 8}, attrs({}, 0.7f), 4},
      {"float mask [T], scale 1", {2, 3, 5, 8}, {2, 3, 19, 8}, {2, 3, 19, 8}, attrs({}, 1.0f), 4, DType::kF32, {19}},
      {"float mask [S, T], a row all -inf", {2, 3, 5, 8}, {2, 3, 19, 8}, {2, 3, 19, 8}, {}, 4, DType::kF32, {5, 19}},
      {"float mask [B, H, S, T]", {2, 3, 5, 8}, {2, 3, 19, 8}, {2, 3, 19, 8}, {}, 4, DType::kF32, {2, 3, 5, 19}},
      {"float mask shorter than the keys", {2, 3, 5, 8}, {2, 3, 19, 8}, {2, 3, 19, 8}, {}, 4, DType::kF32,
       {1, 1, 5, 13}},
      {"bool mask [B, 1, 1, T], a batch masked everywhere", {3, 2, 4, 8}, {3, 2, 18, 8}, {3, 2, 18, 8}, {}, 4,
       DType::kBool, {3, 1, 1, 18}},
      {"bool mask [S, T], a row masked everywhere", {1, 2, 6, 8}, {1, 2, 18, 8}, {1, 2, 18, 8}, {}, 4, DType::kBool,
       {6, 18}},
      {"causal and a bool mask", {1, 2, 10, 8}, {1, 2, 10, 8}, {1, 2, 10, 8}, attrs({{"is_causal", 1}}), 4,
       DType::kBool, {10, 10}},
      {"large (threads), causal", {2, 4, 64, 32}, {2, 4, 200, 32}, {2, 4, 200, 32}, attrs({{"is_causal", 1}})},
  };
  std::vector<KernelSpec> specs;
  for (const NumericCase& c : cases) {
    auto s = describeAttentionTypes(types(c.q, c.k, c.v, c.maskType, c.mask), c.attrs, 1, c.what, c.keyTile);
    ASSERT_TRUE(s.ok()) << c.what << ": " << s.status().message();
    specs.push_back(*s);
  }
  CompiledKernels lib(specs);
  uint64_t seed = 300;
  for (size_t n = 0; n < cases.size(); ++n) {
    const NumericCase& c = cases[n];
    seed += 10;
    Tensor q = randomTensor(c.q, seed), k = randomTensor(c.k, seed + 1), v = randomTensor(c.v, seed + 2), m;
    std::vector<const Tensor*> in = {&q, &k, &v};
    if (c.maskType != DType::kUndefined) {
      m = makeMask(c.maskType, c.mask, seed + 3);
      in.push_back(&m);
    }
    auto ref = runOp("Attention", in, c.attrs);
    ASSERT_TRUE(ref.ok()) << c.what << ": " << ref.status().message();
    const Tensor& want = (*ref)[0];
    Tensor got = Tensor::zeros(DType::kF32, want.shape());
    CompiledKernels::Entry f = lib.entry(n);
    ASSERT_TRUE(f) << c.what;
    std::vector<const void*> ptrs;
    for (const Tensor* t : in) ptrs.push_back(t->raw());
    void* out[] = {got.mutableData()};
    f(ptrs.data(), out);
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.data<float>()[i], r = want.data<float>()[i];
      worst = std::max(worst, std::isfinite(g) ? std::fabs(g - r) : INFINITY);
      largest = std::max(largest, std::fabs(r));
    }
    EXPECT_LE(worst, 5e-5) << c.what;
    EXPECT_GT(largest, 0.05) << c.what << ": the reference is (nearly) zero, the check would prove nothing";
  }
}

TEST(KernelAttentionGenerated, PlansLaunchIt) {
  // A causal GQA Attention with a bool mask and a 3-D one after it, on one
  // and two ranks: every Attention a LAUNCH, the plan equal to the reference.
  const char kText[] =
      "graph @g(%q: f32[2,4,9,8], %k: f32[2,2,9,8], %v: f32[2,2,9,8], %m: bool[2,1,1,9], %x: f32[2,9,32])"
      " -> (%y: f32[2,4,9,8], %z: f32[2,9,32]) {\n"
      "  %y = Attention(%q, %k, %v, %m) {is_causal = 1} : f32[2,4,9,8]\n"
      "  %z = Attention(%x, %x, %x) {q_num_heads = 4, kv_num_heads = 4} : f32[2,9,32]\n"
      "  return %y, %z\n}\n";
  for (int gpus : {1, 2}) {
    plan::Plan p = runGenerated(kText, gpus, "pcc_kernel_attention_plan");
    int attention = 0;
    for (const plan::RankProgram& prog : p.ranks())
      for (const plan::Instruction& ins : prog.instructions()) {
        if (ins.op() != "Attention") continue;
        ++attention;
        EXPECT_EQ(ins.kind(), plan::Instruction::LAUNCH) << ins.node();
      }
    EXPECT_GE(attention, 2) << "gpus " << gpus;
    EXPECT_EQ(p.kernel_fallbacks_size(), 0);
  }
}

}  // namespace
}  // namespace pcc
