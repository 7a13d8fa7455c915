// Graph construction and mutation: names, users, clone, replaceAllUsesWith,
// eraseNodes, eraseUnusedConstants.
#include <gtest/gtest.h>

#include <set>

#include "ir_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

TEST(IrGraph, BuildsNodesWithInferredTypesAndUniqueNames) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2, 3}});
  Value* w = g.addConstant("w", f32({3, 4}, std::vector<float>(12, 1.0f)));
  Node* mm = addInferred(g, OpKind::MatMul, {x, w}, {}, "mm", {"x"});  // name taken: made unique
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->output()->type(), (TensorType{DType::kF32, {2, 4}}));
  EXPECT_EQ(mm->output()->name(), "x_1");
  EXPECT_EQ(mm->output()->producer(), mm);
  EXPECT_EQ(x->producer(), nullptr);
  EXPECT_TRUE(w->isConstant());
  EXPECT_FALSE(x->isConstant());
  EXPECT_EQ(g.findValue("x_1"), mm->output());
  EXPECT_EQ(g.findValue("nope"), nullptr);
  EXPECT_EQ(g.uniqueName("w"), "w_1");
  EXPECT_EQ(g.uniqueName("fresh"), "fresh");
  EXPECT_EQ(g.constants(), std::vector<Value*>{w});
  EXPECT_EQ(mm->describe(), "node 'mm' (MatMul)");
  EXPECT_TRUE(verifyGraph(g).ok());
}

TEST(IrGraph, UsersAndUseCounts) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {4}});
  Node* add = addInferred(g, OpKind::Add, {x, x});
  Node* relu = addInferred(g, OpKind::Relu, {add->output()});
  g.addOutput(relu->output());
  g.addOutput(add->output());
  EXPECT_EQ(g.users(x), std::vector<Node*>{add});  // a node reading x twice appears once
  auto counts = g.useCounts();
  EXPECT_EQ(counts[x], 2);
  EXPECT_EQ(counts[add->output()], 2);  // Relu and a graph output
  EXPECT_EQ(counts[relu->output()], 1);
  EXPECT_EQ(g.indexOf(relu), 1u);
}

TEST(IrGraph, ReplaceAllUsesWithRewritesNodesAndOutputs) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {4}});
  Value* y = g.addInput("y", {DType::kF32, {4}});
  Node* a = addInferred(g, OpKind::Relu, {x});
  Node* b = addInferred(g, OpKind::Mul, {a->output(), a->output()});
  g.setOutputs({a->output(), b->output()});
  g.replaceAllUsesWith(a->output(), y);
  EXPECT_EQ(b->input(0), y);
  EXPECT_EQ(b->input(1), y);
  EXPECT_EQ(g.outputs()[0], y);
  EXPECT_TRUE(g.users(a->output()).empty());
  // Now `a` is dead and can be erased; its output name becomes free again.
  std::string name = a->output()->name();
  g.eraseNodes({a});
  EXPECT_EQ(g.numNodes(), 1u);
  EXPECT_EQ(g.findValue(name), nullptr);
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
}

// Every value's use list holds exactly the (node, slot) reads a scan finds.
void expectUseListsMatchAScan(const Graph& g, const std::vector<Value*>& values) {
  for (Value* v : values) {
    std::multiset<const Node*> scanned, listed(v->uses().begin(), v->uses().end());
    for (Node* n : g.nodes())
      for (Value* in : n->inputs())
        if (in == v) scanned.insert(n);
    EXPECT_EQ(listed, scanned) << v->name();
  }
}

TEST(IrGraph, UseListsFollowEveryMutation) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {4}});
  Value* y = g.addInput("y", {DType::kF32, {4}});
  Node* a = addInferred(g, OpKind::Add, {x, x});
  Node* r = addInferred(g, OpKind::Relu, {a->output()});
  Node* m = addInferred(g, OpKind::Mul, {a->output(), y});
  g.setOutputs({r->output(), m->output()});
  std::vector<Value*> all = {x, y, a->output(), r->output(), m->output()};
  EXPECT_EQ(x->uses().size(), 2u);  // one entry per slot
  EXPECT_EQ(g.users(a->output()), (std::vector<Node*>{r, m}));
  expectUseListsMatchAScan(g, all);

  m->setInput(1, x);  // y loses its only use, x gains one
  EXPECT_TRUE(y->uses().empty());
  EXPECT_EQ(g.users(x), (std::vector<Node*>{a, m}));
  expectUseListsMatchAScan(g, all);

  g.replaceAllUsesWith(x, y);  // both of Add's slots and Mul's
  EXPECT_TRUE(x->uses().empty());
  EXPECT_EQ(y->uses().size(), 3u);
  EXPECT_EQ(a->input(0), y);
  EXPECT_EQ(a->input(1), y);
  expectUseListsMatchAScan(g, all);

  g.setOutputs({m->output()});
  g.eraseNodes({r});  // its input keeps only Mul's use
  EXPECT_EQ(g.users(a->output()), std::vector<Node*>{m});
  expectUseListsMatchAScan(g, {x, y, a->output(), m->output()});

  auto c = g.clone();  // the clone builds its own lists
  Value* cy = c->findValue("y");
  ASSERT_NE(cy, nullptr);
  EXPECT_EQ(cy->uses().size(), 3u);
  expectUseListsMatchAScan(*c, {cy, c->findValue(a->output()->name())});
}

TEST(IrGraph, EraseNodesKeepsOrderOfTheRest) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {4}});
  Node* n0 = addInferred(g, OpKind::Relu, {x});
  Node* n1 = addInferred(g, OpKind::Tanh, {x});
  Node* n2 = addInferred(g, OpKind::Sigmoid, {x});
  Node* n3 = addInferred(g, OpKind::Erf, {x});
  g.setOutputs({n0->output(), n2->output()});
  g.eraseNodes({n3, n1});
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{n0, n2}));
}

TEST(IrGraph, EraseUnusedConstantsKeepsInputs) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  g.addInput("unusedInput", {DType::kF32, {2}});
  Value* c = g.addConstant("c", f32({2}, {1, 2}));
  g.addConstant("dead", f32({2}, {3, 4}));
  Node* add = addInferred(g, OpKind::Add, {x, c});
  g.addOutput(add->output());
  g.eraseUnusedConstants();
  EXPECT_EQ(g.constants(), std::vector<Value*>{c});
  EXPECT_EQ(g.inputs().size(), 2u);
  EXPECT_EQ(g.findValue("dead"), nullptr);
}

TEST(IrGraph, AddNodeAtPositionKeepsTopologicalOrder) {
  Graph g;
  Value* x = g.addInput("x", {DType::kF32, {2}});
  Node* last = addInferred(g, OpKind::Relu, {x});
  g.addOutput(last->output());
  auto types = inferOutputTypes(OpKind::Tanh, {x}, {}, "t");
  ASSERT_TRUE(types.ok());
  Node* first = g.addNode(OpKind::Tanh, {x}, *types, {}, "t", {}, size_t{0});
  last->setInput(0, first->output());
  EXPECT_EQ(g.nodes().front(), first);
  EXPECT_TRUE(verifyGraph(g).ok());
}

TEST(IrGraph, CloneIsDeepAndKeepsAnnotations) {
  Graph g;
  g.setName("orig");
  Value* x = g.addInput("x", {DType::kF32, {2, 6}});
  x->setSharding(Sharding{{MeshAxis::kDP, MeshAxis::kNone}, MeshAxis::kNone});
  Value* c = g.addConstant("c", f32({2, 3}, {1, 2, 3, 4, 5, 6}));
  AttrMap attrs;
  attrs.set("axis", int64_t{1});
  attrs.set("num_outputs", int64_t{2});
  Node* split = addInferred(g, OpKind::Split, {x}, attrs, "split");
  split->setStage(1);
  split->output(1)->setSharding(Sharding{{MeshAxis::kNone, MeshAxis::kTP}, MeshAxis::kNone});
  Node* add = addInferred(g, OpKind::Add, {split->output(0), c}, {}, "add");
  g.setOutputs({add->output(), split->output(1)});

  std::unique_ptr<Graph> copy = g.clone();
  EXPECT_EQ(printGraph(*copy), printGraph(g));
  EXPECT_EQ(copy->name(), "orig");
  ASSERT_EQ(copy->numNodes(), 2u);
  Node* csplit = copy->nodes()[0];
  EXPECT_NE(csplit, split);
  EXPECT_EQ(csplit->stage(), 1);
  EXPECT_EQ(csplit->attrs(), split->attrs());
  EXPECT_EQ(csplit->input(0), copy->inputs()[0]);
  EXPECT_EQ(copy->inputs()[0]->sharding(), x->sharding());
  EXPECT_EQ(copy->nodes()[1]->input(0), csplit->output(0));
  // Mutating the copy leaves the original alone.
  copy->nodes()[1]->setName("renamed");
  copy->setOutputs({csplit->output(1)});
  copy->eraseNodes({copy->nodes()[1]});
  EXPECT_EQ(g.numNodes(), 2u);
  EXPECT_EQ(add->name(), "add");
}

}  // namespace
}  // namespace pcc
