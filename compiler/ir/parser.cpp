// Parser of the textual IR (see docs/ir.md): a hand-written recursive-descent
// parser over characters. It never infers types; it builds exactly what the
// text says and leaves the consistency checks to the verifier. Every error is
// an invalid-input Status `FILE:LINE:COL: message`; no input makes it crash.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

#include "compiler/ir/text.h"

namespace pcc {

namespace {

/// Constants whose data the text elides are synthesized; refuse absurd sizes
/// (a mistyped dimension) instead of trying to allocate them.
constexpr int64_t kMaxSynthesizedElements = int64_t{1} << 28;

bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }

/// A number as written: its text, and whether it reads as a float.
struct NumberToken {
  std::string text;
  bool isFloat = false;
};

class Parser {
 public:
  Parser(std::string_view text, std::string fileName, int firstLine)
      : text_(text), fileName_(std::move(fileName)), firstLine_(firstLine) {}

  StatusOr<std::unique_ptr<Graph>> parse();

 private:
  // --- Lexical helpers -------------------------------------------------------
  void skipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  bool atEnd() {
    skipSpace();
    return pos_ >= text_.size();
  }
  char peek() {
    skipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  /// Consumes punctuation `tok` if it comes next.
  bool consume(std::string_view tok) {
    skipSpace();
    if (text_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  /// Consumes keyword `kw` if it comes next as a whole word.
  bool consumeKeyword(std::string_view kw) {
    skipSpace();
    if (text_.substr(pos_, kw.size()) != kw) return false;
    size_t end = pos_ + kw.size();
    if (end < text_.size() && isNameChar(text_[end])) return false;
    pos_ = end;
    return true;
  }

  /// \returns an invalid-input error at the current position (or at `at`).
  Status error(const std::string& message, std::optional<size_t> at = std::nullopt) {
    if (!at) skipSpace();
    size_t p = std::min(at.value_or(pos_), text_.size());
    int line = firstLine_, col = 1;
    for (size_t i = 0; i < p; ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return invalidInput(fileName_, ":", line, ":", col, ": ", message);
  }
  /// \returns a description of what is at the current position, for errors.
  std::string found() {
    skipSpace();
    if (pos_ >= text_.size()) return "end of input";
    size_t end = pos_;
    if (isNameChar(text_[end])) {
      while (end < text_.size() && isNameChar(text_[end]) && end - pos_ < 24) ++end;
    } else {
      ++end;
    }
    std::string s(text_.substr(pos_, end - pos_));
    for (char& c : s)
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    return "'" + s + "'";
  }
  Status expect(std::string_view tok, std::string_view context) {
    if (consume(tok)) return Status::OK();
    return error(strCat("expected '", tok, "' ", context, ", found ", found()));
  }

  StatusOr<std::string> parseIdentifier(std::string_view what) {
    skipSpace();
    if (pos_ >= text_.size() || !isIdentStart(text_[pos_]))
      return error(strCat("expected ", what, ", found ", found()));
    size_t start = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  /// Reads a double-quoted string with \" \\ \n \t \xHH escapes.
  StatusOr<std::string> parseString(std::string_view what) {
    skipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '"')
      return error(strCat("expected ", what, " (a quoted string), found ", found()));
    size_t start = pos_++;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) return error("expected '\"' to end the string", start);
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return error("expected an escape character", pos_);
      char e = text_[pos_++];
      switch (e) {
        case '"': case '\\': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'x': {
          auto hex = [](char h) -> int {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          if (pos_ + 2 > text_.size() || hex(text_[pos_]) < 0 || hex(text_[pos_ + 1]) < 0)
            return error("expected two hex digits after '\\x'", pos_);
          out += static_cast<char>(hex(text_[pos_]) * 16 + hex(text_[pos_ + 1]));
          pos_ += 2;
          break;
        }
        default: return error(strCat("expected a valid escape, found '\\", std::string(1, e), "'"), pos_ - 2);
      }
    }
  }

  /// Reads a bare [A-Za-z0-9_.]+ name or a quoted one.
  StatusOr<std::string> parseName(std::string_view what) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '"') {
      size_t at = pos_;
      ASSIGN_OR_RETURN(std::string s, parseString(what));
      if (s.empty()) return error(strCat("expected a non-empty ", what), at);
      return s;
    }
    size_t start = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_])) ++pos_;
    if (pos_ == start) return error(strCat("expected ", what, ", found ", found()));
    return std::string(text_.substr(start, pos_ - start));
  }

  /// Reads `%name`.
  StatusOr<std::string> parseValueName() {
    RETURN_IF_ERROR(expect("%", "before a value name"));
    if (pos_ < text_.size() && (isNameChar(text_[pos_]) || text_[pos_] == '"')) return parseName("value name");
    return error(strCat("expected a value name after '%', found ", found()));
  }

  /// Reads a number: [+-]digits[.digits][e[+-]digits], or nan / inf.
  StatusOr<NumberToken> parseNumber(std::string_view what) {
    skipSpace();
    size_t start = pos_;
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
    NumberToken tok;
    if (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) {
      size_t w = pos_;
      while (w < text_.size() && std::isalpha(static_cast<unsigned char>(text_[w]))) ++w;
      std::string word(text_.substr(pos_, w - pos_));
      if (word != "nan" && word != "inf" && word != "infinity") {
        pos_ = start;
        return error(strCat("expected ", what, ", found ", found()));
      }
      pos_ = w;
      tok.isFloat = true;
    } else {
      size_t digits = 0;
      while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.')) {
        if (text_[pos_] == '.') tok.isFloat = true;
        else ++digits;
        ++pos_;
      }
      if (digits == 0) {
        pos_ = start;
        return error(strCat("expected ", what, ", found ", found()));
      }
      if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
        tok.isFloat = true;
        ++pos_;
        if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
        size_t expStart = pos_;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
        if (pos_ == expStart) return error("expected exponent digits", pos_);
      }
    }
    tok.text = std::string(text_.substr(start, pos_ - start));
    numberStart_ = start;
    return tok;
  }

  StatusOr<int64_t> toInt(const NumberToken& tok, std::string_view what) {
    if (tok.isFloat) return error(strCat("expected ", what, " (an integer), found '", tok.text, "'"), numberStart_);
    const char* b = tok.text.data();
    const char* e = b + tok.text.size();
    if (*b == '+') ++b;
    int64_t v = 0;
    auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e)
      return error(strCat("expected ", what, " in the int64 range, found '", tok.text, "'"), numberStart_);
    return v;
  }
  double toDouble(const NumberToken& tok) { return std::strtod(tok.text.c_str(), nullptr); }

  StatusOr<int64_t> parseInt(std::string_view what) {
    ASSIGN_OR_RETURN(NumberToken tok, parseNumber(what));
    return toInt(tok, what);
  }

  // --- Grammar -----------------------------------------------------------------
  StatusOr<TensorType> parseType();
  StatusOr<std::optional<Sharding>> parseOptionalSharding();
  StatusOr<Tensor> parseDense();
  StatusOr<Attribute> parseAttribute();
  StatusOr<AttrMap> parseAttrDict();
  Status parseArgument();
  Status parseNode();
  StatusOr<Value*> parseOperand();
  Status checkFreshName(const std::string& name, size_t at);
  /// Reads `@NAME(args) -> (results) { nodes return ... }` (after the keyword
  /// `graph`) into `g`, which becomes the graph names are looked up in.
  Status parseGraphInto(Graph& g);

  std::string_view text_;
  std::string fileName_;
  int firstLine_;
  size_t pos_ = 0;
  size_t numberStart_ = 0;
  Graph* graph_ = nullptr;  // the graph (or body) being read
  int depth_ = 0;           // nesting of bodies, bounded so no input overflows the stack
};

/// Bodies nest at most this deep in the text.
constexpr int kMaxBodyDepth = 64;

StatusOr<TensorType> Parser::parseType() {
  skipSpace();
  size_t at = pos_;
  ASSIGN_OR_RETURN(std::string dt, parseIdentifier("a type such as f32[8,512]"));
  std::optional<DType> dtype = dtypeFromName(dt);
  if (!dtype) return error(strCat("expected an element type (f32, f16, bf16, f64, i8, u8, i32, i64, bool), found '", dt, "'"), at);
  TensorType t;
  t.dtype = *dtype;
  RETURN_IF_ERROR(expect("[", "to open the shape"));
  if (!consume("]")) {
    do {
      ASSIGN_OR_RETURN(int64_t d, parseInt("a dimension"));
      t.shape.push_back(d);
    } while (consume(","));
    RETURN_IF_ERROR(expect("]", "to close the shape"));
  }
  // Negative dims are the verifier's to report; sizes over the limit of one
  // tensor are refused here, before anything is allocated for them.
  bool negative = std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; });
  if (Status size = checkTensorSize(t); !negative && !size.ok()) return error(size.message(), at);
  return t;
}

StatusOr<std::optional<Sharding>> Parser::parseOptionalSharding() {
  if (!consume("#")) return std::optional<Sharding>();
  if (!consumeKeyword("shard")) return error(strCat("expected 'shard' after '#', found ", found()));
  RETURN_IF_ERROR(expect("<", "after '#shard'"));
  RETURN_IF_ERROR(expect("[", "to open the sharding's dimensions"));
  Sharding s;
  auto parseAxis = [&]() -> StatusOr<MeshAxis> {
    skipSpace();
    size_t start = pos_;
    if (consume("-")) return MeshAxis::kNone;
    ASSIGN_OR_RETURN(std::string name, parseIdentifier("a mesh axis (dp, tp, pp or -)"));
    std::optional<MeshAxis> a = meshAxisFromName(name);
    if (!a) return error(strCat("expected a mesh axis (dp, tp, pp or -), found '", name, "'"), start);
    return *a;
  };
  if (!consume("]")) {
    do {
      ASSIGN_OR_RETURN(MeshAxis a, parseAxis());
      s.dims.push_back(a);
    } while (consume(","));
    RETURN_IF_ERROR(expect("]", "to close the sharding's dimensions"));
  }
  if (consumeKeyword("partial")) {
    RETURN_IF_ERROR(expect("(", "after 'partial'"));
    ASSIGN_OR_RETURN(s.partial, parseAxis());
    RETURN_IF_ERROR(expect(")", "after the partial axis"));
  }
  RETURN_IF_ERROR(expect(">", "to close '#shard<'"));
  // The sharding's rank is the verifier's to check, like every other type fact.
  return std::optional<Sharding>(std::move(s));
}

StatusOr<Tensor> Parser::parseDense() {
  // `dense` is already consumed.
  RETURN_IF_ERROR(expect("<", "after 'dense'"));
  skipSpace();
  size_t typeAt = pos_;
  ASSIGN_OR_RETURN(TensorType type, parseType());
  for (int64_t d : type.shape)
    if (d < 0) return error(strCat("expected a static shape for dense data, found ", type.str()), typeAt);
  if (type.shape.size() > 16 || numElements(type.shape) > kMaxSynthesizedElements)
    return error(strCat("expected dense data of a reasonable size, found ", type.str()), typeAt);
  RETURN_IF_ERROR(expect(":", "after the dense type"));
  Tensor t = Tensor::zeros(type);
  int64_t n = 0;
  auto store = [&](const NumberToken& tok) -> Status {
    if (n >= t.numel()) return error(strCat("expected '>' after ", t.numel(), " elements of ", type.str()), numberStart_);
    if (isFloat(type.dtype)) {
      t.setDouble(n, toDouble(tok));
    } else {
      ASSIGN_OR_RETURN(int64_t v, toInt(tok, "an integer element"));
      // A u64 is written as its int64 bit pattern, as the printer writes it.
      int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      switch (type.dtype) {
        case DType::kI4: lo = -8; hi = 7; break;
        case DType::kU4: lo = 0; hi = 15; break;
        case DType::kI8: lo = -128; hi = 127; break;
        case DType::kU8: lo = 0; hi = 255; break;
        case DType::kI16: lo = -32768; hi = 32767; break;
        case DType::kU16: lo = 0; hi = 65535; break;
        case DType::kBool: lo = 0; hi = 1; break;
        case DType::kI32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
        case DType::kU32: lo = 0; hi = std::numeric_limits<uint32_t>::max(); break;
        default: break;
      }
      if (v < lo || v > hi)
        return error(strCat("expected an element in the range of ", dtypeName(type.dtype), ", found ", v), numberStart_);
      t.setInt(n, v);
    }
    ++n;
    return Status::OK();
  };
  if (peek() != '>') {
    do {
      ASSIGN_OR_RETURN(NumberToken tok, parseNumber("a dense element"));
      RETURN_IF_ERROR(store(tok));
    } while (consume(","));
  }
  if (n != t.numel()) return error(strCat("expected ", t.numel(), " elements for ", type.str(), ", found ", n));
  RETURN_IF_ERROR(expect(">", "to close 'dense<'"));
  return t;
}

StatusOr<Attribute> Parser::parseAttribute() {
  char c = peek();
  if (c == '"') {
    ASSIGN_OR_RETURN(std::string s, parseString("a string attribute"));
    return Attribute(std::move(s));
  }
  if (consumeKeyword("strings")) {
    RETURN_IF_ERROR(expect("[", "after 'strings'"));
    std::vector<std::string> v;
    if (!consume("]")) {
      do {
        ASSIGN_OR_RETURN(std::string s, parseString("a string"));
        v.push_back(std::move(s));
      } while (consume(","));
      RETURN_IF_ERROR(expect("]", "to close the string list"));
    }
    return Attribute(std::move(v));
  }
  if (consumeKeyword("dense")) {
    ASSIGN_OR_RETURN(Tensor t, parseDense());
    return Attribute(std::move(t));
  }
  bool forceFloats = consumeKeyword("floats");
  if (forceFloats || c == '[') {
    RETURN_IF_ERROR(expect("[", forceFloats ? "after 'floats'" : "to open the list"));
    std::vector<NumberToken> toks;
    std::vector<size_t> starts;
    bool anyFloat = forceFloats;
    if (!consume("]")) {
      do {
        ASSIGN_OR_RETURN(NumberToken tok, parseNumber("a list element"));
        anyFloat |= tok.isFloat;
        toks.push_back(std::move(tok));
        starts.push_back(numberStart_);
      } while (consume(","));
      RETURN_IF_ERROR(expect("]", "to close the list"));
    }
    if (anyFloat) {
      std::vector<float> v;
      for (const NumberToken& t : toks) v.push_back(std::strtof(t.text.c_str(), nullptr));
      return Attribute(std::move(v));
    }
    std::vector<int64_t> v;
    for (size_t i = 0; i < toks.size(); ++i) {
      numberStart_ = starts[i];
      ASSIGN_OR_RETURN(int64_t x, toInt(toks[i], "a list element"));
      v.push_back(x);
    }
    return Attribute(std::move(v));
  }
  ASSIGN_OR_RETURN(NumberToken tok, parseNumber("an attribute value"));
  if (tok.isFloat) return Attribute(std::strtof(tok.text.c_str(), nullptr));
  ASSIGN_OR_RETURN(int64_t v, toInt(tok, "an attribute value"));
  return Attribute(v);
}

StatusOr<AttrMap> Parser::parseAttrDict() {
  AttrMap attrs;
  // `{` is already consumed.
  if (consume("}")) return attrs;
  do {
    skipSpace();
    size_t at = pos_;
    std::string name;
    if (peek() == '"') {
      ASSIGN_OR_RETURN(name, parseString("an attribute name"));
    } else {
      ASSIGN_OR_RETURN(name, parseIdentifier("an attribute name"));
    }
    if (attrs.has(name)) return error(strCat("expected each attribute once, found ", quoteIrString(name), " twice"), at);
    RETURN_IF_ERROR(expect("=", strCat("after attribute name ", quoteIrString(name))));
    ASSIGN_OR_RETURN(Attribute a, parseAttribute());
    attrs.set(name, std::move(a));
  } while (consume(","));
  RETURN_IF_ERROR(expect("}", "to close the attributes"));
  return attrs;
}

Status Parser::checkFreshName(const std::string& name, size_t at) {
  if (graph_->findValue(name)) return error(strCat("expected a new value name, found a redefinition of ", valueRefText(name)), at);
  return Status::OK();
}

Status Parser::parseArgument() {
  skipSpace();
  size_t at = pos_;
  ASSIGN_OR_RETURN(std::string name, parseValueName());
  RETURN_IF_ERROR(checkFreshName(name, at));
  RETURN_IF_ERROR(expect(":", strCat("after argument ", valueRefText(name))));
  skipSpace();
  size_t typeAt = pos_;
  ASSIGN_OR_RETURN(TensorType type, parseType());
  ASSIGN_OR_RETURN(std::optional<Sharding> sharding, parseOptionalSharding());
  Value* v = nullptr;
  if (consumeKeyword("const")) {
    for (int64_t d : type.shape)
      if (d < 0) return error(strCat("expected a static shape for constant ", valueRefText(name), ", found ", type.str()), typeAt);
    Tensor data;
    skipSpace();
    size_t denseAt = pos_;
    if (consumeKeyword("dense")) {
      ASSIGN_OR_RETURN(data, parseDense());
      if (data.type() != type)
        return error(strCat("expected dense data of type ", type.str(), " for ", valueRefText(name), ", found ",
                            data.type().str()),
                     denseAt);
    } else {
      if (type.shape.size() > 16 || numElements(type.shape) > kMaxSynthesizedElements)
        return error(strCat("expected a constant of a reasonable size, found ", type.str()), typeAt);
      data = pseudoRandomTensor(type, seedFromName(name));
    }
    v = graph_->addConstant(name, std::move(data));
  } else {
    v = graph_->addInput(name, type);
  }
  v->setSharding(std::move(sharding));
  return Status::OK();
}

StatusOr<Value*> Parser::parseOperand() {
  if (consumeKeyword("_")) return static_cast<Value*>(nullptr);
  skipSpace();
  size_t at = pos_;
  ASSIGN_OR_RETURN(std::string name, parseValueName());
  Value* v = graph_->findValue(name);
  if (!v) return error(strCat("expected a defined value, found use of undefined value ", valueRefText(name)), at);
  return v;
}

Status Parser::parseNode() {
  // results '=' Op '(' operands ')' [attrs] ':' types [loc("name")] [@stage(N)]
  std::vector<std::string> names;
  std::vector<size_t> nameAts;
  std::unordered_set<std::string> seen;
  do {
    skipSpace();
    size_t at = pos_;
    ASSIGN_OR_RETURN(std::string name, parseValueName());
    RETURN_IF_ERROR(checkFreshName(name, at));
    if (!seen.insert(name).second) return error(strCat("expected distinct result names, found ", valueRefText(name), " twice"), at);
    names.push_back(std::move(name));
    nameAts.push_back(at);
  } while (consume(","));
  RETURN_IF_ERROR(expect("=", "after the result names"));
  skipSpace();
  size_t opAt = pos_;
  ASSIGN_OR_RETURN(std::string opName, parseIdentifier("an op name"));
  std::optional<OpKind> op = opFromName(opName);
  if (!op) return error(strCat("expected an op name from Ops.def, found unknown op '", opName, "'"), opAt);
  RETURN_IF_ERROR(expect("(", strCat("after op ", opName)));
  std::vector<Value*> inputs;
  if (!consume(")")) {
    do {
      ASSIGN_OR_RETURN(Value* v, parseOperand());
      inputs.push_back(v);
    } while (consume(","));
    RETURN_IF_ERROR(expect(")", "to close the operands"));
  }
  AttrMap attrs;
  if (consume("{")) {
    ASSIGN_OR_RETURN(attrs, parseAttrDict());
  }
  RETURN_IF_ERROR(expect(":", "before the result types"));
  std::vector<TensorType> types;
  std::vector<std::optional<Sharding>> shardings;
  do {
    ASSIGN_OR_RETURN(TensorType t, parseType());
    ASSIGN_OR_RETURN(std::optional<Sharding> s, parseOptionalSharding());
    types.push_back(std::move(t));
    shardings.push_back(std::move(s));
  } while (consume(","));
  if (types.size() != names.size())
    return error(strCat("expected ", names.size(), " result types for ", names.size(), " results, found ",
                        types.size()),
                 opAt);
  std::string nodeName;
  if (consumeKeyword("loc")) {
    RETURN_IF_ERROR(expect("(", "after 'loc'"));
    ASSIGN_OR_RETURN(nodeName, parseString("a node name"));
    RETURN_IF_ERROR(expect(")", "to close 'loc('"));
  }
  int stage = 0;
  if (consume("@")) {
    if (!consumeKeyword("stage")) return error(strCat("expected 'stage' after '@', found ", found()));
    RETURN_IF_ERROR(expect("(", "after '@stage'"));
    skipSpace();
    size_t at = pos_;
    ASSIGN_OR_RETURN(int64_t s, parseInt("a stage number"));
    if (s < 0 || s > std::numeric_limits<int>::max())
      return error(strCat("expected a non-negative stage number, found ", s), at);
    stage = static_cast<int>(s);
    RETURN_IF_ERROR(expect(")", "to close '@stage('"));
  }
  // Bodies: '{' graph {graph} '}'. Each is a graph of its own: it sees none of
  // the enclosing graph's names.
  std::vector<std::unique_ptr<Graph>> bodies;
  if (consume("{")) {
    if (depth_ >= kMaxBodyDepth) return error(strCat("expected bodies nested at most ", kMaxBodyDepth, " deep"));
    do {
      if (!consumeKeyword("graph")) return error(strCat("expected a body ('graph @name(...)'), found ", found()));
      auto body = std::make_unique<Graph>();
      Graph* enclosing = graph_;
      ++depth_;
      Status st = parseGraphInto(*body);
      --depth_;
      graph_ = enclosing;
      RETURN_IF_ERROR(st);
      bodies.push_back(std::move(body));
    } while (peek() != '}');
    RETURN_IF_ERROR(expect("}", "to close the node's bodies"));
  }
  Node* n = graph_->addNode(*op, std::move(inputs), std::move(types), std::move(attrs), std::move(nodeName), names);
  n->setStage(stage);
  for (auto& b : bodies) n->addBody(std::move(b));
  for (size_t i = 0; i < shardings.size(); ++i) n->output(i)->setSharding(std::move(shardings[i]));
  return Status::OK();
}

StatusOr<std::unique_ptr<Graph>> Parser::parse() {
  auto g = std::make_unique<Graph>();
  if (!consumeKeyword("graph")) return error(strCat("expected 'graph', found ", found()));
  RETURN_IF_ERROR(parseGraphInto(*g));
  if (!atEnd()) return error(strCat("expected end of input after the graph, found ", found()));
  return g;
}

Status Parser::parseGraphInto(Graph& g) {
  graph_ = &g;
  RETURN_IF_ERROR(expect("@", "before the graph name"));
  if (pos_ >= text_.size() || !(isNameChar(text_[pos_]) || text_[pos_] == '"'))
    return error(strCat("expected a graph name after '@', found ", found()));
  ASSIGN_OR_RETURN(std::string name, parseName("graph name"));
  graph_->setName(name);
  RETURN_IF_ERROR(expect("(", "to open the graph arguments"));
  if (!consume(")")) {
    do {
      RETURN_IF_ERROR(parseArgument());
    } while (consume(","));
    RETURN_IF_ERROR(expect(")", "to close the graph arguments"));
  }
  RETURN_IF_ERROR(expect("->", "before the graph result types"));
  RETURN_IF_ERROR(expect("(", "to open the graph results"));
  struct ResultSig {
    std::string name;
    TensorType type;
    size_t at;
  };
  std::vector<ResultSig> results;
  if (!consume(")")) {
    do {
      skipSpace();
      ResultSig r;
      r.at = pos_;
      ASSIGN_OR_RETURN(r.name, parseValueName());
      RETURN_IF_ERROR(expect(":", strCat("after result ", valueRefText(r.name))));
      ASSIGN_OR_RETURN(r.type, parseType());
      results.push_back(std::move(r));
    } while (consume(","));
    RETURN_IF_ERROR(expect(")", "to close the graph results"));
  }
  RETURN_IF_ERROR(expect("{", "to open the graph body"));
  while (!consumeKeyword("return")) {
    if (peek() != '%') return error(strCat("expected a node ('%name = Op(...)') or 'return', found ", found()));
    RETURN_IF_ERROR(parseNode());
  }
  skipSpace();
  size_t returnAt = pos_;
  std::vector<Value*> outputs;
  if (peek() == '%') {
    do {
      ASSIGN_OR_RETURN(Value* v, parseOperand());
      if (!v) return error("expected a value to return, found '_'");
      outputs.push_back(v);
    } while (consume(","));
  }
  RETURN_IF_ERROR(expect("}", "to close the graph body"));
  if (outputs.size() != results.size())
    return error(strCat("expected ", results.size(), " returned values as the signature says, found ", outputs.size()),
                 returnAt);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i]->name() != results[i].name || outputs[i]->type() != results[i].type)
      return error(strCat("expected result ", i, " to be ", valueRefText(outputs[i]->name()), ": ", outputs[i]->type().str(),
                          " as returned, found ", valueRefText(results[i].name), ": ", results[i].type.str()),
                   results[i].at);
  }
  graph_->setOutputs(std::move(outputs));
  return Status::OK();
}

}  // namespace

uint64_t seedFromName(std::string_view name) {
  uint64_t h = 14695981039346656037ULL;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

StatusOr<std::unique_ptr<Graph>> parseGraph(std::string_view text, const std::string& fileName, int firstLine) {
  Parser p(text, fileName, firstLine);
  return p.parse();
}

}  // namespace pcc
