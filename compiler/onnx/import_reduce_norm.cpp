// Importers of the reduce norm op family.
#include "compiler/onnx/import_util.h"

namespace pcc {

std::vector<ImporterEntry> reduceNormImporters() {
  return {};
}

}  // namespace pcc
