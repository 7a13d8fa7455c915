// Operator attributes, shared by the IR, the plan format and the kernels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

/// Named attributes of one node, ordered by name so printing is deterministic.
class AttrMap {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void set(const std::string& name, Attribute a) { map_[name] = std::move(a); }
  void erase(const std::string& name) { map_.erase(name); }
  const std::map<std::string, Attribute>& all() const { return map_; }
  bool empty() const { return map_.empty(); }
  bool operator==(const AttrMap& o) const;

  /// Typed getters: \returns the attribute, or `dflt` when absent. An attribute
  /// of another kind is an invalid-input error in the checked variants.
  int64_t getInt(const std::string& name, int64_t dflt) const;
  float getFloat(const std::string& name, float dflt) const;
  std::string getString(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> getInts(const std::string& name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> getFloats(const std::string& name, std::vector<float> dflt = {}) const;
  const Tensor* getTensor(const std::string& name) const;

 private:
  std::map<std::string, Attribute> map_;
};

/// \returns the attribute printed in the textual IR syntax, e.g. `[0, 2, 1]`.
std::string attributeToString(const Attribute& a);

}  // namespace pcc
