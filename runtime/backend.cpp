// The backend registry: name -> maker. "cpu" is registered on first use; tests
// add their own.
#include "runtime/backend.h"

#include <map>
#include <mutex>

namespace pcc {

std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options);  // cpu_backend.cpp

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, BackendMakerOr, std::less<>> makers;
  std::map<std::string, BackendProbe, std::less<>> probes;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->makers["cpu"] = [](const BackendOptions& o) -> StatusOr<std::unique_ptr<Backend>> {
      return makeCpuBackend(o);
    };
    return reg;
  }();
  return *r;
}
}  // namespace

StatusOr<Tensor> Backend::allocateStaging(const TensorType& t) { return Tensor::zeros(t); }

void registerBackend(const std::string& name, BackendMaker make) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.makers[name] = [make](const BackendOptions& o) -> StatusOr<std::unique_ptr<Backend>> {
    std::unique_ptr<Backend> b = make(o);
    if (!b) return internalError("the backend maker returned nothing");
    return b;
  };
  r.probes.erase(name);
}

void registerBackendOr(const std::string& name, BackendMakerOr make, BackendProbe probe) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.makers[name] = std::move(make);
  r.probes[name] = std::move(probe);
}

StatusOr<std::string> resolveBackend(const std::string& requested, std::string* note) {
  auto probe = [](const std::string& name, bool* known) -> Status {
    Registry& r = registry();
    BackendProbe p;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      *known = r.makers.count(name) != 0;
      auto it = r.probes.find(name);
      if (it != r.probes.end()) p = it->second;
    }
    if (!*known) return Status::OK();
    return p ? p() : Status::OK();
  };
  bool known = false;
  if (requested == "auto") {
    Status st = probe("cuda", &known);
    if (known && st.ok()) return std::string("cuda");
    if (note)
      *note = strCat("--backend auto: no usable GPU (",
                     known ? st.message() : std::string("this build has no CUDA backend: built without the CUDA toolkit"),
                     "); running on CPU ranks");
    return std::string("cpu");
  }
  Status st = probe(requested, &known);
  if (!known && requested == "cuda")
    return environmentError("--backend cuda: this build has no CUDA backend (built without the CUDA toolkit)");
  if (!known) {
    std::string names;
    for (const std::string& n : backendNames()) names += (names.empty() ? "" : ", ") + n;
    return invalidInput("--backend: unknown backend '", requested, "' (registered: ", names, "; or auto)");
  }
  if (!st.ok()) return Status(st.code(), strCat("--backend ", requested, ": ", st.message()));
  return requested;
}

StatusOr<std::unique_ptr<Backend>> makeBackend(std::string_view name, const BackendOptions& options) {
  Registry& r = registry();
  BackendMakerOr make;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.makers.find(name);
    if (it != r.makers.end()) make = it->second;
  }
  if (!make) {
    std::string known;
    for (const std::string& n : backendNames()) known += (known.empty() ? "" : ", ") + n;
    return invalidInput("unknown backend '", name, "' (known: ", known, ")");
  }
  return make(options);
}

std::vector<std::string> backendNames() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, m] : r.makers) names.push_back(n);
  return names;
}

}  // namespace pcc
