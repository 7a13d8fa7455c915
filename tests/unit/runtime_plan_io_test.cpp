#include <gtest/gtest.h>

#include <fstream>

#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "runtime_test_util.h"

namespace pcc {
namespace {

using namespace testing_rt;

TEST(RuntimePlanConvert, DescRoundTrip) {
  TensorType t{DType::kBF16, {2, 0, 5}};
  EXPECT_EQ(fromDesc(toDesc(t)), t);
  plan::TensorDesc bad;
  bad.set_dtype(99);
  EXPECT_EQ(fromDesc(bad).dtype, DType::kUndefined);
}

TEST(RuntimePlanConvert, AttributesRoundTripEveryKind) {
  AttrMap a;
  a.set("i", int64_t{-3});
  a.set("f", 0.25f);
  a.set("s", std::string("same"));
  a.set("ints", std::vector<int64_t>{1, 2, 3});
  a.set("empty_ints", std::vector<int64_t>{});
  a.set("floats", std::vector<float>{1.5f, -2.f});
  a.set("strings", std::vector<std::string>{"a", "bc"});
  a.set("t", Tensor::fromVector<int64_t>(DType::kI64, {2}, {7, 8}));
  google::protobuf::RepeatedPtrField<plan::Attr> protos;
  for (const auto& [name, v] : a.all()) toAttrProto(name, v, protos.Add());
  auto back = fromAttrProtos(protos);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == a);
  // An empty list keeps its kind.
  EXPECT_TRUE(std::holds_alternative<std::vector<int64_t>>(back->all().at("empty_ints")));
}

TEST(RuntimePlanConvert, BadAttributesAreInvalidInput) {
  google::protobuf::RepeatedPtrField<plan::Attr> protos;
  protos.Add()->set_name("novalue");
  auto r = fromAttrProtos(protos);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status().message().find("'novalue'"), std::string::npos);

  protos.Clear();
  plan::Attr* t = protos.Add();
  t->set_name("short");
  *t->mutable_tensor()->mutable_desc() = toDesc({DType::kF32, {4}});
  t->mutable_tensor()->set_data("abc");
  r = fromAttrProtos(protos);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs 16 bytes"), std::string::npos) << r.status().message();
}

/// A one-rank plan with two weights in rank0.bin.
struct TwoWeights {
  plan::Plan plan;
  WeightFileWriter writer;
  Tensor w0 = pattern(f32({3, 5}));
  Tensor w1 = Tensor::fromVector<int64_t>(DType::kI64, {3}, {1, -2, 3});
  TwoWeights() {
    ProgBuilder b(plan.add_ranks(), 0, &writer);
    b.weight("fc1.weight", w0);
    b.weight("idx", w1);
  }
};

TEST(RuntimePlanIo, WeightWriterRoundTripIsAlignedAndMapped) {
  TwoWeights tw;
  const plan::RankProgram& prog = tw.plan.ranks(0);
  EXPECT_EQ(prog.weights(0).offset(), 0u);
  EXPECT_EQ(prog.weights(1).offset(), 64u);  // 60 bytes, then padding to 64
  EXPECT_EQ(prog.weights(0).nbytes(), 60u);
  EXPECT_EQ(prog.weights(0).crc32(), crc32Of(tw.w0.raw(), 60));

  LoadedPlan lp = writeAndLoad("roundtrip", tw.plan, {{"rank0.bin", &tw.writer}});
  EXPECT_EQ(lp.plan.schema_version(), kPlanSchemaVersion);  // stamped by the writer
  ASSERT_EQ(lp.files.count("rank0.bin"), 1u);
  EXPECT_EQ(lp.files["rank0.bin"]->size(), 64u + 24u);
  EXPECT_TRUE(std::filesystem::exists(lp.dir + "/report.json"));
  for (int i = 0; i < 2; ++i) {
    auto t = loadWeight(lp, lp.plan.ranks(0), i, true);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const Tensor& want = i == 0 ? tw.w0 : tw.w1;
    EXPECT_EQ(t->type(), want.type());
    EXPECT_EQ(std::memcmp(t->raw(), want.raw(), want.nbytes()), 0);
    // A view into the mapping, not a copy.
    EXPECT_EQ(t->raw(), lp.files["rank0.bin"]->data() + lp.plan.ranks(0).weights(i).offset());
  }
  auto missing = loadWeight(lp, lp.plan.ranks(0), 2, true);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no weight 2"), std::string::npos);
}

TEST(RuntimePlanIo, FlippedByteIsAChecksumError) {
  TwoWeights tw;
  std::string dir = freshDir("flipped");
  ASSERT_TRUE(writePlanBundle(dir, tw.plan, {{"rank0.bin", &tw.writer}}, "{}").ok());
  {
    std::fstream f(dir + "/rank0.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(5);
    f.write(&c, 1);
  }
  auto lp = loadPlanBundle(dir);
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  auto t = loadWeight(*lp, lp->plan.ranks(0), 0, true);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
  std::string m = t.status().message();
  EXPECT_EQ(m.rfind(dir + "/rank0.bin: weight 'fc1.weight' checksum mismatch (stored 0x", 0), 0u) << m;
  EXPECT_NE(m.find(", computed 0x"), std::string::npos) << m;
  // Unverified, the damaged weight loads; the intact one verifies.
  EXPECT_TRUE(loadWeight(*lp, lp->plan.ranks(0), 0, false).ok());
  EXPECT_TRUE(loadWeight(*lp, lp->plan.ranks(0), 1, true).ok());
}

TEST(RuntimePlanIo, WeightOutsideTheFileIsRefused) {
  TwoWeights tw;
  tw.plan.mutable_ranks(0)->mutable_weights(1)->set_offset(128);
  LoadedPlan lp = writeAndLoad("outside", tw.plan, {{"rank0.bin", &tw.writer}});
  auto t = loadWeight(lp, lp.plan.ranks(0), 1, false);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("lies outside the file"), std::string::npos)
      << t.status().message();
}

TEST(RuntimePlanIo, UnknownSchemaVersionIsRefused) {
  plan::Plan p;
  p.set_schema_version(7);
  std::string dir = freshDir("v7");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(),
            dir + "/plan.pb: plan schema version 7 is not supported by this runtime (supports 2)");
}

TEST(RuntimePlanIo, PlanWithoutAMemoryPlanIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(1);  // before arena offsets
  std::string dir = freshDir("v1");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 1 is older than this runtime's 2 (it has "
                                         "no memory plan); recompile the model with this pcc");
}

TEST(RuntimePlanIo, BadBundlesNameTheFile) {
  auto notDir = loadPlanBundle(freshDir("nowhere"));
  ASSERT_FALSE(notDir.ok());
  EXPECT_NE(notDir.status().message().find("not a directory"), std::string::npos);

  std::string empty = freshDir("empty");
  std::filesystem::create_directories(empty);
  auto noPlan = loadPlanBundle(empty);
  ASSERT_FALSE(noPlan.ok());
  EXPECT_EQ(noPlan.status().message(), empty + "/plan.pb: missing");

  std::ofstream(empty + "/plan.pb") << "\xff\xff\xff not a protobuf";
  auto garbage = loadPlanBundle(empty);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(garbage.status().message().find(empty + "/plan.pb: cannot parse"), std::string::npos);

  // A program naming a weight file that is not there.
  TwoWeights tw;
  std::string dir = freshDir("noweights");
  ASSERT_TRUE(writePlanBundle(dir, tw.plan, {}, "{}").ok());
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_NE(lp.status().message().find(dir + "/rank0.bin: weight file of rank 0 is missing"),
            std::string::npos)
      << lp.status().message();
}

}  // namespace
}  // namespace pcc
