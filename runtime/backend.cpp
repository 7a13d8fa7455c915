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
  std::map<std::string, BackendMaker, std::less<>> makers;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->makers["cpu"] = makeCpuBackend;
    return reg;
  }();
  return *r;
}
}  // namespace

StatusOr<Tensor> Backend::allocateStaging(const TensorType& t) { return Tensor::zeros(t); }

void registerBackend(const std::string& name, BackendMaker make) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.makers[name] = std::move(make);
}

StatusOr<std::unique_ptr<Backend>> makeBackend(std::string_view name, const BackendOptions& options) {
  Registry& r = registry();
  BackendMaker make;
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
