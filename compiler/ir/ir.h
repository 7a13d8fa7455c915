// The pcc IR: a Graph of Nodes over Values, in topological order, with static
// shapes. See docs/ir.md for the textual form.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/schema/op_table.h"
#include "runtime/schema/schema.h"
#include "runtime/support/attribute.h"
#include "runtime/support/dtype.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

// The op table (OpKind, OpInfo, opName, opFromName, opClass, ...) is
// runtime/schema/op_table.h, shared with the runtime.

/// Axes of the logical device mesh pp × dp × tp (tp innermost).
enum class MeshAxis : int8_t { kNone = -1, kDP = 0, kTP = 1, kPP = 2 };
std::string_view meshAxisName(MeshAxis a);  // "dp", "tp", "pp", "-"
std::optional<MeshAxis> meshAxisFromName(std::string_view s);

/// How a value is laid out over the mesh: each tensor dimension is replicated
/// (kNone) or split evenly-as-possible over one mesh axis; `partial` marks a
/// value each rank of that axis holds a partial sum of.
struct Sharding {
  std::vector<MeshAxis> dims;
  MeshAxis partial = MeshAxis::kNone;

  bool isReplicated() const;
  /// \returns the dimension split over `axis`, or -1.
  int dimSplitOver(MeshAxis axis) const;
  /// \returns "[dp,-]" or "[-,-] partial(tp)".
  std::string str() const;
  bool operator==(const Sharding& o) const { return dims == o.dims && partial == o.partial; }
};

class Node;
class Graph;

class Value {
 public:
  int id() const { return id_; }
  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  const TensorType& type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  /// The producing node; nullptr for graph inputs and constants.
  Node* producer() const { return producer_; }
  bool isConstant() const { return constant_.has_value() || block_.has_value(); }
  /// \returns the constant's data. A constant that is a block of another
  /// tensor (constantBlock) is copied out of its source on the first call and
  /// kept: passes that read a weight's values get them, at that cost (not
  /// thread-safe: the first call writes the copy).
  const Tensor& constantData() const;
  void setConstantData(Tensor t) {
    constant_ = std::move(t);
    block_.reset();
  }
  /// \returns the block of a larger tensor this constant is, while its data
  /// has not been read (constantData), else nullptr. Lowering gives each rank
  /// its piece of a large weight this way, and the plan writer streams the
  /// piece from the source: planning copies and reads no weight bytes.
  const TensorBlock* constantBlock() const { return constant_ ? nullptr : block_ ? &*block_ : nullptr; }
  /// Sharding annotation; nullopt until the partitioner runs.
  const std::optional<Sharding>& sharding() const { return sharding_; }
  void setSharding(std::optional<Sharding> s) { sharding_ = std::move(s); }
  /// The nodes that read this value, one entry per input slot (a node reading
  /// it twice appears twice), in the order the uses were made. Graph and
  /// Node::setInput keep it; graph outputs are not in it.
  const std::vector<Node*>& uses() const { return uses_; }

 private:
  friend class Graph;
  friend class Node;
  void addUse(Node* n) { uses_.push_back(n); }
  void removeUse(Node* n);
  std::vector<Node*> uses_;
  int id_ = -1;
  std::string name_;
  TensorType type_;
  Node* producer_ = nullptr;
  mutable std::optional<Tensor> constant_;  // filled from block_ on first read
  std::optional<TensorBlock> block_;
  std::optional<Sharding> sharding_;
};

class Node {
 public:
  OpKind op() const { return op_; }
  std::string_view opName() const { return pcc::opName(op_); }
  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// Inputs; an absent optional input is nullptr.
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  /// Makes input `i` read `v` (nullptr: absent), keeping the use lists.
  void setInput(size_t i, Value* v);
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t i = 0) const { return outputs_.at(i); }
  AttrMap& attrs() { return attrs_; }
  const AttrMap& attrs() const { return attrs_; }
  /// Pipeline stage assigned by the partitioner (0 when there is one stage).
  int stage() const { return stage_; }
  void setStage(int s) { stage_ = s; }
  /// \returns "node 'name' (Op)" for error messages.
  std::string describe() const;

  /// Bodies (regions) the node owns: If's then and else branches, Loop's and
  /// Scan's body. A body is a Graph: its inputs are the block parameters, its
  /// outputs the results. A body reads nothing of the enclosing graph; values
  /// it captures are passed as the node's trailing inputs (docs/ir.md#regions).
  const std::vector<std::unique_ptr<Graph>>& bodies() const { return bodies_; }
  size_t numBodies() const { return bodies_.size(); }
  Graph* body(size_t i) const { return bodies_.at(i).get(); }
  /// Appends `body`. \returns it.
  Graph* addBody(std::unique_ptr<Graph> body);

  Node();
  ~Node();

 private:
  friend class Graph;
  OpKind op_ = OpKind::kNumOps;
  std::string name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  AttrMap attrs_;
  int stage_ = 0;
  std::vector<std::unique_ptr<Graph>> bodies_;
};

/// A graph owns its values and nodes. Nodes are kept in topological order;
/// passes that create nodes insert them at a position that keeps it so.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  /// Adds a graph input (a run-time tensor).
  Value* addInput(std::string name, TensorType type);
  /// Adds a constant (an initializer / weight) holding `data`.
  Value* addConstant(std::string name, Tensor data);
  /// Adds a constant that is `block` of another tensor, not copied until its
  /// data is read (Value::constantBlock). \returns it.
  Value* addConstantBlock(std::string name, TensorBlock block);
  /// Creates a node with one output per entry of `outputTypes` and inserts it
  /// before position `pos` of nodes() (default: at the end). Output names are
  /// taken from `outputNames` where given, else made unique.
  Node* addNode(OpKind op, std::vector<Value*> inputs, std::vector<TensorType> outputTypes,
                AttrMap attrs = {}, std::string name = {}, std::vector<std::string> outputNames = {},
                std::optional<size_t> pos = std::nullopt);
  void addOutput(Value* v) { outputs_.push_back(v); }
  void setOutputs(std::vector<Value*> outs) { outputs_ = std::move(outs); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  /// Constants in creation order.
  std::vector<Value*> constants() const;
  /// Nodes in topological order.
  std::vector<Node*> nodes() const;
  size_t numNodes() const { return nodes_.size(); }
  /// \returns the position of `n` in nodes().
  size_t indexOf(const Node* n) const;
  /// Puts the nodes in `order`: a permutation of nodes() in which each node
  /// comes after the producers of its inputs (the scheduler's reorder,
  /// passes/schedule.h). \returns false, leaving the order as it was, when
  /// `order` is not one.
  bool reorderNodes(const std::vector<Node*>& order);

  /// \returns the nodes that read `v` in the order of Value::uses() (a node
  /// reading v twice appears once). Costs the number of uses of `v`.
  std::vector<Node*> users(const Value* v) const;
  /// \returns a map from each value to its number of uses (nodes and graph outputs).
  std::unordered_map<const Value*, int> useCounts() const;
  /// Makes every reader of `from` (nodes and graph outputs) read `to` instead.
  /// Costs the number of uses of `from` plus the number of graph outputs.
  void replaceAllUsesWith(Value* from, Value* to);
  /// Erases the given nodes; none of their outputs may still be used.
  void eraseNodes(const std::vector<Node*>& dead);
  /// Drops constants and inputs no node or output reads... constants only: inputs are the interface.
  void eraseUnusedConstants();
  /// \returns a value by name, or nullptr.
  Value* findValue(std::string_view name) const;
  /// Renames `v` to `name`. \returns false (and leaves it) when another value has that name.
  bool renameValue(Value* v, const std::string& name);
  /// \returns `base` if no value has that name, else base + "_N".
  std::string uniqueName(const std::string& base) const;
  /// \returns a deep copy (constants share their buffers; bodies are copied).
  std::unique_ptr<Graph> clone() const;
  /// Replaces the graph inputs (block parameters of a body) by `ins`, values
  /// of this graph that are neither constants nor node outputs.
  void setInputs(std::vector<Value*> ins) { inputs_ = std::move(ins); }

 private:
  Value* newValue(std::string name, TensorType type);

  std::string name_ = "main";
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::unordered_map<std::string, Value*> byName_;
  int nextId_ = 0;
};

/// Runs `infer` on `args` and checks every output type against the limit of
/// one tensor (checkTensorSize: no negative dim, at most kMaxTensorBytes), so
/// no node is ever typed with a size that would overflow or exhaust memory.
/// Every inference of a node's types goes through here (inferOutputTypes and
/// the ONNX importer). \returns the types, or the inference's error, or an
/// invalid-input error naming the output and its type.
StatusOr<std::vector<TensorType>> inferCheckedTypes(InferFn infer, const InferArgs& args);

/// Infers the output types of a node that is being created: looks up the op's
/// schema and calls its inference with the input types and constant values.
/// \returns the output types, or an error naming the node, op and input shapes.
StatusOr<std::vector<TensorType>> inferOutputTypes(OpKind op, const std::vector<Value*>& inputs,
                                                   const AttrMap& attrs, const std::string& nodeName);

}  // namespace pcc
