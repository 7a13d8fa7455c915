#include "runtime/plan_convert.h"

#include <cstring>

namespace pcc {

plan::TensorDesc toDesc(const TensorType& t) {
  plan::TensorDesc d;
  d.set_dtype(static_cast<int32_t>(t.dtype));
  for (int64_t s : t.shape) d.add_shape(s);
  return d;
}

TensorType fromDesc(const plan::TensorDesc& d) {
  TensorType t;
  t.dtype = dtypeFromOnnx(d.dtype()).value_or(DType::kUndefined);
  t.shape.assign(d.shape().begin(), d.shape().end());
  return t;
}

void toAttrProto(const std::string& name, const Attribute& a, plan::Attr* out) {
  out->Clear();
  out->set_name(name);
  if (auto* i = std::get_if<int64_t>(&a)) {
    out->set_i(*i);
  } else if (auto* f = std::get_if<float>(&a)) {
    out->set_f(*f);
  } else if (auto* s = std::get_if<std::string>(&a)) {
    out->set_s(*s);
  } else if (auto* is = std::get_if<std::vector<int64_t>>(&a)) {
    auto* m = out->mutable_ints();  // set even when empty: the oneof records the kind
    for (int64_t v : *is) m->add_v(v);
  } else if (auto* fs = std::get_if<std::vector<float>>(&a)) {
    auto* m = out->mutable_floats();
    for (float v : *fs) m->add_v(v);
  } else if (auto* ss = std::get_if<std::vector<std::string>>(&a)) {
    auto* m = out->mutable_strings();
    for (const auto& v : *ss) m->add_v(v);
  } else if (auto* t = std::get_if<Tensor>(&a)) {
    auto* m = out->mutable_tensor();
    *m->mutable_desc() = toDesc(t->type());
    m->set_data(static_cast<const char*>(t->raw()), t->nbytes());
  }
}

StatusOr<AttrMap> fromAttrProtos(const google::protobuf::RepeatedPtrField<plan::Attr>& attrs) {
  AttrMap map;
  for (const plan::Attr& a : attrs) {
    switch (a.value_case()) {
      case plan::Attr::kI: map.set(a.name(), a.i()); break;
      case plan::Attr::kF: map.set(a.name(), a.f()); break;
      case plan::Attr::kS: map.set(a.name(), a.s()); break;
      case plan::Attr::kInts:
        map.set(a.name(), std::vector<int64_t>(a.ints().v().begin(), a.ints().v().end()));
        break;
      case plan::Attr::kFloats:
        map.set(a.name(), std::vector<float>(a.floats().v().begin(), a.floats().v().end()));
        break;
      case plan::Attr::kStrings:
        map.set(a.name(), std::vector<std::string>(a.strings().v().begin(), a.strings().v().end()));
        break;
      case plan::Attr::kTensor: {
        const plan::InlineTensor& it = a.tensor();
        TensorType type = fromDesc(it.desc());
        if (type.dtype == DType::kUndefined)
          return invalidInput("attribute '", a.name(), "': unknown tensor dtype code ",
                              it.desc().dtype());
        for (int64_t s : type.shape)
          if (s < 0) return invalidInput("attribute '", a.name(), "': negative dim in ", type.str());
        if (it.data().size() != type.bytes())
          return invalidInput("attribute '", a.name(), "': tensor ", type.str(), " needs ",
                              type.bytes(), " bytes, the plan holds ", it.data().size());
        Tensor t = Tensor::zeros(type);
        if (t.nbytes()) std::memcpy(t.mutableData(), it.data().data(), t.nbytes());
        map.set(a.name(), std::move(t));
        break;
      }
      case plan::Attr::VALUE_NOT_SET:
        return invalidInput("attribute '", a.name(), "' has no value");
    }
  }
  return map;
}

const char* instructionKindName(plan::Instruction::Kind k) {
  switch (k) {
    case plan::Instruction::KERNEL: return "kernel";
    case plan::Instruction::ALL_REDUCE: return "all_reduce";
    case plan::Instruction::ALL_GATHER: return "all_gather";
    case plan::Instruction::REDUCE_SCATTER: return "reduce_scatter";
    case plan::Instruction::ALL_TO_ALL: return "all_to_all";
    case plan::Instruction::SEND: return "send";
    case plan::Instruction::RECV: return "recv";
    case plan::Instruction::FREE: return "free";
    case plan::Instruction::REGION: return "region";
    case plan::Instruction::LAUNCH: return "launch";
    default: return "unknown";
  }
}

}  // namespace pcc
