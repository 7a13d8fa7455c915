// The op table of the ONNX importer: one import function per ONNX op_type.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/onnx/import_context.h"

namespace pcc {

/// Imports the current node of the context: maps it to canonical IR ops
/// (through ImportContext::emit) and defines each used ONNX output.
using ImportFn = Status (*)(ImportContext& ctx);

/// \returns the import function of `opType` (default domain) at `opset`, or
/// nullptr when pcc does not support that op there.
/// One row of the importer table.
struct ImporterEntry {
  const char* opType;
  int minOpset;  ///< the opset that introduced the op (7: older than pcc's range)
  ImportFn fn;
};

/// Importer tables of the op families, one per file (import_math.cpp,
/// import_reduce_norm.cpp, import_tensor.cpp); findImporter merges them.
std::vector<ImporterEntry> mathImporters();
std::vector<ImporterEntry> reduceNormImporters();
std::vector<ImporterEntry> tensorImporters();
std::vector<ImporterEntry> signalImporters();
std::vector<ImporterEntry> rnnImporters();
std::vector<ImporterEntry> visionImporters();

ImportFn findImporter(std::string_view opType, int64_t opset);

/// \returns the import function of an op onnxruntime defines beyond ONNX
/// (import_contrib.cpp: com.microsoft's GroupQueryAttention, RotaryEmbedding,
/// Skip(Simplified)LayerNormalization, SimplifiedLayerNormalization, the last
/// also in the default domain), or nullptr.
ImportFn findContribImporter(std::string_view domain, std::string_view opType);

/// \returns every row of the importer tables (the families merged).
const std::vector<ImporterEntry>& importerRows();
/// \returns the op_types with more than one row, sorted (findImporter refuses
/// to start when there is one).
std::vector<std::string> duplicateImporterRows();

}  // namespace pcc
