// Type inference (the op schemas) of RNN, GRU and LSTM. Their reference
// kernels, and what the kernels compute, are runtime/ops/rnn.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "runtime/schema/infer_util.h"
#include "runtime/schema/families.h"
#include "runtime/schema/rnn.h"

namespace pcc {

namespace ops::rnn_schema {

int64_t gatesOf(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4; }

size_t actsOf(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 2 : 3; }

int64_t outputsOf(Cell c) { return c == Cell::kLstm ? 3 : 2; }

size_t maxInputsOf(Cell c) { return c == Cell::kLstm ? 8 : 6; }

StatusOr<std::vector<std::string>> stringsAttr(const AttrMap& attrs, const std::string& name,
                                               std::vector<std::string> dflt) {
  auto it = attrs.all().find(name);
  if (it == attrs.all().end()) return dflt;
  if (const auto* v = std::get_if<std::vector<std::string>>(&it->second)) return *v;
  if (const auto* s = std::get_if<std::string>(&it->second)) return std::vector<std::string>{*s};
  return invalidInput("attribute '", name, "' must be a list of strings");
}

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

}  // namespace ops::rnn_schema

namespace {
using namespace ops;
using namespace ops::rnn_schema;

template <Cell C>
StatusOr<std::vector<TensorType>> inferRecurrent(const InferArgs& args) {
  ASSIGN_OR_RETURN(Recurrent r, recurrentShape(C, args));
  return r.outputs;
}

}  // namespace

void registerRnnSchemas(SchemaRegistry& r) {
  r.add(OpKind::RNN, &inferRecurrent<Cell::kRnn>);
  r.add(OpKind::GRU, &inferRecurrent<Cell::kGru>);
  r.add(OpKind::LSTM, &inferRecurrent<Cell::kLstm>);
}

}  // namespace pcc
