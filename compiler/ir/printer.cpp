// Printer of the textual IR (see docs/ir.md). The output is deterministic and
// the parser reads it back exactly.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/ir/text.h"

namespace pcc {

std::string quoteIrString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string valueRefText(std::string_view name) {
  return "%" + (isBareName(name) ? std::string(name) : quoteIrString(name));
}

namespace {

bool isIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  });
}

std::string valueRef(const Value* v) { return v ? valueRefText(v->name()) : std::string("_"); }

/// Attribute text: attributeToString's syntax with two refinements. Strings
/// also escape control characters, so every node stays on one line. And an
/// empty float list prints as `floats[]`, because `[]` reads back as an empty
/// int list.
std::string attrText(const Attribute& a) {
  if (auto* f = std::get_if<std::vector<float>>(&a); f && f->empty()) return "floats[]";
  if (auto* s = std::get_if<std::string>(&a)) return quoteIrString(*s);
  if (auto* l = std::get_if<std::vector<std::string>>(&a)) {
    std::string out = "strings[";
    for (size_t i = 0; i < l->size(); ++i) out += (i ? ", " : "") + quoteIrString((*l)[i]);
    return out + "]";
  }
  return attributeToString(a);
}

std::string attrDict(const AttrMap& attrs) {
  if (attrs.empty()) return "";
  std::string s = " {";
  bool first = true;
  for (const auto& [name, value] : attrs.all()) {
    if (!first) s += ", ";
    first = false;
    s += isIdentifier(name) ? name : quoteIrString(name);
    s += " = ";
    s += attrText(value);
  }
  return s + "}";
}

/// `TYPE` plus ` #shard<...>` when the value has a sharding.
std::string typeAnnotation(const Value* v) {
  std::string s = v->type().str();
  if (v->sharding()) s += " #shard<" + v->sharding()->str() + ">";
  return s;
}

std::string argText(const Value* v, const PrintOptions& options) {
  std::string s = valueRef(v) + ": " + typeAnnotation(v);
  if (!v->isConstant()) return s;
  s += " const";
  // The size comes from the type: a large weight's bytes are not read.
  if (options.maxConstElements < 0 || v->type().numel() <= options.maxConstElements)
    s += " " + attributeToString(v->constantData());
  return s;
}

/// Prints `g` with every line indented by `indent` spaces; bodies of region
/// nodes print nested, four spaces deeper than their node.
std::string printGraphAt(const Graph& g, const PrintOptions& options, size_t indent);

}  // namespace

bool isBareName(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  });
}

std::string printGraph(const Graph& g, const PrintOptions& options) { return printGraphAt(g, options, 0); }

namespace {

std::string printGraphAt(const Graph& g, const PrintOptions& options, size_t indent) {
  const std::string pad(indent, ' ');
  // Inputs and constants share the signature, in creation order (value ids), so
  // a graph prints its arguments the way its builder declared them.
  std::vector<Value*> args = g.inputs();
  for (Value* c : g.constants()) args.push_back(c);
  std::stable_sort(args.begin(), args.end(), [](const Value* a, const Value* b) { return a->id() < b->id(); });

  std::vector<std::string> argTexts;
  size_t total = 0;
  for (const Value* v : args) {
    argTexts.push_back(argText(v, options));
    total += argTexts.back().size() + 2;
  }
  std::string outSig = "(";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value* v = g.outputs()[i];
    outSig += strCat(i ? ", " : "", valueRef(v), ": ", v->type().str());
  }
  outSig += ")";

  std::string graphName = isBareName(g.name()) ? g.name() : quoteIrString(g.name());
  std::string s = pad + "graph @" + graphName + "(";
  // Short signatures stay on one line; long ones (over 120 columns) put one argument per line.
  bool multiline = total + s.size() + outSig.size() > 120;
  for (size_t i = 0; i < argTexts.size(); ++i) {
    if (multiline) s += "\n    " + pad;
    s += argTexts[i];
    if (i + 1 < argTexts.size()) s += multiline ? "," : ", ";
  }
  s += multiline ? ")\n    " + pad + "-> " : std::string(") -> ");
  s += outSig + " {\n";

  for (const Node* n : g.nodes()) {
    s += pad + "  ";
    for (size_t i = 0; i < n->outputs().size(); ++i) s += (i ? ", " : "") + valueRef(n->output(i));
    s += strCat(" = ", n->opName(), "(");
    for (size_t i = 0; i < n->inputs().size(); ++i) s += (i ? ", " : "") + valueRef(n->input(i));
    s += ")" + attrDict(n->attrs()) + " : ";
    for (size_t i = 0; i < n->outputs().size(); ++i) s += (i ? ", " : "") + typeAnnotation(n->output(i));
    if (!n->name().empty()) s += " loc(" + quoteIrString(n->name()) + ")";
    if (n->stage() != 0) s += strCat(" @stage(", n->stage(), ")");
    if (!n->bodies().empty()) {
      s += " {\n";
      for (const auto& b : n->bodies()) s += printGraphAt(*b, options, indent + 4);
      s += pad + "  }";
    }
    s += "\n";
  }
  s += pad + "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) s += (i ? ", " : " ") + valueRef(g.outputs()[i]);
  s += "\n" + pad + "}\n";
  return s;
}

}  // namespace

}  // namespace pcc
