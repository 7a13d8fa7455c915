// The pattern-rewrite utility of the canonicalize, fold-batchnorm and
// recognize passes: a pattern matches at a root node and rewrites through a
// PatternRewriter; applyPatterns runs a set of patterns to a fixpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/ir.h"
#include "passes/pass.h"

namespace pcc {

/// The only way a pattern changes the graph. New nodes go right before the
/// root being rewritten, so the graph stays in topological order; replaced
/// nodes are collected and erased by the driver after its sweep, together
/// with the producers that became dead.
class PatternRewriter {
 public:
  PatternRewriter(Graph& g, Node* root) : g_(g), root_(root) {}

  Graph& graph() { return g_; }

  /// Creates `op` on `inputs` before the root, typed by inference.
  /// \returns the node, or the inference's error (a pattern bug or a
  /// mismatch the pattern should have checked).
  StatusOr<Node*> create(OpKind op, std::vector<Value*> inputs, AttrMap attrs = {});
  /// Adds a constant named after `base`. \returns it.
  Value* constant(const std::string& base, Tensor data);
  /// Makes every reader of `from` read `to`. When `from` is a graph output,
  /// `to` takes over its name (an output keeps its name in the plan) unless
  /// `to` is a graph input or already an output.
  void replace(Value* from, Value* to);
  /// \returns whether replace(from, to) keeps the graph's interface: `from`
  /// is no graph output, or `to` can take over its name. Patterns that
  /// forward an existing value check this first.
  bool canReplace(const Value* from, const Value* to) const;
  /// Replaces each output of `n` by the matching one of `with`; `n` is
  /// erased after the sweep.
  void replaceNode(Node* n, const std::vector<Value*>& with);

  /// The nodes created and the nodes whose inputs changed since the last call
  /// (the driver's worklist additions).
  std::vector<Node*> takeTouched();
  /// The values replaced since the last call (their producers may be dead).
  std::vector<Value*> takeReplaced();

 private:
  Graph& g_;
  Node* root_;
  std::vector<Node*> touched_;
  std::vector<Value*> replaced_;
};

/// A rewrite rooted at nodes of one op.
class RewritePattern {
 public:
  virtual ~RewritePattern() = default;
  /// \returns the op of the nodes this pattern is tried on.
  virtual OpKind rootOp() const = 0;
  /// \returns the pattern's name; a rewrite counts under it in
  /// PassContext::stats when countsAsStat() (e.g. "LayerNormalization").
  virtual std::string_view name() const = 0;
  virtual bool countsAsStat() const { return false; }
  /// Tries to rewrite at `root`: checks first, then changes the graph only
  /// through `rw`. \returns true if it rewrote, false if it did not match
  /// (nothing changed), or an error.
  virtual StatusOr<bool> matchAndRewrite(Node& root, PatternRewriter& rw) const = 0;
};

using PatternList = std::vector<std::unique_ptr<RewritePattern>>;

/// Applies `patterns` to `g` until none matches:
///  1. Sweep: every live node, in topological order, then the nodes rewrites
///     created or touched (a worklist), is offered to the patterns of its op
///     in list order until one rewrites it.
///  2. Erase the replaced nodes and every node whose results nothing reads
///     any more (collect, then erase; all ops are free of side effects).
///  3. Repeat while a sweep rewrote something, at most `maxSweeps` times.
///  4. Recurse into the bodies of the region nodes (If, Loop, Scan): a body
///     is a graph of its own, rewritten the same way; its interface (its
///     parameters and the types of its results) does not change.
/// \returns true if the graph changed, or an internal error when the
/// patterns do not converge (they undo each other), or a pattern's error.
/// Counts each rewrite of a counting pattern in ctx.stats.
StatusOr<bool> applyPatterns(Graph& g, const PatternList& patterns, PassContext& ctx, int maxSweeps = 16);

// --- Matching helpers shared by the patterns.

/// \returns whether `v` is read exactly once, by a node, and is no graph output.
bool hasOneUse(const Graph& g, const Value* v);
/// \returns whether `v` is a graph output.
bool isGraphOutput(const Graph& g, const Value* v);
/// \returns the producer of `v` if it is an `op` node, else nullptr.
Node* producerOf(const Value* v, OpKind op);
/// \returns the value of every element of constant `v` if all are equal
/// (a splat, any shape), else nullopt. Non-constants, and constants of more
/// than 65536 elements (weights, which are not read), give nullopt.
std::optional<double> splatValue(const Value* v);
/// \returns whether `v` is a constant splat within `tol` (relative) of `want`.
bool isSplat(const Value* v, double want, double tol = 1e-6);
/// \returns the other input of binary node `n` than the one that is `v`
/// (nullptr if `n` does not read `v`).
Value* otherInput(const Node* n, const Value* v);
/// The relative tolerance constants of a recognized block are checked with.
inline constexpr double kMatchTolerance = 1e-5;
/// \returns whether `v` is a value of a floating-point type.
bool isFloatValue(const Value* v);
/// \returns the input of binary node `n` that is not a constant splat near
/// `c` (kMatchTolerance), when the other one is; else nullptr.
Value* operandBesides(const Node* n, double c);
/// \returns whether binary node `n`'s result has the type of one of its
/// operands (its constant does not broadcast it to a larger shape).
bool keepsType(const Node* n);

}  // namespace pcc
