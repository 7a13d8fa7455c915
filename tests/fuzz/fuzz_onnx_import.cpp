// Model bytes -> the whole compiler pipeline up to the plan (import, passes,
// partition over 2 devices, lowering, emission), nothing written to disk.
// Every input must end in a plan or a clean Status; a crash, a sanitizer
// report or an uncaught exception is a finding.
#include "compiler/driver.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string model = pcc::fuzz::scratchDir() + "/model.onnx";
  pcc::fuzz::writeFile(model, data, size);
  pcc::CompileOptions opts;
  opts.modelPath = model;
  opts.gpus = 2;
  opts.batch = 2;
  opts.quiet = true;
  opts.emit = "json";  // plan in memory only
  auto c = pcc::compileModel(opts, nullptr);
  (void)c.ok();
  return 0;
}
