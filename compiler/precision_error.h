// The error a precision conversion makes (docs/precision.md#error): the
// float32 graph and the converted one run on the reference evaluator on the
// same inputs, and each output is compared.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

/// The error of one output over every input set.
struct OutputError {
  std::string name;
  double maxAbs = 0;
  /// maxAbs over the largest magnitude of the reference output (0 when that is 0).
  double maxRel = 0;
  /// Cosine similarity of the whole output, the lowest over the sets; NaN
  /// where the converted output is not finite.
  double cosine = 1;
  /// The fraction of rows (the last axis) whose argmax agrees, for outputs
  /// that hold class scores or token logits (named logits, scores, probs or
  /// class, or computed by Softmax or LogSoftmax; rank 2 or more, at least 2
  /// entries per row); -1 for the others.
  double top1 = -1;
  bool finite = true;
};

/// The seeded input sets the error is measured on without --calibration-inputs.
inline constexpr int kSeededSets = 2;

/// One set of inputs per entry, each one tensor per graph input of `g`:
/// the tensors of each .npz file or folder of NAME.npy files in `dir`
/// (sorted by name; inputs a set does not name are seeded), or, with `dir`
/// empty, `seeded` sets of randomInputs. \returns them, or an exit-2 error
/// naming the file and the input whose type differs.
StatusOr<std::vector<std::vector<Tensor>>> calibrationSets(const Graph& g, const std::string& dir, int seeded);

/// \returns the largest finite magnitude of every float value of `g` (node
/// outputs, inputs and constants, by name) over the sets (an infinity is one
/// in every float type: it overflows nothing); `outputs`
/// (optional) receives the graph's outputs on each set.
StatusOr<std::map<std::string, double>> measureRanges(const Graph& g, const std::vector<std::vector<Tensor>>& sets,
                                                      std::vector<std::vector<Tensor>>* outputs = nullptr);

/// \returns the error of `converted` against `original` (the same inputs and
/// outputs, by position) over the sets, one entry per float output.
/// `want` (optional): the outputs of `original` on the sets, already computed.
StatusOr<std::vector<OutputError>> measureError(const Graph& original, const Graph& converted,
                                                const std::vector<std::vector<Tensor>>& sets,
                                                const std::vector<std::vector<Tensor>>* want = nullptr);

/// \returns the op kinds computing in `target` upstream of output `name` of
/// `g`, the most frequent first: "MatMul x12, Add x10, Mul x4".
std::string upstreamOps(const Graph& g, const std::string& name, DType target);

}  // namespace pcc
