// ONNX import: ModelProto -> pcc Graph with static shapes.
//
// The importer accepts models of opsets 1 to 24 of the default domain (IR
// versions up to 12) and maps every node into the canonical (newest-opset)
// ops of runtime/schema/Ops.def; all opset differences are resolved here (see op_importers.cpp). Shapes are
// inferred by pcc itself (inferOutputTypes), not by the ONNX library, whose
// shape inference stops at opset 17. Nodes whose inputs are all constants are
// evaluated at import (constant folding), so the shape subgraphs of exported
// models disappear and every shape is static.
//
// Graph outputs keep the ONNX order and names. An ONNX output that is a graph
// input, an initializer or a Constant is produced by an inserted Identity node,
// so every graph output is the output of a node.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compiler/ir/ir.h"
#include "runtime/support/dtype.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// How the symbolic dims of the model's inputs are bound: by --shape, then
/// --batch, then the sizes the model itself carries (input_dims.h); a dim
/// left without a size is an error.
struct ImportOptions {
  /// Binds dim 0 of every input whose dim 0 is symbolic (--batch N). Other
  /// occurrences of the same symbol name, in any input, get the same value.
  std::optional<int64_t> batch;
  /// Full shape of input NAME (--shape NAME=AxB). Must match the rank and the
  /// fixed dims of the model's declaration; binds the symbols it covers.
  std::map<std::string, Dims> shapes;
  /// Known values of inputs: input NAME becomes a constant of the graph instead
  /// of an input (for models that take shape-like tensors as inputs, as the ONNX
  /// backend tests do). The tensor must match the input's declared type.
  std::map<std::string, Tensor> inputValues;
  /// Import every If, Loop and Scan (opset 9+) as a region node (with
  /// bodies) instead of folding If on a constant condition and unrolling Loop
  /// and Scan where they are static. Without it, only those whose condition
  /// or trip count is computed at run time (or that are too large to unroll)
  /// stay region nodes (see compiler/onnx/import_control.h).
  bool keepControlFlow = false;
  /// When set, initializers are taken from (and added to) this map by name:
  /// two imports of one model at different shapes (a generation plan's decode
  /// step and prefill) then hold the same weight tensors, which the plan
  /// emitter stores once.
  std::shared_ptr<std::map<std::string, Tensor>> initializers;
};

/// A size the model itself carries for a symbolic dim (see modelDims in
/// compiler/onnx/input_dims.h).
struct ModelDim {
  /// The dim_param; empty: the unnamed dim `dim` of graph input `input`.
  std::string symbol;
  std::string input;
  int dim = -1;
  int64_t value = 0;
  /// Where the size was found: "value_info 'x' dim 1", "metadata_props 'seq'".
  std::string source;
};

/// What import will need, known before the batch is chosen.
struct InputDimsInfo {
  /// The inputs whose leading dim is symbolic and bound by nothing given
  /// (--batch, --shape): the batch the compiler chooses. Empty: none.
  std::vector<std::string> batchInputs;
  /// The batch's symbol names as declared ("" for an unnamed one).
  std::vector<std::string> batchSymbols;
  /// The symbols the model itself gives a size to, which import will use.
  std::vector<ModelDim> fromModel;
};

/// Checks model `m` as import does and binds its inputs' dims as import
/// would, except that a batch nothing binds is reported, not refused.
/// \returns what binding found, or the error import would give (every
/// symbolic dim without a size named in one message).
StatusOr<InputDimsInfo> inspectInputDims(const onnx::ModelProto& m, const std::string& displayName,
                                         const ImportOptions& opts);

/// Reads and parses the ONNX model at `path` (not yet checked).
/// \returns the model, or an invalid-input error naming `path`.
StatusOr<onnx::ModelProto> readOnnxModel(const std::string& path);

/// Reads and imports the ONNX model at `path`; external data files are found
/// relative to the model's directory.
/// \returns the graph, or an invalid-input / unsupported error whose message
/// starts with `path` and names the node, op, opset and shapes involved.
StatusOr<std::unique_ptr<Graph>> importOnnxModel(const std::string& path, const ImportOptions& opts);

/// Imports a parsed model. `baseDir` resolves external data; `displayName`
/// starts every error message (usually the model's path).
StatusOr<std::unique_ptr<Graph>> importOnnxModel(const onnx::ModelProto& m, const std::string& baseDir,
                                                 const std::string& displayName, const ImportOptions& opts);

}  // namespace pcc
