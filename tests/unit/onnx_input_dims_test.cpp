// Binding symbolic input dims (compiler/onnx/input_dims.h): the sizes a model
// carries (a second declaration with a dim_value, metadata_props), conflicts,
// the batch left to the compiler, and one error naming every dim left unbound.
#include "compiler/onnx/input_dims.h"
#include "tests/unit/onnx_test_util.h"

namespace pcc {
namespace {

using testing::declare;
using testing::ModelBuilder;

/// y = ids + mask, both [batch, seq] i64.
ModelBuilder addModel() {
  ModelBuilder b(13);
  b.input("ids", DType::kI64, {std::string("batch"), std::string("seq")})
      .input("mask", DType::kI64, {std::string("batch"), std::string("seq")})
      .output("y");
  b.node("Add", {"ids", "mask"}, {"y"}, "add");
  return b;
}

TEST(OnnxInputDims, ValueInfoGivesTheSequenceLength) {
  ModelBuilder b = addModel();
  declare(b.model().mutable_graph()->add_value_info(), "mask", DType::kI64, {std::string("batch"), int64_t(12)});
  ImportOptions o;
  o.batch = 3;
  PCC_IMPORT_OK(g, b, o);
  EXPECT_EQ(g->inputs()[0]->type().str(), "i64[3,12]");  // 'seq' from mask's value_info, shared by ids
  EXPECT_EQ(g->inputs()[1]->type().str(), "i64[3,12]");

  auto info = inspectInputDims(b.model(), "model.onnx", o);
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_EQ(info->fromModel.size(), 1u);
  EXPECT_EQ(info->fromModel[0].symbol, "seq");
  EXPECT_EQ(info->fromModel[0].value, 12);
  EXPECT_EQ(info->fromModel[0].source, "value_info 'mask' dim 1");
  EXPECT_TRUE(info->batchInputs.empty());  // --batch binds it

  // --shape wins over the model's size.
  ImportOptions shaped;
  shaped.shapes["ids"] = {2, 5};
  PCC_IMPORT_OK(g2, b, shaped);
  EXPECT_EQ(g2->inputs()[1]->type().str(), "i64[2,5]");
}

TEST(OnnxInputDims, AnOutputDeclaredAgainAndMetadataGiveSizes) {
  // x [batch, 'h'] passes through to output x declared [?, 6]; 'w' comes from
  // metadata_props.
  ModelBuilder b(13);
  b.input("x", DType::kF32, {std::string("batch"), std::string("h")})
      .input("z", DType::kF32, {std::string("batch"), std::string("w")});
  declare(b.model().mutable_graph()->add_output(), "x", DType::kF32, {std::string("batch"), int64_t(6)});
  b.output("r");
  b.node("Relu", {"z"}, {"r"}, "relu");
  auto* meta = b.model().add_metadata_props();
  meta->set_key("w");
  meta->set_value("9");
  auto* junk = b.model().add_metadata_props();  // not a size: ignored
  junk->set_key("h");
  junk->set_value("tall");
  ImportOptions o;
  o.batch = 2;
  PCC_IMPORT_OK(g, b, o);
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[2,6]");
  EXPECT_EQ(g->inputs()[1]->type().str(), "f32[2,9]");
  auto info = inspectInputDims(b.model(), "model.onnx", o);
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_EQ(info->fromModel.size(), 2u);
  EXPECT_EQ(info->fromModel[0].source, "output 'x' dim 1");
  EXPECT_EQ(info->fromModel[1].source, "metadata_props 'w'");
}

TEST(OnnxInputDims, AnUnnamedDimTakesItsOwnRedeclaration) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {std::string("batch"), std::string()}).output("y");
  b.node("Relu", {"x"}, {"y"}, "relu");
  declare(b.model().mutable_graph()->add_value_info(), "x", DType::kF32, {std::string("batch"), int64_t(7)});
  ImportOptions o;
  o.batch = 4;
  PCC_IMPORT_OK(g, b, o);
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[4,7]");
}

TEST(OnnxInputDims, TwoSizesForOneSymbolAreRefusedNamingBoth) {
  ModelBuilder b = addModel();
  declare(b.model().mutable_graph()->add_value_info(), "mask", DType::kI64, {std::string("batch"), int64_t(12)});
  auto* meta = b.model().add_metadata_props();
  meta->set_key("seq");
  meta->set_value("16");
  ImportOptions o;
  o.batch = 1;
  auto r = testing::importModel(b, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("two sizes: 12 (value_info 'mask' dim 1) and 16 (metadata_props 'seq')"), std::string::npos) << m;
  // The batch is no symbol the model sizes: a value_info for it changes nothing.
  ModelBuilder c = addModel();
  declare(c.model().mutable_graph()->add_value_info(), "ids", DType::kI64, {int64_t(5), int64_t(3)});
  auto info = inspectInputDims(c.model(), "model.onnx", {});
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->batchInputs, (std::vector<std::string>{"ids", "mask"}));
  EXPECT_EQ(info->batchSymbols, (std::vector<std::string>{"batch"}));
  ASSERT_EQ(info->fromModel.size(), 1u);
  EXPECT_EQ(info->fromModel[0].symbol, "seq");
}

TEST(OnnxInputDims, OneErrorNamesEveryUnboundDimAndTheFlags) {
  ModelBuilder b(13);
  b.input("ids", DType::kI64, {std::string("batch"), std::string("seq")})
      .input("image", DType::kF32, {std::string("batch"), int64_t(3), std::string("height"), std::string()})
      .input("scale", DType::kF32, {int64_t(1)})
      .output("y")
      .output("z");
  testing::setInt(b.node("Cast", {"ids"}, {"y"}, "cast"), "to", 1);
  b.node("Mul", {"image", "scale"}, {"z"}, "mul");
  // Batch left to the compiler: only the other dims are named.
  auto info = inspectInputDims(b.model(), "model.onnx", {});
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(info.status().message(),
            "model.onnx: 3 symbolic dims have no size (from --batch, --shape or the model): input 'ids' dim 1 "
            "('seq'), input 'image' dim 2 ('height'), input 'image' dim 3 (unnamed); pass --shape "
            "ids=BATCHxSEQ --shape image=BATCHx3xHEIGHTxD3 with sizes in place of BATCH, SEQ, HEIGHT, D3");
  // With --batch, the flags carry it.
  ImportOptions o;
  o.batch = 8;
  auto r = testing::importModel(b, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pass --shape ids=8xSEQ --shape image=8x3xHEIGHTxD3 with sizes in place of "
                                      "SEQ, HEIGHT, D3"),
            std::string::npos)
      << r.status().message();
  // Plain import without a batch: the batch is named too, with --batch.
  ImportOptions s;
  s.shapes["ids"] = {2, 4};
  r = testing::importModel(b, s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "model.onnx: 2 symbolic dims have no size (from --batch, --shape or the model): input 'image' dim 2 "
            "('height'), input 'image' dim 3 (unnamed); pass --shape image=2x3xHEIGHTxD3 with sizes in place of "
            "HEIGHT, D3");
}

TEST(OnnxInputDims, AnUnboundBatchAloneAsksForBatch) {
  ModelBuilder b(13);
  b.input("x", DType::kF32, {std::string("N"), int64_t(4)}).output("y");
  b.node("Relu", {"x"}, {"y"}, "relu");
  auto r = testing::importModel(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "model.onnx: a symbolic dim has no size (from --batch, --shape or the model): input 'x' dim 0 ('N', the "
            "batch); pass --batch N for the batch");
  auto info = inspectInputDims(b.model(), "model.onnx", {});
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->batchInputs, std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace pcc
