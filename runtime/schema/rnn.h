// Helpers of the type inference of runtime/schema/rnn.cpp that the reference
// kernels of runtime/ops/rnn.cpp use too (the functions are defined in
// runtime/schema/rnn.cpp).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>

#include "runtime/schema/infer_util.h"

namespace pcc::ops::rnn_schema {

enum class Cell { kRnn, kGru, kLstm };

/// \returns the gate count G of the weight matrices.
int64_t gatesOf(Cell c);

/// \returns how many activations one direction uses.
size_t actsOf(Cell c);

/// \returns the number of ONNX outputs: Y, Y_h and, for LSTM, Y_c.
int64_t outputsOf(Cell c);

/// \returns the maximum input count.
size_t maxInputsOf(Cell c);

// ---- Activations --------------------------------------------------------------

enum class ActKind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh,
                     kHardSigmoid, kElu, kSoftsign, kSoftplus };

struct ActInfo {
  const char* name;
  ActKind kind;
  bool usesAlpha, usesBeta;
  float alpha, beta;  // defaults
};

constexpr ActInfo kActs[] = {
    {"relu", ActKind::kRelu, false, false, 0, 0},
    {"tanh", ActKind::kTanh, false, false, 0, 0},
    {"sigmoid", ActKind::kSigmoid, false, false, 0, 0},
    {"affine", ActKind::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", ActKind::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", ActKind::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", ActKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ActKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActKind::kElu, true, false, 1.0f, 0},
    {"softsign", ActKind::kSoftsign, false, false, 0, 0},
    {"softplus", ActKind::kSoftplus, false, false, 0, 0},
};

/// One activation function with its parameters.
struct Activation {
  ActKind kind = ActKind::kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case ActKind::kRelu: return x > 0 ? x : 0;
      case ActKind::kTanh: return std::tanh(x);
      case ActKind::kSigmoid: return 1 / (1 + std::exp(-x));
      case ActKind::kAffine: return alpha * x + beta;
      case ActKind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case ActKind::kThresholdedRelu: return x > alpha ? x : 0;
      case ActKind::kScaledTanh: return alpha * std::tanh(beta * x);
      case ActKind::kHardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
      case ActKind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case ActKind::kSoftsign: return x / (1 + std::fabs(x));
      case ActKind::kSoftplus: return x > 30 ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

/// \returns the string list attribute `name`, or `dflt` when absent.
StatusOr<std::vector<std::string>> stringsAttr(const AttrMap& attrs, const std::string& name,
                                               std::vector<std::string> dflt);

/// \returns the activations of every direction (D * actsOf(cell) of them), from
/// the attributes activations, activation_alpha and activation_beta.
StatusOr<std::vector<Activation>> parseActivations(Cell cell, const AttrMap& attrs, int64_t dirs);

// ---- Shapes --------------------------------------------------------------------

/// Everything a recurrent node's inputs and attributes determine.
struct Recurrent {
  Cell cell = Cell::kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool batchFirst = false;                // layout 1
  bool reverseOnly = false;               // direction "reverse"
  double clip = 0;                        // <= 0: no clipping
  bool linearBeforeReset = false;         // GRU
  bool inputForget = false;               // LSTM
  std::vector<Activation> acts;           // actsOf(cell) per direction
  Dims yShape, stateShape;                // of Y and of Y_h / Y_c
  std::vector<TensorType> outputs;        // num_outputs of Y, Y_h, Y_c

  /// Element offsets of X, Y and the [D, B, H] states in either layout.
  int64_t xAt(int64_t t, int64_t b) const { return (batchFirst ? b * seq + t : t * batch + b) * input; }
  int64_t yAt(int64_t t, int64_t d, int64_t b) const {
    return (batchFirst ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  int64_t stateAt(int64_t d, int64_t b) const { return (batchFirst ? b * dirs + d : d * batch + b) * hidden; }
};

/// \returns an error unless optional input `i` (named `what`) is absent or has `shape`.
Status checkShape(const InferArgs& args, size_t i, const Dims& shape, DType dtype, const char* what);

StatusOr<Recurrent> recurrentShape(Cell cell, const InferArgs& args);

}  // namespace pcc::ops::rnn_schema
