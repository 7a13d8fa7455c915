// Text -> the IR parser, then the verifier and the printer on what parses;
// a graph that parses and verifies must print and parse again.
#include <cstdlib>
#include <string_view>

#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = pcc::parseGraph(text, "<fuzz>");
  if (!g.ok()) return 0;
  if (!pcc::verifyGraph(**g).ok()) return 0;
  std::string printed = pcc::printGraph(**g);
  auto again = pcc::parseGraph(printed, "<printed>");
  if (!again.ok()) abort();  // the printer wrote what the parser refuses
  return 0;
}
