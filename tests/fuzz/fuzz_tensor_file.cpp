// Bytes -> the tensor-file reader (`pcc-run --inputs`, `--expect`, `--freeze`).
#include "runtime/onnx_tensor.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pcc::fuzz::scratchDir() + "/input_0.pb";
  pcc::fuzz::writeFile(path, data, size);
  std::string name;
  auto t = pcc::readTensorFile(path, &name);
  if (t.ok()) (void)t->numel();
  return 0;
}
