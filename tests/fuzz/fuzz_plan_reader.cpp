// Bytes -> plan.pb of a bundle whose weight files come from a real plan
// (PCC_FUZZ_BUNDLE, set by tools/fuzz.sh), then the reader and every weight
// load. A plan either loads whole or is refused with a Status.
#include <filesystem>

#include "runtime/plan_io.h"
#include "tests/fuzz/fuzz_util.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* bundle = std::getenv("PCC_FUZZ_BUNDLE");
  fs::path dir = fs::path(pcc::fuzz::scratchDir()) / "plan.pcc";
  fs::create_directories(dir);
  if (bundle)
    for (const auto& e : fs::directory_iterator(bundle))
      if (e.path().filename() != "plan.pb") fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = pcc::fuzz::scratchDir() + "/plan.pcc";
  pcc::fuzz::writeFile(dir + "/plan.pb", data, size);
  auto p = pcc::loadPlanBundle(dir);
  if (!p.ok()) return 0;
  for (const auto& prog : p->plan.ranks())
    for (int w = 0; w < prog.weights_size(); ++w) (void)pcc::loadWeight(*p, prog, w, true).ok();
  return 0;
}
