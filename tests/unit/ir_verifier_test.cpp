// The verifier: each invariant is checked, and errors name the node or value.
#include <gtest/gtest.h>

#include "ir_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

void expectError(const Graph& g, const std::string& fragment) {
  Status s = verifyGraph(g);
  ASSERT_FALSE(s.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(IrVerifier, AcceptsAWellFormedGraph) {
  auto g = parseOrFail(
      "graph @ok(%x: f32[2,6], %c: f32[3] const dense<f32[3]: 1, 2, 3>) -> (%s: f32[2,3]) {\n"
      "  %a, %b = Split(%x) {axis = 1, num_outputs = 2} : f32[2,3] #shard<[dp,-]>, f32[2,3]\n"
      "  %s = Add(%a, %c) : f32[2,3] @stage(1)\n"
      "  return %s\n"
      "}\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(verifyGraph(*g).ok());
}

TEST(IrVerifier, WrongOutputTypeNamesNodeAndBothTypes) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2, 3}});
  Node* n = g.addNode(OpKind::Relu, {x}, {{DType::kF32, {3, 2}}}, {}, "relu");
  g.addOutput(n->output());
  expectError(g, "node 'relu' (Relu): output 0 %");
  expectError(g, "has type f32[3,2] but type inference gives f32[2,3]");
  // An unnamed node is named by its first result.
  n->setName("");
  expectError(g, "node defining %" + n->output()->name() + " (Relu)");
}

TEST(IrVerifier, WrongDTypeIsCaught) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  Node* n = g.addNode(OpKind::Relu, {x}, {{DType::kF16, {2}}}, {}, "r");
  g.addOutput(n->output());
  expectError(g, "has type f16[2] but type inference gives f32[2]");
}

TEST(IrVerifier, ArityBounds) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  Node* n = g.addNode(OpKind::Add, {x, x, x}, {{DType::kF32, {2}}}, {}, "add3");
  g.addOutput(n->output());
  expectError(g, "node 'add3' (Add): has 3 inputs, expected 2");

  Graph g2;
  Value* y = g2.addInput("y", {DType::kF32, {2, 2}});
  Node* gemm = g2.addNode(OpKind::Gemm, {y}, {{DType::kF32, {2, 2}}}, {}, "gemm1");
  g2.addOutput(gemm->output());
  expectError(g2, "node 'gemm1' (Gemm): has 1 inputs, expected 2 to 3");

  Graph g3;
  Value* z = g3.addInput("z", {DType::kF32, {2}});
  Node* two = g3.addNode(OpKind::Relu, {z}, {{DType::kF32, {2}}, {DType::kF32, {2}}}, {}, "relu2");
  g3.addOutput(two->output());
  expectError(g3, "node 'relu2' (Relu): has 2 outputs, expected 1");
}

TEST(IrVerifier, RequiredInputAbsent) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2, 2}});
  Node* n = g.addNode(OpKind::MatMul, {nullptr, x}, {{DType::kF32, {2, 2}}}, {}, "mm");
  g.addOutput(n->output());
  expectError(g, "node 'mm' (MatMul): required input 0 is absent");
}

TEST(IrVerifier, TopologicalOrder) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  Node* second = addInferred(g, OpKind::Relu, {x}, {}, "second");
  // Insert a reader of `second` before it.
  Node* first = g.addNode(OpKind::Tanh, {second->output()}, {{DType::kF32, {2}}}, {}, "first", {}, size_t{0});
  g.addOutput(first->output());
  expectError(g, "node 'first' (Tanh): input 0 %" + second->output()->name() + " is not defined before the node");
}

TEST(IrVerifier, ValueFromAnotherGraphIsNotDefined) {
  Graph other;
  Value* foreign = other.addInput("foreign", {DType::kF32, {2}});
  Graph g;
  g.addInput("x", {DType::kF32, {2}});
  Node* n = addInferred(g, OpKind::Relu, {foreign}, {}, "r");
  g.addOutput(n->output());
  expectError(g, "node 'r' (Relu): input 0 %foreign is not defined before the node");
  g.setOutputs({foreign});
  g.eraseNodes({n});
  expectError(g, "graph output 0 %foreign is not defined in the graph");
}

TEST(IrVerifier, DuplicateNamesAndShardingRank) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2, 2}});
  Node* n = addInferred(g, OpKind::Relu, {x}, {}, "r", {"y"});
  g.addOutput(n->output());
  n->output()->setName("x");  // bypasses Graph's name table on purpose
  expectError(g, "value name %x is defined twice");
  n->output()->setName("y");
  n->output()->setSharding(Sharding{{MeshAxis::kDP}, MeshAxis::kNone});
  expectError(g, "node 'r' (Relu): value %y of type f32[2,2] has sharding [dp] of rank 1");
  n->output()->setSharding(std::nullopt);
  x->setSharding(Sharding{{MeshAxis::kDP, MeshAxis::kTP, MeshAxis::kNone}, MeshAxis::kNone});
  expectError(g, "value %x of type f32[2,2] has sharding [dp,tp,-] of rank 3");
}

TEST(IrVerifier, ConstantTypeMustMatchData) {
  Graph g;
  Value* c = g.addConstant("c", f32({2}, {1, 2}));
  g.addOutput(c);
  EXPECT_TRUE(verifyGraph(g).ok());
  c->setType({DType::kF32, {3}});
  expectError(g, "constant %c has type f32[3] but its data is f32[2]");
}

TEST(IrVerifier, InferenceFailureNamesNodeAndShapes) {
  Graph g;
  Value* a = g.addInput("a", {DType::kF32, {2, 3}});
  Value* b = g.addInput("b", {DType::kF32, {4, 5}});
  Node* n = g.addNode(OpKind::MatMul, {a, b}, {{DType::kF32, {2, 5}}}, {}, "mm");
  g.addOutput(n->output());
  expectError(g, "node 'mm' (MatMul) with inputs (f32[2,3], f32[4,5])");
}

TEST(IrVerifier, NegativeStage) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  Node* n = addInferred(g, OpKind::Relu, {x}, {}, "r");
  n->setStage(-2);
  g.addOutput(n->output());
  expectError(g, "node 'r' (Relu): negative stage -2");
}

TEST(IrVerifier, CollectivesCheckedOnlyWithTheirAttributes) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {4, 2}});
  AttrMap attrs;
  attrs.set("axis", std::string("tp"));
  Node* n = g.addNode(OpKind::AllGather, {x}, {{DType::kF32, {8, 2}}}, attrs, "ag");
  g.addOutput(n->output());
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  n->attrs().set("dim", int64_t{0});
  n->attrs().set("group_size", int64_t{2});
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  n->attrs().set("group_size", int64_t{4});
  expectError(g, "node 'ag' (AllGather): output 0 %");
  // AllReduce never needs attributes: its type is always checked.
  Node* ar = g.addNode(OpKind::AllReduce, {x}, {{DType::kF32, {4, 4}}}, attrs, "ar");
  n->attrs().set("group_size", int64_t{2});
  g.addOutput(ar->output());
  expectError(g, "node 'ar' (AllReduce): output 0 %");
}

}  // namespace
}  // namespace pcc
