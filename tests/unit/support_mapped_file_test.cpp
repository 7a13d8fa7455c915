#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/support/mapped_file.h"

namespace pcc {
namespace {

std::string tempPath(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("pcc_mapped_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(MappedFile, MapsContents) {
  std::string path = tempPath("hello.bin");
  { std::ofstream(path, std::ios::binary) << "hello, world"; }
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->data()), (*f)->size()), "hello, world");
  EXPECT_EQ((*f)->path(), path);
}

TEST(MappedFile, EmptyFileIsValid) {
  std::string path = tempPath("empty.bin");
  { std::ofstream(path, std::ios::binary); }
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), 0u);
}

TEST(MappedFile, MissingFileIsInvalidInput) {
  auto f = MappedFile::open(tempPath("does_not_exist.bin"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(f.status().message().find("does_not_exist.bin"), std::string::npos);
}

TEST(MappedFile, DirectoryIsInvalidInput) {
  auto f = MappedFile::open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidInput);
}

TEST(MappedFile, MappingOutlivesOtherReferences) {
  std::string path = tempPath("shared.bin");
  { std::ofstream(path, std::ios::binary) << "abcd"; }
  std::shared_ptr<MappedFile> keep;
  {
    auto f = MappedFile::open(path);
    ASSERT_TRUE(f.ok());
    keep = *f;
  }
  std::filesystem::remove(path);  // the mapping stays readable after unlink
  EXPECT_EQ(keep->data()[3], 'd');
}

}  // namespace
}  // namespace pcc
