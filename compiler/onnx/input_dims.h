// Binding the symbolic dims of a model's inputs to sizes (import step 4):
// --shape, --batch, and the sizes the model itself carries.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compiler/onnx/importer.h"

namespace pcc {

/// One graph input's declaration: a dim is fixed, or symbolic with an
/// optional name (dim_param; empty when unnamed).
struct InputDecl {
  std::string name;
  DType dtype = DType::kUndefined;
  bool hasShape = false;
  std::vector<std::optional<int64_t>> dims;
  std::vector<std::string> symbols;
};

/// \returns the declaration of graph input `in`, or an unsupported error
/// (not a tensor, an unknown element type) that names `file`.
StatusOr<InputDecl> declOf(const onnx::ValueInfoProto& in, const std::string& file);

/// What binding the inputs produced.
struct InputBinding {
  /// The static shape of every declaration, in order.
  std::vector<Dims> shapes;
  /// The symbols the model gave a size to (only those an input needed).
  std::vector<ModelDim> fromModel;
  /// The inputs whose leading dim is the batch that nothing bound (only with
  /// `batchPending`; their shapes then hold 1 there).
  std::vector<std::string> batchInputs;
  /// The names of the batch's symbols, as declared ("" for an unnamed one).
  std::vector<std::string> batchSymbols;
};

/// Binds every symbolic dim of `decls` (the model's run-time inputs). In
/// order: --shape binds the symbols its dims cover; --batch the leading dim of
/// every other input whose leading dim is symbolic, and that symbol wherever
/// it appears (the batch); the model's own sizes (modelDims) every other
/// symbol. A symbol bound twice to different sizes is an error naming both.
/// With `batchPending` (the caller chooses the batch later) an unbound batch
/// is not an error: its inputs are listed in batchInputs.
/// \returns the binding, or one invalid-input error that names every dim
/// left without a size and the --shape flags that would bind them.
StatusOr<InputBinding> bindInputShapes(const std::vector<InputDecl>& decls, const ImportOptions& opts,
                                       const onnx::ModelProto& m, const std::string& file, bool batchPending);

/// \returns the sizes `m` carries for symbolic dims, by symbol: where a value
/// (graph input, output or value_info) declared more than once has a symbol
/// at a position where another declaration of it has a dim_value, and where a
/// metadata_props key is a symbol's name and its value a size. A symbol may
/// appear more than once with different sizes; bindInputShapes refuses that
/// when it needs the symbol.
std::vector<ModelDim> modelDims(const onnx::ModelProto& m);

}  // namespace pcc
