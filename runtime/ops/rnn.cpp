// Reference kernels of the recurrent network op family: RNN, GRU and LSTM in
// their newest-opset form.
//
// Shapes (H = hidden size, G = gates per cell: 1 RNN, 3 GRU, 4 LSTM, D = 2 when
// bidirectional else 1; layout 1 puts the batch first in X, Y and the states):
//   X [S, B, I]   W [D, G*H, I]   R [D, G*H, H]   B [D, 2*G*H] (W bias, R bias)
//   sequence_lens [B]   initial_h / initial_c [D, B, H]   P [D, 3*H] (LSTM)
//   Y [S, D, B, H]   Y_h / Y_c [D, B, H]
// Gate order in W, R and B: RNN i; GRU z, r, h; LSTM i, o, f, c; P is i, o, f.
//
// Each batch row runs its own time loop of sequence_lens[b] steps (S when the
// input is absent); the reverse direction walks those steps backwards. Steps
// past a row's length leave Y zero, and Y_h / Y_c hold the state after the
// row's last step. `clip` bounds every gate's pre-activation.
//
// Activations are given per direction (forward first), f for RNN, f g for GRU
// and f g h for LSTM; activation_alpha / activation_beta are consumed in that
// order by the activations that take an alpha (or a beta), the others fall back
// to their defaults. The node's num_outputs (set by the importer) says how many
// of Y, Y_h, Y_c it produces.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "runtime/ops/op_util.h"

namespace pcc {
namespace {
using namespace ops;

enum class Cell { kRnn, kGru, kLstm };

/// \returns the gate count G of the weight matrices.
int64_t gatesOf(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4; }
/// \returns how many activations one direction uses.
size_t actsOf(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 2 : 3; }
/// \returns the number of ONNX outputs: Y, Y_h and, for LSTM, Y_c.
int64_t outputsOf(Cell c) { return c == Cell::kLstm ? 3 : 2; }
/// \returns the maximum input count.
size_t maxInputsOf(Cell c) { return c == Cell::kLstm ? 8 : 6; }

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
                                               std::vector<std::string> dflt) {
  auto it = attrs.all().find(name);
  if (it == attrs.all().end()) return dflt;
  if (const auto* v = std::get_if<std::vector<std::string>>(&it->second)) return *v;
  if (const auto* s = std::get_if<std::string>(&it->second)) return std::vector<std::string>{*s};
  return invalidInput("attribute '", name, "' must be a list of strings");
}

/// \returns the activations of every direction (D * actsOf(cell) of them), from
/// the attributes activations, activation_alpha and activation_beta.
StatusOr<std::vector<Activation>> parseActivations(Cell cell, const AttrMap& attrs, int64_t dirs) {
  std::vector<std::string> dflt = cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
                                  : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                       : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  ASSIGN_OR_RETURN(std::vector<std::string> names, stringsAttr(attrs, "activations", dflt));
  size_t per = actsOf(cell), want = per * static_cast<size_t>(dirs);
  // One direction's list serves both directions when only that much is given.
  if (names.size() == per && want == 2 * per) {
    std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  if (names.size() != want)
    return invalidInput("activations must list ", want, " functions (", per, " per direction), got ",
                        names.size());
  std::vector<float> alphas = attrs.getFloats("activation_alpha"), betas = attrs.getFloats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> acts;
  for (const std::string& n : names) {
    std::string lower = n;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
    const ActInfo* info = nullptr;
    for (const ActInfo& a : kActs)
      if (lower == a.name) info = &a;
    if (!info) return unsupported("activation '", n, "' is not supported");
    Activation a;
    a.kind = info->kind;
    a.alpha = info->usesAlpha && ai < alphas.size() ? alphas[ai++] : info->alpha;
    a.beta = info->usesBeta && bi < betas.size() ? betas[bi++] : info->beta;
    acts.push_back(a);
  }
  return acts;
}

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
Status checkShape(const InferArgs& args, size_t i, const Dims& shape, DType dtype, const char* what) {
  if (!args.has(i)) return Status::OK();
  const TensorType& t = args.inputs[i];
  if (t.dtype != dtype || t.shape != shape)
    return invalidInput(what, " must be ", TensorType{dtype, shape}.str(), ", got ", t.str());
  return Status::OK();
}

StatusOr<Recurrent> recurrentShape(Cell cell, const InferArgs& args) {
  RETURN_IF_ERROR(checkArity(args, 3, maxInputsOf(cell)));
  static const AttrMap kNoAttrs;
  const AttrMap& attrs = args.attrs ? *args.attrs : kNoAttrs;
  Recurrent r;
  r.cell = cell;
  const TensorType& x = args.inputs[0];
  RETURN_IF_ERROR(checkDType(x, kFloatTypes, "X"));
  if (x.rank() != 3) return invalidInput("X must be 3-D, got ", x.str());
  int64_t layout = attrs.getInt("layout", 0);
  if (layout != 0 && layout != 1) return invalidInput("layout must be 0 or 1, got ", layout);
  r.batchFirst = layout == 1;
  r.seq = x.shape[r.batchFirst ? 1 : 0];
  r.batch = x.shape[r.batchFirst ? 0 : 1];
  r.input = x.shape[2];

  std::string direction = attrs.getString("direction", "forward");
  if (direction == "bidirectional") {
    r.dirs = 2;
  } else if (direction == "reverse") {
    r.reverseOnly = true;
  } else if (direction != "forward") {
    return invalidInput("direction must be forward, reverse or bidirectional, got '", direction, "'");
  }
  const TensorType& rt = args.inputs[2];
  if (rt.rank() != 3) return invalidInput("R must be 3-D, got ", rt.str());
  r.hidden = attrs.getInt("hidden_size", rt.shape[2]);
  if (r.hidden <= 0) return invalidInput("hidden_size must be positive, got ", r.hidden);
  int64_t g = gatesOf(cell) * r.hidden, d = r.dirs, h = r.hidden, b = r.batch;
  RETURN_IF_ERROR(checkShape(args, 1, {d, g, r.input}, x.dtype, "W"));
  RETURN_IF_ERROR(checkShape(args, 2, {d, g, h}, x.dtype, "R"));
  RETURN_IF_ERROR(checkShape(args, 3, {d, 2 * g}, x.dtype, "B"));
  if (args.has(4)) {
    const TensorType& sl = args.inputs[4];
    if ((sl.dtype != DType::kI32 && sl.dtype != DType::kI64) || sl.shape != Dims{b})
      return invalidInput("sequence_lens must be i32[", b, "], got ", sl.str());
  }
  Dims state = r.batchFirst ? Dims{b, d, h} : Dims{d, b, h};
  RETURN_IF_ERROR(checkShape(args, 5, state, x.dtype, "initial_h"));
  if (cell == Cell::kLstm) {
    RETURN_IF_ERROR(checkShape(args, 6, state, x.dtype, "initial_c"));
    RETURN_IF_ERROR(checkShape(args, 7, {d, 3 * h}, x.dtype, "P"));
  }

  if (attrs.has("clip")) {
    r.clip = attrs.getFloat("clip", 0.0f);
    if (r.clip <= 0) return invalidInput("clip must be positive, got ", r.clip);
  }
  r.linearBeforeReset = cell == Cell::kGru && attrs.getInt("linear_before_reset", 0) != 0;
  r.inputForget = cell == Cell::kLstm && attrs.getInt("input_forget", 0) != 0;
  ASSIGN_OR_RETURN(r.acts, parseActivations(cell, attrs, r.dirs));

  int64_t n = attrs.getInt("num_outputs", outputsOf(cell));
  if (n < 1 || n > outputsOf(cell))
    return invalidInput("num_outputs must be 1 to ", outputsOf(cell), ", got ", n);
  r.yShape = r.batchFirst ? Dims{b, r.seq, d, h} : Dims{r.seq, d, b, h};
  r.stateShape = state;
  r.outputs = {{x.dtype, r.yShape}, {x.dtype, state}, {x.dtype, state}};
  r.outputs.resize(static_cast<size_t>(n));
  return r;
}

template <Cell C>
StatusOr<std::vector<TensorType>> inferRecurrent(const InferArgs& args) {
  ASSIGN_OR_RETURN(Recurrent r, recurrentShape(C, args));
  return r.outputs;
}

// ---- Kernel ----------------------------------------------------------------------

/// Typed views of one direction's parameters.
template <typename T>
struct DirParams {
  const T *w, *r, *wb = nullptr, *rb = nullptr, *p = nullptr;
};

/// Computes one time step of batch row b in place on the state h (and c).
/// `x` is the step's input row; `ws` is scratch of 2 * G * H doubles.
template <typename T>
void step(const Recurrent& s, const DirParams<T>& q, const Activation* act, const T* x, std::vector<double>& h,
          std::vector<double>& c, std::vector<double>& ws) {
  const int64_t H = s.hidden, I = s.input, GH = gatesOf(s.cell) * H;
  double* xw = ws.data();       // X W^T + Wb, per gate row
  double* hr = ws.data() + GH;  // H R^T + Rb, per gate row
  for (int64_t k = 0; k < GH; ++k) {
    double a = q.wb ? static_cast<double>(q.wb[k]) : 0.0;
    for (int64_t i = 0; i < I; ++i) a += static_cast<double>(x[i]) * static_cast<double>(q.w[k * I + i]);
    double bsum = q.rb ? static_cast<double>(q.rb[k]) : 0.0;
    for (int64_t j = 0; j < H; ++j) bsum += h[j] * static_cast<double>(q.r[k * H + j]);
    xw[k] = a;
    hr[k] = bsum;
  }
  auto clip = [&](double v) { return s.clip > 0 ? std::clamp(v, -s.clip, s.clip) : v; };
  auto peep = [&](int64_t gate, int64_t j, double cell) {
    return q.p ? static_cast<double>(q.p[gate * H + j]) * cell : 0.0;
  };
  switch (s.cell) {
    case Cell::kRnn:
      for (int64_t j = 0; j < H; ++j) h[j] = act[0](clip(xw[j] + hr[j]));
      break;
    case Cell::kGru: {
      // Gates z (rows 0..H), r (H..2H), h (2H..3H).
      std::vector<double> z(H), rh(H), cand(H);
      for (int64_t j = 0; j < H; ++j) {
        z[j] = act[0](clip(xw[j] + hr[j]));
        rh[j] = act[0](clip(xw[H + j] + hr[H + j]));  // the reset gate r
      }
      for (int64_t j = 0; j < H; ++j) {
        double recur;
        if (s.linearBeforeReset) {
          recur = rh[j] * hr[2 * H + j];
        } else {
          // (r * h) R_h^T + Rb_h: the reset applies before the recurrence.
          recur = q.rb ? static_cast<double>(q.rb[2 * H + j]) : 0.0;
          for (int64_t k = 0; k < H; ++k) recur += rh[k] * h[k] * static_cast<double>(q.r[(2 * H + j) * H + k]);
        }
        cand[j] = act[1](clip(xw[2 * H + j] + recur));
      }
      for (int64_t j = 0; j < H; ++j) h[j] = (1 - z[j]) * cand[j] + z[j] * h[j];
      break;
    }
    case Cell::kLstm: {
      // Gates i (rows 0..H), o (H..2H), f (2H..3H), c (3H..4H); peepholes i, o, f.
      for (int64_t j = 0; j < H; ++j) {
        double in = act[0](clip(xw[j] + hr[j] + peep(0, j, c[j])));
        double forget = s.inputForget ? 1 - in : act[0](clip(xw[2 * H + j] + hr[2 * H + j] + peep(2, j, c[j])));
        double cand = act[1](clip(xw[3 * H + j] + hr[3 * H + j]));
        c[j] = forget * c[j] + in * cand;
        double out = act[0](clip(xw[H + j] + hr[H + j] + peep(1, j, c[j])));
        h[j] = out * act[2](c[j]);
      }
      break;
    }
  }
}

template <typename T>
Status runRecurrent(const Recurrent& s, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
  auto opt = [&](size_t i) { return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr; };
  const int64_t H = s.hidden, GH = gatesOf(s.cell) * H;
  const Tensor* lens = opt(4);
  const Tensor *h0 = opt(5), *c0 = opt(6), *bias = opt(3), *peep = opt(7);
  DType dt = in[0]->dtype();
  Tensor y = Tensor::zeros(dt, s.yShape), yh = Tensor::zeros(dt, s.stateShape), yc = Tensor::zeros(dt, s.stateShape);
  const T* x = in[0]->data<T>();
  std::vector<double> h(H), c(H), ws(2 * GH);
  for (int64_t d = 0; d < s.dirs; ++d) {
    DirParams<T> q;
    q.w = in[1]->data<T>() + d * GH * s.input;
    q.r = in[2]->data<T>() + d * GH * H;
    if (bias) q.wb = bias->data<T>() + d * 2 * GH, q.rb = q.wb + GH;
    if (peep) q.p = peep->data<T>() + d * 3 * H;
    bool reverse = s.reverseOnly || d == 1;
    const Activation* act = s.acts.data() + d * actsOf(s.cell);
    for (int64_t b = 0; b < s.batch; ++b) {
      int64_t len = lens ? static_cast<int64_t>(lens->getDouble(b)) : s.seq;
      if (len < 0 || len > s.seq)
        return invalidInput("sequence_lens[", b, "] = ", len, " is outside [0, ", s.seq, "]");
      int64_t so = s.stateAt(d, b);
      for (int64_t j = 0; j < H; ++j) {
        h[j] = h0 ? static_cast<double>(h0->data<T>()[so + j]) : 0.0;
        c[j] = c0 ? static_cast<double>(c0->data<T>()[so + j]) : 0.0;
      }
      for (int64_t k = 0; k < len; ++k) {
        int64_t t = reverse ? len - 1 - k : k;
        step<T>(s, q, act, x + s.xAt(t, b), h, c, ws);
        T* yp = y.mutableData<T>() + s.yAt(t, d, b);
        for (int64_t j = 0; j < H; ++j) yp[j] = static_cast<T>(h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        yh.mutableData<T>()[so + j] = static_cast<T>(h[j]);
        yc.mutableData<T>()[so + j] = static_cast<T>(c[j]);
      }
    }
  }
  std::vector<Tensor> all = {std::move(y), std::move(yh), std::move(yc)};
  for (size_t i = 0; i < s.outputs.size(); ++i) out.push_back(std::move(all[i]));
  return Status::OK();
}

template <Cell C>
Status computeRecurrent(const std::vector<const Tensor*>& in, const AttrMap& attrs, std::vector<Tensor>& out) {
  if (anyHalf(in)) return computeViaF32(&computeRecurrent<C>, in, attrs, out);
  ASSIGN_OR_RETURN(Recurrent s, recurrentShape(C, argsFromTensors(in, attrs)));
  return visitFloat(in[0]->dtype(), [&]<typename T>() { return runRecurrent<T>(s, in, out); });
}

}  // namespace

void registerRnnOps(OpRegistry& r) {
  r.add({"RNN", &inferRecurrent<Cell::kRnn>, &computeRecurrent<Cell::kRnn>});
  r.add({"GRU", &inferRecurrent<Cell::kGru>, &computeRecurrent<Cell::kGru>});
  r.add({"LSTM", &inferRecurrent<Cell::kLstm>, &computeRecurrent<Cell::kLstm>});
}

}  // namespace pcc
