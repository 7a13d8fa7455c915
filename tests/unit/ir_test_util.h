// Helpers to build small graphs in the ir, eval and passes tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "compiler/ir/text.h"
#include "compiler/ir/verifier.h"

namespace pcc::testing {

/// Adds a node whose output types come from type inference; fails the test
/// (and returns nullptr) when inference fails.
inline Node* addInferred(Graph& g, OpKind op, std::vector<Value*> inputs, AttrMap attrs = {},
                         std::string name = {}, std::vector<std::string> outputNames = {}) {
  auto types = inferOutputTypes(op, inputs, attrs, name);
  EXPECT_TRUE(types.ok()) << types.status().message();
  if (!types.ok()) return nullptr;
  return g.addNode(op, std::move(inputs), *types, std::move(attrs), std::move(name), std::move(outputNames));
}

inline Tensor f32(Dims shape, std::vector<float> v) { return Tensor::fromVector<float>(DType::kF32, std::move(shape), v); }
inline Tensor i64(Dims shape, std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>(DType::kI64, std::move(shape), v);
}

inline std::vector<float> floatsOf(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.getDouble(i)));
  return v;
}

/// Parses `text`, failing the test on error. \returns the graph (nullptr on error).
inline std::unique_ptr<Graph> parseOrFail(const std::string& text) {
  auto g = parseGraph(text, "test.ir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return nullptr;
  Status s = verifyGraph(**g);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::move(*g);
}

}  // namespace pcc::testing
