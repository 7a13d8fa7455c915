// The op table of Ops.def as an array indexed by OpKind.
#include "runtime/schema/op_table.h"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

namespace pcc {

namespace {
constexpr uint32_t shapeMask() { return 0; }
template <typename... Rest>
constexpr uint32_t shapeMask(int first, Rest... rest) {
  return (1u << first) | shapeMask(rest...);
}

const OpInfo kOpInfos[] = {
#define OnnxDirect(...) OnnxImport::kDirect
#define OnnxCustom OnnxImport::kCustom
#define NotOnnx OnnxImport::kNone
#define PCC_OP(Name, MinIn, MaxIn, NumOut, Kind, ShapeOperands, Shard, Import) \
  {#Name, MinIn, MaxIn, NumOut, OpClass::k##Kind, shapeMask ShapeOperands, ShardRule::k##Shard, Import},
#include "runtime/schema/Ops.def"
#undef PCC_OP
#undef OnnxDirect
#undef OnnxCustom
#undef NotOnnx
};
static_assert(std::size(kOpInfos) == kNumOpKinds);
}  // namespace

const OpInfo& opInfo(OpKind op) { return kOpInfos[static_cast<int>(op)]; }

std::optional<OpKind> opFromName(std::string_view name) {
  // Built once; the importer, the parser and the runtime's plan loader look
  // an op up by name once per node.
  static const auto* byName = [] {
    auto* m = new std::unordered_map<std::string_view, OpKind>();
    for (size_t i = 0; i < kNumOpKinds; ++i) m->emplace(kOpInfos[i].name, static_cast<OpKind>(i));
    return m;
  }();
  auto it = byName->find(name);
  if (it == byName->end()) return std::nullopt;
  return it->second;
}

std::string_view opClassName(OpClass c) {
  switch (c) {
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kBroadcast: return "broadcast";
    case OpClass::kInjective: return "injective";
    case OpClass::kReduction: return "reduction";
    case OpClass::kOpaque: return "opaque";
    case OpClass::kCollective: return "collective";
  }
  return "?";
}

}  // namespace pcc
