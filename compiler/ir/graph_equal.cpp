#include "compiler/ir/graph_equal.h"

#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "runtime/support/tensor_block.h"

namespace pcc {

namespace {

bool sameTensor(const Tensor& a, const Tensor& b) {
  if (a.type() != b.type()) return false;
  if (a.raw() == b.raw() || a.nbytes() == 0) return true;
  // A weight mapped from a file is compared by where it lies, never read.
  if (a.isMapped() || b.isMapped()) return false;
  return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool sameConstant(const Value& a, const Value& b) {
  const TensorBlock* x = a.constantBlock();
  const TensorBlock* y = b.constantBlock();
  if ((x == nullptr) != (y == nullptr)) return false;
  if (x)
    return x->source.raw() == y->source.raw() && x->source.type() == y->source.type() && x->start == y->start &&
           x->extent == y->extent && x->as == y->as;
  return sameTensor(a.constantData(), b.constantData());
}

class Matcher {
 public:
  explicit Matcher(const AttrsMatch& attrsMatch) : attrsMatch_(attrsMatch) {}

  bool graphs(const Graph& a, const Graph& b) {
    if (a.name() != b.name() || a.inputs().size() != b.inputs().size() || a.outputs().size() != b.outputs().size() ||
        a.numNodes() != b.numNodes())
      return false;
    for (size_t i = 0; i < a.inputs().size(); ++i)
      if (!define(a.inputs()[i], b.inputs()[i])) return false;
    const std::vector<Value*> ca = a.constants(), cb = b.constants();
    if (ca.size() != cb.size()) return false;
    for (size_t i = 0; i < ca.size(); ++i)
      if (!define(ca[i], cb[i]) || !sameConstant(*ca[i], *cb[i])) return false;
    const std::vector<Node*> na = a.nodes(), nb = b.nodes();
    for (size_t i = 0; i < na.size(); ++i)
      if (!nodes(*na[i], *nb[i])) return false;
    for (size_t i = 0; i < a.outputs().size(); ++i)
      if (!same(a.outputs()[i], b.outputs()[i])) return false;
    return true;
  }

 private:
  // Pairs `a` with `b`, which must look alike.
  bool define(const Value* a, const Value* b) {
    if (a->id() != b->id() || a->name() != b->name() || a->type() != b->type() || a->sharding() != b->sharding())
      return false;
    return counterpart_.emplace(a, b).second;
  }
  // Whether `b` is what `a` was paired with (nullptr: an absent input).
  bool same(const Value* a, const Value* b) const {
    if (!a || !b) return a == b;
    auto it = counterpart_.find(a);
    return it != counterpart_.end() && it->second == b;
  }
  bool nodes(const Node& a, const Node& b) {
    if (a.op() != b.op() || a.name() != b.name() || a.stage() != b.stage() || a.inputs().size() != b.inputs().size() ||
        a.outputs().size() != b.outputs().size() || a.numBodies() != b.numBodies())
      return false;
    if (attrsMatch_ ? !attrsMatch_(a, b) : !attrsEqual(a.attrs(), b.attrs())) return false;
    for (size_t i = 0; i < a.inputs().size(); ++i)
      if (!same(a.input(i), b.input(i))) return false;
    for (size_t i = 0; i < a.numBodies(); ++i)
      if (!graphs(*a.body(i), *b.body(i))) return false;  // a body reads only its own values
    for (size_t i = 0; i < a.outputs().size(); ++i)
      if (!define(a.output(i), b.output(i))) return false;
    return true;
  }

  const AttrsMatch& attrsMatch_;
  std::unordered_map<const Value*, const Value*> counterpart_;
};

}  // namespace

bool attrsEqual(const AttrMap& a, const AttrMap& b, const char* except) {
  auto ia = a.all().begin(), ib = b.all().begin();
  const auto ea = a.all().end(), eb = b.all().end();
  while (true) {
    if (except) {
      if (ia != ea && ia->first == except) ++ia;
      if (ib != eb && ib->first == except) ++ib;
    }
    if (ia == ea || ib == eb) return ia == ea && ib == eb;
    if (ia->first != ib->first || ia->second.index() != ib->second.index()) return false;
    const bool equal = std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          const T& y = std::get<T>(ib->second);
          if constexpr (std::is_same_v<T, Tensor>)
            return x.type() == y.type() && (x.nbytes() == 0 || std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0);
          else
            return x == y;
        },
        ia->second);
    if (!equal) return false;
    ++ia;
    ++ib;
  }
}

bool graphsIdentical(const Graph& a, const Graph& b, const AttrsMatch& attrsMatch) {
  return Matcher(attrsMatch).graphs(a, b);
}

}  // namespace pcc
