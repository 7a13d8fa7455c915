// The shipped device specs (passes/partition/devices/*.json), compiled into
// pcc by CMake (the definition is generated into the build tree), so that
// `--gpu NAME` needs no data file beside the binary.
#pragma once

#include <string_view>
#include <vector>

namespace pcc {

struct BuiltinSpecText {
  std::string_view name;  ///< the file name without .json, e.g. "h100"
  std::string_view json;
};

/// \returns every shipped spec's text, in file-name order.
const std::vector<BuiltinSpecText>& builtinSpecTexts();

}  // namespace pcc
