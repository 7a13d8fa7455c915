// PCC_SKIP_UNLESS_REQUIRED: a prerequisite the README lets a machine lack
// (docs/testing.md, "Where a test may skip") is skipped, saying so; where the
// environment variable CI is set (as CI services set it) it must be there,
// and its absence fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace pcc::testing_support {

inline bool prerequisitesRequired() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::string(ci) != "0" && std::string(ci) != "false";
}

}  // namespace pcc::testing_support

#define PCC_SKIP_UNLESS_REQUIRED(why)                                                          \
  do {                                                                                         \
    if (::pcc::testing_support::prerequisitesRequired())                                       \
      FAIL() << why << " (CI is set: this prerequisite is required)";                          \
    GTEST_SKIP() << why;                                                                       \
  } while (0)
