// The op table of the ONNX importer: one import function per ONNX op_type.
#pragma once

#include <string_view>

#include "compiler/onnx/import_context.h"

namespace pcc {

/// Imports the current node of the context: maps it to canonical IR ops
/// (through ImportContext::emit) and defines each used ONNX output.
using ImportFn = Status (*)(ImportContext& ctx);

/// \returns the import function of `opType` (default domain) at `opset`, or
/// nullptr when pcc does not support that op there.
ImportFn findImporter(std::string_view opType, int64_t opset);

}  // namespace pcc
