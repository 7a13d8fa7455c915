// Binding the symbolic dims of the model's inputs to sizes. The steps:
//   1. --shape NAME=AxB gives an input's whole shape; it must match the
//      declared rank and fixed dims, and binds the symbols its dims cover;
//   2. the batch is the leading dim of every other input whose leading dim is
//      symbolic (and that symbol wherever it appears): --batch N binds it;
//      without it the batch is left to the caller (batchPending), or unbound;
//   3. every other symbol takes the size the model carries (modelDims): a
//      second declaration of the same value with a dim_value there, or a
//      metadata_props entry named after the symbol; two different sizes for a
//      symbol an input needs are an error naming both sources;
//   4. the shapes are assembled; every dim still without a size is named in
//      one error, which gives the --shape flag of every input that needs one.
#include "compiler/onnx/input_dims.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace pcc {

namespace {

/// \returns the size written in `s` (decimal digits, at least 1), if it is one.
std::optional<int64_t> sizeIn(const std::string& s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  int64_t v = std::stoll(s);
  if (v < 1) return std::nullopt;
  return v;
}

/// \returns what a suggested --shape flag writes for a dim without a size:
/// its symbol in capitals (characters other than letters, digits and '_' as
/// '_', an 'S' before a leading digit), or D<i> for the unnamed dim i.
std::string placeholder(const std::string& symbol, size_t i) {
  if (symbol.empty()) return strCat("D", i);
  std::string p;
  for (char c : symbol) {
    auto u = static_cast<unsigned char>(c);
    p += std::isalnum(u) ? static_cast<char>(std::toupper(u)) : '_';
  }
  if (std::isdigit(static_cast<unsigned char>(p[0]))) p = "S" + p;
  return p;
}

std::string symbolText(const std::string& symbol) { return symbol.empty() ? std::string("unnamed") : "'" + symbol + "'"; }

/// Steps 1 and 2 share this: symbol -> size and who set it.
class SymbolTable {
 public:
  explicit SymbolTable(const std::string& file) : file_(file) {}

  /// Binds `symbol` (nothing when empty) to `v`, set by `by`. \returns an
  /// error when it already has another size.
  Status bind(const std::string& symbol, int64_t v, const std::string& by) {
    if (symbol.empty()) return Status::OK();
    auto [it, fresh] = sizes_.emplace(symbol, std::make_pair(v, by));
    if (!fresh && it->second.first != v)
      return invalidInput(file_, ": symbolic dim '", symbol, "' is ", it->second.first, " by ", it->second.second,
                          " but ", v, " by ", by);
    return Status::OK();
  }
  std::optional<int64_t> find(const std::string& symbol) const {
    auto it = sizes_.find(symbol);
    if (symbol.empty() || it == sizes_.end()) return std::nullopt;
    return it->second.first;
  }

 private:
  const std::string& file_;
  std::map<std::string, std::pair<int64_t, std::string>> sizes_;
};

}  // namespace

StatusOr<InputDecl> declOf(const onnx::ValueInfoProto& in, const std::string& file) {
  InputDecl d;
  d.name = in.name();
  if (!in.type().has_tensor_type())
    return unsupported(file, ": input '", in.name(), "' is not a tensor (unsupported: pcc takes tensor inputs only)");
  const auto& tt = in.type().tensor_type();
  std::optional<DType> dt = dtypeFromOnnx(tt.elem_type());
  if (!dt) {
    // The system ONNX library may predate the newest types (float8, int4, ...).
    std::string typeName = onnx::TensorProto_DataType_Name(tt.elem_type());
    return unsupported(file, ": input '", in.name(), "' has unsupported element type ", tt.elem_type(), " (",
                       typeName.empty() ? "a type newer than pcc's ONNX library" : typeName, ")");
  }
  d.dtype = *dt;
  d.hasShape = tt.has_shape();
  for (const auto& dim : tt.shape().dim()) {
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0)
        return invalidInput(file, ": not a valid ONNX model (input '", in.name(), "' has a negative dim)");
      d.dims.push_back(dim.dim_value());
      d.symbols.emplace_back();
    } else {
      d.dims.push_back(std::nullopt);
      d.symbols.push_back(dim.has_dim_param() ? dim.dim_param() : std::string());
    }
  }
  return d;
}

std::vector<ModelDim> modelDims(const onnx::ModelProto& m) {
  struct Decl {
    const onnx::ValueInfoProto* vi;
    const char* kind;
  };
  std::map<std::string, std::vector<Decl>> byName;
  const onnx::GraphProto& g = m.graph();
  for (const auto& vi : g.input()) byName[vi.name()].push_back({&vi, "input"});
  for (const auto& vi : g.output()) byName[vi.name()].push_back({&vi, "output"});
  for (const auto& vi : g.value_info()) byName[vi.name()].push_back({&vi, "value_info"});
  std::vector<ModelDim> found;
  for (const auto& [name, decls] : byName) {
    if (decls.size() < 2) continue;
    for (const Decl& a : decls) {
      const bool isInput = std::string_view(a.kind) == "input";
      for (const Decl& b : decls) {
        if (&a == &b) continue;
        const auto &ta = a.vi->type().tensor_type(), &tb = b.vi->type().tensor_type();
        if (!ta.has_shape() || !tb.has_shape() || ta.shape().dim_size() != tb.shape().dim_size()) continue;
        for (int i = 0; i < ta.shape().dim_size(); ++i) {
          const auto &da = ta.shape().dim(i), &db = tb.shape().dim(i);
          if (da.has_dim_value() || !db.has_dim_value() || db.dim_value() < 0) continue;
          ModelDim md;
          md.symbol = da.has_dim_param() ? da.dim_param() : std::string();
          if (md.symbol.empty() && !isInput) continue;  // an unnamed dim binds nothing elsewhere
          if (isInput) md.input = name, md.dim = i;
          md.value = db.dim_value();
          md.source = strCat(b.kind, " '", name, "' dim ", i);
          found.push_back(std::move(md));
        }
      }
    }
  }
  for (const auto& p : m.metadata_props()) {
    std::optional<int64_t> v = sizeIn(p.value());
    if (!v || p.key().empty()) continue;
    ModelDim md;
    md.symbol = p.key();
    md.value = *v;
    md.source = strCat("metadata_props '", p.key(), "'");
    found.push_back(std::move(md));
  }
  return found;
}

StatusOr<InputBinding> bindInputShapes(const std::vector<InputDecl>& decls, const ImportOptions& opts,
                                       const onnx::ModelProto& m, const std::string& file, bool batchPending) {
  std::string inputList;
  for (const InputDecl& d : decls) inputList += strCat(inputList.empty() ? "" : ", ", d.name);
  for (const auto& entry : opts.shapes) {
    const std::string& name = entry.first;
    if (std::none_of(decls.begin(), decls.end(), [&](const InputDecl& d) { return d.name == name; }))
      return invalidInput(file, ": --shape names '", name, "', which is not an input of the model (inputs: ",
                          inputList.empty() ? "none" : inputList, ")");
  }
  if (opts.batch && *opts.batch <= 0) return invalidInput(file, ": --batch must be positive, got ", *opts.batch);

  SymbolTable symbols(file);
  InputBinding out;
  out.shapes.resize(decls.size());
  // Step 1.
  for (size_t k = 0; k < decls.size(); ++k) {
    const InputDecl& d = decls[k];
    auto it = opts.shapes.find(d.name);
    if (it == opts.shapes.end()) continue;
    const Dims& given = it->second;
    std::string by = strCat("--shape ", d.name);
    if (d.hasShape && given.size() != d.dims.size())
      return invalidInput(file, ": ", by, " has rank ", given.size(), " but the input has rank ", d.dims.size());
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i] < 0) return invalidInput(file, ": ", by, " has a negative dim");
      if (!d.hasShape) continue;
      if (d.dims[i] && *d.dims[i] != given[i])
        return invalidInput(file, ": ", by, " sets dim ", i, " to ", given[i], " but the model fixes it to ",
                            *d.dims[i]);
      RETURN_IF_ERROR(symbols.bind(d.symbols[i], given[i], by));
    }
    out.shapes[k] = given;
  }
  // Step 2: the inputs whose leading dim is the batch, and its symbols.
  auto open = [&](const InputDecl& d) { return !opts.shapes.count(d.name) && d.hasShape; };
  std::vector<bool> batchLed(decls.size(), false);
  std::set<std::string> batchSymbols;
  for (size_t k = 0; k < decls.size(); ++k) {
    const InputDecl& d = decls[k];
    if (!open(d) || d.dims.empty() || d.dims[0] || symbols.find(d.symbols[0])) continue;
    batchLed[k] = true;
    if (!d.symbols[0].empty()) batchSymbols.insert(d.symbols[0]);
    if (std::find(out.batchSymbols.begin(), out.batchSymbols.end(), d.symbols[0]) == out.batchSymbols.end())
      out.batchSymbols.push_back(d.symbols[0]);
  }
  if (opts.batch)
    for (size_t k = 0; k < decls.size(); ++k)
      if (batchLed[k]) RETURN_IF_ERROR(symbols.bind(decls[k].symbols[0], *opts.batch, "--batch"));
  auto isBatchDim = [&](size_t k, size_t i) {
    return (i == 0 && batchLed[k]) || batchSymbols.count(decls[k].symbols[i]) > 0;
  };

  // Step 3.
  std::vector<ModelDim> carried = modelDims(m);
  std::map<std::pair<size_t, size_t>, int64_t> unnamedSizes;
  for (size_t k = 0; k < decls.size(); ++k) {
    const InputDecl& d = decls[k];
    if (!open(d)) continue;
    for (size_t i = 0; i < d.dims.size(); ++i) {
      const std::string& sym = d.symbols[i];
      if (d.dims[i] || symbols.find(sym) || isBatchDim(k, i)) continue;
      const ModelDim* first = nullptr;
      for (const ModelDim& md : carried) {
        bool match = sym.empty() ? md.symbol.empty() && md.input == d.name && md.dim == static_cast<int>(i)
                                 : md.symbol == sym;
        if (!match) continue;
        if (first && first->value != md.value)
          return invalidInput(file, ": the model gives symbolic dim ", symbolText(sym), " of input '", d.name, "' dim ",
                              i, " two sizes: ", first->value, " (", first->source, ") and ", md.value, " (",
                              md.source, "); give it with --shape");
        if (!first) first = &md;
      }
      if (!first) continue;
      ModelDim used = *first;
      used.input = d.name;
      used.dim = static_cast<int>(i);
      if (sym.empty()) unnamedSizes[{k, i}] = used.value;
      else RETURN_IF_ERROR(symbols.bind(sym, used.value, used.source));
      out.fromModel.push_back(std::move(used));
    }
  }

  // Step 4.
  std::vector<std::string> unbound, flags, holders;
  bool batchUnbound = false;
  for (size_t k = 0; k < decls.size(); ++k) {
    const InputDecl& d = decls[k];
    if (opts.shapes.count(d.name)) continue;
    if (!d.hasShape) {
      unbound.push_back(strCat("input '", d.name, "' (no declared shape)"));
      flags.push_back(strCat("--shape ", d.name, "=AxB..."));
      continue;
    }
    bool needsShape = false, pending = false;
    std::string flag;
    std::vector<std::string> mine;  // the placeholders of its flag
    for (size_t i = 0; i < d.dims.size(); ++i) {
      std::optional<int64_t> v = d.dims[i] ? d.dims[i] : symbols.find(d.symbols[i]);
      if (!v && unnamedSizes.count({k, i})) v = unnamedSizes[{k, i}];
      if (!v && i == 0 && opts.batch && batchLed[k]) v = *opts.batch;
      std::string text = v ? std::to_string(*v) : placeholder(d.symbols[i], i);
      flag += (i ? "x" : "") + text;
      if (v) {
        out.shapes[k].push_back(*v);
        continue;
      }
      out.shapes[k].push_back(1);
      mine.push_back(text);
      if (isBatchDim(k, i) && batchPending) {
        pending = true;
        continue;
      }
      bool batch = isBatchDim(k, i);
      batchUnbound |= batch;
      needsShape |= !batch;
      unbound.push_back(strCat("input '", d.name, "' dim ", i, " (", symbolText(d.symbols[i]),
                               batch ? ", the batch" : "", ")"));
    }
    if (pending) out.batchInputs.push_back(d.name);
    if (!needsShape) continue;
    flags.push_back(strCat("--shape ", d.name, "=", flag));
    for (const std::string& h : mine)
      if (std::find(holders.begin(), holders.end(), h) == holders.end()) holders.push_back(h);
  }
  if (unbound.empty()) return out;
  std::string list;
  for (const std::string& u : unbound) list += (list.empty() ? "" : ", ") + u;
  std::string fix;
  for (const std::string& f : flags) fix += (fix.empty() ? "" : " ") + f;
  if (!fix.empty()) {
    std::string names;
    for (const std::string& h : holders) names += (names.empty() ? "" : ", ") + h;
    fix = strCat("pass ", fix, names.empty() ? "" : strCat(" with sizes in place of ", names));
  }
  if (batchUnbound) fix += strCat(fix.empty() ? "pass" : ", and", " --batch N for the batch");
  return invalidInput(file, ": ", unbound.size() == 1 ? "a symbolic dim has" : strCat(unbound.size(), " symbolic dims have"),
                      " no size (from --batch, --shape or the model): ", list, "; ", fix);
}

}  // namespace pcc
