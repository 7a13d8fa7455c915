#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "runtime/support/tensor_block.h"
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
  EXPECT_EQ(prog.weights(0).crc32(), 0u);  // computed while the file is written, not when added

  LoadedPlan lp = writeAndLoad("roundtrip", tw.plan, {{"rank0.bin", &tw.writer}});
  EXPECT_EQ(lp.plan.ranks(0).weights(0).crc32(), crc32Of(tw.w0.raw(), 60));
  EXPECT_EQ(lp.plan.ranks(0).weights(1).crc32(), crc32Of(tw.w1.raw(), 24));
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
  std::string dir = writeBundle("flipped", tw.plan, {{"rank0.bin", &tw.writer}});
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
  p.set_schema_version(9);
  std::string dir = freshDir("v9");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(),
            dir + "/plan.pb: plan schema version 9 is not supported by this runtime (supports 8)");
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
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 1 is older than this runtime's 8 (it has "
                                         "no memory plan); recompile the model with this pcc");
}

TEST(RuntimePlanIo, PlanWithoutAChecksumIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(2);  // before plan_crc32
  std::string dir = freshDir("v2");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 2 is older than this runtime's 8 (it has "
                                         "no checksum of plan.pb); recompile the model with this pcc");
}

TEST(RuntimePlanIo, PlanWithoutRegionsIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(3);  // before REGION
  std::string dir = freshDir("v3");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 3 is older than this runtime's 8 (it has "
                                         "no REGION instruction for If, Loop and Scan); recompile the model with this pcc");
}

TEST(RuntimePlanIo, PlanWithoutMicroBatchesIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(4);  // before pipeline stages ran over micro-batches
  std::string dir = freshDir("v4");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 4 is older than this runtime's 8 (it has "
                                         "no micro-batch count of pipeline stages); recompile the model with this pcc");
}

TEST(RuntimePlanIo, PlanWithoutGeneratedKernelsIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(5);  // before LAUNCH
  std::string dir = freshDir("v5");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 5 is older than this runtime's 8 (it has "
                                         "no LAUNCH instruction for generated kernels); recompile the model with this pcc");
}

TEST(RuntimePlanIo, PlanWithoutAllToAllIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(6);  // before ALL_TO_ALL
  std::string dir = freshDir("v6");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 6 is older than this runtime's 8 (it has "
                                         "no ALL_TO_ALL instruction); recompile the model with this pcc");
}

TEST(RuntimePlanIo, PlanWithoutSessionStateIsRefusedWithRecompile) {
  plan::Plan p;
  p.set_schema_version(7);  // before generation plans' state
  std::string dir = freshDir("v7");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.pb", std::ios::binary) << p.SerializeAsString();
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(lp.status().message(), dir + "/plan.pb: plan schema version 7 is older than this runtime's 8 (it has "
                                         "no session state of generation plans); recompile the model with this pcc");
}

/// x -> Relu -> y on one rank, with one weight the program does not read.
struct ReluPlan {
  plan::Plan plan;
  WeightFileWriter writer;
  ReluPlan() {
    addIo(&plan, true, "x", f32({2, 3}));
    addIo(&plan, false, "y", f32({2, 3}));
    ProgBuilder b(plan.add_ranks(), 0, &writer);
    int x = b.buffer("x", f32({2, 3})), y = b.buffer("y", f32({2, 3}));
    b.weight("w", pattern(f32({4})));
    b.input(x, 0);
    b.kernel("Relu", {x}, {y}, "act");
    b.output(y, 0);
  }
  std::string write(const std::string& name) { return writeBundle(name, plan, {{"rank0.bin", &writer}}); }
};

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

/// Rewrites DIR/plan.pb as `edit` leaves it, with a correct checksum: what
/// someone editing a plan on purpose would do.
void editPlan(const std::string& dir, const std::function<void(plan::Plan&)>& edit) {
  plan::Plan p;
  ASSERT_TRUE(p.ParseFromString(readFile(dir + "/plan.pb")));
  edit(p);
  p.clear_plan_crc32();
  std::string bytes = p.SerializeAsString();
  uint32_t crc = crc32Of(bytes.data(), bytes.size());
  bytes.push_back(static_cast<char>(0x65));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  std::ofstream(dir + "/plan.pb", std::ios::binary | std::ios::trunc) << bytes;
}

void expectRefused(const std::string& dir, const std::string& what) {
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok()) << what;
  EXPECT_EQ(lp.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(lp.status().message().find(what), std::string::npos) << lp.status().message();
  EXPECT_EQ(lp.status().message().find('\n'), std::string::npos) << lp.status().message();
}

TEST(RuntimePlanIo, PlanPbEndsInItsChecksum) {
  ReluPlan rp;
  std::string dir = rp.write("crc");
  std::string bytes = readFile(dir + "/plan.pb");
  ASSERT_GE(bytes.size(), 5u);
  EXPECT_EQ(static_cast<uint8_t>(bytes[bytes.size() - 5]), 0x65);
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[bytes.size() - 4 + i])) << (8 * i);
  EXPECT_EQ(stored, crc32Of(bytes.data(), bytes.size() - 5));
  auto lp = loadPlanBundle(dir);
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  EXPECT_EQ(lp->plan.plan_crc32(), stored);
}

TEST(RuntimePlanIo, AFlippedByteInPlanPbIsRefused) {
  ReluPlan rp;
  std::string dir = rp.write("relu_selu");
  std::string bytes = readFile(dir + "/plan.pb");
  size_t at = bytes.find("Relu");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'S';  // 'R' ^ 0x01: still a valid plan, another op
  std::ofstream(dir + "/plan.pb", std::ios::binary | std::ios::trunc) << bytes;
  expectRefused(dir, dir + "/plan.pb: checksum mismatch (stored 0x");
  // Cut short: the checksum is gone.
  std::ofstream(dir + "/plan.pb", std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 5);
  expectRefused(dir, "does not end in its checksum");
}

TEST(RuntimePlanIo, EditedMeshGroupsAndCoordinatesAreRefused) {
  plan::Plan p;
  addIo(&p, true, "x", f32({4}));
  addIo(&p, false, "y", f32({4}));
  addGroup(&p, "tp", {0, 1});
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r);
    int x = b.buffer("x", f32({4})), y = b.buffer("y", f32({4}));
    b.input(x, 0);
    b.collective(plan::Instruction::ALL_REDUCE, x, y, 0);
    if (r == 0) b.output(y, 0);
  }
  ASSERT_TRUE(loadPlanBundle(writeBundle("mesh_ok", p)).ok());
  struct Case {
    const char* name;
    std::function<void(plan::Plan&)> edit;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {"tp4", [](plan::Plan& q) { q.mutable_mesh()->set_tp(4); }, "mesh pp=1 dp=1 tp=4 has 4 ranks, the plan has 2"},
           {"dp0", [](plan::Plan& q) { q.mutable_mesh()->set_dp(0); }, "has an extent below 1"},
           {"dp2", [](plan::Plan& q) { q.mutable_mesh()->set_dp(2); q.mutable_mesh()->set_tp(1); },
            "rank 1: mesh_coord is not (0, 1, 0)"},
           {"swapped", [](plan::Plan& q) { q.mutable_groups(0)->set_ranks(0, 1); q.mutable_groups(0)->set_ranks(1, 0); },
            "group 0 (tp): ranks [1,0] are not a tp group"},
           {"short", [](plan::Plan& q) { q.mutable_groups(0)->mutable_ranks()->RemoveLast(); },
            "group 0 (tp): ranks [0] are not a tp group"},
           {"axis", [](plan::Plan& q) { q.mutable_groups(0)->set_axis("dp"); }, "ranks [0,1] are not a dp group"},
           {"rank", [](plan::Plan& q) { q.mutable_ranks(1)->set_rank(0); }, "rank 0 is out of range or repeated"},
           {"group_index", [](plan::Plan& q) { q.mutable_ranks(1)->mutable_instructions(0)->set_group(3); },
            "rank 1: instruction #0: group 3 does not exist (the plan has 1)"},
           // Collectives must match across the group, or the ranks would hang
           // or combine unrelated data.
           {"extra_collective", [](plan::Plan& q) { *q.mutable_ranks(0)->add_instructions() = q.ranks(0).instructions(0); },
            "group 0 (tp): rank 1 runs 1 collective(s) on it, rank 0 runs 2"},
           {"skipped_collective", [](plan::Plan& q) {
              auto* ins = q.mutable_ranks(1)->mutable_instructions(0);
              ins->set_kind(plan::Instruction::FREE);
              ins->clear_outputs(); },
            "group 0 (tp): rank 1 runs 0 collective(s) on it, rank 0 runs 1"},
       }) {
    std::string dir = writeBundle(strCat("mesh_", c.name), p);
    editPlan(dir, c.edit);
    expectRefused(dir, c.want);
  }
}

TEST(RuntimePlanIo, AllReducesOfDifferentShapesAcrossAGroupAreRefused) {
  // Uneven pieces of x[7] (4 and 3 elements) all-reduced: the ranks would sum
  // tensors of different sizes.
  plan::Plan p;
  addIo(&p, true, "x", f32({7}));
  addIo(&p, false, "y", f32({4}));
  addGroup(&p, "tp", {0, 1});
  for (int r = 0; r < 2; ++r) {
    ProgBuilder b(p.add_ranks(), r);
    int64_t len = r == 0 ? 4 : 3;
    int x = b.buffer("x", f32({len})), y = b.buffer("y", f32({len}));
    b.input(x, 0, 0, r == 0 ? 0 : 4, len);
    b.collective(plan::Instruction::ALL_REDUCE, x, y, 0);
    if (r == 0) b.output(y, 0);
  }
  expectRefused(writeBundle("allreduce_shapes", p),
                "group 0 (tp): collective 0 is all_reduce dim 0 of dtype 1 [4] on rank 0 but all_reduce dim 0 of "
                "dtype 1 [3] on rank 1");
}

TEST(RuntimePlanIo, OutOfRangeIdsCountsAndUnpairedTransfersAreRefused) {
  plan::Plan p;
  addIo(&p, true, "x", f32({2, 3}));
  addIo(&p, false, "y", f32({2, 3}));
  WeightFileWriter w0;
  ProgBuilder b0(p.add_ranks(), 0, &w0), b1(p.add_ranks(), 1);
  int x = b0.buffer("x", f32({2, 3})), h = b0.buffer("h", f32({2, 3}));
  b0.weight("w", pattern(f32({3})));
  b0.input(x, 0);
  b0.kernel("Relu", {x}, {h}, "act");
  b0.send(h, 1);
  int in = b1.buffer("h", f32({2, 3})), y = b1.buffer("y", f32({2, 3}));
  b1.recv(in, 0);
  b1.kernel("Add", {in, in}, {y}, "add");
  b1.output(y, 0);
  ASSERT_TRUE(loadPlanBundle(writeBundle("ids_ok", p, {{"rank0.bin", &w0}})).ok());
  struct Case {
    const char* name;
    std::function<void(plan::Plan&)> edit;
    const char* want;
  };
  using K = plan::Instruction;
  for (const Case& c : std::vector<Case>{
           {"in", [](plan::Plan& q) { q.mutable_ranks(0)->mutable_instructions(0)->set_inputs(0, 9); },
            "rank 0: instruction #0 (node 'act'): input names no buffer (9)"},
           {"weight", [](plan::Plan& q) { q.mutable_ranks(0)->mutable_buffers(2)->set_weight(1); },
            "rank 0: buffer 2 'w': weight index 1 is out of range (1 weights)"},
           {"dtype", [](plan::Plan& q) { q.mutable_ranks(1)->mutable_buffers(1)->mutable_desc()->set_dtype(99); },
            "rank 1: buffer 1 'y': unknown dtype code 99"},
           {"huge", [](plan::Plan& q) { q.mutable_ranks(1)->mutable_buffers(1)->mutable_desc()->set_shape(0, int64_t{1} << 62); },
            "more than 2^48 bytes"},
           {"arena", [](plan::Plan& q) { q.mutable_ranks(1)->mutable_buffers(1)->set_arena_offset(64); },
            "rank 1: buffer 1 'y': bytes [64, +24) lie outside the 0-byte arena"},
           {"binding", [](plan::Plan& q) { q.mutable_ranks(1)->mutable_outputs(0)->set_index(2); },
            "rank 1: output binding 0: index 2 is out of range (the plan has 1)"},
           {"slice", [](plan::Plan& q) { auto* b = q.mutable_ranks(0)->mutable_inputs(0); b->set_split_dim(0); b->set_offset(1); b->set_length(2); },
            "rank 0: input binding 0: slice [1, +2) along dim 0 is outside the extent 2"},
           {"send_count", [](plan::Plan& q) { q.mutable_ranks(0)->mutable_instructions(1)->add_inputs(0); },
            "SEND takes 1 input(s) and 0 output(s), the plan gives 2 and 0"},
           {"peer", [](plan::Plan& q) { q.mutable_ranks(0)->mutable_instructions(1)->set_peer(0); },
            "SEND peer 0 is not another rank of 2"},
           {"unpaired", [](plan::Plan& q) { q.mutable_ranks(1)->mutable_instructions(0)->set_kind(K::FREE);
                                            q.mutable_ranks(1)->mutable_instructions(0)->clear_outputs(); },
            "transfers from rank 0 to rank 1: 1 SEND(s) but 0 RECV(s)"},
           // The Add after the RECV made of the new type too: the transfer alone is at fault.
           {"types", [](plan::Plan& q) { for (int b : {0, 1}) q.mutable_ranks(1)->mutable_buffers(b)->mutable_desc()->set_shape(0, 3); },
            "transfer 0 from rank 0 to rank 1: SEND and RECV differ in type"},
           {"kind", [](plan::Plan& q) { q.mutable_ranks(0)->mutable_instructions(0)->set_kind(static_cast<K::Kind>(42)); },
            "unknown instruction kind 42"},
       }) {
    std::string dir = writeBundle(strCat("ids_", c.name), p, {{"rank0.bin", &w0}});
    editPlan(dir, c.edit);
    expectRefused(dir, c.want);
  }
}

TEST(RuntimePlanIo, WeightFilesStayInsideTheBundle) {
  ReluPlan rp;
  // A real file outside the bundle, with the weight's bytes and checksum.
  std::string outside = freshDir("outside_bytes");
  std::filesystem::create_directories(outside);
  std::string dir = rp.write("escape");
  std::filesystem::copy_file(dir + "/rank0.bin", outside + "/stolen.bin");
  for (const auto& c : std::vector<std::pair<std::string, std::string>>{
           {"../../etc/passwd", "rank 0: weight file '../../etc/passwd' climbs out of its folder with '..'"},
           {"/etc/passwd", "rank 0: weight file '/etc/passwd' is absolute"},
           {"../outside_bytes/stolen.bin", "climbs out of its folder"},
           {"link.bin", "resolves to"},
       }) {
    const std::string& name = c.first;  // a plain name: clang 14 cannot capture a structured binding
    std::string d = rp.write("escape");
    std::filesystem::create_symlink(outside + "/stolen.bin", d + "/link.bin");
    editPlan(d, [&](plan::Plan& q) { q.mutable_ranks(0)->set_weight_file(name); });
    expectRefused(d, c.second);
  }
  // A link that stays inside is fine.
  std::string d = rp.write("escape");
  std::filesystem::create_symlink("rank0.bin", d + "/inside.bin");
  editPlan(d, [&](plan::Plan& q) { q.mutable_ranks(0)->set_weight_file("inside.bin"); });
  auto lp = loadPlanBundle(d);
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  EXPECT_TRUE(loadWeight(*lp, lp->plan.ranks(0), 0, true).ok());
}

TEST(RuntimePlanIo, NamesThatAreNotUtf8AreRefusedWhenWrittenAndWhenRead) {
  ReluPlan rp;
  rp.plan.mutable_ranks(0)->mutable_instructions(0)->set_node("act\xff");
  std::string dir = freshDir("utf8");
  Status st = writePlanBundle(dir, withMesh(rp.plan), {{"rank0.bin", &rp.writer}}, "{}");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("rank 0: node name 'act\\xff' is not valid UTF-8 (byte 3)"), std::string::npos)
      << st.message();
  EXPECT_FALSE(std::filesystem::exists(dir));
  // Overlong and surrogate forms are not UTF-8 either; real multi-byte names are.
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    rp.plan.mutable_ranks(0)->mutable_instructions(0)->set_node(bad);
    EXPECT_FALSE(checkPlanStrings(rp.plan).ok()) << bad;
  }
  rp.plan.mutable_ranks(0)->mutable_instructions(0)->set_node("Aktivierung_\xc3\xbc_\xe2\x82\xac_\xf0\x9f\x99\x82");
  EXPECT_TRUE(checkPlanStrings(rp.plan).ok());
  EXPECT_EQ(utf8OrEscaped("m\xffodel.onnx"), "m\\xffodel.onnx");

  // A plan.pb holding one (with a correct checksum): one message, nothing
  // from libprotobuf on stderr.
  rp.plan.mutable_ranks(0)->mutable_instructions(0)->set_node("act");
  std::string good = rp.write("utf8_read");
  std::string bytes = readFile(good + "/plan.pb");
  size_t at = bytes.find("act");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] = static_cast<char>(0xff);
  bytes.resize(bytes.size() - 5);
  uint32_t crc = crc32Of(bytes.data(), bytes.size());
  bytes.push_back(static_cast<char>(0x65));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  std::ofstream(good + "/plan.pb", std::ios::binary | std::ios::trunc) << bytes;
  ::testing::internal::CaptureStderr();
  auto lp = loadPlanBundle(good);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(lp.ok());
  EXPECT_NE(lp.status().message().find("cannot parse as a pcc plan (String field"), std::string::npos)
      << lp.status().message();
  EXPECT_EQ(err, "");
}

TEST(RuntimePlanIo, BundlesAreReplacedWholeAndOnlyBundles) {
  ReluPlan a;
  std::string dir = a.write("replace");
  auto old = loadPlanBundle(dir);
  ASSERT_TRUE(old.ok()) << old.status().message();
  auto oldWeight = loadWeight(*old, old->plan.ranks(0), 0, true);
  ASSERT_TRUE(oldWeight.ok());
  std::vector<float> before(oldWeight->data<float>(), oldWeight->data<float>() + 4);

  // Another plan onto the same directory: the old mapping stays readable.
  plan::Plan p2 = withMesh(a.plan);
  WeightFileWriter w2;
  *p2.mutable_ranks(0)->mutable_weights(0) = w2.add("w", pattern(f32({4}), 1.0f, 3.0f));
  ASSERT_TRUE(writePlanBundle(dir, p2, {{"rank0.bin", &w2}}, "{}").ok());
  EXPECT_EQ(std::vector<float>(oldWeight->data<float>(), oldWeight->data<float>() + 4), before);
  auto now = loadPlanBundle(dir);
  ASSERT_TRUE(now.ok()) << now.status().message();
  auto newWeight = loadWeight(*now, now->plan.ranks(0), 0, true);
  ASSERT_TRUE(newWeight.ok());
  EXPECT_NE(std::vector<float>(newWeight->data<float>(), newWeight->data<float>() + 4), before);
  // Nothing left next to it.
  std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  for (const auto& e : std::filesystem::directory_iterator(parent))
    EXPECT_EQ(e.path().filename().string().find("." + std::filesystem::path(dir).filename().string() + "."),
              std::string::npos) << e.path();

  // A failed write (a weight file that cannot be created) leaves the old bundle whole.
  Status failed = writePlanBundle(dir, p2, {{"plan.pb/rank0.bin", &w2}}, "{}");
  EXPECT_FALSE(failed.ok());
  auto still = loadPlanBundle(dir);
  ASSERT_TRUE(still.ok()) << still.status().message();
  EXPECT_EQ(still->plan.plan_crc32(), now->plan.plan_crc32());
  for (const auto& e : std::filesystem::directory_iterator(parent))
    EXPECT_EQ(e.path().filename().string().find("." + std::filesystem::path(dir).filename().string() + "."),
              std::string::npos) << e.path();

  // Not a bundle: refused, untouched.
  std::string other = freshDir("not_a_bundle");
  std::filesystem::create_directories(other);
  std::ofstream(other + "/notes.txt") << "keep me";
  Status st = writePlanBundle(other, p2, {{"rank0.bin", &w2}}, "{}");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(st.message(), other + ": exists and is not a plan bundle (it holds 'notes.txt'); refusing to replace it");
  EXPECT_EQ(readFile(other + "/notes.txt"), "keep me");
  std::ofstream(other + "/plan.pb") << "x";  // a plan.pb among other files is still not a bundle
  EXPECT_FALSE(writePlanBundle(other, p2, {{"rank0.bin", &w2}}, "{}").ok());
  std::string file = freshDir("a_file");
  std::ofstream(file) << "x";
  EXPECT_NE(writePlanBundle(file, p2, {}, "{}").message().find("exists and is not a plan bundle directory"),
            std::string::npos);
  for (const char* bad : {"", "/", "//", ".", "..", "./"}) {
    Status s = writePlanBundle(bad, p2, {}, "{}");
    EXPECT_FALSE(s.ok()) << "'" << bad << "'";
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << "'" << bad << "'";
  }
  // An empty directory becomes a bundle.
  std::string empty = freshDir("empty_target");
  std::filesystem::create_directories(empty);
  ASSERT_TRUE(writePlanBundle(empty, p2, {{"rank0.bin", &w2}}, "{}").ok());
  EXPECT_TRUE(loadPlanBundle(empty).ok());
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
  std::string dir = writeBundle("noweights", tw.plan, {});
  auto lp = loadPlanBundle(dir);
  ASSERT_FALSE(lp.ok());
  EXPECT_NE(lp.status().message().find(dir + "/rank0.bin: weight file of rank 0 is missing"),
            std::string::npos)
      << lp.status().message();
}

}  // namespace
}  // namespace pcc

namespace pcc {
namespace {

// WeightFileWriter streams blocks (a rank's pieces of a weight) from a mapped
// source of more than the 64 MiB after which it releases the pages it has
// read: the file holds exactly what copying each block (sliceBlock) and
// writing the copies would, each CRC is crc32Of of that copy, the progress
// reaches the total, and the source still reads correctly after its pages
// were released.
TEST(RuntimePlanIo, StreamedBlocksEqualCopiedBlocks) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("pcc_stream_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int64_t rows = 4160, cols = 4096;  // 4160 x 4096 f32 = 65 MiB
  {
    std::ofstream f(dir / "source.bin", std::ios::binary);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(r * 7 + c % 13) * 0.25f;
      f.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(cols * sizeof(float)));
    }
  }
  auto mapping = MappedFile::open((dir / "source.bin").string());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  std::shared_ptr<MappedFile> file = *mapping;
  Tensor source = Tensor::mappedView(DType::kF32, {rows, cols}, file->data(),
                                     std::shared_ptr<const void>(file, file->data()));
  Tensor small = Tensor::fromVector<int64_t>(DType::kI64, {3}, {1, -2, 3});
  std::vector<TensorBlock> blocks = {
      *makeBlock(source, {0, 0}, {rows, cols}),             // whole: one run, released every 64 MiB
      *makeBlock(source, {0, cols / 2}, {rows, cols / 2}),  // a column half: a run per row
      *makeBlock(source, {rows / 2, 0}, {rows / 2, cols}),  // a row half
      *makeBlock(source, {5, 3}, {7, 11}),                  // an odd corner
  };
  WeightFileWriter writer;
  std::vector<plan::Weight> weights;
  for (size_t i = 0; i < blocks.size(); ++i) weights.push_back(writer.add("b" + std::to_string(i), blocks[i]));
  weights.push_back(writer.add("small", small));
  uint64_t lastDone = 0, lastTotal = 0;
  auto crcs = writer.finish((dir / "out.bin").string(), [&](uint64_t done, uint64_t total, const std::string&) {
    EXPECT_GE(done, lastDone);
    lastDone = done;
    lastTotal = total;
  }, 0, writer.size());
  ASSERT_TRUE(crcs.ok()) << crcs.status().message();
  ASSERT_EQ(crcs->size(), 5u);
  EXPECT_EQ(lastDone, writer.size());
  EXPECT_EQ(lastTotal, writer.size());
  auto out = MappedFile::open((dir / "out.bin").string());
  ASSERT_TRUE(out.ok());
  ASSERT_EQ((*out)->size(), writer.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    Tensor copy = i < blocks.size() ? *sliceBlock(source, blocks[i].start, blocks[i].extent) : small;
    ASSERT_EQ(weights[i].nbytes(), copy.nbytes());
    EXPECT_EQ(weights[i].offset() % kWeightAlignment, 0u);
    EXPECT_EQ(std::memcmp((*out)->data() + weights[i].offset(), copy.raw(), copy.nbytes()), 0) << "weight " << i;
    EXPECT_EQ((*crcs)[i], crc32Of(copy.raw(), copy.nbytes())) << "weight " << i;
  }
  // The released pages read back from the file.
  const float* s = source.data<float>();
  EXPECT_EQ(s[0], 0.f);
  EXPECT_EQ(s[(rows - 1) * cols + 12], static_cast<float>((rows - 1) * 7 + 12) * 0.25f);
  fs::remove_all(dir);
}

// The reader checks each KERNEL instruction as the kernels will index it: an
// operand the op requires edited to -1, or attributes (Conv's pads) whose
// output is not the planned buffer's type, are refused at load, naming the node.
TEST(RuntimePlanIo, KernelOperandsAndAttributesAreCheckedAtLoad) {
  struct ConvPlan {
    plan::Plan plan;
    WeightFileWriter writer;
    ConvPlan() {
      addIo(&plan, true, "x", f32({1, 3, 8, 8}));
      addIo(&plan, false, "y", f32({1, 4, 8, 8}));
      ProgBuilder b(plan.add_ranks(), 0, &writer);
      int x = b.buffer("x", f32({1, 3, 8, 8})), y = b.buffer("y", f32({1, 4, 8, 8}));
      int w = b.weight("w", pattern(f32({4, 3, 3, 3})));
      b.input(x, 0);
      plan::Instruction* conv = b.kernel("Conv", {x, w}, {y}, "conv");
      toAttrProto("pads", Attribute(std::vector<int64_t>{1, 1, 1, 1}), conv->add_attrs());
      b.output(y, 0);
    }
  };
  auto editConv = [](const std::function<void(plan::Instruction&)>& edit) {
    return [edit](plan::Plan& p) { edit(*p.mutable_ranks(0)->mutable_instructions(0)); };
  };
  {
    ConvPlan cp;
    std::string dir = writeBundle("conv_ok", cp.plan, {{"rank0.bin", &cp.writer}});
    auto lp = loadPlanBundle(dir);
    EXPECT_TRUE(lp.ok()) << lp.status().message();
  }
  for (int k : {0, 1}) {
    ConvPlan cp;
    std::string dir = writeBundle("conv_absent", cp.plan, {{"rank0.bin", &cp.writer}});
    editPlan(dir, editConv([k](plan::Instruction& ins) { ins.set_inputs(k, -1); }));
    expectRefused(dir, strCat("(node 'conv'): Conv input ", k, " is required but absent (-1)"));
  }
  const std::pair<std::vector<int64_t>, std::string> pads[] = {
      {{-1, -1, -1, -1}, "must be non-negative"},
      {{0, 0, 0, 0}, "makes output 0 f32[1,4,6,6] but buffer 1 'y' is f32[1,4,8,8]"},
      {{3, 3, 3, 3}, "makes output 0 f32[1,4,12,12] but buffer 1 'y' is f32[1,4,8,8]"},
  };
  for (const auto& [v, why] : pads) {
    ConvPlan cp;
    std::string dir = writeBundle("conv_pads", cp.plan, {{"rank0.bin", &cp.writer}});
    editPlan(dir, editConv([v = v](plan::Instruction& ins) {
      ins.clear_attrs();
      toAttrProto("pads", Attribute(v), ins.add_attrs());
    }));
    expectRefused(dir, why);
    expectRefused(dir, "(node 'conv'): Conv with inputs (f32[1,3,8,8], f32[4,3,3,3])");
  }
  {
    ConvPlan cp;
    std::string dir = writeBundle("conv_arity", cp.plan, {{"rank0.bin", &cp.writer}});
    editPlan(dir, editConv([](plan::Instruction& ins) { ins.mutable_inputs()->RemoveLast(); }));
    expectRefused(dir, "Conv takes 2 to 3 input(s), the plan gives 1");
  }
}

}  // namespace
}  // namespace pcc
