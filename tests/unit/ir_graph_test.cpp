// Graph construction and mutation: names, users, clone, replaceAllUsesWith,
// eraseNodes, eraseUnusedConstants.
#include <gtest/gtest.h>

#include <set>

#include "compiler/ir/graph_equal.h"
#include "ir_test_util.h"
#include "runtime/support/tensor_block.h"

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


// Two programs built alike: x -> MatMul(w) -> Relu, w a block of `source`.
std::unique_ptr<Graph> blockProgram(const Tensor& source, int64_t row) {
  auto g = std::make_unique<Graph>();
  Value* x = g->addInput("x", {DType::kF32, {2, 4}});
  auto block = makeBlock(source, {row, 0}, {4, 3});
  EXPECT_TRUE(block.ok());
  Value* w = g->addConstantBlock("w", *block);
  Value* b = g->addConstant("b", f32({3}, {1, 2, 3}));
  Node* mm = addInferred(*g, OpKind::MatMul, {x, w}, {}, "mm");
  Node* add = addInferred(*g, OpKind::Add, {mm->output(), b}, {}, "add");
  Node* relu = addInferred(*g, OpKind::LeakyRelu, {add->output()}, [] {
    AttrMap a;
    a.set("alpha", 0.5f);
    return a;
  }(), "relu");
  g->addOutput(relu->output());
  return g;
}

TEST(IrGraph, IdenticalGraphsAreTheSameProgramNodeForNode) {
  Tensor source = f32({8, 3}, std::vector<float>(24, 1.0f));
  auto a = blockProgram(source, 0), b = blockProgram(source, 0);
  EXPECT_TRUE(graphsIdentical(*a, *b));
  EXPECT_TRUE(graphsIdentical(*a, *a->clone()));
  // Another block of the same source: another weight.
  EXPECT_FALSE(graphsIdentical(*a, *blockProgram(source, 4)));
  // Another source with the same bytes: compared by where it lies, not read.
  Tensor copy = source.clone();
  EXPECT_FALSE(graphsIdentical(*a, *blockProgram(copy, 0)));
  // An attribute.
  auto c = blockProgram(source, 0);
  c->nodes()[2]->attrs().set("alpha", 0.25f);
  EXPECT_FALSE(graphsIdentical(*a, *c));
  // ... unless the comparison is told to let it differ.
  EXPECT_TRUE(graphsIdentical(*a, *c, [](const Node& x, const Node& y) {
    return attrsEqual(x.attrs(), y.attrs(), "alpha");
  }));
  // A copied constant's bytes.
  auto d = blockProgram(source, 0);
  d->findValue("b")->setConstantData(f32({3}, {1, 2, 4}));
  EXPECT_FALSE(graphsIdentical(*a, *d));
  d->findValue("b")->setConstantData(f32({3}, {1, 2, 3}));
  EXPECT_TRUE(graphsIdentical(*a, *d));
  // What a node reads.
  auto e = blockProgram(source, 0);
  e->nodes()[1]->setInput(1, e->nodes()[0]->output());  // Add(mm, mm)
  EXPECT_FALSE(graphsIdentical(*a, *e));
  // A name, a stage, a sharding.
  auto f = blockProgram(source, 0);
  f->nodes()[0]->setName("mm2");
  EXPECT_FALSE(graphsIdentical(*a, *f));
  auto h = blockProgram(source, 0);
  h->nodes()[0]->setStage(1);
  EXPECT_FALSE(graphsIdentical(*a, *h));
  auto k = blockProgram(source, 0);
  k->findValue("x")->setSharding(Sharding{{MeshAxis::kDP, MeshAxis::kNone}});
  EXPECT_FALSE(graphsIdentical(*a, *k));
}

TEST(IrGraph, AttributeEqualityComparesValuesAndSkipsTheNamedOne) {
  AttrMap a, b;
  a.set("perm", std::vector<int64_t>{0, 2, 1});
  b.set("perm", std::vector<int64_t>{0, 2, 1});
  a.set("t", f32({2}, {1, 2}));
  b.set("t", f32({2}, {1, 2}));
  EXPECT_TRUE(attrsEqual(a, b));
  b.set("t", f32({2}, {1, 3}));
  EXPECT_FALSE(attrsEqual(a, b));
  EXPECT_TRUE(attrsEqual(a, b, "t"));
  b.set("t", f32({2}, {1, 2}));
  b.set("peer", int64_t{3});
  EXPECT_FALSE(attrsEqual(a, b));
  EXPECT_TRUE(attrsEqual(a, b, "peer"));
  a.set("peer", 3.0f);  // another kind of attribute
  EXPECT_FALSE(attrsEqual(a, b));
}

}  // namespace
}  // namespace pcc
