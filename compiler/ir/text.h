// The textual form of the IR: a printer and a parser that round-trip exactly,
// print(parse(print(g))) == print(g). The syntax is documented in docs/ir.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compiler/ir/ir.h"
#include "runtime/support/random.h"  // pseudoRandomTensor, for elided constants

namespace pcc {

/// Knobs of the printer; the defaults are what pcc-opt and the lit tests use.
struct PrintOptions {
  /// Constants with at most this many elements print their data as
  /// `dense<...>`; larger ones print only `const` (the parser then fills them
  /// with pseudoRandomTensor() data). Negative: always print the data.
  int64_t maxConstElements = 16;
};

/// \returns `g` in the textual form, ending with a newline.
std::string printGraph(const Graph& g, const PrintOptions& options = {});

/// Parses one graph in the textual form (bodies of region nodes included,
/// each with names of its own). `//` comments are skipped. The parser
/// infers nothing: node output types are the printed ones (run verifyGraph()
/// to check them). `fileName` and `firstLine` (the line `text` starts on in
/// that file) only feed error locations.
/// \returns the graph, or an invalid-input error `FILE:LINE:COL: expected ...`.
StatusOr<std::unique_ptr<Graph>> parseGraph(std::string_view text, const std::string& fileName = "<input>",
                                            int firstLine = 1);

/// \returns a stable 64-bit hash of `name` (FNV-1a), a seed for pseudoRandomTensor().
uint64_t seedFromName(std::string_view name);

/// \returns true if `name` prints bare after `%` (matches [A-Za-z0-9_.]+);
/// other names print quoted: %"/blk/Add_output_0".
bool isBareName(std::string_view name);

/// \returns `s` double-quoted, with quotes, backslashes and control characters
/// escaped (\" \\ \n \t \xHH), as the textual IR writes strings.
std::string quoteIrString(std::string_view s);

/// \returns how the textual IR refers to value `name`: `%x` or `%"/a b"`.
/// Error messages use it too, so they stay on one line.
std::string valueRefText(std::string_view name);

}  // namespace pcc
