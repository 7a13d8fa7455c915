// Helpers for the importer tests: build ONNX models in C++ with the protobuf
// API, import them, and evaluate the imported graph with the reference kernels.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "compiler/eval/evaluator.h"
#include "compiler/onnx/importer.h"
#include "runtime/onnx_tensor.h"
#include "runtime/ops/registry.h"

namespace pcc::testing {

/// A declared dim: fixed (int) or symbolic (name; "" = unnamed).
using Dim = std::variant<int64_t, std::string>;

inline void declare(onnx::ValueInfoProto* vi, const std::string& name, DType dt, const std::vector<Dim>& dims,
                    bool withShape = true) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  if (dt != DType::kUndefined) tt->set_elem_type(static_cast<int32_t>(dt));
  if (!withShape) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    auto* pd = shape->add_dim();
    if (const int64_t* v = std::get_if<int64_t>(&d)) {
      pd->set_dim_value(*v);
    } else if (!std::get<std::string>(d).empty()) {
      pd->set_dim_param(std::get<std::string>(d));
    }
  }
}

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17, int64_t irVersion = 8) {
    m_.set_ir_version(irVersion);
    m_.set_producer_name("pcc-tests");
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }
  ModelBuilder& input(const std::string& name, DType dt, const std::vector<Dim>& dims) {
    declare(m_.mutable_graph()->add_input(), name, dt, dims);
    return *this;
  }
  ModelBuilder& inputNoShape(const std::string& name, DType dt) {
    declare(m_.mutable_graph()->add_input(), name, dt, {}, false);
    return *this;
  }
  ModelBuilder& output(const std::string& name, DType dt = DType::kUndefined) {
    declare(m_.mutable_graph()->add_output(), name, dt, {}, false);
    return *this;
  }
  ModelBuilder& init(const std::string& name, const Tensor& t) {
    tensorToProto(t, name, m_.mutable_graph()->add_initializer());
    return *this;
  }
  ModelBuilder& initI64(const std::string& name, const std::vector<int64_t>& v) {
    return init(name, Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v));
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& ins,
                        const std::vector<std::string>& outs, const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& s : ins) n->add_input(s);
    for (const auto& s : outs) n->add_output(s);
    return *n;
  }
  onnx::ModelProto& model() { return m_; }
  std::string bytes() const { return m_.SerializeAsString(); }

 private:
  onnx::ModelProto m_;
};

inline onnx::AttributeProto* newAttr(onnx::NodeProto& n, const std::string& name,
                                     onnx::AttributeProto::AttributeType type) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
inline void setInt(onnx::NodeProto& n, const std::string& name, int64_t v) {
  newAttr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
inline void setFloat(onnx::NodeProto& n, const std::string& name, float v) {
  newAttr(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}
inline void setString(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  newAttr(n, name, onnx::AttributeProto::STRING)->set_s(v);
}
inline void setInts(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = newAttr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void setFloats(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
  auto* a = newAttr(n, name, onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
inline void setTensor(onnx::NodeProto& n, const std::string& name, const Tensor& t) {
  tensorToProto(t, "", newAttr(n, name, onnx::AttributeProto::TENSOR)->mutable_t());
}

inline StatusOr<std::unique_ptr<Graph>> importModel(ModelBuilder& b, const ImportOptions& opts = {}) {
  return importOnnxModel(b.model(), "", "model.onnx", opts);
}

/// Imports and fails the test on error.
#define PCC_IMPORT_OK(g, builder, ...)                                      \
  auto g##_or = ::pcc::testing::importModel(builder, ##__VA_ARGS__);        \
  ASSERT_TRUE(g##_or.ok()) << g##_or.status().message();                    \
  std::unique_ptr<::pcc::Graph> g = std::move(g##_or).value()

/// Evaluates `g` on `inputs` (in graph-input order) with the reference
/// kernels: the reference evaluator (evaluateGraph), not an interpreter of its own.
/// \returns the graph outputs.
inline StatusOr<std::vector<Tensor>> evaluate(const Graph& g, const std::vector<Tensor>& inputs) {
  return evaluateGraph(g, inputs);
}

/// \returns the nodes of `g` whose op is `op`.
inline std::vector<Node*> nodesOf(const Graph& g, OpKind op) {
  std::vector<Node*> out;
  for (Node* n : g.nodes())
    if (n->op() == op) out.push_back(n);
  return out;
}

/// \returns a tensor of `shape` with values `start + i * step`.
inline Tensor iota(Dims shape, float start = 0.f, float step = 1.f) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mutableData<float>()[i] = start + step * static_cast<float>(i);
  return t;
}

/// \returns a fresh directory for this test process.
inline std::string tempDir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() / ("pcc_onnx_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline void expectNear(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  ASSERT_EQ(a.type(), b.type()) << a.str() << " vs " << b.str();
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.getDouble(i), b.getDouble(i), tol) << "element " << i << ": " << a.str() << " vs " << b.str();
}

}  // namespace pcc::testing
