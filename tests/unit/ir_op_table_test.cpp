// The op table (runtime/schema/Ops.def) against everything else that knows an op:
// type inference (runtime/schema) and the reference kernel (runtime/ops), the importer tables
// (compiler/onnx), the dimension maps of the partitioner (passes/partition).
// Adding an op without one of them fails here (docs/adding-an-op.md).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "compiler/ir/ir.h"
#include "compiler/ir/regions.h"
#include "compiler/onnx/import_control.h"
#include "compiler/onnx/op_importers.h"
#include "passes/partition/dim_map.h"
#include "runtime/ops/registry.h"

namespace pcc {
namespace {

// The newest opset the importer reads (README: opsets 1 to 24).
constexpr int64_t kNewestOpset = 24;

std::vector<OpKind> allOps() {
  std::vector<OpKind> ops;
  for (int i = 0; i < static_cast<int>(OpKind::kNumOps); ++i) ops.push_back(static_cast<OpKind>(i));
  return ops;
}

TEST(OpTable, NamesAreUniqueAndRoundTrip) {
  std::set<std::string_view> seen;
  for (OpKind op : allOps()) {
    EXPECT_TRUE(seen.insert(opName(op)).second) << opName(op);
    EXPECT_EQ(opFromName(opName(op)), op) << opName(op);
  }
}

TEST(OpTable, EveryOpHasTypeInferenceAndAReferenceKernel) {
  for (OpKind op : allOps()) {
    // Region ops (If, Loop, Scan) are typed by their bodies (compiler/ir/regions.h)
    // and run by the evaluator, not by a kernel.
    if (isRegionOp(op)) {
      EXPECT_EQ(inferFn(op), nullptr) << opName(op);
      EXPECT_EQ(referenceKernel(op), nullptr) << opName(op);
      continue;
    }
    EXPECT_NE(inferFn(op), nullptr) << opName(op) << ": no type inference in runtime/schema";
    EXPECT_EQ(findInferFn(opName(op)), inferFn(op)) << opName(op);
    const KernelEntry* k = referenceKernel(op);
    ASSERT_NE(k, nullptr) << opName(op) << ": no reference kernel in runtime/ops";
    EXPECT_NE(k->compute, nullptr) << opName(op);
  }
  // No family registered an op twice (the tables keep the first error).
  EXPECT_TRUE(schemaTableStatus().ok()) << schemaTableStatus().message();
  EXPECT_TRUE(kernelTableStatus().ok()) << kernelTableStatus().message();
}

TEST(OpTable, EveryOnnxOpHasAnImporterRow) {
  for (OpKind op : allOps()) {
    OnnxImport how = opInfo(op).onnx;
    // Exactly the ops pcc makes are NotOnnx: the collectives (the partitioner)
    // and Fused (the fuse pass, passes/fuse.cpp). A model naming one is refused.
    bool made = isCollective(op) || op == OpKind::Fused;
    EXPECT_EQ(how == OnnxImport::kNone, made) << opName(op) << ": the Import column of Ops.def";
    if (how == OnnxImport::kNone) {
      EXPECT_EQ(findImporter(opName(op), kNewestOpset), nullptr) << opName(op) << " is NotOnnx but has an importer row";
      EXPECT_FALSE(isControlFlowOp(opName(op))) << opName(op);
      continue;
    }
    if (isRegionOp(op)) {  // imported with their bodies by compiler/onnx/import_control.cpp
      EXPECT_EQ(how, OnnxImport::kCustom) << opName(op);
      EXPECT_TRUE(isControlFlowOp(opName(op))) << opName(op) << ": no control-flow importer";
      continue;
    }
    // OnnxDirect ops get their row from Ops.def; OnnxCustom ones need an
    // import function in compiler/onnx/import_*.cpp (onnxruntime's
    // com.microsoft ops that are pcc ops, MatMulNBits, in that domain).
    if (how == OnnxImport::kCustom && findContribImporter("com.microsoft", opName(op))) continue;
    EXPECT_NE(findImporter(opName(op), kNewestOpset), nullptr)
        << opName(op) << (how == OnnxImport::kDirect ? ": OnnxDirect in Ops.def but no row was made from it"
                                                     : ": OnnxCustom in Ops.def but no row in compiler/onnx/import_*.cpp");
  }
}

TEST(OpTable, OnnxDirectRowsComeFromOpsDefOnly) {
  // An OnnxDirect op has exactly one importer row (the one made from its
  // Ops.def row): a hand-written row for it as well is a duplicate.
  std::map<std::string_view, int> rows;
  for (const ImporterEntry& e : importerRows()) ++rows[e.opType];
  int direct = 0;
  for (OpKind op : allOps()) {
    if (opInfo(op).onnx != OnnxImport::kDirect) continue;
    ++direct;
    EXPECT_EQ(rows[opName(op)], 1) << opName(op);
  }
  EXPECT_GE(direct, 100);  // most ops map one-to-one
}

TEST(OpTable, NoImporterRowIsDuplicated) {
  EXPECT_EQ(duplicateImporterRows(), std::vector<std::string>{});
  // The check itself: every row's op_type counted once.
  std::set<std::string> names;
  for (const ImporterEntry& e : importerRows()) names.insert(e.opType);
  EXPECT_EQ(names.size(), importerRows().size());
}

TEST(OpTable, ShardRuleIsADimMapOrAnExplicitReplicate) {
  for (OpKind op : allOps()) {
    bool hasRule = dimMapRule(op) != nullptr;
    if (opInfo(op).shard == ShardRule::kDimMap) {
      EXPECT_TRUE(hasRule) << opName(op) << " is marked DimMap in Ops.def but dim_map.cpp has no rule";
    } else {
      EXPECT_FALSE(hasRule) << opName(op) << " is marked Replicate in Ops.def but dim_map.cpp has a rule";
    }
  }
}

TEST(OpTable, KindsAreConsistent) {
  for (OpKind op : allOps()) {
    const OpInfo& info = opInfo(op);
    // An elementwise op always splits along with its inputs.
    if (isElementwiseOp(op)) {
      EXPECT_EQ(info.shard, ShardRule::kDimMap) << opName(op);
    }
    if (isCollective(op)) {
      EXPECT_EQ(info.shard, ShardRule::kReplicate) << opName(op);
    }
    // Shape operands name inputs the op has.
    if (info.maxInputs >= 0 && info.maxInputs < 32) {  // a shift by 32 or more is undefined
      EXPECT_EQ(info.shapeOperands >> info.maxInputs, 0u) << opName(op) << ": a shape operand past its last input";
    }
    if (info.opClass == OpClass::kElementwise) {
      EXPECT_EQ(info.shapeOperands, 0u) << opName(op);
    }
  }
  EXPECT_TRUE(isElementwiseOp(OpKind::Add));
  EXPECT_FALSE(isElementwiseOp(OpKind::MatMul));
  EXPECT_EQ(opClass(OpKind::Expand), OpClass::kBroadcast);
  EXPECT_EQ(opClass(OpKind::ReduceSum), OpClass::kReduction);
  EXPECT_EQ(opClass(OpKind::Transpose), OpClass::kInjective);
  EXPECT_TRUE(isCollective(OpKind::AllGather));
  EXPECT_TRUE(isShapeOperand(OpKind::Reshape, 1));
  EXPECT_FALSE(isShapeOperand(OpKind::Reshape, 0));
  EXPECT_TRUE(isShapeOperand(OpKind::Slice, 4));
  EXPECT_EQ(opClassName(OpClass::kOpaque), "opaque");
}

}  // namespace
}  // namespace pcc
