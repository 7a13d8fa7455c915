// Importers of the math op family.
#include "compiler/onnx/import_util.h"

namespace pcc {

std::vector<ImporterEntry> mathImporters() {
  return {};
}

}  // namespace pcc
