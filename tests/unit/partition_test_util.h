// Helpers shared by the partitioner's tests.
#pragma once

#include <gtest/gtest.h>

#include "passes/partition/device_spec.h"

namespace pcc::testing {

/// \returns the shipped h100 cluster spec, failing the test if it cannot be read.
inline ClusterSpec h100() {
  auto s = builtinClusterSpec("h100");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

}  // namespace pcc::testing
