#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/onnx_tensor.h"

namespace pcc {
namespace {

std::string tempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("pcc_tensorio_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// A tensor of `dtype` and `shape` whose elements are distinct small values.
Tensor sample(DType dtype, Dims shape) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = static_cast<double>(i % 7) - 3 + (isFloat(dtype) ? 0.5 : 0);
    if (dtype == DType::kU8) t.setInt(i, i * 37);
    else if (dtype == DType::kI32) t.setInt(i, static_cast<int64_t>(v * 1000));
    else if (dtype == DType::kI64) t.setInt(i, static_cast<int64_t>(v) << 40);
    else if (dtype == DType::kU64) t.setInt(i, ~int64_t(0) - i);
    else if (dtype == DType::kBool) t.setInt(i, i % 3 == 0);
    else t.setDouble(i, v);
  }
  return t;
}

void expectSame(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.type(), b.type());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << a.str() << " vs " << b.str();
}

TEST(OnnxTensor, RawDataRoundTripAllDTypes) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor t = sample(dt, {2, 3, 5});
    onnx::TensorProto p;
    tensorToProto(t, "x", &p);
    EXPECT_EQ(p.name(), "x");
    EXPECT_EQ(p.data_type(), static_cast<int>(dt));
    auto back = tensorFromProto(p, "");
    ASSERT_TRUE(back.ok()) << back.status().message();
    expectSame(t, *back);
  }
}

// The 4-bit types are held one element a byte and packed two a byte in files,
// low nibble first; an odd count leaves the last high nibble zero.
TEST(OnnxTensor, FourBitTypesArePacked) {
  Tensor t = Tensor::zeros(DType::kI4, {5});
  const int64_t vals[] = {-8, 7, -1, 3, 2};
  for (int i = 0; i < 5; ++i) t.setInt(i, vals[i]);
  onnx::TensorProto p;
  tensorToProto(t, "q", &p);
  ASSERT_EQ(p.raw_data().size(), 3u);
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[0]), 0x78);  // 7 << 4 | (-8 & 0xf)
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[1]), 0x3f);
  EXPECT_EQ(static_cast<uint8_t>(p.raw_data()[2]), 0x02);
  auto back = tensorFromProto(p, "");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->toInts(), (std::vector<int64_t>{-8, 7, -1, 3, 2}));

  // int32_data holds one packed byte per value.
  p.Clear();
  p.set_data_type(21);  // UINT4: newer than the ONNX headers installed here
  p.add_dims(3);
  p.add_int32_data(0xa1);
  p.add_int32_data(0x0f);
  back = tensorFromProto(p, "");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->toInts(), (std::vector<int64_t>{1, 10, 15}));
  p.add_int32_data(0);  // one value too many for 3 elements
  EXPECT_FALSE(tensorFromProto(p, "").ok());

  // uint64_data for u64 and u32.
  p.Clear();
  p.set_data_type(onnx::TensorProto::UINT64);
  p.add_dims(1);
  p.add_uint64_data(~uint64_t(0));
  back = tensorFromProto(p, "");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->data<uint64_t>()[0], ~uint64_t(0));
}

TEST(OnnxTensor, ScalarAndEmpty) {
  Tensor s = Tensor::scalarF32(2.5f);
  onnx::TensorProto p;
  tensorToProto(s, "s", &p);
  auto back = tensorFromProto(p, "");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rank(), 0);
  EXPECT_EQ(back->data<float>()[0], 2.5f);

  Tensor e = Tensor::zeros(DType::kI64, {0, 4});
  tensorToProto(e, "e", &p);
  back = tensorFromProto(p, "");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shape(), (Dims{0, 4}));
}

TEST(OnnxTensor, TypedFields) {
  onnx::TensorProto p;
  p.set_name("f");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(3);
  for (float v : {1.f, -2.f, 3.5f}) p.add_float_data(v);
  auto t = tensorFromProto(p, "");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->data<float>()[2], 3.5f);

  p.Clear();
  p.set_data_type(onnx::TensorProto::INT64);
  p.add_dims(2);
  p.add_int64_data(int64_t(1) << 40);
  p.add_int64_data(-7);
  t = tensorFromProto(p, "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->toInts(), (std::vector<int64_t>{int64_t(1) << 40, -7}));

  p.Clear();
  p.set_data_type(onnx::TensorProto::DOUBLE);
  p.add_double_data(0.25);
  t = tensorFromProto(p, "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(t->data<double>()[0], 0.25);

  struct Case { int onnxType; DType dt; std::vector<int32_t> stored; std::vector<double> expect; };
  const Case cases[] = {
      {onnx::TensorProto::INT32, DType::kI32, {5, -6}, {5, -6}},
      {onnx::TensorProto::INT8, DType::kI8, {-128, 127}, {-128, 127}},
      {onnx::TensorProto::UINT8, DType::kU8, {0, 255}, {0, 255}},
      {onnx::TensorProto::BOOL, DType::kBool, {1, 0}, {1, 0}},
      {onnx::TensorProto::FLOAT16, DType::kF16, {floatToHalf(1.5f), floatToHalf(-2.f)}, {1.5, -2}},
      {onnx::TensorProto::BFLOAT16, DType::kBF16, {floatToBf16(3.f), floatToBf16(-0.5f)}, {3, -0.5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(dtypeName(c.dt));
    p.Clear();
    p.set_data_type(c.onnxType);
    p.add_dims(2);
    for (int32_t v : c.stored) p.add_int32_data(v);
    t = tensorFromProto(p, "");
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->dtype(), c.dt);
    EXPECT_EQ(t->getDouble(0), c.expect[0]);
    EXPECT_EQ(t->getDouble(1), c.expect[1]);
  }
}

TEST(OnnxTensor, BadTensorsNameTheTensor) {
  onnx::TensorProto p;
  p.set_name("weird");
  p.set_data_type(onnx::TensorProto::STRING);
  auto t = tensorFromProto(p, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(t.status().message().find("'weird'"), std::string::npos);

  p.Clear();
  p.set_name("short");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(4);
  p.set_raw_data(std::string(12, '\0'));
  t = tensorFromProto(p, "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'short'"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("16"), std::string::npos) << t.status().message();

  p.clear_raw_data();
  p.add_float_data(1.f);
  t = tensorFromProto(p, "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("float_data"), std::string::npos);

  p.Clear();
  p.set_name("neg");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(-1);
  EXPECT_FALSE(tensorFromProto(p, "").ok());

  p.Clear();
  p.set_name("huge");
  p.set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) p.add_dims(int64_t(1) << 20);
  t = tensorFromProto(p, "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'huge'"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("larger than 1024 GiB, the limit of one tensor"), std::string::npos)
      << t.status().message();
}

/// Writes `bytes` to `dir/name`.
void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

onnx::TensorProto externalProto(const std::string& name, Dims dims, const std::string& location,
                                int64_t offset, std::optional<int64_t> length) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) p.add_dims(d);
  p.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* e = p.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  if (length) add("length", std::to_string(*length));
  return p;
}

TEST(OnnxTensor, ExternalDataIsMappedNotCopied) {
  std::string dir = tempDir();
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  writeBytes(dir + "/w.bin", std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));

  ExternalDataFiles files;
  auto t = tensorFromProto(externalProto("w", {4, 8}, "w.bin", 64, 128), dir, &files);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->data<float>()[0], 8.f);
  EXPECT_EQ(t->data<float>()[31], 23.5f);  // element 16 + 31
  auto mapping = files.get(dir + "/w.bin");
  ASSERT_TRUE(mapping.ok());
  const uint8_t* p = static_cast<const uint8_t*>(t->raw());
  EXPECT_GE(p, (*mapping)->data());
  EXPECT_LE(p + t->nbytes(), (*mapping)->data() + (*mapping)->size());

  // No length: the rest of the file. The view keeps the mapping alive.
  Tensor whole;
  {
    auto w = tensorFromProto(externalProto("all", {64}, "w.bin", 0, std::nullopt), dir);
    ASSERT_TRUE(w.ok()) << w.status().message();
    whole = *w;
  }
  std::filesystem::remove(dir + "/w.bin");
  EXPECT_EQ(whole.data<float>()[63], 31.5f);
}

TEST(OnnxTensor, ExternalDataErrors) {
  std::string dir = tempDir();
  writeBytes(dir + "/small.bin", std::string(32, '\1'));
  struct Case { onnx::TensorProto p; const char* expect; };
  const Case cases[] = {
      {externalProto("t1", {4}, "missing.bin", 0, 16), "missing.bin"},
      {externalProto("t2", {16}, "small.bin", 0, 64), "outside"},
      {externalProto("t3", {4}, "small.bin", 24, 16), "outside"},
      {externalProto("t4", {4}, "small.bin", 0, 12), "needs 16"},
      {externalProto("t5", {4}, "small.bin", 1000, std::nullopt), "outside"},
  };
  for (const Case& c : cases) {
    auto t = tensorFromProto(c.p, dir);
    ASSERT_FALSE(t.ok()) << c.p.name();
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(t.status().message().find("'" + c.p.name() + "'"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  onnx::TensorProto p = externalProto("t6", {4}, "small.bin", 0, 16);
  p.mutable_external_data(1)->set_value("12abc");
  EXPECT_FALSE(tensorFromProto(p, dir).ok());
}

TEST(OnnxTensor, ExternalDataStaysInsideTheModelFolder) {
  // The ONNX specification: locations are relative to the model's folder and
  // may not leave it; symlinks are resolved before the check.
  std::string root = tempDir();
  std::string dir = root + "/model";
  std::filesystem::create_directories(dir + "/sub");
  writeBytes(dir + "/sub/w.bin", std::string(16, '\1'));
  writeBytes(root + "/secret.bin", std::string(16, '\2'));
  std::filesystem::create_symlink(root + "/secret.bin", dir + "/link.bin");
  std::filesystem::create_symlink(dir + "/sub/w.bin", dir + "/inside.bin");
  std::filesystem::create_symlink(root, dir + "/up");

  auto ok = tensorFromProto(externalProto("w", {4}, "sub/w.bin", 0, 16), dir);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
  auto inside = tensorFromProto(externalProto("w", {4}, "inside.bin", 0, 16), dir);
  EXPECT_TRUE(inside.ok()) << "a symlink to a file inside the folder is fine: " << inside.status().message();

  struct Case { std::string location, expect; };
  const Case cases[] = {
      {root + "/secret.bin", "absolute"},
      {"../secret.bin", "'..'"},
      {"sub/../../secret.bin", "'..'"},
      {"link.bin", "outside"},
      {"up/secret.bin", "outside"},
  };
  for (const Case& c : cases) {
    auto t = tensorFromProto(externalProto("evil", {4}, c.location, 0, 16), dir);
    ASSERT_FALSE(t.ok()) << c.location << " was read";
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(t.status().message().find("'evil'"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
}

TEST(OnnxTensor, TensorFileRoundTrip) {
  std::string dir = tempDir();
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Tensor t = sample(dt, {3, 4});
    std::string path = dir + "/input_0.pb";
    ASSERT_TRUE(writeTensorFile(path, t, "input").ok());
    auto back = readTensorFile(path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    expectSame(t, *back);
  }
}

TEST(OnnxTensor, BadTensorFiles) {
  std::string dir = tempDir();
  auto missing = readTensorFile(dir + "/nope.pb");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidInput);

  writeBytes(dir + "/garbage.pb", "\xff\xff\xff\xff this is not a tensor");
  auto garbage = readTensorFile(dir + "/garbage.pb");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("garbage.pb"), std::string::npos);

  // A truncated file must fail, whatever protobuf makes of the prefix.
  Tensor t = sample(DType::kF32, {10});
  onnx::TensorProto p;
  tensorToProto(t, "x", &p);
  std::string bytes = p.SerializeAsString();
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    writeBytes(dir + "/cut.pb", bytes.substr(0, cut));
    auto r = readTensorFile(dir + "/cut.pb");
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
  }

  EXPECT_FALSE(writeTensorFile(dir + "/no/such/dir/x.pb", t, "x").ok());
}

}  // namespace
}  // namespace pcc
