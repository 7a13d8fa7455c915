// OpKernel: preparation (schema lookup, inference once) and the two ways of
// running (allocating, or into planned outputs). See kernel_call.h.
#include "runtime/ops/kernel_call.h"

#include <array>
#include <atomic>
#include <cstring>

#include "runtime/ops/op_util.h"

namespace pcc {

std::vector<const Tensor*> OpKernel::normalize(const std::vector<const Tensor*>& inputs) {
  std::vector<const Tensor*> r;
  r.reserve(inputs.size());
  for (const Tensor* t : inputs) r.push_back(t && t->defined() ? t : nullptr);
  while (!r.empty() && !r.back()) r.pop_back();
  return r;
}

namespace {
/// \returns the error for an op name that is not in the op table, in the form
/// of every kernel error: "<where>: <op> with inputs (<types>): ...".
Status unknownOp(std::string_view op, const std::vector<TensorType>& inputs, std::string_view where) {
  std::string d = strCat(op, " with inputs (", ops::typesToString(inputs), ")");
  return unsupported(where.empty() ? d : strCat(where, ": ", d), ": no kernel for this op (not in the op table)");
}
}  // namespace

std::vector<ProviderKernel> makeProviderKernels(OpKind op, const AttrMap& attrs,
                                                const std::vector<bool>& constantInputs,
                                                const std::vector<Provider>& preference, bool inPlace) {
  std::vector<ProviderKernel> r;
  for (Provider p : preference) {
    if (p == Provider::kReference) break;  // it takes every call: later providers never would
    const KernelEntry* e = kernelRegistry().find(op, p);
    if (!e || (inPlace && !e->inPlace)) continue;
    std::unique_ptr<KernelOverride> k = e->make(attrs, constantInputs);
    if (k) r.push_back({p, std::shared_ptr<KernelOverride>(std::move(k))});
  }
  return r;
}

std::string OpKernel::describe(const std::vector<const Tensor*>& inputs) const {
  std::vector<TensorType> ts;
  for (const Tensor* t : inputs) ts.push_back(t ? t->type() : TensorType{});
  std::string d = strCat(opName(op_), " with inputs (", ops::typesToString(ts), ")");
  return where_.empty() ? d : strCat(where_, ": ", d);
}

Status OpKernel::fail(const Status& st, const std::vector<const Tensor*>& inputs) const {
  return st.withContext(describe(inputs));
}

StatusOr<OpKernel> OpKernel::prepare(std::string_view op, const AttrMap& attrs, std::vector<TensorType> inputs,
                                     std::vector<const Tensor*> known, std::string where,
                                     std::vector<ProviderKernel> providers, bool reference) {
  std::optional<OpKind> kind = opFromName(op);
  if (!kind) return unknownOp(op, inputs, where);
  return prepare(*kind, attrs, std::move(inputs), std::move(known), std::move(where), std::move(providers),
                 reference);
}

StatusOr<OpKernel> OpKernel::prepare(OpKind op, const AttrMap& attrs, std::vector<TensorType> inputs,
                                     std::vector<const Tensor*> known, std::string where,
                                     std::vector<ProviderKernel> providers, bool reference) {
  RETURN_IF_ERROR(kernelTableStatus());
  RETURN_IF_ERROR(schemaTableStatus());
  OpKernel k;
  k.op_ = op;
  k.where_ = std::move(where);
  k.attrs_ = &attrs;
  k.providers_ = std::move(providers);
  InferArgs args;
  args.attrs = &attrs;
  args.inputs = std::move(inputs);
  while (!args.inputs.empty() && args.inputs.back().dtype == DType::kUndefined) args.inputs.pop_back();
  args.constInputs = std::move(known);
  args.constInputs.resize(args.inputs.size(), nullptr);
  auto describe = [&] {
    std::string d = strCat(opName(op), " with inputs (", ops::typesToString(args.inputs), ")");
    return k.where_.empty() ? d : strCat(k.where_, ": ", d);
  };
  k.infer_ = inferFn(op);
  if (reference) k.reference_ = referenceKernel(op);
  if (!k.infer_ || (!k.reference_ && k.providers_.empty()))
    return unsupported(describe(), ": no kernel for this op");
  auto inferred = k.infer_(args);
  if (inferred.ok()) {
    k.inferred_ = std::move(inferred).value();
    return k;
  }
  // While some input's value is unknown (a computed input, in the runtime)
  // the refusal may be for want of that value: infer again on every run, when
  // it is known (a plain type error then surfaces at the first run). With
  // every value known, the refusal is final.
  bool unknownOperand = false;
  for (size_t i = 0; i < args.inputs.size(); ++i) unknownOperand |= args.has(i) && !args.constInputs[i];
  if (!unknownOperand) return inferred.status().withContext(describe());
  k.inferAtRun_ = true;
  return k;
}

Status OpKernel::checkDeclared(const std::vector<TensorType>& declared, StatusCode code,
                               const std::function<std::string(size_t)>& name) const {
  if (inferAtRun_) return Status::OK();
  auto error = [&](const std::string& msg) { return Status(code, where_.empty() ? msg : strCat(where_, ": ", msg)); };
  if (declared.size() > inferred_.size())
    return error(strCat("the op makes ", inferred_.size(), " outputs, ", declared.size(), " are declared"));
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i].dtype != DType::kUndefined && declared[i] != inferred_[i])
      return error(strCat("output ", i, " is ", inferred_[i].str(), " but ", name(i), " is ", declared[i].str()));
  return Status::OK();
}

StatusOr<std::vector<TensorType>> OpKernel::typesFor(const std::vector<const Tensor*>& inputs) const {
  if (!inferAtRun_) return inferred_;
  auto inferred = infer_(ops::argsFromTensors(inputs, *attrs_));
  if (!inferred.ok()) return fail(inferred.status(), inputs);
  return inferred;
}

StatusOr<std::vector<Tensor>> OpKernel::run(const std::vector<const Tensor*>& given) {
  std::vector<const Tensor*> inputs = normalize(given);
  ASSIGN_OR_RETURN(std::vector<TensorType> types, typesFor(inputs));
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(dispatch(inputs, {}, outputs));
  if (outputs.size() != types.size())
    return fail(internalError("kernel produced ", outputs.size(), " outputs, inference ", types.size()), inputs);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].type() != types[i])
      return fail(internalError("kernel output ", i, " is ", outputs[i].type().str(), " but inference says ",
                                types[i].str()),
                  inputs);
  return outputs;
}

Status OpKernel::dispatch(const std::vector<const Tensor*>& inputs, const std::vector<Tensor>& planned,
                          std::vector<Tensor>& got) {
  for (const ProviderKernel& p : providers_) {
    got = planned;  // views: a provider writes into the planned memory
    auto ran = p.kernel->run(inputs, got);
    if (!ran.ok()) return fail(ran.status(), inputs);
    if (*ran) {
      lastProvider_ = p.provider;
      return Status::OK();
    }
  }
  // A reference kernel that writes its outputs gets the planned ones; any
  // other starts from nothing and allocates (runInto then copies).
  if (reference_ && reference_->writesOutputs) got = planned;
  else got.clear();
  if (!reference_)
    return fail(unsupported("no kernel of the preferred providers takes this call"), inputs);
  Status st = reference_->compute(inputs, *attrs_, got);
  if (!st.ok()) return fail(st, inputs);
  lastProvider_ = Provider::kReference;
  return Status::OK();
}

bool OpKernel::isNormal(const std::vector<const Tensor*>& inputs) {
  if (!inputs.empty() && !inputs.back()) return false;
  for (const Tensor* t : inputs)
    if (t && !t->defined()) return false;
  return true;
}

Status OpKernel::runInto(const std::vector<const Tensor*>& given, const std::vector<Tensor>& outputs) {
  // The per-instruction path of the runtime: no copy of the argument list
  // unless it needs normalizing.
  bool normal = isNormal(given);
  std::vector<const Tensor*> normalized;
  if (!normal) normalized = normalize(given);
  const std::vector<const Tensor*>& inputs = normal ? given : normalized;
  if (inferAtRun_) {
    ASSIGN_OR_RETURN(std::vector<TensorType> types, typesFor(inputs));
    for (size_t k = 0; k < outputs.size() && k < types.size(); ++k)
      if (outputs[k].defined() && types[k] != outputs[k].type())
        return fail(invalidInput("output ", k, " is ", types[k].str(), " but the caller planned ",
                                 outputs[k].type().str()),
                    inputs);
  }
  std::vector<Tensor>& got = got_;
  struct Empty {  // every return below leaves got_ holding no tensor (their shapes' storage kept)
    std::vector<Tensor>& v;
    ~Empty() {
      for (Tensor& t : v) t.reset();
    }
  } empty{got};
  RETURN_IF_ERROR(dispatch(inputs, outputs, got));
  lastCopied_ = false;
  if (got.size() < outputs.size())
    return fail(internalError("the kernel made ", got.size(), " outputs, the caller planned ", outputs.size()), inputs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!outputs[k].defined()) continue;  // a result the caller drops
    if (got[k].dtype() != outputs[k].dtype() || got[k].shape() != outputs[k].shape())
      return fail(internalError("kernel output ", k, " is ", got[k].type().str(), " but the caller planned ",
                                outputs[k].type().str()),
                  inputs);
    Tensor dst = outputs[k];
    if (got[k].raw() != dst.raw() && dst.nbytes()) {
      // The fallback: a kernel that allocated its result (see ComputeFn).
      std::memmove(dst.mutableData(), got[k].raw(), dst.nbytes());
      lastCopied_ = true;
      copyCounters()[static_cast<size_t>(op_)].fetch_add(1, std::memory_order_relaxed);
    }
  }
  return Status::OK();
}

std::array<std::atomic<uint64_t>, kNumOpKinds>& OpKernel::copyCounters() {
  static std::array<std::atomic<uint64_t>, kNumOpKinds> counters{};
  return counters;
}

uint64_t OpKernel::outputCopies(OpKind op) {
  return copyCounters()[static_cast<size_t>(op)].load(std::memory_order_relaxed);
}

StatusOr<std::vector<Tensor>> runKernel(std::string_view op, const std::vector<const Tensor*>& inputs,
                                        const AttrMap& attrs, std::string_view where, KernelOverride* fast,
                                        Provider fastProvider) {
  std::optional<OpKind> kind = opFromName(op);
  if (!kind) {
    std::vector<TensorType> types;
    for (const Tensor* t : inputs) types.push_back(t && t->defined() ? t->type() : TensorType{});
    return unknownOp(op, types, where);
  }
  return runKernel(*kind, inputs, attrs, where, fast, fastProvider);
}

StatusOr<std::vector<Tensor>> runKernel(OpKind op, const std::vector<const Tensor*>& inputs, const AttrMap& attrs,
                                        std::string_view where, KernelOverride* fast, Provider fastProvider) {
  std::vector<TensorType> types;
  std::vector<const Tensor*> known;
  for (const Tensor* t : inputs) {
    bool present = t && t->defined();
    types.push_back(present ? t->type() : TensorType{});
    known.push_back(present ? t : nullptr);
  }
  std::vector<ProviderKernel> providers;
  if (fast) providers.push_back({fastProvider, std::shared_ptr<KernelOverride>(fast, [](KernelOverride*) {})});
  ASSIGN_OR_RETURN(OpKernel k, OpKernel::prepare(op, attrs, std::move(types), std::move(known), std::string(where),
                                                 std::move(providers)));
  return k.run(inputs);
}

}  // namespace pcc
