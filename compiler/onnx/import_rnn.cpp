// Importers of the rnn op family.
#include "compiler/onnx/import_util.h"

namespace pcc {

std::vector<ImporterEntry> rnnImporters() {
  return {};
}

}  // namespace pcc
