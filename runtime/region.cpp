// Regions at run time:
//  1. prepare: each body becomes a BodyProgram (its buffers resolved to
//     slots, weights loaded once, kernels prepared through the backend,
//     nested REGIONs prepared recursively); the bodies' parameter and result
//     types are checked against the region's operands, so nothing is
//     inferred while the region runs.
//  2. run a body: bind the parameters, run the steps in order (each output a
//     fresh backend allocation), drop buffers at FREE, return the results.
//  3. run the region per ONNX: If the taken branch; Loop while the trip
//     count and the condition allow (the run's deadline ends a loop that
//     does not stop), carrying values and stacking scan outputs on axis 0;
//     Scan once per slice along each scan input's axis (reversed where asked),
//     stacking scan outputs along their axes (reversed where asked).
//  4. copy the results into the region's outputs.
#include "runtime/region.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/plan_convert.h"
#include "runtime/plan_regions.h"
#include "runtime/support/tensor_block.h"

namespace pcc {

/// One body of a region, prepared.
class BodyProgram {
 public:
  static StatusOr<std::unique_ptr<BodyProgram>> prepare(const plan::Body& b, const RegionEnv& env, const std::string& where);

  std::vector<TensorType> paramTypes() const { return typesOf(params_); }
  std::vector<TensorType> resultTypes() const { return typesOf(results_); }
  const std::string& where() const { return where_; }

  /// Runs the body on `params` (device tensors of the parameter types).
  /// \returns its results, or the first error naming the body's node.
  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& params) const;

 private:
  struct Step {
    const plan::Instruction* ins = nullptr;
    AttrMap attrs;
    std::vector<int> in, out;  // slots; -1 absent
    std::unique_ptr<DeviceKernel> kernel;
    std::unique_ptr<RegionRunner> region;
    std::string where;
  };
  std::vector<TensorType> typesOf(const std::vector<int>& slots) const {
    std::vector<TensorType> t;
    for (int s : slots) t.push_back(types_[s]);
    return t;
  }

  RegionEnv env_;
  std::string where_;
  std::vector<TensorType> types_;            // per slot
  std::vector<std::string> names_;           // per slot, for messages
  std::vector<Tensor> weights_;              // per slot: the device weight, or undefined
  std::vector<const Tensor*> hostWeights_;   // per slot: the mapped weight, or null
  std::vector<int> params_, results_;
  std::vector<std::unique_ptr<Step>> steps_;  // pointers: kernels keep &attrs
};

StatusOr<std::unique_ptr<BodyProgram>> BodyProgram::prepare(const plan::Body& b, const RegionEnv& env,
                                                           const std::string& where) {
  std::unique_ptr<BodyProgram> p(new BodyProgram());
  p->env_ = env;
  p->where_ = where;
  std::unordered_map<int, int> slotOf;
  for (const plan::Buffer& buf : b.buffers()) {
    slotOf[buf.id()] = static_cast<int>(p->types_.size());
    p->types_.push_back(fromDesc(buf.desc()));
    p->names_.push_back(strCat("buffer ", buf.id(), " '", buf.name(), "'"));
    Tensor w;
    const Tensor* host = nullptr;
    if (buf.weight() >= 0) {
      auto dev = env.weight(buf.weight(), &host);
      if (!dev.ok()) return dev.status().withContext(strCat(where, ": ", p->names_.back()));
      w = std::move(dev).value();
      if (w.type() != p->types_.back())
        return invalidInput(where, ": ", p->names_.back(), " is ", p->types_.back().str(), " but its weight is ", w.type().str());
    }
    p->weights_.push_back(std::move(w));
    p->hostWeights_.push_back(host);
  }
  auto slot = [&](int id) { return id < 0 ? -1 : slotOf.at(id); };  // ids checked by validatePlan
  for (int id : b.params()) p->params_.push_back(slot(id));
  for (int id : b.results()) p->results_.push_back(slot(id));
  for (const plan::Instruction& ins : b.instructions()) {
    auto s = std::make_unique<Step>();
    s->ins = &ins;
    s->where = strCat(where, ": node '", ins.node(), "' (", ins.op(), ")");
    for (int id : ins.inputs()) s->in.push_back(slot(id));
    for (int id : ins.outputs()) s->out.push_back(slot(id));
    auto attrs = fromAttrProtos(ins.attrs());
    if (!attrs.ok()) return attrs.status().withContext(s->where);
    s->attrs = std::move(attrs).value();
    if (ins.kind() != plan::Instruction::FREE) {
      std::vector<TensorType> ins_t, outs_t;
      for (int sl : s->in) ins_t.push_back(sl >= 0 ? p->types_[sl] : TensorType{});
      for (int sl : s->out) outs_t.push_back(sl >= 0 ? p->types_[sl] : TensorType{});
      if (ins.kind() == plan::Instruction::REGION) {
        ASSIGN_OR_RETURN(s->region, RegionRunner::prepare(ins, s->attrs, ins_t, outs_t, env, s->where));
      } else {
        KernelDesc k;
        k.op = ins.op();
        k.attrs = &s->attrs;
        k.where = s->where;
        k.inputs = ins_t;
        for (int sl : s->in) k.constInputs.push_back(sl >= 0 ? p->hostWeights_[sl] : nullptr);
        k.outputs = outs_t;
        for (int sl : s->out) k.outputNames.push_back(sl >= 0 ? p->names_[sl] : std::string("unused output"));
        ASSIGN_OR_RETURN(s->kernel, env.backend->prepareKernel(k));
      }
    }
    p->steps_.push_back(std::move(s));
  }
  return p;
}

StatusOr<std::vector<Tensor>> BodyProgram::run(const std::vector<Tensor>& params) const {
  std::vector<Tensor> bufs = weights_;  // views: copying them copies no data
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params[i].type() != types_[params_[i]])
      return internalError(where_, ": parameter ", i, " is ", params[i].type().str(), ", the body takes ",
                           types_[params_[i]].str());
    bufs[params_[i]] = params[i];
  }
  for (const auto& s : steps_) {
    if (s->ins->kind() == plan::Instruction::FREE) {
      for (int sl : s->in)
        if (sl >= 0) bufs[sl] = Tensor();
      continue;
    }
    std::vector<const Tensor*> args;
    for (int sl : s->in) {
      if (sl >= 0 && !bufs[sl].defined())
        return invalidInput(s->where, ": ", names_[sl], " is read before it is written");
      args.push_back(sl >= 0 ? &bufs[sl] : nullptr);
    }
    std::vector<Tensor> outs;
    for (int sl : s->out) {
      if (sl < 0) {
        outs.emplace_back();
        continue;
      }
      auto m = env_.backend->allocate(types_[sl].bytes());
      if (!m.ok()) return m.status().withContext(s->where);
      bufs[sl] = m->view(0, types_[sl]);
      outs.push_back(bufs[sl]);
    }
    Status st = s->region ? s->region->run(args, outs) : s->kernel->run(args, outs);
    if (!st.ok()) return s->region ? st : st.withContext(s->where);
  }
  std::vector<Tensor> results;
  for (int sl : results_) {
    if (!bufs[sl].defined()) return invalidInput(where_, ": result ", names_[sl], " was never written (or was freed)");
    results.push_back(bufs[sl]);
  }
  return results;
}

namespace {

bool isFlag(const TensorType& t, DType dtype) { return t.dtype == dtype && t.numel() == 1; }

/// \returns an error unless `got` equals `want`; `what` names the operand.
Status expectType(const TensorType& got, const TensorType& want, const std::string& where, const std::string& what) {
  if (got == want) return Status::OK();
  return invalidInput(where, ": ", what, " is ", got.str(), ", expected ", want.str());
}

/// Checks that body parameters [from, from + count) have the types of operands [opFrom, ...).
Status expectParams(const std::vector<TensorType>& params, size_t from, const std::vector<TensorType>& operands,
                    size_t opFrom, size_t count, const std::string& where) {
  for (size_t i = 0; i < count; ++i)
    RETURN_IF_ERROR(expectType(params[from + i], operands[opFrom + i], where, strCat("parameter ", from + i)));
  return Status::OK();
}

}  // namespace

RegionRunner::~RegionRunner() = default;

StatusOr<std::unique_ptr<RegionRunner>> RegionRunner::prepare(const plan::Instruction& ins, const AttrMap& attrs,
                                                              const std::vector<TensorType>& inputs,
                                                              const std::vector<TensorType>& outputs,
                                                              const RegionEnv& env, const std::string& where) {
  std::unique_ptr<RegionRunner> r(new RegionRunner());
  r->ins_ = &ins;
  r->env_ = env;
  r->where_ = where;
  r->outputs_ = outputs;
  ASSIGN_OR_RETURN(RegionLayout l, regionLayout(ins, where));
  r->op_ = l.op;
  r->captures_ = l.captures;
  r->carried_ = l.carried;
  r->scanInputs_ = l.scanInputs;
  r->scanOutputs_ = l.scanOutputs;
  for (const plan::Body& b : ins.bodies()) {
    ASSIGN_OR_RETURN(auto body, BodyProgram::prepare(b, env, strCat(where, ": body '", b.name(), "'")));
    r->bodies_.push_back(std::move(body));
  }
  size_t caps = static_cast<size_t>(l.captures), carried = static_cast<size_t>(l.carried);
  size_t nIn = inputs.size();
  switch (l.op) {
    case RegionLayout::Op::kIf: {
      if (!isFlag(inputs[0], DType::kBool))
        return invalidInput(where, ": the condition is ", inputs[0].str(), ", expected a one-element bool");
      for (const auto& b : r->bodies_) {
        RETURN_IF_ERROR(expectParams(b->paramTypes(), 0, inputs, 1, caps, b->where()));
        std::vector<TensorType> res = b->resultTypes();
        for (size_t i = 0; i < outputs.size(); ++i)
          if (outputs[i].dtype != DType::kUndefined)
            RETURN_IF_ERROR(expectType(res[i], outputs[i], b->where(), strCat("result ", i)));
      }
      break;
    }
    case RegionLayout::Op::kLoop: {
      if (inputs[0].dtype != DType::kUndefined && !isFlag(inputs[0], DType::kI64))
        return invalidInput(where, ": the trip count is ", inputs[0].str(), ", expected a one-element i64");
      if (inputs[1].dtype != DType::kUndefined && !isFlag(inputs[1], DType::kBool))
        return invalidInput(where, ": the condition is ", inputs[1].str(), ", expected a one-element bool");
      if (inputs[0].dtype == DType::kUndefined && inputs[1].dtype == DType::kUndefined)
        return invalidInput(where, ": a Loop without trip count and condition never ends");
      const BodyProgram& b = *r->bodies_[0];
      std::vector<TensorType> params = b.paramTypes(), res = b.resultTypes();
      if (!isFlag(params[0], DType::kI64) || !isFlag(params[1], DType::kBool) || !isFlag(res[0], DType::kBool))
        return invalidInput(b.where(), ": takes ", params[0].str(), ", ", params[1].str(), " and gives ", res[0].str(),
                            "; expected a one-element i64 iteration and bool conditions");
      RETURN_IF_ERROR(expectParams(params, 2, inputs, 2, nIn - 2, b.where()));
      for (size_t i = 0; i < carried; ++i) {
        RETURN_IF_ERROR(expectType(res[1 + i], params[2 + i], b.where(), strCat("loop-carried result ", i)));
        if (outputs[i].dtype != DType::kUndefined)
          RETURN_IF_ERROR(expectType(res[1 + i], outputs[i], b.where(), strCat("loop-carried result ", i)));
      }
      for (size_t k = 0; k < static_cast<size_t>(l.scanOutputs); ++k) {
        const TensorType& out = outputs[carried + k];
        if (out.dtype == DType::kUndefined) continue;
        TensorType want = res[1 + carried + k];
        want.shape.insert(want.shape.begin(), out.rank() > 0 ? out.shape[0] : 0);
        RETURN_IF_ERROR(expectType(out, want, where, strCat("scan output ", k)));
      }
      break;
    }
    case RegionLayout::Op::kScan: {
      size_t states = carried, m = static_cast<size_t>(l.scanInputs), outs = static_cast<size_t>(l.scanOutputs);
      std::vector<int64_t> inAxes = attrs.getInts("scan_input_axes", std::vector<int64_t>(m, 0));
      std::vector<int64_t> inDirs = attrs.getInts("scan_input_directions", std::vector<int64_t>(m, 0));
      std::vector<int64_t> outAxes = attrs.getInts("scan_output_axes", std::vector<int64_t>(outs, 0));
      std::vector<int64_t> outDirs = attrs.getInts("scan_output_directions", std::vector<int64_t>(outs, 0));
      if (inAxes.size() != m || inDirs.size() != m || outAxes.size() != outs || outDirs.size() != outs)
        return invalidInput(where, ": scan axes and directions do not have one entry per scan input (", m,
                            ") and scan output (", outs, ")");
      const BodyProgram& b = *r->bodies_[0];
      std::vector<TensorType> params = b.paramTypes(), res = b.resultTypes();
      for (size_t j = 0; j < m; ++j) {
        const TensorType& x = inputs[states + j];
        int64_t rank = x.rank(), ax = inAxes[j];
        if (ax < -rank || ax >= rank)
          return invalidInput(where, ": scan_input_axes[", j, "] = ", ax, " is out of range for ", x.str());
        if (ax < 0) ax += rank;
        int64_t extent = x.shape[static_cast<size_t>(ax)];
        if (j == 0) r->scanTrip_ = extent;
        if (extent != r->scanTrip_)
          return invalidInput(where, ": scan input ", j, " ", x.str(), " has ", extent, " iterations along axis ", ax,
                              ", scan input 0 has ", r->scanTrip_);
        TensorType slice = x;
        slice.shape.erase(slice.shape.begin() + ax);
        RETURN_IF_ERROR(expectType(params[states + j], slice, b.where(), strCat("parameter ", states + j)));
        r->inAxes_.push_back(ax);
        r->inReverse_.push_back(inDirs[j] != 0);
      }
      RETURN_IF_ERROR(expectParams(params, 0, inputs, 0, states, b.where()));
      RETURN_IF_ERROR(expectParams(params, states + m, inputs, states + m, caps, b.where()));
      for (size_t i = 0; i < states; ++i) {
        RETURN_IF_ERROR(expectType(res[i], inputs[i], b.where(), strCat("state result ", i)));
        if (outputs[i].dtype != DType::kUndefined)
          RETURN_IF_ERROR(expectType(res[i], outputs[i], b.where(), strCat("state result ", i)));
      }
      for (size_t k = 0; k < outs; ++k) {
        TensorType want = res[states + k];
        int64_t rank = want.rank() + 1, ax = outAxes[k];
        if (ax < -rank || ax >= rank)
          return invalidInput(where, ": scan_output_axes[", k, "] = ", ax, " is out of range for rank ", rank);
        if (ax < 0) ax += rank;
        want.shape.insert(want.shape.begin() + ax, r->scanTrip_);
        if (outputs[states + k].dtype != DType::kUndefined)
          RETURN_IF_ERROR(expectType(outputs[states + k], want, where, strCat("scan output ", k)));
        r->outAxes_.push_back(ax);
        r->outReverse_.push_back(outDirs[k] != 0);
      }
      break;
    }
  }
  return r;
}

namespace {

/// \returns element 0 of device tensor `t` as an integer.
StatusOr<int64_t> readInt(Backend& b, const Tensor& t) {
  ASSIGN_OR_RETURN(Tensor host, b.toHost(t));
  return host.getInt(0);
}

/// \returns a device tensor of type `t` (one element) holding `v`.
StatusOr<Tensor> deviceFlag(Backend& b, const TensorType& t, int64_t v) {
  Tensor x = Tensor::zeros(t);
  x.setInt(0, v);
  return b.toDevice(x);
}

/// Stacks host `parts` along `axis` and copies the result into device tensor `out`.
Status stackInto(Backend& b, const std::vector<Tensor>& parts, const TensorType& part, size_t axis, const Tensor& out) {
  ASSIGN_OR_RETURN(Tensor dev, b.toDevice(stackAlong(parts, part, axis)));
  return b.copy(dev, out);
}

}  // namespace

Status RegionRunner::run(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs) {
  switch (op_) {
    case RegionLayout::Op::kIf: return runIf(args, outs);
    case RegionLayout::Op::kLoop: return runLoop(args, outs);
    case RegionLayout::Op::kScan: return runScan(args, outs);
  }
  return internalError(where_, ": unknown region op");
}

Status RegionRunner::store(const std::vector<Tensor>& results, const std::vector<Tensor>& outs) {
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].defined()) RETURN_IF_ERROR(env_.backend->copy(results[i], outs[i]).withContext(where_));
  return Status::OK();
}

Status RegionRunner::runIf(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs) {
  Backend& b = *env_.backend;
  auto cond = readInt(b, *args[0]);
  if (!cond.ok()) return cond.status().withContext(where_);
  std::vector<Tensor> caps;
  for (size_t i = 1; i < args.size(); ++i) caps.push_back(*args[i]);
  ASSIGN_OR_RETURN(std::vector<Tensor> results, bodies_[*cond != 0 ? 0 : 1]->run(caps));
  return store(results, outs);
}

Status RegionRunner::runLoop(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs) {
  Backend& b = *env_.backend;
  const BodyProgram& body = *bodies_[0];
  std::vector<TensorType> params = body.paramTypes(), resTypes = body.resultTypes();
  size_t carried = static_cast<size_t>(carried_), scans = static_cast<size_t>(scanOutputs_);
  int64_t trip = -1;  // -1: no trip count
  bool cond = true;
  if (args[0]) {
    auto m = readInt(b, *args[0]);
    if (!m.ok()) return m.status().withContext(where_);
    trip = std::max<int64_t>(0, *m);
  }
  if (args[1]) {
    auto c = readInt(b, *args[1]);
    if (!c.ok()) return c.status().withContext(where_);
    cond = *c != 0;
  }
  std::vector<Tensor> state;
  for (size_t i = 0; i < carried; ++i) state.push_back(*args[2 + i]);
  std::vector<std::vector<Tensor>> parts(scans);
  int64_t it = 0;
  for (; (trip < 0 || it < trip) && cond; ++it) {
    if (env_.limit && env_.limit->seconds > 0 && std::chrono::steady_clock::now() > env_.limit->deadline)
      return environmentError(where_, ": still looping after ", it, " iterations when the run's time limit of ",
                              env_.limit->seconds, " s (--timeout) passed; ",
                              trip < 0 ? std::string("it has no trip count and its condition never turned false")
                                       : strCat("its trip count is ", trip));
    std::vector<Tensor> in;
    ASSIGN_OR_RETURN(Tensor iter, deviceFlag(b, params[0], it));
    ASSIGN_OR_RETURN(Tensor go, deviceFlag(b, params[1], 1));
    in.push_back(std::move(iter));
    in.push_back(std::move(go));
    for (Tensor& t : state) in.push_back(t);
    for (size_t i = 2 + carried; i < args.size(); ++i) in.push_back(*args[i]);
    ASSIGN_OR_RETURN(std::vector<Tensor> res, body.run(in));
    auto c = readInt(b, res[0]);
    if (!c.ok()) return c.status().withContext(where_);
    cond = *c != 0;
    state.assign(res.begin() + 1, res.begin() + 1 + static_cast<std::ptrdiff_t>(carried));
    for (size_t k = 0; k < scans; ++k) {
      auto host = b.toHost(res[1 + carried + k]);
      if (!host.ok()) return host.status().withContext(where_);
      parts[k].push_back(std::move(host).value());
    }
  }
  for (size_t i = 0; i < carried; ++i)
    if (outs[i].defined()) RETURN_IF_ERROR(b.copy(state[i], outs[i]).withContext(where_));
  for (size_t k = 0; k < scans; ++k) {
    const Tensor& out = outs[carried + k];
    if (!out.defined()) continue;
    if (static_cast<int64_t>(parts[k].size()) != out.shape()[0])
      return invalidInput(where_, ": ran ", parts[k].size(), " iterations but scan output ", k, " is planned as ",
                          out.type().str(), " (", out.shape()[0], " iterations)");
    RETURN_IF_ERROR(stackInto(b, parts[k], resTypes[1 + carried + k], 0, out).withContext(where_));
  }
  return Status::OK();
}

Status RegionRunner::runScan(const std::vector<const Tensor*>& args, const std::vector<Tensor>& outs) {
  Backend& b = *env_.backend;
  const BodyProgram& body = *bodies_[0];
  std::vector<TensorType> resTypes = body.resultTypes();
  size_t states = static_cast<size_t>(carried_), m = static_cast<size_t>(scanInputs_);
  size_t scans = static_cast<size_t>(scanOutputs_);
  std::vector<Tensor> xs;
  for (size_t j = 0; j < m; ++j) {
    auto host = b.toHost(*args[states + j]);
    if (!host.ok()) return host.status().withContext(where_);
    xs.push_back(std::move(host).value());
  }
  std::vector<Tensor> state;
  for (size_t i = 0; i < states; ++i) state.push_back(*args[i]);
  std::vector<std::vector<Tensor>> parts(scans);
  for (int64_t t = 0; t < scanTrip_; ++t) {
    std::vector<Tensor> in = state;
    for (size_t j = 0; j < m; ++j) {
      auto slice = b.toDevice(takeAlong(xs[j], static_cast<size_t>(inAxes_[j]), inReverse_[j] ? scanTrip_ - 1 - t : t));
      if (!slice.ok()) return slice.status().withContext(where_);
      in.push_back(std::move(slice).value());
    }
    for (size_t i = states + m; i < args.size(); ++i) in.push_back(*args[i]);
    ASSIGN_OR_RETURN(std::vector<Tensor> res, body.run(in));
    state.assign(res.begin(), res.begin() + static_cast<std::ptrdiff_t>(states));
    for (size_t k = 0; k < scans; ++k) {
      auto host = b.toHost(res[states + k]);
      if (!host.ok()) return host.status().withContext(where_);
      parts[k].push_back(std::move(host).value());
    }
  }
  for (size_t i = 0; i < states; ++i)
    if (outs[i].defined()) RETURN_IF_ERROR(b.copy(state[i], outs[i]).withContext(where_));
  for (size_t k = 0; k < scans; ++k) {
    if (!outs[states + k].defined()) continue;
    if (outReverse_[k]) std::reverse(parts[k].begin(), parts[k].end());
    RETURN_IF_ERROR(
        stackInto(b, parts[k], resTypes[states + k], static_cast<size_t>(outAxes_[k]), outs[states + k]).withContext(where_));
  }
  return Status::OK();
}

}  // namespace pcc
