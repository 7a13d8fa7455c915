// Bytes -> plan.pb of a bundle whose weight files come from a real plan
// (PCC_FUZZ_BUNDLE, set by tools/fuzz.sh), then the reader and every weight
// load. A plan either loads whole or is refused with a Status. Bytes that do
// not end in their own checksum get one appended (docs/plan-format.md), so
// mutants reach the parser and the validation behind the checksum.
#include <filesystem>

#include "runtime/plan_io.h"
#include "tests/fuzz/fuzz_util.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* bundle = std::getenv("PCC_FUZZ_BUNDLE");
  fs::path dir = fs::path(pcc::fuzz::scratchDir()) / "plan.pcc";
  fs::create_directories(dir);
  // Every file but plan.pb, the kernels/ directory of generated code included.
  if (bundle)
    for (const auto& e : fs::directory_iterator(bundle))
      if (e.path().filename() != "plan.pb")
        fs::copy(e.path(), dir / e.path().filename(),
                 fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = pcc::fuzz::scratchDir() + "/plan.pcc";
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto le32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
    return v;
  };
  bool signedAlready = size >= 5 && data[size - 5] == 0x65 && le32(size - 4) == pcc::crc32Of(data, size - 5);
  if (!signedAlready) {
    uint32_t crc = pcc::crc32Of(bytes.data(), bytes.size());
    bytes.push_back(static_cast<char>(0x65));
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  }
  pcc::fuzz::writeFile(dir + "/plan.pb", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto p = pcc::loadPlanBundle(dir);
  if (!p.ok()) return 0;
  for (const auto& prog : p->plan.ranks())
    for (int w = 0; w < prog.weights_size(); ++w) (void)pcc::loadWeight(*p, prog, w, true).ok();
  return 0;
}
