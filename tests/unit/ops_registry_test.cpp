#include <algorithm>

#include "compiler/ir/regions.h"
#include "ops_test_util.h"

namespace pcc::testing {
namespace {

TEST(OpsRegistry, EveryOpInOpsDefHasInferAndCompute) {
  // Region ops (If, Loop, Scan) have no kernel: their bodies type them
  // (compiler/ir/regions.h) and the evaluator runs them.
  std::vector<std::string> want;
#define PCC_OP(Name, MinIn, MaxIn, NumOut, Kind, ShapeOperands, Shard) \
  if (!isRegionOp(OpKind::Name)) want.push_back(#Name);
#include "compiler/ir/Ops.def"
#undef PCC_OP
  for (const std::string& op : want) {
    const OpSchema* s = findOpSchema(op);
    ASSERT_NE(s, nullptr) << op;
    EXPECT_EQ(s->name, op);
    EXPECT_NE(s->infer, nullptr) << op;
    EXPECT_NE(s->compute, nullptr) << op;
  }
  std::vector<std::string> ops = registeredOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ops, want);
}

TEST(OpsRegistry, UnknownOp) {
  EXPECT_EQ(findOpSchema("NoSuchOp"), nullptr);
  Tensor x = f32({1}, {1});
  auto r = runOp("NoSuchOp", {&x}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("NoSuchOp"), std::string::npos);
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
