// NumPy tensor files (runtime/npy_files.h): round trips of every dtype through
// .npy, .npz and a folder, the file-name spelling of tensor names, matching
// against a plan's names and types, and every refusal (a damaged zip, a
// truncated header or data, an unread dtype, Fortran order, object arrays).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/npy_files.h"

namespace pcc {
namespace {

namespace fs = std::filesystem;

/// An .npy file as numpy 1.x/2.x writes it: version 1.0, the dictionary
/// padded with spaces to a multiple of 64 bytes, then `data`.
std::string npyBytes(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/pcc-npy-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& f) const { return (fs::path(path_) / f).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string refusal(const std::string& bytes) {
  auto t = decodeNpy(bytes, "f.npy");
  EXPECT_FALSE(t.ok()) << "accepted " << (t.ok() ? t->type().str() : "");
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(t.status().message().rfind("f.npy: ", 0), 0u) << t.status().message();
  return t.status().message();
}

Tensor sample(DType dt, Dims shape) {
  Tensor t = Tensor::zeros(dt, shape);
  auto* b = static_cast<unsigned char*>(t.mutableData());
  for (size_t i = 0; i < t.nbytes(); ++i) b[i] = static_cast<unsigned char>(dt == DType::kBool ? i % 2 : i * 7 + 3);
  return t;
}

bool sameTensor(const Tensor& a, const Tensor& b) {
  return a.type() == b.type() && (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  auto t = decodeNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                              floats({1, 2, 3, 4, 5, 6})),
                     "x.npy");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->type().str(), TensorType({DType::kF32, {2, 3}}).str());
  EXPECT_EQ(t->data<float>()[5], 6.0f);
  // 1-d, 0-d, empty, and the 2.0 header form.
  t = decodeNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", floats({1, 2, 3})), "x");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shape(), Dims({3}));
  t = decodeNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", floats({7})), "x");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shape(), Dims({}));
  t = decodeNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", ""), "x");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shape(), Dims({0, 4}));
  t = decodeNpy(npyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\1\0", 2), 2), "x");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kBool);
}

TEST(Npy, RoundTripsEveryDtype) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kF64, DType::kI64, DType::kI32, DType::kI16, DType::kI8,
                   DType::kU8, DType::kU16, DType::kU32, DType::kU64, DType::kBool}) {
    for (Dims shape : {Dims{2, 3, 4}, Dims{5}, Dims{}, Dims{0, 3}}) {
      Tensor t = sample(dt, shape);
      auto bytes = encodeNpy(t);
      ASSERT_TRUE(bytes.ok()) << bytes.status().message();
      EXPECT_EQ(bytes->size() % 64, t.nbytes() % 64);  // the header is padded to 64 bytes
      auto back = decodeNpy(*bytes, "x");
      ASSERT_TRUE(back.ok()) << dtypeName(dt) << ": " << back.status().message();
      EXPECT_TRUE(sameTensor(t, *back)) << dtypeName(dt);
    }
  }
  EXPECT_FALSE(encodeNpy(sample(DType::kBF16, {2})).ok());
}

TEST(Npy, Refusals) {
  const std::string f4 = floats({1, 2});
  EXPECT_NE(refusal(npyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", f4)).find("Fortran"),
            std::string::npos);
  EXPECT_NE(refusal(npyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')))
                .find("object"),
            std::string::npos);
  EXPECT_NE(refusal(npyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f4)).find("'<c8'"),
            std::string::npos);
  EXPECT_NE(refusal(npyBytes("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }", std::string(12, 'a'))),
            "");
  EXPECT_NE(refusal(npyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4)).find("big-endian"),
            std::string::npos);
  // Truncated: the magic, the header length, the header, the data.
  const std::string good = npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4);
  for (size_t cut : {size_t(0), size_t(5), size_t(9), size_t(20), good.size() - 8, good.size() - 1}) {
    std::string m = refusal(good.substr(0, cut));
    EXPECT_NE(m.find("truncated"), std::string::npos) << cut << ": " << m;
  }
  EXPECT_NE(refusal(good + "x").find("1 bytes after the data"), std::string::npos);
  EXPECT_NE(refusal("PK\3\4" + good).find("not an .npy file"), std::string::npos);
  std::string v3 = good;
  v3[6] = 3;
  EXPECT_NE(refusal(v3).find("version 3.0"), std::string::npos);
  // Headers numpy never writes.
  for (const char* dict : {"{'descr': '<f4', 'fortran_order': False, 'shape': (abc,), }",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': 2, }",
                           "{'descr': '<f4', 'fortran_order': False, 'shape', }",
                           "{'descr': '<f4', 'fortran_order': False}", "{}", "", "   ",
                           "{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }",
                           "{'shape': (2,), 'descr': '<f4', 'fortran_order': False, }",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }"})
    refusal(npyBytes(dict, f4));
  // A header length past the end, and a shape whose size overflows.
  std::string longHeader = good;
  longHeader[8] = '\xff';
  longHeader[9] = '\x7f';
  EXPECT_NE(refusal(longHeader).find("truncated"), std::string::npos);
  EXPECT_NE(refusal(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", f4))
                .find("truncated data"),
            std::string::npos);
  EXPECT_NE(refusal(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", f4)),
            "");
  EXPECT_NE(refusal(npyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\1\2", 2)))
                .find("not 0 or 1"),
            std::string::npos);
}

TEST(NpyNames, Spelling) {
  EXPECT_EQ(*npyFileName("input_ids"), "input_ids.npy");
  EXPECT_EQ(*npyFileName("a/b:0"), "a%2Fb%3A0.npy");
  EXPECT_EQ(*npyFileName("x%y"), "x%25y.npy");
  EXPECT_EQ(*npyFileName(".."), "%2E..npy");
  EXPECT_EQ(*npyFileName("a b"), "a%20b.npy");
  EXPECT_FALSE(npyFileName("").ok());
  EXPECT_FALSE(npyFileName(std::string(300, 'a')).ok());
  for (const std::string name : {"input_ids", "a/b:0", "x%y", "..", ".hidden", "a b", "\xc3\xa9t\xc3\xa9", "0"}) {
    auto f = npyFileName(name);
    ASSERT_TRUE(f.ok());
    auto back = npyTensorName(*f);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, name);
  }
  // One spelling per name.
  for (const char* file : {"a%2fb.npy", "a%2.npy", "a%.npy", "a%zz.npy", "a%41.npy", ".x.npy", "a:b.npy", ".npy", "x.pb"})
    EXPECT_FALSE(npyTensorName(file).ok()) << file;
}

TEST(Npz, RoundTripAndFolder) {
  TempDir dir;
  NamedTensors ts{{"x", sample(DType::kF32, {2, 3})},
                  {"ids", sample(DType::kI64, {4})},
                  {"mask/0", sample(DType::kBool, {2, 2})},
                  {"h", sample(DType::kF16, {3})}};
  ASSERT_TRUE(writeNpz(dir / "a.npz", ts).ok());
  std::map<std::string, std::string> sources;
  auto back = readNpz(dir / "a.npz", &sources);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), ts.size());
  for (const auto& [n, t] : ts) EXPECT_TRUE(sameTensor(t, back->at(n))) << n;
  EXPECT_EQ(sources["x"], dir / "a.npz" + ":x.npy");
  auto viaPath = readNamedTensors(dir / "a.npz");
  ASSERT_TRUE(viaPath.ok());
  EXPECT_EQ(viaPath->size(), ts.size());

  ASSERT_TRUE(writeNpyFolder(dir / "f", ts).ok());
  EXPECT_TRUE(fs::exists(dir / "f/mask%2F0.npy"));
  EXPECT_TRUE(holdsNpyFiles(dir / "f"));
  EXPECT_FALSE(holdsNpyFiles(dir.path() + "/none"));
  writeFile(dir / "f/notes.txt", "left alone");
  back = readNamedTensors(dir / "f", &sources);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), ts.size());
  for (const auto& [n, t] : ts) EXPECT_TRUE(sameTensor(t, back->at(n))) << n;
  EXPECT_EQ(sources["mask/0"], dir / "f/mask%2F0.npy");
  writeFile(dir / "f/bad%2f.npy", "");
  auto bad = readNamedTensors(dir / "f");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad%2f.npy"), std::string::npos);
  EXPECT_FALSE(encodeNpz({}).ok());
}

TEST(Npz, Refusals) {
  TempDir dir;
  auto expectRefused = [&](const std::string& bytes, const std::string& want) {
    writeFile(dir / "z.npz", bytes);
    auto r = readNpz(dir / "z.npz");
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(r.status().message().find(dir / "z.npz"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  };
  auto good = encodeNpz({{"x", sample(DType::kF32, {8})}, {"y", sample(DType::kI32, {2})}});
  ASSERT_TRUE(good.ok());
  expectRefused("not a zip at all", "not a valid .npz");
  expectRefused("", "not a valid .npz");
  expectRefused(good->substr(0, good->size() / 2), "not a valid .npz");
  expectRefused(good->substr(0, good->size() - 5), "not a valid .npz");
  // A flipped data byte: the entry's CRC.
  std::string flipped = *good;
  size_t data = flipped.find("\x93NUMPY");
  ASSERT_NE(data, std::string::npos);
  flipped[data + 130] ^= 0x40;
  expectRefused(flipped, "x.npy: damaged entry");
  // An entry that is no .npy, or an .npy entry that is not one.
  std::string renamed = *good;
  for (size_t p; (p = renamed.find("y.npy")) != std::string::npos;) renamed.replace(p, 5, "y.txt");
  expectRefused(renamed, "y.txt: an .npz entry is NAME.npy");
  std::string magic = *good;
  magic[data + 1] = 'X';  // the CRC now fails first
  expectRefused(magic, "x.npy");
  auto fortran = encodeNpz({{"f", sample(DType::kF32, {2, 2})}});
  ASSERT_TRUE(fortran.ok());
  std::string f = *fortran;
  // Same length: 'False' -> 'True ' keeps the header's size (the CRC still
  // fails: the archive is refused either way, naming the entry).
  size_t at = f.find("False");
  ASSERT_NE(at, std::string::npos);
  f.replace(at, 5, "True ");
  expectRefused(f, "f.npy");
  EXPECT_FALSE(readNpz(dir / "missing.npz").ok());
  EXPECT_FALSE(readNamedTensors(dir / "missing").ok());
}

TEST(NpyMatch, AgainstThePlan) {
  NamedTensors got{{"x", sample(DType::kF32, {2, 3})}, {"ids", sample(DType::kI64, {4})}};
  std::vector<std::pair<std::string, TensorType>> want{{"ids", {DType::kI64, {4}}}, {"x", {DType::kF32, {2, 3}}}};
  auto m = matchNamedTensors(got, want, "input", "d");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].dtype(), DType::kI64);  // in the plan's order
  auto fails = [&](const NamedTensors& g, const std::vector<std::pair<std::string, TensorType>>& w) {
    auto r = matchNamedTensors(g, w, "input", "d", {{"x", "d/x.npy"}});
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  std::string s = fails(got, {{"ids", {DType::kI64, {4}}}, {"x", {DType::kF32, {2, 4}}}});
  EXPECT_NE(s.find("d/x.npy: input 'x': the plan expects f32[2,4], got f32[2,3]"), std::string::npos) << s;
  s = fails(got, {{"ids", {DType::kI64, {4}}}, {"x", {DType::kF16, {2, 3}}}});
  EXPECT_NE(s.find("the plan expects f16[2,3]"), std::string::npos) << s;
  s = fails(got, {{"ids", {DType::kI64, {4}}}, {"x", {DType::kF32, {2, 3}}}, {"a/b", {DType::kF32, {1}}}});
  EXPECT_NE(s.find("no tensor for input 'a/b'"), std::string::npos) << s;
  EXPECT_NE(s.find("a%2Fb.npy"), std::string::npos) << s;
  s = fails(got, {{"ids", {DType::kI64, {4}}}});
  EXPECT_NE(s.find("d/x.npy: 'x' is none of the plan's inputs ('ids')"), std::string::npos) << s;
}

}  // namespace
}  // namespace pcc
