// The shared kernel entry (runtime/ops/kernel_call.h): one handling of absent
// inputs, of inference (once, or at run time when a shape operand is not
// known), of provider kernels and of error context, whoever calls.
#include <cstring>

#include "ops_test_util.h"
#include "runtime/ops/kernel_call.h"

namespace pcc::testing {
namespace {

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.raw(), v.size() * sizeof(float));
  return v;
}

TEST(OpsKernelCall, AbsentInputsAreHandledAlikeWhateverTheirSpelling) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2, 2}, {1, 0, 0, 1}), none;
  auto two = runKernel("Gemm", {&a, &b}, {});
  auto null = runKernel("Gemm", {&a, &b, nullptr}, {});
  auto undefined = runKernel("Gemm", {&a, &b, &none}, {});
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_TRUE(null.ok()) << null.status().message();
  ASSERT_TRUE(undefined.ok()) << undefined.status().message();
  EXPECT_EQ(floats((*two)[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(floats((*null)[0]), floats((*two)[0]));
  EXPECT_EQ(floats((*undefined)[0]), floats((*two)[0]));
  // An absent input before a present one stays in place (Clip's min absent, max given).
  Tensor x = f32({3}, {-5, 0.5, 5}), hi = f32({}, {1});
  auto clip = runKernel("Clip", {&x, nullptr, &hi}, {});
  ASSERT_TRUE(clip.ok()) << clip.status().message();
  EXPECT_EQ(floats((*clip)[0]), (std::vector<float>{-5, 0.5, 1}));
}

TEST(OpsKernelCall, ErrorsNameWhereOpAndInputs) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({4}, {1, 2, 3, 4});
  auto r = runKernel("Add", {&a, &b, nullptr}, {}, "node 'n1' (Add)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(r.status().message().rfind("node 'n1' (Add): Add with inputs (f32[2,3], f32[4]): ", 0), 0u)
      << r.status().message();
  auto none = runKernel("NoSuchOp", {&a}, {}, "node 'n2' (NoSuchOp)");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(none.status().message().rfind("node 'n2' (NoSuchOp): NoSuchOp with inputs (f32[2,3])", 0), 0u)
      << none.status().message();
}

TEST(OpsKernelCall, InfersOnceWhenShapeOperandsAreKnown) {
  AttrMap attrs;
  Tensor shape = ints({3, 2});
  auto k = OpKernel::prepare("Reshape", attrs, {TensorType{DType::kF32, {2, 3}}, shape.type()}, {nullptr, &shape});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_FALSE(k->infersAtRun());
  ASSERT_EQ(k->outputTypes().size(), 1u);
  EXPECT_EQ(k->outputTypes()[0], (TensorType{DType::kF32, {3, 2}}));
  EXPECT_TRUE(k->checkDeclared({TensorType{DType::kF32, {3, 2}}}, StatusCode::kInvalidInput,
                               [](size_t) { return std::string("y"); }).ok());
  Status bad = k->checkDeclared({TensorType{DType::kF32, {6}}}, StatusCode::kInvalidInput,
                                [](size_t) { return std::string("buffer 'y'"); });
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kInvalidInput);
  EXPECT_NE(bad.message().find("output 0 is f32[3,2] but buffer 'y' is f32[6]"), std::string::npos) << bad.message();
  // More declared outputs than the op makes.
  EXPECT_FALSE(k->checkDeclared({TensorType{DType::kF32, {3, 2}}, TensorType{DType::kF32, {3, 2}}},
                                StatusCode::kInternal, [](size_t) { return std::string("y"); }).ok());
}

TEST(OpsKernelCall, InfersAtRunWhenAShapeOperandIsComputed) {
  AttrMap attrs;
  Tensor x = iota({2, 3}), shape = ints({3, 2}), wrong = ints({6});
  auto k = OpKernel::prepare("Reshape", attrs, {x.type(), shape.type()}, {}, "rank 0: node 'r' (Reshape)");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE(k->infersAtRun());
  auto out = k->run({&x, &shape});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].type(), (TensorType{DType::kF32, {3, 2}}));
  // Into planned memory: the type the value gives must be the planned one.
  Tensor planned = Tensor::zeros(DType::kF32, {3, 2});
  ASSERT_TRUE(k->runInto({&x, &shape}, {planned}).ok());
  EXPECT_EQ(floats(planned), floats(x));
  Status st = k->runInto({&x, &wrong}, {planned});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(st.message().rfind("rank 0: node 'r' (Reshape): Reshape with inputs", 0), 0u) << st.message();
}

TEST(OpsKernelCall, KnownInputsTheOpRejectsFailAtPreparation) {
  AttrMap attrs;
  Tensor a = f32({2}, {1, 2}), b = f32({3}, {1, 2, 3});
  auto k = OpKernel::prepare("Add", attrs, {a.type(), b.type()}, {&a, &b});
  ASSERT_FALSE(k.ok());  // every value known: final, not deferred to run time
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidInput);
  // With a computed input the refusal waits for the run (the plan may not
  // say everything inference needs), and the run reports it.
  auto later = OpKernel::prepare("Add", attrs, {a.type(), b.type()}, {&a, nullptr}, "rank 0: node 'a' (Add)");
  ASSERT_TRUE(later.ok()) << later.status().message();
  EXPECT_TRUE(later->infersAtRun());
  auto r = later->run({&a, &b});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(r.status().message().rfind("rank 0: node 'a' (Add): Add with inputs (f32[2], f32[3]): ", 0), 0u)
      << r.status().message();
}

/// A provider kernel that takes every other call and counts them.
class Alternating : public KernelOverride {
 public:
  StatusOr<bool> run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) override {
    ++calls;
    if (calls % 2 == 0) return false;  // leave this one to the reference kernel
    // Planned outputs arrive as tensors to write; a dropped one undefined.
    if (out.empty()) out.emplace_back();
    if (!out[0].defined()) out[0] = Tensor::zeros(in[0]->type());
    Tensor y = out[0];
    float* d = static_cast<float*>(y.mutableData());
    const float* s = in[0]->data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) d[i] = s[i] > 0 ? s[i] : 0;  // Relu
    ++taken;
    return true;
  }
  int calls = 0, taken = 0;
};

TEST(OpsKernelCall, ProviderKernelFirstThenReference) {
  Tensor x = f32({4}, {-1, 2, -3, 4});
  AttrMap attrs;
  auto provider = std::make_shared<Alternating>();
  auto k = OpKernel::prepare("Relu", attrs, {x.type()}, {}, {}, {{Provider::kGenerated, provider}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::vector<float> want{0, 2, 0, 4};
  for (int i = 0; i < 2; ++i) {  // the provider's call, then the reference's
    auto out = k->run({&x});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(floats((*out)[0]), want);
    EXPECT_EQ(k->lastProvider(), i == 0 ? Provider::kGenerated : Provider::kReference);
  }
  for (int i = 0; i < 2; ++i) {  // into planned memory, over the input (in place)
    Tensor y = f32({4}, {-1, 2, -3, 4});
    ASSERT_TRUE(k->runInto({&y}, {y}).ok());
    EXPECT_EQ(floats(y), want);
  }
  EXPECT_EQ(provider->calls, 4);
  EXPECT_EQ(provider->taken, 2);
  // A dropped output (undefined) is not written; the call still succeeds.
  ASSERT_TRUE(k->runInto({&x}, {Tensor()}).ok());
}

TEST(OpsKernelCall, WithoutTheReferenceACallNoProviderTakesIsAnError) {
  Tensor x = f32({4}, {-1, 2, -3, 4});
  AttrMap attrs;
  auto provider = std::make_shared<Alternating>();
  auto k = OpKernel::prepare(OpKind::Relu, attrs, {x.type()}, {}, {}, {{Provider::kGenerated, provider}},
                             /*reference=*/false);
  ASSERT_TRUE(k.ok()) << k.status().message();
  ASSERT_TRUE(k->run({&x}).ok());  // the provider takes the first call
  auto declined = k->run({&x});     // and leaves the second, with no reference kernel behind it
  ASSERT_FALSE(declined.ok());
  EXPECT_NE(declined.status().message().find("no kernel of the preferred providers"), std::string::npos)
      << declined.status().message();
  // Neither a provider nor the reference: nothing to run.
  EXPECT_FALSE(OpKernel::prepare(OpKind::Relu, attrs, {x.type()}, {}, {}, {}, /*reference=*/false).ok());
}

TEST(OpsKernelCall, RunOpIsTheEntryWithoutContext) {
  Tensor a = f32({2}, {1, 2}), b = f32({2}, {3, 4});
  auto viaRunOp = runOp("Mul", {&a, &b}, {});
  auto viaEntry = runKernel("Mul", {&a, &b}, {});
  ASSERT_TRUE(viaRunOp.ok());
  ASSERT_TRUE(viaEntry.ok());
  EXPECT_EQ(floats((*viaRunOp)[0]), floats((*viaEntry)[0]));
}

}  // namespace
}  // namespace pcc::testing
