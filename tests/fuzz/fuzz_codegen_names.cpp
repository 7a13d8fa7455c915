// Bytes -> a model text (a node or value name) and an attribute string ->
// every kind of generated kernel, C++ and CUDA (tests/fuzz/codegen_names_check.h).
// The input is the name, then optionally a NUL byte and the attribute
// string. Aborts when the source's tokens differ from those with a fixed
// placeholder in the name's place: model text left its comment.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/codegen_names_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static pcc::fuzz::CodegenNamesCheck* check = [] {
    auto* c = new pcc::fuzz::CodegenNamesCheck;
    if (!c->ready()) {
      std::fprintf(stderr, "fuzz_codegen_names: the fixed graphs do not fuse\n");
      std::abort();
    }
    return c;
  }();
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string name = in.substr(0, nul);
  std::string attr = nul == std::string::npos ? "none" : in.substr(nul + 1);
  std::string diff = check->check(name, attr);
  if (!diff.empty()) {
    std::fprintf(stderr, "fuzz_codegen_names: model text reached generated source: %s\n", diff.c_str());
    std::abort();
  }
  return 0;
}
