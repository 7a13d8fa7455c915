#include "runtime/executor.h"

#include <chrono>
#include <unordered_map>

#include "runtime/cpu/fast_kernels.h"
#include "runtime/plan_convert.h"
#include "runtime/tensor_slice.h"

namespace pcc {

namespace {

const char* kindName(plan::Instruction::Kind k) {
  switch (k) {
    case plan::Instruction::KERNEL: return "KERNEL";
    case plan::Instruction::ALL_REDUCE: return "ALL_REDUCE";
    case plan::Instruction::ALL_GATHER: return "ALL_GATHER";
    case plan::Instruction::REDUCE_SCATTER: return "REDUCE_SCATTER";
    case plan::Instruction::SEND: return "SEND";
    case plan::Instruction::RECV: return "RECV";
    case plan::Instruction::FREE: return "FREE";
    default: return "UNKNOWN";
  }
}

/// \returns the type of the slice an IoBinding selects from a tensor of type `full`.
StatusOr<TensorType> boundType(const plan::IoBinding& b, const TensorType& full) {
  if (b.split_dim() == -1) return full;
  if (b.split_dim() < 0 || b.split_dim() >= full.rank())
    return invalidInput("split dim ", b.split_dim(), " is out of range for ", full.str());
  if (b.offset() < 0 || b.length() < 0 || b.offset() + b.length() > full.shape[b.split_dim()])
    return invalidInput("slice [", b.offset(), ", ", b.offset() + b.length(), ") along dim ",
                        b.split_dim(), " is outside ", full.str());
  TensorType t = full;
  t.shape[b.split_dim()] = b.length();
  return t;
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> Executor::create(const LoadedPlan& p,
                                                     const plan::RankProgram& prog,
                                                     bool verifyChecksums, bool fastKernels) {
  std::unique_ptr<Executor> e(new Executor(p, prog));
  RETURN_IF_ERROR(e->prepare(verifyChecksums, fastKernels));
  return e;
}

Status Executor::prepare(bool verifyChecksums, bool fastKernels) {
  const std::string rankName = strCat("rank ", prog_.rank());
  std::unordered_map<int, int> slotOf;
  for (const plan::Buffer& b : prog_.buffers()) {
    if (!slotOf.emplace(b.id(), static_cast<int>(buffers_.size())).second)
      return invalidInput(rankName, ": buffer id ", b.id(), " is defined twice");
    TensorType t = fromDesc(b.desc());
    if (t.dtype == DType::kUndefined)
      return invalidInput(rankName, ": buffer ", b.id(), " '", b.name(), "' has unknown dtype code ",
                          b.desc().dtype());
    buffers_.push_back(&b);
    types_.push_back(t);
    Tensor w;
    if (b.weight() >= 0) {
      ASSIGN_OR_RETURN(w, loadWeight(plan_, prog_, b.weight(), verifyChecksums));
      if (w.type() != t)
        return invalidInput(rankName, ": buffer ", b.id(), " '", b.name(), "' is ", t.str(),
                            " but its weight '", prog_.weights(b.weight()).name(), "' is ",
                            w.type().str());
    }
    weights_.push_back(std::move(w));
  }
  auto resolve = [&](int id, bool allowAbsent, const std::string& ctx) -> StatusOr<int> {
    if (id == -1 && allowAbsent) return -1;
    auto it = slotOf.find(id);
    if (it == slotOf.end()) return invalidInput(ctx, ": no buffer with id ", id);
    return it->second;
  };

  for (int i = 0; i < prog_.instructions_size(); ++i) {
    const plan::Instruction& ins = prog_.instructions(i);
    Step s{&ins, i, {}, {}, {}, nullptr};
    std::string ctx = where(s);
    bool kernel = ins.kind() == plan::Instruction::KERNEL;
    for (int id : ins.inputs()) {
      ASSIGN_OR_RETURN(int slot, resolve(id, kernel, ctx));
      s.in.push_back(slot);
    }
    for (int id : ins.outputs()) {
      ASSIGN_OR_RETURN(int slot, resolve(id, kernel, ctx));
      s.out.push_back(slot);
    }
    size_t needIn = 0, needOut = 0;
    switch (ins.kind()) {
      case plan::Instruction::KERNEL:
        if (!findOpSchema(ins.op()))
          return unsupported(ctx, ": op '", ins.op(), "' has no CPU kernel");
        break;
      case plan::Instruction::ALL_REDUCE:
      case plan::Instruction::ALL_GATHER:
      case plan::Instruction::REDUCE_SCATTER: needIn = needOut = 1; break;
      case plan::Instruction::SEND: needIn = 1; break;
      case plan::Instruction::RECV: needOut = 1; break;
      case plan::Instruction::FREE: break;
      default: return invalidInput(ctx, ": unknown instruction kind ", static_cast<int>(ins.kind()));
    }
    if (!kernel && ins.kind() != plan::Instruction::FREE &&
        (s.in.size() != needIn || s.out.size() != needOut))
      return invalidInput(ctx, ": takes ", needIn, " input(s) and ", needOut,
                          " output(s), the plan gives ", s.in.size(), " and ", s.out.size());
    auto parsed = fromAttrProtos(ins.attrs());
    if (!parsed.ok()) return parsed.status().withContext(ctx);
    s.attrs = std::move(parsed).value();
    if (kernel && fastKernels) {
      // Plan weights hold the same data on every run: a kernel may keep a
      // reordered copy of them.
      std::vector<bool> constant;
      for (int slot : s.in) constant.push_back(slot >= 0 && weights_[slot].defined());
      s.fast = cpu::makeFastKernel(ins.op(), s.attrs, constant);
    }
    steps_.push_back(std::move(s));
  }

  for (const plan::IoBinding& b : prog_.inputs()) {
    std::string ctx = strCat(rankName, ": input binding of input ", b.index());
    if (b.index() < 0 || b.index() >= plan_.plan.inputs_size())
      return invalidInput(ctx, ": the plan has ", plan_.plan.inputs_size(), " inputs");
    ASSIGN_OR_RETURN(int slot, resolve(b.buffer(), false, ctx));
    auto t = boundType(b, fromDesc(plan_.plan.inputs(b.index()).desc()));
    if (!t.ok()) return t.status().withContext(ctx);
    if (*t != types_[slot])
      return invalidInput(ctx, ": the slice is ", t->str(), " but buffer ", b.buffer(), " is ",
                          types_[slot].str());
    inputSlots_.push_back(slot);
  }
  for (const plan::IoBinding& b : prog_.outputs()) {
    std::string ctx = strCat(rankName, ": output binding of output ", b.index());
    if (b.index() < 0 || b.index() >= plan_.plan.outputs_size())
      return invalidInput(ctx, ": the plan has ", plan_.plan.outputs_size(), " outputs");
    ASSIGN_OR_RETURN(int slot, resolve(b.buffer(), false, ctx));
    auto t = boundType(b, fromDesc(plan_.plan.outputs(b.index()).desc()));
    if (!t.ok()) return t.status().withContext(ctx);
    if (*t != types_[slot])
      return invalidInput(ctx, ": the slice is ", t->str(), " but buffer ", b.buffer(), " is ",
                          types_[slot].str());
    outputSlots_.push_back(slot);
  }
  return Status::OK();
}

std::string Executor::where(const Step& s) const {
  const plan::Instruction& ins = *s.ins;
  std::string r = strCat("rank ", prog_.rank(), ": ");
  if (!ins.node().empty()) {
    r += strCat("node '", ins.node(), "'");
  } else {
    r += strCat("instruction #", s.index);
  }
  return r + strCat(" (", ins.kind() == plan::Instruction::KERNEL ? ins.op() : kindName(ins.kind()), ")");
}

Status Executor::checkType(const Step& s, int slot, const Tensor& t, const char* what) const {
  if (t.type() == types_[slot]) return Status::OK();
  return invalidInput(where(s), ": ", what, " is ", t.type().str(), " but the plan's buffer ",
                      buffers_[slot]->id(), " '", buffers_[slot]->name(), "' is ",
                      types_[slot].str());
}

Status Executor::run(const std::vector<Tensor>& inputs, RankComms* comms,
                     std::vector<OutputPiece>* outputs) {
  std::vector<Tensor> bufs = weights_;  // views: copying them copies no data
  for (size_t i = 0; i < inputSlots_.size(); ++i) {
    const plan::IoBinding& b = prog_.inputs(static_cast<int>(i));
    if (b.index() >= static_cast<int>(inputs.size()))
      return invalidInput("rank ", prog_.rank(), ": model input ", b.index(), " was not given");
    const Tensor& full = inputs[b.index()];
    if (b.split_dim() == -1) {
      bufs[inputSlots_[i]] = full;
    } else {
      auto sl = sliceAlong(full, b.split_dim(), b.offset(), b.length());
      if (!sl.ok()) return sl.status().withContext(strCat("rank ", prog_.rank(), ": input ", b.index()));
      bufs[inputSlots_[i]] = std::move(sl).value();
    }
    if (bufs[inputSlots_[i]].type() != types_[inputSlots_[i]])
      return invalidInput("rank ", prog_.rank(), ": input ", b.index(), " slice is ",
                          bufs[inputSlots_[i]].type().str(), ", the plan expects ",
                          types_[inputSlots_[i]].str());
  }
  for (const Step& s : steps_) RETURN_IF_ERROR(execute(s, bufs, comms));
  outputs->clear();
  for (size_t i = 0; i < outputSlots_.size(); ++i) {
    const plan::IoBinding& b = prog_.outputs(static_cast<int>(i));
    const Tensor& t = bufs[outputSlots_[i]];
    if (!t.defined())
      return invalidInput("rank ", prog_.rank(), ": output ", b.index(), " buffer ", b.buffer(),
                          " was never written (or was freed)");
    outputs->push_back({b.index(), b.split_dim(), b.offset(), b.length(), t});
  }
  return Status::OK();
}

Status Executor::execute(const Step& s, std::vector<Tensor>& bufs, RankComms* comms) {
  const plan::Instruction& ins = *s.ins;
  auto input = [&](size_t k) -> StatusOr<const Tensor*> {
    int slot = s.in[k];
    if (slot < 0) return static_cast<const Tensor*>(nullptr);
    if (!bufs[slot].defined())
      return invalidInput(where(s), ": input ", k, " (buffer ", buffers_[slot]->id(), " '",
                          buffers_[slot]->name(), "') is read before it is written");
    return &bufs[slot];
  };
  auto group = [&]() -> StatusOr<Communicator*> {
    if (!comms) return invalidInput(where(s), ": collective in a program run without communicators");
    if (ins.group() < 0 || ins.group() >= static_cast<int>(comms->groups.size()))
      return invalidInput(where(s), ": group ", ins.group(), " does not exist (the plan has ",
                          comms->groups.size(), ")");
    Communicator* c = comms->groups[ins.group()].get();
    if (!c) return invalidInput(where(s), ": rank ", prog_.rank(), " is not in group ", ins.group());
    return c;
  };
  auto world = [&]() -> StatusOr<Communicator*> {
    if (!comms || !comms->world)
      return invalidInput(where(s), ": send/recv in a program run without a world communicator");
    return comms->world.get();
  };

  switch (ins.kind()) {
    case plan::Instruction::KERNEL: {
      std::vector<const Tensor*> args;
      for (size_t k = 0; k < s.in.size(); ++k) {
        ASSIGN_OR_RETURN(const Tensor* t, input(k));
        args.push_back(t);
      }
      auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      auto res = runOp(ins.op(), args, s.attrs, s.fast.get());
      if (profiling_) {
        OpTime& t = profile_[ins.op()];
        t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++t.calls;
      }
      if (!res.ok()) return res.status().withContext(where(s));
      std::vector<Tensor>& outs = *res;
      if (outs.size() < s.out.size())
        return internalError(where(s), ": the kernel made ", outs.size(), " outputs, the plan names ",
                             s.out.size());
      for (size_t k = 0; k < s.out.size(); ++k) {
        if (s.out[k] < 0) continue;
        RETURN_IF_ERROR(checkType(s, s.out[k], outs[k], strCat("output ", k).c_str()));
        bufs[s.out[k]] = std::move(outs[k]);
      }
      return Status::OK();
    }
    case plan::Instruction::ALL_REDUCE: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      RETURN_IF_ERROR(checkType(s, s.out[0], *in, "the input"));
      Tensor t = in->clone();  // inputs may be shared views (weights, model inputs)
      RETURN_IF_ERROR(c->allReduceSum(t).withContext(where(s)));
      bufs[s.out[0]] = std::move(t);
      return Status::OK();
    }
    case plan::Instruction::ALL_GATHER: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      Tensor out;
      RETURN_IF_ERROR(c->allGather(*in, ins.dim(), &out).withContext(where(s)));
      RETURN_IF_ERROR(checkType(s, s.out[0], out, "the gathered tensor"));
      bufs[s.out[0]] = std::move(out);
      return Status::OK();
    }
    case plan::Instruction::REDUCE_SCATTER: {
      ASSIGN_OR_RETURN(Communicator * c, group());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      Tensor out = Tensor::zeros(types_[s.out[0]]);
      RETURN_IF_ERROR(c->reduceScatterSum(*in, ins.dim(), &out).withContext(where(s)));
      RETURN_IF_ERROR(checkType(s, s.out[0], out, "the scattered slice"));
      bufs[s.out[0]] = std::move(out);
      return Status::OK();
    }
    case plan::Instruction::SEND: {
      ASSIGN_OR_RETURN(Communicator * c, world());
      ASSIGN_OR_RETURN(const Tensor* in, input(0));
      return c->send(*in, ins.peer()).withContext(where(s));
    }
    case plan::Instruction::RECV: {
      ASSIGN_OR_RETURN(Communicator * c, world());
      Tensor t = Tensor::zeros(types_[s.out[0]]);
      RETURN_IF_ERROR(c->recv(&t, ins.peer()).withContext(where(s)));
      bufs[s.out[0]] = std::move(t);
      return Status::OK();
    }
    case plan::Instruction::FREE:
      for (int slot : s.in)
        if (slot >= 0) bufs[slot] = Tensor();
      return Status::OK();
    default:
      return invalidInput(where(s), ": unknown instruction kind");
  }
}

}  // namespace pcc
