#include "runtime/support/attribute.h"

#include <cstdio>

namespace pcc {

namespace {
bool tensorsEqual(const Tensor& a, const Tensor& b) {
  return a.type() == b.type() && (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

std::string floatToString(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  std::string s = buf;
  // Keep floats recognizable as floats when printed back.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
}  // namespace

bool AttrMap::operator==(const AttrMap& o) const {
  if (map_.size() != o.map_.size()) return false;
  for (auto it = map_.begin(), jt = o.map_.begin(); it != map_.end(); ++it, ++jt) {
    if (it->first != jt->first || it->second.index() != jt->second.index()) return false;
    if (auto* t = std::get_if<Tensor>(&it->second)) {
      if (!tensorsEqual(*t, std::get<Tensor>(jt->second))) return false;
    } else if (attributeToString(it->second) != attributeToString(jt->second)) {
      return false;
    }
  }
  return true;
}

int64_t AttrMap::getInt(const std::string& name, int64_t dflt) const {
  auto it = map_.find(name);
  if (it == map_.end()) return dflt;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  if (auto* f = std::get_if<float>(&it->second)) return static_cast<int64_t>(*f);
  return dflt;
}

float AttrMap::getFloat(const std::string& name, float dflt) const {
  auto it = map_.find(name);
  if (it == map_.end()) return dflt;
  if (auto* v = std::get_if<float>(&it->second)) return *v;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<float>(*i);
  return dflt;
}

std::string AttrMap::getString(const std::string& name, const std::string& dflt) const {
  auto it = map_.find(name);
  if (it == map_.end()) return dflt;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  return dflt;
}

std::vector<int64_t> AttrMap::getInts(const std::string& name, std::vector<int64_t> dflt) const {
  auto it = map_.find(name);
  if (it == map_.end()) return dflt;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* i = std::get_if<int64_t>(&it->second)) return {*i};
  return dflt;
}

std::vector<float> AttrMap::getFloats(const std::string& name, std::vector<float> dflt) const {
  auto it = map_.find(name);
  if (it == map_.end()) return dflt;
  if (auto* v = std::get_if<std::vector<float>>(&it->second)) return *v;
  return dflt;
}

const Tensor* AttrMap::getTensor(const std::string& name) const {
  auto it = map_.find(name);
  if (it == map_.end()) return nullptr;
  return std::get_if<Tensor>(&it->second);
}

std::string attributeToString(const Attribute& a) {
  struct V {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(float v) const { return floatToString(v); }
    std::string operator()(const std::string& v) const { return quote(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<float>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + floatToString(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string s = "strings[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + quote(v[i]);
      return s + "]";
    }
    // dense<f32[2]: 1.0, 2.0>: every element, so the text round-trips exactly.
    std::string operator()(const Tensor& t) const {
      std::string s = "dense<" + t.type().str() + ":";
      for (int64_t i = 0; i < t.numel(); ++i) {
        s += i ? ", " : " ";
        if (isFloat(t.dtype())) {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", t.getDouble(i));
          s += buf;
        } else {
          s += std::to_string(t.getInt(i));
        }
      }
      return s + ">";
    }
  };
  return std::visit(V{}, a);
}

}  // namespace pcc
