// ImportContext: what an op import function sees of the ONNX node being
// imported, and the one way it builds IR (emit), which infers the output types
// and folds nodes whose inputs are all constants.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compiler/ir/fold_policy.h"
#include "compiler/ir/ir.h"
#include "runtime/onnx_tensor.h"

namespace pcc {

class ImportContext {
 public:
  /// `graphOutputs` and `consumed` are the ONNX names read as graph outputs and
  /// by any node; `reserved` every ONNX value name (temporaries avoid them).
  ImportContext(Graph& g, std::string file, int64_t opset, std::string baseDir, ExternalDataFiles& files,
                std::unordered_set<std::string> graphOutputs, std::unordered_set<std::string> consumed,
                std::unordered_set<std::string> reserved);

  // ---- Values by ONNX name ----------------------------------------------------
  /// Makes ONNX name `name` refer to `v`.
  void define(const std::string& name, Value* v) { values_[name] = v; }
  /// \returns the value of ONNX name `name` (looked up in the enclosing
  /// contexts too, for a body imported inline), or nullptr.
  Value* lookup(const std::string& name) const;

  // ---- Bodies of If, Loop and Scan (import_control.cpp) -----------------------
  /// \returns a context that imports the nodes of ONNX graph `body` into
  /// `target`. When `seesEnclosing`, names the body does not define resolve in
  /// this context (a body inlined into this graph); otherwise the caller
  /// defines every name the body reads from outside (a body that becomes a
  /// region). Node names get `prefix`.
  ImportContext child(Graph& target, const onnx::GraphProto& body, bool seesEnclosing, std::string prefix) const;
  /// \returns tensor `t` (an initializer of a body), external data resolved
  /// as the model's.
  StatusOr<Tensor> loadTensor(const onnx::TensorProto& t) const { return tensorFromProto(t, baseDir_, &files_); }
  /// Prefix of the names of the nodes this context imports ("" at top level).
  const std::string& namePrefix() const { return namePrefix_; }
  /// Import If, Loop and Scan as region nodes instead of folding or unrolling
  /// them (ImportOptions::keepControlFlow).
  bool keepControlFlow() const { return keepControlFlow_; }
  void setKeepControlFlow(bool keep) { keepControlFlow_ = keep; }
  /// Attributes may leave their type unset (a model of IR version 1, as the
  /// ONNX checker allows); from IR version 2 on such an attribute is refused.
  void setUntypedAttributes(bool allowed) { untypedAttributes_ = allowed; }
  /// Loop and Scan iterations unrolled so far over the whole model (every
  /// context of one import shares the count).
  int64_t unrolledIterations() const { return *unrolled_; }
  void countUnrolledIteration() const { ++*unrolled_; }

  // ---- The node being imported ----------------------------------------------
  /// Starts importing `n`, named `name`; converts its attributes.
  /// \returns an error when an attribute cannot be converted.
  Status beginNode(const onnx::NodeProto& n, std::string name);
  const onnx::NodeProto& node() const { return *node_; }
  const std::string& nodeName() const { return nodeName_; }
  int64_t opset() const { return opset_; }
  size_t numInputs() const { return static_cast<size_t>(node_->input_size()); }
  /// \returns input `i`, or nullptr when absent (past the end or empty name).
  Value* input(size_t i) const;
  /// \returns input `i`, or an error when it is absent.
  StatusOr<Value*> requiredInput(size_t i) const;
  size_t numOutputs() const { return static_cast<size_t>(node_->output_size()); }
  /// \returns true when output `i` is named and read by a node or the graph.
  bool outputUsed(size_t i) const;
  /// \returns an error naming the first output past `n` that is used.
  Status onlyFirstOutputsUsed(size_t n, std::string_view what) const;
  /// Every attribute of the node, converted.
  const AttrMap& attrs() const { return attrs_; }
  /// \returns the node's attributes named in `names` (the canonical set of the op).
  AttrMap keep(std::initializer_list<std::string_view> names) const;
  AttrMap keep(const std::vector<std::string_view>& names) const;

  // ---- Building --------------------------------------------------------------
  /// Creates an `op` node reading `inputs`, or, when they are all constants and
  /// small enough, evaluates it and creates constants. Outputs are named by
  /// `names` where given (ONNX names), else by a fresh name built from the node
  /// name and `tag`. An output read as a graph output is never folded, so that
  /// the graph output stays produced by a node.
  /// \returns the output values, or a node error.
  StatusOr<std::vector<Value*>> emit(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                                     std::vector<std::string> names = {}, std::string_view tag = {});
  /// emit() with the node's own output names, defining each of them.
  Status emitNode(OpKind op, std::vector<Value*> inputs, AttrMap attrs);
  /// \returns a new constant holding `t`, named from `tag`.
  Value* constant(Tensor t, std::string_view tag);
  /// \returns a new 1-D i64 constant.
  Value* constI64(const std::vector<int64_t>& v, std::string_view tag);
  /// Defines ONNX output `i` as a constant holding `t`. When that output is a
  /// graph output, an Identity node reading the constant produces it.
  Status constantOutput(size_t i, Tensor t);
  /// Defines ONNX output `i` of the node as `v` (no-op for an unnamed output).
  void setOutput(size_t i, Value* v);
  /// \returns true when ONNX output `i` is a graph output.
  bool isGraphOutput(size_t i) const;

  // ---- Errors ----------------------------------------------------------------
  /// \returns "FILE: node 'NAME' (OpType, opset N): problem [input shapes ...]";
  /// an unsupported-code problem that does not say so is prefixed "unsupported: ".
  Status error(StatusCode code, const std::string& problem) const;
  template <typename... A>
  Status invalid(const A&... a) const { return error(StatusCode::kInvalidInput, strCat(a...)); }
  template <typename... A>
  Status unsupportedHere(const A&... a) const { return error(StatusCode::kUnsupported, strCat(a...)); }

  const std::string& file() const { return file_; }
  Graph& graph() { return graph_; }
  /// \returns a value name that no value of the graph or the model has.
  std::string freshName(const std::string& base) const;

 private:
  Graph& graph_;
  const ImportContext* enclosing_ = nullptr;   // where names resolve next (inline bodies)
  const ImportContext* reservedBy_ = nullptr;  // whose reserved names freshName avoids too
  std::string namePrefix_;
  bool keepControlFlow_ = false;
  bool untypedAttributes_ = false;
  std::shared_ptr<int64_t> unrolled_ = std::make_shared<int64_t>(0);
  std::string file_;
  int64_t opset_;
  std::string baseDir_;
  ExternalDataFiles& files_;
  std::unordered_set<std::string> graphOutputs_, consumed_, reserved_;
  std::unordered_map<std::string, Value*> values_;

  const onnx::NodeProto* node_ = nullptr;
  std::string nodeName_;
  AttrMap attrs_;
};

}  // namespace pcc
