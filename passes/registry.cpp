#include "passes/registry.h"

#include <algorithm>

namespace pcc {

namespace {
struct PassEntry {
  std::string_view name;
  std::unique_ptr<Pass> (*create)();
};

// One row per pass; names must equal the passes' name().
const PassEntry kPasses[] = {
    {"canonicalize", [] { return createCanonicalizePass(); }},
    {"cse", [] { return createCsePass(); }},
    {"dce", [] { return createDcePass(); }},
    {"fold-batchnorm", [] { return createFoldBatchNormPass(); }},
    {"fold-constants", [] { return createFoldConstantsPass(); }},
    {"recognize", [] { return createRecognizePass(); }},
    {"fuse", [] { return createFusePass(); }},
    {"unit-transposes", [] { return createUnitTransposesPass(); }},
};
}  // namespace

std::unique_ptr<Pass> createPass(std::string_view name) {
  for (const PassEntry& e : kPasses)
    if (e.name == name) return e.create();
  return nullptr;
}

std::vector<std::string> passNames() {
  std::vector<std::string> names;
  for (const PassEntry& e : kPasses) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace pcc
