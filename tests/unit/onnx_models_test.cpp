// The committed models (models/*.onnx), imported with --batch 2 and run on the
// reference kernels, against onnxruntime's outputs stored by
// tests/data/onnx/make_reference.py.
#include "onnx_test_util.h"

namespace pcc {
namespace {
using namespace pcc::testing;

class OnnxModels : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxModels, MatchesOnnxRuntime) {
  std::string name = GetParam();
  std::string model = std::string(PCC_SOURCE_DIR) + "/models/" + name + ".onnx";
  std::string data = std::string(PCC_SOURCE_DIR) + "/tests/data/onnx/" + name;
  ImportOptions opts;
  opts.batch = 2;
  auto g = importOnnxModel(model, opts);
  ASSERT_TRUE(g.ok()) << g.status().message();
  // Every shape is static and the shape subgraphs are folded away.
  EXPECT_TRUE(nodesOf(**g, OpKind::Shape).empty());
  EXPECT_TRUE(nodesOf(**g, OpKind::Concat).empty());
  for (Node* n : (*g)->nodes()) {
    if (n->op() == OpKind::Reshape) {
      EXPECT_TRUE(n->input(1)->isConstant()) << n->name();
    }
    for (Value* v : n->outputs()) EXPECT_NE(v->type().dtype, DType::kUndefined) << v->name();
  }
  EXPECT_EQ((*g)->inputs()[0]->type().shape.at(0), 2);

  auto x = readTensorFile(data + "/input_0.pb");
  auto expected = readTensorFile(data + "/output_0.pb");
  ASSERT_TRUE(x.ok()) << x.status().message();
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto out = evaluate(**g, {*x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  expectNear((*out)[0], *expected, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Committed, OnnxModels, ::testing::Values("mlp", "cnn_small", "gpt2_tiny"));

}  // namespace
}  // namespace pcc
