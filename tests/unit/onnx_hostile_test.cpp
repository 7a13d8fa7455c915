// Models a hostile user would write: each once a crash, a hang or a silent
// acceptance, now an invalid-input Status of one line naming the node, or a
// bounded import.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "compiler/onnx/import_control.h"
#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

/// A graph attribute `name` of `n`, to be filled.
onnx::GraphProto* graphAttr(onnx::NodeProto& n, const std::string& name) {
  auto* a = newAttr(n, name, onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

void declareValue(onnx::ValueInfoProto* v, const std::string& name, int32_t elemType, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elemType);
  auto* s = t->mutable_shape();
  for (int64_t d : dims) s->add_dim()->set_dim_value(d);
}

onnx::NodeProto* addNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                         std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (const auto& s : ins) n->add_input(s);
  for (const auto& s : outs) n->add_output(s);
  return n;
}

/// A float[4] initializer `name` whose raw_data holds 3 bytes instead of 16.
void addShortInitializer(onnx::GraphProto* g, const std::string& name) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_raw_data("abc");
}

Tensor flag(bool b) {
  Tensor t = Tensor::zeros(DType::kBool, {});
  t.setInt(0, b);
  return t;
}

void expectRefused(ModelBuilder& b, const std::string& expected) {
  auto g = importModel(b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().exitCode(), 2) << g.status().message();
  EXPECT_NE(g.status().message().find(expected), std::string::npos) << g.status().message();
  EXPECT_EQ(g.status().message().find('\n'), std::string::npos) << g.status().message();
}

TEST(OnnxHostile, ABadInitializerOfABodyNamesTheNodeOwningIt) {
  // In If's taken branch: the error once dereferenced the body's node, which
  // did not exist yet (SIGSEGV).
  ModelBuilder b(17);
  b.input("x", DType::kF32, {int64_t(4)}).output("y", DType::kF32);
  b.init("c", flag(true));
  auto& n = b.node("If", {"c"}, {"y"}, "branch");
  onnx::GraphProto* then = graphAttr(n, "then_branch");
  addShortInitializer(then, "w");
  addNode(then, "Add", {"x", "w"}, {"t"});
  declareValue(then->add_output(), "t", onnx::TensorProto::FLOAT, {4});
  onnx::GraphProto* other = graphAttr(n, "else_branch");
  addNode(other, "Identity", {"x"}, {"e"});
  declareValue(other->add_output(), "e", onnx::TensorProto::FLOAT, {4});
  expectRefused(b, "model.onnx: node 'branch' (If, opset 17): body 'then_branch' initializer: tensor 'w': raw_data");

  // In a Loop's body, unrolled.
  ModelBuilder l(17);
  l.input("x", DType::kF32, {int64_t(4)}).output("y", DType::kF32);
  l.init("m", Tensor::scalarI64(2)).init("go", flag(true));
  auto& loop = l.node("Loop", {"m", "go", "x"}, {"y"}, "loop");
  onnx::GraphProto* body = graphAttr(loop, "body");
  declareValue(body->add_input(), "i", onnx::TensorProto::INT64, {});
  declareValue(body->add_input(), "c_in", onnx::TensorProto::BOOL, {});
  declareValue(body->add_input(), "acc", onnx::TensorProto::FLOAT, {4});
  addShortInitializer(body, "w");
  addNode(body, "Identity", {"c_in"}, {"c_out"});
  addNode(body, "Add", {"acc", "w"}, {"next"});
  declareValue(body->add_output(), "c_out", onnx::TensorProto::BOOL, {});
  declareValue(body->add_output(), "next", onnx::TensorProto::FLOAT, {4});
  expectRefused(l, "model.onnx: node 'loop' (Loop, opset 17): body 'body' initializer: tensor 'w': raw_data");
}

/// Loop(no M, cond true) whose body is `inner` levels of the same loop
/// around x = x + x: no level ever stops.
void endlessBody(onnx::GraphProto* body, int inner) {
  declareValue(body->add_input(), "i", onnx::TensorProto::INT64, {});
  declareValue(body->add_input(), "c_in", onnx::TensorProto::BOOL, {});
  declareValue(body->add_input(), "acc", onnx::TensorProto::FLOAT, {2});
  addNode(body, "Identity", {"c_in"}, {"c_out"});
  if (inner == 0) {
    addNode(body, "Add", {"acc", "acc"}, {"next"});
  } else {
    auto* go = addNode(body, "Constant", {}, {"go_inner"});
    auto* v = go->add_attribute();
    v->set_name("value");
    v->set_type(onnx::AttributeProto::TENSOR);
    tensorToProto(flag(true), "", v->mutable_t());
    endlessBody(graphAttr(*addNode(body, "Loop", {"", "go_inner", "acc"}, {"next"}), "body"), inner - 1);
  }
  declareValue(body->add_output(), "c_out", onnx::TensorProto::BOOL, {});
  declareValue(body->add_output(), "next", onnx::TensorProto::FLOAT, {2});
}

TEST(OnnxHostile, LoopsThatNeverStopNestedInEachOtherAreNotUnrolledForever) {
  // Each outer iteration once unrolled the inner loop anew, up to its own
  // limit: an import without end, its memory growing. The model's unrolling
  // budget (kMaxUnrolledIterations) ends it; the loops run at run time.
  for (int depth : {1}) {
    ModelBuilder b(17);
    b.input("x", DType::kF32, {int64_t(2)}).output("y", DType::kF32);
    b.init("go", flag(true));
    endlessBody(graphAttr(b.node("Loop", {"", "go", "x"}, {"y"}, "outer"), "body"), depth);
    PCC_IMPORT_OK(g, b);
    ASSERT_EQ(g->numNodes(), 1u);
    EXPECT_EQ(g->nodes()[0]->op(), OpKind::Loop);
  }
}

TEST(OnnxHostile, AnAttributeGivenTwiceIsRefused) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y", DType::kF32);
  auto& n = b.node("Softmax", {"x"}, {"y"}, "soft");
  setInt(n, "axis", 0);
  setInt(n, "axis", 1);
  expectRefused(b, "node 'soft' (Softmax, opset 13): attribute 'axis' is given twice");
}

TEST(OnnxHostile, AnAttributeWithoutATypeIsRefusedFromIrVersion2) {
  for (int64_t ir : {1, 8}) {
    ModelBuilder b(13, ir);
    b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y", DType::kF32);
    auto& n = b.node("Softmax", {"x"}, {"y"}, "soft");
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_i(0);
    if (ir == 1) {
      PCC_IMPORT_OK(g, b);  // IR version 1 left the type out; the value says it
      continue;
    }
    expectRefused(b, "node 'soft' (Softmax, opset 13): attribute 'axis' has no type (UNDEFINED)");
  }
}

TEST(OnnxHostile, AReferenceToAFunctionAttributeOutsideAFunctionIsRefused) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2), int64_t(3)}).output("y", DType::kF32);
  auto& n = b.node("Softmax", {"x"}, {"y"}, "soft");
  auto* a = newAttr(n, "axis", onnx::AttributeProto::INT);
  a->set_ref_attr_name("dim");
  expectRefused(b, "node 'soft' (Softmax, opset 13): attribute 'axis' refers to 'dim' (ref_attr_name)");
}

TEST(OnnxHostile, AConstantWithTwoValuesIsRefused) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {int64_t(2)}).output("y", DType::kF32);
  auto& n = b.node("Constant", {}, {"c"}, "two");
  setFloat(n, "value_float", 1.f);
  setInt(n, "value_int", 2);
  b.node("Add", {"x", "c"}, {"y"}, "add");
  expectRefused(b, "node 'two' (Constant, opset 13): has 2 value attributes (value_float, value_int)");
}

/// Makes `b` a model whose only node is `op` on x f32[2, 8, 8, 8] and the
/// constants `consts`. \returns the node.
onnx::NodeProto& oneNode(ModelBuilder& b, const std::string& op,
                         const std::vector<std::pair<std::string, Tensor>>& consts) {
  b.input("x", DType::kF32, {int64_t(2), int64_t(8), int64_t(8), int64_t(8)}).output("y", DType::kF32);
  std::vector<std::string> ins{"x"};
  for (const auto& [name, t] : consts) {
    b.init(name, t);
    ins.push_back(name);
  }
  return b.node(op, ins, {"y"}, "n");
}

Tensor i64s(std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v);
}

TEST(OnnxHostile, ShapesThatWrapAroundInt64AreRefused) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  // Pad: 8 + (2^63 - 1) + (2^63 - 1) wraps to 6, a small and wrong shape.
  ModelBuilder pad(19);
  oneNode(pad, "Pad", {{"pads", i64s({0, 0, 0, big, 0, 0, 0, big})}});
  expectRefused(pad, "node 'n' (Pad, opset 19): pads [0,0,0,9223372036854775807,0,0,0,9223372036854775807] overflow "
                     "int64 on dim 3");
  // Tile: 8 * 2^61 wraps to 0.
  ModelBuilder tile(19);
  oneNode(tile, "Tile", {{"repeats", i64s({1, 1, 1, int64_t{1} << 61})}});
  expectRefused(tile, "node 'n' (Tile, opset 19): repeats [1,1,1,2305843009213693952] overflow int64 on dim 3");
  // MaxPool: a dilation that makes the window's extent wrap.
  ModelBuilder pool(19);
  onnx::NodeProto& maxPool = oneNode(pool, "MaxPool", {});
  setInts(maxPool, "kernel_shape", {3, 3});
  setInts(maxPool, "dilations", {1, big / 2 + 1});
  expectRefused(pool, "node 'n' (MaxPool, opset 19): kernel 3 with dilation 4611686018427387904 in spatial dim 1 "
                      "overflows int64");
  // Conv: pads that wrap around.
  ModelBuilder conv(19);
  setInts(oneNode(conv, "Conv", {{"w", Tensor::zeros(DType::kF32, {2, 8, 1, 1})}}), "pads", {0, big, 0, big});
  expectRefused(conv, "node 'n' (Conv, opset 19): pads [0,9223372036854775807,0,9223372036854775807] overflow int64 "
                      "in spatial dim 1");
  // ConvTranspose: a stride that makes the output size wrap.
  ModelBuilder convT(19);
  setInts(oneNode(convT, "ConvTranspose", {{"w", Tensor::zeros(DType::kF32, {8, 2, 1, 1})}}), "strides", {1, big / 4});
  expectRefused(convT, "node 'n' (ConvTranspose, opset 19): strides, dilations and output_padding overflow int64 in "
                       "spatial dim 1");
  // Resize to sizes past int64 (a cast that was undefined).
  ModelBuilder resize(19);
  onnx::NodeProto& r = oneNode(resize, "Resize", {{"scales", Tensor::fromVector<float>(DType::kF32, {4}, {1, 1, 1, 1e30f})}});
  r.set_input(1, "");  // no roi
  r.add_input("scales");
  expectRefused(resize, "node 'n' (Resize, opset 19): scale 1e+30 makes dim 3 of f32[2,8,8,8] overflow int64");
  // DepthToSpace: blocksize^2 wrapped to 0 and was divided by (SIGFPE).
  ModelBuilder d2s(19);
  setInt(oneNode(d2s, "DepthToSpace", {}), "blocksize", int64_t{1} << 32);
  expectRefused(d2s, "node 'n' (DepthToSpace, opset 19): blocksize 4294967296 makes the output of f32[2,8,8,8] "
                     "overflow int64");
}

TEST(OnnxHostile, ARangeOfMoreThanInt64ElementsIsRefused) {
  ModelBuilder b(13);
  b.output("y", DType::kF32);
  b.init("start", Tensor::scalarF32(0)).init("limit", Tensor::scalarF32(1e30f)).init("delta", Tensor::scalarF32(1e-10f));
  b.node("Range", {"start", "limit", "delta"}, {"y"}, "range");
  expectRefused(b, "node 'range' (Range, opset 13): start 0, limit 1e+30 and delta 1e-10 give");
}

}  // namespace
}  // namespace pcc
