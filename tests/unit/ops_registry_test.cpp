#include <algorithm>

#include "compiler/ir/regions.h"
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsRegistry, EveryOpInOpsDefHasInferAndCompute) {
  // Region ops (If, Loop, Scan) have no kernel: their bodies type them
  // (compiler/ir/regions.h) and the evaluator runs them.
  std::vector<std::string> want;
#define PCC_OP(Name, MinIn, MaxIn, NumOut, Kind, ShapeOperands, Shard, Import) \
  if (!isRegionOp(OpKind::Name)) want.push_back(#Name);
#include "runtime/schema/Ops.def"
#undef PCC_OP
  for (const std::string& op : want) {
    std::optional<OpKind> kind = opFromName(op);
    ASSERT_TRUE(kind) << op;
    EXPECT_NE(inferFn(*kind), nullptr) << op;
    const KernelEntry* k = referenceKernel(*kind);
    ASSERT_NE(k, nullptr) << op;
    EXPECT_NE(k->compute, nullptr) << op;
  }
  std::vector<std::string> ops = registeredOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ops, want);
}

TEST(OpsRegistry, UnknownOp) {
  EXPECT_EQ(findInferFn("NoSuchOp"), nullptr);
  Tensor x = f32({1}, {1});
  auto r = runOp("NoSuchOp", {&x}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("NoSuchOp"), std::string::npos);
}

Status dummyCompute(const std::vector<const Tensor*>&, const AttrMap&, std::vector<Tensor>&) {
  return Status::OK();
}
std::unique_ptr<KernelOverride> noKernel(const AttrMap&, const std::vector<bool>&) { return nullptr; }

TEST(KernelRegistry, SameOpAndProviderTwiceIsAnError) {
  KernelRegistry r;
  KernelEntry ref;
  ref.compute = &dummyCompute;
  KernelEntry fast;
  fast.make = &noKernel;
  ASSERT_TRUE(r.add(OpKind::MatMul, Provider::kReference, ref).ok());
  ASSERT_TRUE(r.add(OpKind::MatMul, Provider::kOneDnn, fast).ok());  // another provider: fine
  ASSERT_TRUE(r.add(OpKind::Add, Provider::kReference, ref).ok());   // another op: fine
  Status twice = r.add(OpKind::MatMul, Provider::kReference, ref);
  EXPECT_EQ(twice.code(), StatusCode::kInternal);
  EXPECT_NE(twice.message().find("MatMul is registered twice"), std::string::npos) << twice.message();
  EXPECT_FALSE(r.add(OpKind::MatMul, Provider::kOneDnn, fast).ok());
  // An entry without the provider's kind of kernel is refused too.
  EXPECT_FALSE(r.add(OpKind::Relu, Provider::kReference, fast).ok());
  EXPECT_FALSE(r.add(OpKind::Relu, Provider::kOneDnn, ref).ok());
  EXPECT_EQ(r.find(OpKind::MatMul, Provider::kReference)->compute, &dummyCompute);
  EXPECT_EQ(r.find(OpKind::MatMul, Provider::kGenerated), nullptr);
  EXPECT_EQ(r.ops(Provider::kReference), (std::vector<OpKind>{OpKind::MatMul, OpKind::Add}));
  EXPECT_EQ(r.ops(Provider::kOneDnn), std::vector<OpKind>{OpKind::MatMul});
}

TEST(KernelRegistry, ReferenceHooksKeepTheFirstError) {
  KernelRegistry r;
  OpRegistry hook(r);
  hook.add(OpKind::Relu, &dummyCompute);
  EXPECT_TRUE(hook.status().ok());
  hook.add(OpKind::Relu, &dummyCompute);
  EXPECT_FALSE(hook.status().ok());
  EXPECT_NE(hook.status().message().find("Relu"), std::string::npos) << hook.status().message();
}

TEST(SchemaRegistry, SameOpTwiceIsAnError) {
  SchemaRegistry r;
  InferFn f = inferFn(OpKind::Relu);
  ASSERT_NE(f, nullptr);
  r.add(OpKind::Relu, f);
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.get(OpKind::Relu), f);
  r.add(OpKind::Relu, f);
  EXPECT_FALSE(r.status().ok());
  EXPECT_NE(r.status().message().find("Relu registered twice"), std::string::npos) << r.status().message();
}

TEST(OpsRegistry, RunOpErrorNamesOpAndShapes) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({4}, {1, 2, 3, 4});
  auto r = runOp("Add", {&a, &b}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  std::string m = r.status().message();
  EXPECT_NE(m.find("Add"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[2,3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4]"), std::string::npos) << m;
}

TEST(OpsRegistry, WrongArityIsAnError) {
  Tensor a = f32({2}, {1, 2});
  EXPECT_NE(runError("Add", {&a}), "");
  EXPECT_NE(runError("Relu", {&a, &a}), "");
  EXPECT_NE(runError("Gemm", {&a, nullptr}), "");  // required input absent
}

TEST(OpsCollectives, Infer) {
  TensorType t{DType::kF32, {8, 6}};
  auto ar = infer("AllReduce", {t});
  ASSERT_TRUE(ar.ok());
  EXPECT_EQ((*ar)[0], t);
  auto ag = infer("AllGather", {t}, {}, attrs({{"dim", I(1)}, {"group_size", I(4)}}));
  ASSERT_TRUE(ag.ok()) << ag.status().message();
  EXPECT_EQ((*ag)[0], (TensorType{DType::kF32, {8, 24}}));
  auto rs = infer("ReduceScatter", {t}, {}, attrs({{"dim", I(0)}, {"group_size", I(4)}}));
  ASSERT_TRUE(rs.ok()) << rs.status().message();
  EXPECT_EQ((*rs)[0], (TensorType{DType::kF32, {2, 6}}));
  auto bad = infer("ReduceScatter", {t}, {}, attrs({{"dim", I(1)}, {"group_size", I(4)}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("divisible"), std::string::npos);
  EXPECT_FALSE(infer("AllGather", {t}, {}, attrs({{"dim", I(2)}, {"group_size", I(2)}})).ok());
  EXPECT_FALSE(infer("AllGather", {t}).ok());  // attributes missing
}

TEST(OpsCollectives, InferUnevenPiecesAndAllToAll) {
  TensorType t{DType::kF32, {8, 6}};
  // Reduce-scatter of 6 over 4: pieces of 2, 2, 1, 1; this rank's is given.
  auto rs = infer("ReduceScatter", {t}, {}, attrs({{"dim", I(1)}, {"group_size", I(4)}, {"piece_size", I(1)}}));
  ASSERT_TRUE(rs.ok()) << rs.status().message();
  EXPECT_EQ((*rs)[0], (TensorType{DType::kF32, {8, 1}}));
  EXPECT_FALSE(infer("ReduceScatter", {t}, {}, attrs({{"dim", I(1)}, {"group_size", I(4)}, {"piece_size", I(3)}})).ok());
  // All-to-all: dim 1 split 3 ways, dim 0 gathered.
  auto a2a = infer("AllToAll", {t}, {}, attrs({{"dim", I(1)}, {"concat_dim", I(0)}, {"group_size", I(3)}}));
  ASSERT_TRUE(a2a.ok()) << a2a.status().message();
  EXPECT_EQ((*a2a)[0], (TensorType{DType::kF32, {24, 2}}));
  // Uneven both ways: 6 columns over 4 (this rank 1), rows gathered to 29 of about 8 each.
  auto un = infer("AllToAll", {t}, {},
                  attrs({{"dim", I(1)}, {"concat_dim", I(0)}, {"group_size", I(4)}, {"piece_size", I(1)},
                         {"gathered_size", I(29)}}));
  ASSERT_TRUE(un.ok()) << un.status().message();
  EXPECT_EQ((*un)[0], (TensorType{DType::kF32, {29, 1}}));
  auto odd = infer("AllToAll", {t}, {}, attrs({{"dim", I(1)}, {"concat_dim", I(0)}, {"group_size", I(4)}}));
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("divisible"), std::string::npos);
  EXPECT_FALSE(infer("AllToAll", {t}, {}, attrs({{"dim", I(1)}, {"concat_dim", I(1)}, {"group_size", I(2)}})).ok());
  EXPECT_FALSE(infer("AllToAll", {t}, {}, attrs({{"dim", I(1)}, {"group_size", I(2)}})).ok());  // no concat_dim
}

TEST(OpsCollectives, ComputeIsAnInternalError) {
  Tensor x = f32({2}, {1, 2});
  auto r = runOp("AllReduce", {&x}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("collective ops run only in the runtime's executor"),
            std::string::npos);
}

}  // namespace
}  // namespace pcc::testing
