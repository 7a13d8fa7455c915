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
// Their type inference is runtime/schema/rnn.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "runtime/ops/op_util.h"
#include "runtime/schema/rnn.h"

namespace pcc {
namespace {
using namespace ops;
using namespace ops::rnn_schema;

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
  r.add(OpKind::RNN, &computeRecurrent<Cell::kRnn>);
  r.add(OpKind::GRU, &computeRecurrent<Cell::kGru>);
  r.add(OpKind::LSTM, &computeRecurrent<Cell::kLstm>);
}

}  // namespace pcc
