// The property fuzz_codegen_names.cpp fuzzes and codegen_source_safety_test.cpp
// tests (docs/security.md): text of a model (a node's or a value's name, an
// attribute string) printed into generated kernel source, C++ or CUDA, must
// leave the source's tokens exactly as they are with a fixed placeholder in
// its place; it may only sit inside a comment.
//
// Algorithm of sourceTokens, the translation phases 1 to 3 of C and C++ done
// conservatively, as the strictest compiler would:
//  1. Replace the nine trigraphs (??/ is a backslash) and splice every
//     backslash-newline; CR, CR LF and LF are each one line end.
//  2. Drop comments: a block comment is one space, a line comment ends at
//     the next line end.
//  3. Split the rest into tokens: a run of identifier or number characters,
//     a string or character literal up to its closing quote (escapes kept) or
//     the line end, any other character alone, and "\n" for every line end
//     (a line break that escaped a comment moves a directive or ends one).
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/attention_kernel.h"
#include "codegen/kernel_desc.h"
#include "codegen/kernel_emit.h"
#include "compiler/ir/text.h"
#include "passes/registry.h"

namespace pcc::fuzz {

/// Phase 1: \returns `src` with trigraphs replaced, line ends made "\n" and
/// backslash-newlines spliced.
inline std::string splicedSource(std::string_view src) {
  std::string a;
  a.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '?' && i + 2 < src.size() && src[i + 1] == '?') {
      static constexpr std::string_view kFrom = "=/'()!<>-", kTo = "#\\^[]|{}~";
      size_t k = kFrom.find(src[i + 2]);
      if (k != std::string_view::npos) {
        a += kTo[k];
        i += 2;
        continue;
      }
    }
    if (src[i] == '\r') {
      a += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      continue;
    }
    a += src[i];
  }
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == '\\' && i + 1 < a.size() && a[i + 1] == '\n') {
      ++i;
      continue;
    }
    b += a[i];
  }
  return b;
}

/// \returns the tokens of `src` without its comments (phases 1 to 3 above).
inline std::vector<std::string> sourceTokens(std::string_view src) {
  const std::string s = splicedSource(src);
  std::vector<std::string> out;
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  };
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      out.emplace_back("\n");
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\f' || c == '\v') {
      ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      i = s.find('\n', i);
      if (i == std::string::npos) i = s.size();
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
    } else if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c && s[j] != '\n') j += s[j] == '\\' && j + 1 < s.size() ? 2 : 1;
      if (j < s.size() && s[j] == c) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    } else if (word(c)) {
      size_t j = i;
      while (j < s.size() && word(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    } else {
      out.emplace_back(1, c);
      ++i;
    }
  }
  return out;
}

/// \returns "" when `withText` (source emitted with model text) has the
/// tokens of `withPlaceholder` (the same kernels emitted with the
/// placeholder) and holds only printable ASCII and line feeds; else what
/// differs, for the failure message.
inline std::string compareSources(const std::string& withText, const std::string& withPlaceholder) {
  for (size_t i = 0; i < withText.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(withText[i]);
    if (c != '\n' && (c < 0x20 || c > 0x7e)) {
      char b[64];
      std::snprintf(b, sizeof b, "byte 0x%02x at offset %zu", c, i);
      return b;
    }
  }
  std::vector<std::string> a = sourceTokens(withText), b = sourceTokens(withPlaceholder);
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  if (k == a.size() && k == b.size()) return "";
  auto at = [&](const std::vector<std::string>& t) {
    std::string s;
    for (size_t j = k; j < t.size() && j < k + 8; ++j) s += (t[j] == "\n" ? std::string("\\n") : t[j]) + " ";
    return s;
  };
  return "token " + std::to_string(k) + ": '" + at(a) + "' instead of '" + at(b) + "'";
}

/// Kernels of each kind the emitters print (an elementwise chain with a Gelu,
/// a reduction, an attention kernel), and the check of one model text
/// through all of them.
class CodegenNamesCheck {
 public:
  static constexpr const char* kPlaceholder = "placeholder";

  CodegenNamesCheck() {
    graphs_.push_back(fused("graph @g(%x: f32[4,8], %b: f32[8]) -> (%r: f32[4,8]) {\n"
                            "  %a = Add(%x, %b) : f32[4,8]\n"
                            "  %r = Gelu(%a) : f32[4,8]\n"
                            "  return %r\n}\n"));
    graphs_.push_back(fused("graph @g(%x: f32[4,8], %y: f32[4,8]) -> (%r: f32[4,8]) {\n"
                            "  %a = Mul(%x, %y) : f32[4,8]\n"
                            "  %r = Softmax(%a) {axis = -1} : f32[4,8]\n"
                            "  return %r\n}\n"));
  }

  /// \returns whether the fixed graphs parsed and fused (else check() tests little).
  bool ready() const {
    for (const auto& g : graphs_)
      if (!g || !fusedNode(*g)) return false;
    return !graphs_.empty();
  }

  /// Names the kernels' fused nodes (then, with no node name, their result
  /// values) `text`, sets the Gelu's `approximate` attribute to `attr`, and
  /// emits every kernel as C++ (one library) and as CUDA. \returns "" when
  /// each source has the tokens of the same kernels named kPlaceholder; else
  /// the first difference.
  std::string check(const std::string& text, const std::string& attr) {
    for (bool byValue : {false, true}) {
      auto key = std::make_pair(attr, byValue);
      auto it = placeholders_.find(key);
      if (it == placeholders_.end()) {
        if (placeholders_.size() > 64) placeholders_.clear();  // attribute strings vary while fuzzing
        it = placeholders_.emplace(key, emit(kPlaceholder, attr, byValue)).first;
      }
      const Sources& want = it->second;
      Sources got = emit(text, attr, byValue);
      if (got.kernels != want.kernels) return "a different number of kernels";
      if (std::string d = compareSources(got.cpp, want.cpp); !d.empty()) return "C++: " + d;
      if (std::string d = compareSources(got.cuda, want.cuda); !d.empty()) return "CUDA: " + d;
    }
    return "";
  }

 private:
  struct Sources {
    std::string cpp, cuda;
    size_t kernels = 0;
  };

  static std::unique_ptr<Graph> fused(const std::string& text) {
    auto g = parseGraph(text, "names.ir");
    if (!g.ok()) return nullptr;
    PassContext ctx;
    if (!createPass("fuse")->run(**g, ctx).ok()) return nullptr;
    return std::move(g).value();
  }

  static Node* fusedNode(Graph& g) {
    for (Node* n : g.nodes())
      if (n->op() == OpKind::Fused) return n;
    return nullptr;
  }

  Sources emit(const std::string& text, const std::string& attr, bool byValue) {
    std::vector<KernelSpec> specs;
    for (auto& g : graphs_) {
      Node* f = fusedNode(*g);
      if (!f) continue;
      for (Node* n : f->body(0)->nodes())
        if (n->op() == OpKind::Gelu) n->attrs().set("approximate", Attribute(attr));
      std::string oldName = f->output(0)->name();
      f->setName(byValue ? "" : text);
      if (byValue) f->output(0)->setName(text);
      auto spec = describeFused(*f);
      f->output(0)->setName(oldName);
      if (spec.ok()) specs.push_back(std::move(spec).value());
    }
    std::vector<TensorType> qkv(3, TensorType{DType::kF32, {1, 2, 4, 8}});
    if (auto a = describeAttentionTypes(qkv, AttrMap(), 1, text); a.ok()) specs.push_back(std::move(a).value());
    Sources s;
    std::vector<std::pair<std::string, const KernelSpec*>> kernels;
    for (size_t i = 0; i < specs.size(); ++i) {
      std::string name = "pcc_k_" + std::string(15, '0') + std::to_string(i);
      kernels.emplace_back(name, &specs[i]);
      s.cuda += emitCudaKernel(name, specs[i]);
    }
    s.cpp = emitCppLibrary(kernels);
    s.kernels = specs.size();
    return s;
  }

  std::vector<std::unique_ptr<Graph>> graphs_;
  std::map<std::pair<std::string, bool>, Sources> placeholders_;  // by (attribute, byValue)
};

}  // namespace pcc::fuzz
