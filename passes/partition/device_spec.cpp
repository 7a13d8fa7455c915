#include "passes/partition/device_spec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "passes/partition/device_spec_data.h"
#include "runtime/support/mapped_file.h"

namespace pcc {

namespace {

using Json = nlohmann::json;

// The ranges a spec's figures must lie in (docs/cost-model.md). They bound
// every estimate: a tensor of at most 2^40 bytes (kMaxTensorBytes) moved at
// 1 B/s at an efficiency of 1e-3 takes about 1e15 s, far from overflow, where
// a rate or bandwidth of 1e-300 would make every time infinite (printed as
// null). The lower ends are far below any real device so that toy specs
// (tests, hand computations) stay valid.
struct Range {
  double lo, hi;
};
constexpr Range kRateRange{1, 1e21};          // operations per second
constexpr Range kBandwidthRange{1, 1e18};     // bytes per second
constexpr Range kSecondsRange{1e-12, 3600};   // launch overhead, link latency
constexpr Range kEfficiencyRange{1e-3, 1};    // achievable fraction of a peak
constexpr Range kOpFactorRange{1e-4, 1e4};    // on an op's roofline time
constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;  // 1 PiB per device

// Rate keys a spec may list, and the element types each covers.
const std::set<std::string> kRateKeys = {"f64", "f32", "tf32", "f16", "bf16", "f8", "i8"};

std::string rateKey(DType t) {
  switch (t) {
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3FN:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2:
    case DType::kF8E5M2FNUZ: return "f8";
    case DType::kI8:
    case DType::kU8: return "i8";
    default: return "f32";
  }
}

double rateFor(const std::map<std::string, double>& rates, DType t) {
  auto it = rates.find(rateKey(t));
  return it != rates.end() ? it->second : rates.at("f32");
}

// Reads JSON objects field by field, naming the path of what is wrong.
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  Status fail(const std::string& path, const std::string& what) const {
    return invalidInput(origin_, ": ", path, ": ", what);
  }

  /// Fails on a key of `obj` not in `known`: a misspelt key must not be ignored.
  Status onlyKeys(const Json& obj, const std::string& path, std::initializer_list<const char*> known) const {
    for (const auto& item : obj.items()) {
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return item.key() == k; }))
        return fail(path.empty() ? item.key() : path + "." + item.key(), "unknown key");
    }
    return Status::OK();
  }

  StatusOr<const Json*> member(const Json& obj, const std::string& path, const char* key, Json::value_t type) const {
    std::string p = path.empty() ? key : path + "." + key;
    auto it = obj.find(key);
    if (it == obj.end()) return fail(p, "missing");
    bool ok = it->type() == type || (type == Json::value_t::number_float && it->is_number());
    if (!ok) return fail(p, strCat("must be ", typeName(type)));
    return &*it;
  }

  StatusOr<std::string> string(const Json& obj, const std::string& path, const char* key) const {
    ASSIGN_OR_RETURN(const Json* v, member(obj, path, key, Json::value_t::string));
    return v->get<std::string>();
  }

  /// A finite number in [r.lo, r.hi]; the error names the key and the range.
  StatusOr<double> number(const Json& obj, const std::string& path, const char* key, Range r) const {
    ASSIGN_OR_RETURN(const Json* v, member(obj, path, key, Json::value_t::number_float));
    double d = v->get<double>();
    if (!std::isfinite(d) || d < r.lo || d > r.hi)
      return fail(path.empty() ? key : path + "." + key,
                  strCat("must be a number from ", r.lo, " to ", r.hi, " (got ", v->dump(), ")"));
    return d;
  }

  StatusOr<int64_t> integer(const Json& obj, const std::string& path, const char* key, int64_t lo,
                            int64_t hi = INT64_MAX) const {
    std::string p = path.empty() ? key : path + "." + key;
    auto it = obj.find(key);
    if (it == obj.end()) return fail(p, "missing");
    if (!it->is_number_integer()) return fail(p, "must be an integer");
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return fail(p, "too large");
    int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
      return fail(p, hi == INT64_MAX ? strCat("must be an integer >= ", lo)
                                     : strCat("must be an integer from ", lo, " to ", hi, " (got ", v, ")"));
    return v;
  }

  StatusOr<std::map<std::string, double>> rates(const Json& obj, const std::string& path, const char* key) const {
    std::string p = path + "." + key;
    ASSIGN_OR_RETURN(const Json* v, member(obj, path, key, Json::value_t::object));
    std::map<std::string, double> out;
    for (const auto& item : v->items()) {
      if (!kRateKeys.count(item.key()))
        return fail(p + "." + item.key(), "unknown element type (f64, f32, tf32, f16, bf16, f8, i8)");
      ASSIGN_OR_RETURN(out[item.key()], number(*v, p, item.key().c_str(), kRateRange));
    }
    if (!out.count("f32")) return fail(p + ".f32", "missing (the rate used for types not listed)");
    return out;
  }

  StatusOr<LinkSpec> link(const Json& obj, const char* key) const {
    ASSIGN_OR_RETURN(const Json* v, member(obj, "", key, Json::value_t::object));
    RETURN_IF_ERROR(onlyKeys(*v, key, {"name", "bandwidth", "latency_s", "efficiency"}));
    LinkSpec l;
    ASSIGN_OR_RETURN(l.name, string(*v, key, "name"));
    ASSIGN_OR_RETURN(l.bandwidth, number(*v, key, "bandwidth", kBandwidthRange));
    ASSIGN_OR_RETURN(l.latency, number(*v, key, "latency_s", kSecondsRange));
    ASSIGN_OR_RETURN(l.efficiency, number(*v, key, "efficiency", kEfficiencyRange));
    return l;
  }

 private:
  static const char* typeName(Json::value_t t) {
    switch (t) {
      case Json::value_t::string: return "a string";
      case Json::value_t::object: return "an object";
      default: return "a number";
    }
  }
  std::string origin_;
};

}  // namespace

double DeviceSpec::matrixRate(DType t) const { return rateFor(matrixFlops, t); }
double DeviceSpec::vectorRate(DType t) const { return rateFor(vectorFlops, t); }

double DeviceSpec::opFactor(std::string_view op) const {
  auto it = opFactors.find(std::string(op));
  return it != opFactors.end() ? it->second : 1.0;
}

StatusOr<ClusterSpec> parseClusterSpec(std::string_view json, std::string_view origin) {
  Reader r(origin);
  Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalidInput(origin, ": not valid JSON");
  if (!doc.is_object()) return invalidInput(origin, ": must be a JSON object");
  RETURN_IF_ERROR(r.onlyKeys(doc, "", {"name", "description", "source", "device", "gpus_per_node", "intra_node",
                                       "inter_node"}));
  ClusterSpec c;
  ASSIGN_OR_RETURN(c.name, r.string(doc, "", "name"));
  ASSIGN_OR_RETURN(c.description, r.string(doc, "", "description"));
  if (doc.contains("source")) {
    ASSIGN_OR_RETURN(c.source, r.string(doc, "", "source"));
  }

  ASSIGN_OR_RETURN(const Json* dev, r.member(doc, "", "device", Json::value_t::object));
  RETURN_IF_ERROR(r.onlyKeys(*dev, "device", {"memory_bytes", "reserved_bytes", "memory_bandwidth", "matrix_flops",
                                              "vector_flops", "launch_overhead_s", "efficiency", "op_factors",
                                              "cache"}));
  DeviceSpec& d = c.device;
  ASSIGN_OR_RETURN(d.memoryBytes, r.integer(*dev, "device", "memory_bytes", 1, kMaxMemoryBytes));
  ASSIGN_OR_RETURN(d.reservedBytes, r.integer(*dev, "device", "reserved_bytes", 0));
  if (d.reservedBytes >= d.memoryBytes)
    return r.fail("device.reserved_bytes", "must be less than device.memory_bytes");
  ASSIGN_OR_RETURN(d.memoryBandwidth, r.number(*dev, "device", "memory_bandwidth", kBandwidthRange));
  ASSIGN_OR_RETURN(d.matrixFlops, r.rates(*dev, "device", "matrix_flops"));
  ASSIGN_OR_RETURN(d.vectorFlops, r.rates(*dev, "device", "vector_flops"));
  ASSIGN_OR_RETURN(d.launchOverhead, r.number(*dev, "device", "launch_overhead_s", kSecondsRange));
  ASSIGN_OR_RETURN(const Json* eff, r.member(*dev, "device", "efficiency", Json::value_t::object));
  RETURN_IF_ERROR(r.onlyKeys(*eff, "device.efficiency", {"matrix", "vector", "memory"}));
  ASSIGN_OR_RETURN(d.matrixEfficiency, r.number(*eff, "device.efficiency", "matrix", kEfficiencyRange));
  ASSIGN_OR_RETURN(d.vectorEfficiency, r.number(*eff, "device.efficiency", "vector", kEfficiencyRange));
  ASSIGN_OR_RETURN(d.memoryEfficiency, r.number(*eff, "device.efficiency", "memory", kEfficiencyRange));
  if (dev->contains("cache")) {
    ASSIGN_OR_RETURN(const Json* cache, r.member(*dev, "device", "cache", Json::value_t::object));
    RETURN_IF_ERROR(r.onlyKeys(*cache, "device.cache", {"bytes", "bandwidth"}));
    ASSIGN_OR_RETURN(d.cacheBytes, r.integer(*cache, "device.cache", "bytes", 1, kMaxMemoryBytes));
    ASSIGN_OR_RETURN(d.cacheBandwidth, r.number(*cache, "device.cache", "bandwidth", kBandwidthRange));
  }
  if (dev->contains("op_factors")) {
    ASSIGN_OR_RETURN(const Json* f, r.member(*dev, "device", "op_factors", Json::value_t::object));
    for (const auto& item : f->items()) {
      if (item.key().empty()) return r.fail("device.op_factors", "an empty op name");
      ASSIGN_OR_RETURN(d.opFactors[item.key()], r.number(*f, "device.op_factors", item.key().c_str(), kOpFactorRange));
    }
  }

  ASSIGN_OR_RETURN(int64_t perNode, r.integer(doc, "", "gpus_per_node", 1, 65536));
  c.gpusPerNode = static_cast<int>(perNode);
  ASSIGN_OR_RETURN(c.intraNode, r.link(doc, "intra_node"));
  ASSIGN_OR_RETURN(c.interNode, r.link(doc, "inter_node"));
  return c;
}

StatusOr<ClusterSpec> loadClusterSpec(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> f, MappedFile::open(path));
  constexpr size_t kMaxSpecBytes = 1 << 20;
  if (f->size() > kMaxSpecBytes) return invalidInput(path, ": a cluster spec over 1 MiB is not plausible");
  return parseClusterSpec(std::string_view(reinterpret_cast<const char*>(f->data()), f->size()), path);
}

StatusOr<ClusterSpec> builtinClusterSpec(std::string_view name) {
  for (const BuiltinSpecText& s : builtinSpecTexts()) {
    if (s.name != name) continue;
    return parseClusterSpec(s.json, strCat("built-in spec '", s.name, "'"));
  }
  std::string names;
  for (const std::string& n : builtinClusterSpecNames()) names += (names.empty() ? "" : ", ") + n;
  return invalidInput("unknown device '", name, "' (known: ", names, "; or give --cluster FILE.json)");
}

std::vector<std::string> builtinClusterSpecNames() {
  std::vector<std::string> names;
  for (const BuiltinSpecText& s : builtinSpecTexts()) names.emplace_back(s.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace pcc
