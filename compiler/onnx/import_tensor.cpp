// Importers of the tensor op family.
#include "compiler/onnx/import_util.h"

namespace pcc {

std::vector<ImporterEntry> tensorImporters() {
  return {};
}

}  // namespace pcc
