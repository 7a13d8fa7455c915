// Reference kernels registered with kWritesOutputs write the outputs they are
// handed (views into a rank's arena) instead of allocating: every such kernel
// is run into outputs filled with a poison pattern, and must leave them
// holding exactly what the allocating call gives, at the same address, with
// no copy counted; the elementwise ones also with output 0 over input 0 (the
// memory plan's in-place placement), broadcasting included. Kernels without
// the trait are still copied into place, and counted.
#include <cstring>
#include <map>
#include <set>

#include "ops_test_util.h"
#include "runtime/ops/kernel_call.h"

namespace pcc::testing {
namespace {

/// One way of calling an op: its inputs (values known) and attributes.
struct Call {
  std::vector<Tensor> inputs;
  AttrMap attrs;
};

/// \returns a tensor of `t` with deterministic values that every op under test
/// accepts: floats in [0.1, 0.9] (Log, Sqrt and the divisions stay finite),
/// integers in [1, 3] (no division by zero), bools alternating.
Tensor valuesOf(const TensorType& t, uint32_t seed) {
  Tensor r = Tensor::zeros(t);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < r.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    double u = static_cast<double>(s >> 8) / static_cast<double>(1u << 24);
    if (isFloat(t.dtype)) r.setDouble(i, 0.1 + 0.8 * u);
    else if (t.dtype == DType::kBool) r.setInt(i, (s >> 12) & 1);
    else r.setInt(i, 1 + static_cast<int64_t>(u * 3));
  }
  return r;
}

/// Calls for ops whose inputs are shape operands, indices or otherwise not
/// made by the generic search below.
std::map<OpKind, Call> specialCalls() {
  std::map<OpKind, Call> m;
  Tensor x = valuesOf({DType::kF32, {2, 3, 4}}, 1);
  auto attrs = [](std::initializer_list<std::pair<const char*, int64_t>> kv) {
    AttrMap a;
    for (const auto& p : kv) a.set(p.first, Attribute(p.second));
    return a;
  };
  m[OpKind::Reshape] = {{x, ints({4, 6})}, {}};
  m[OpKind::Unsqueeze] = {{x, ints({1})}, {}};
  m[OpKind::Squeeze] = {{valuesOf({DType::kF32, {2, 1, 4}}, 2), ints({1})}, {}};
  m[OpKind::Expand] = {{valuesOf({DType::kF32, {3, 1}}, 3), ints({2, 3, 4})}, {}};
  m[OpKind::ConstantOfShape] = {{ints({2, 3})}, {}};
  m[OpKind::Slice] = {{x, ints({0, 1}), ints({2, 4}), ints({1, 2}), ints({1, 2})}, {}};
  m[OpKind::Split] = {{x, ints({1, 3})}, attrs({{"axis", 2}})};
  m[OpKind::Gather] = {{x, i64({2, 2}, {2, 0, 1, -1})}, attrs({{"axis", 1}})};
  m[OpKind::GatherND] = {{x, i64({2, 2}, {1, 2, 0, 1})}, {}};
  m[OpKind::Concat] = {{x, valuesOf({DType::kF32, {2, 1, 4}}, 4)}, attrs({{"axis", 1}})};
  m[OpKind::MatMul] = {{x, valuesOf({DType::kF32, {4, 5}}, 11)}, {}};
  m[OpKind::Gemm] = {{valuesOf({DType::kF32, {3, 4}}, 12), valuesOf({DType::kF32, {5, 4}}, 13),
                      valuesOf({DType::kF32, {5}}, 14)},
                     attrs({{"transB", 1}})};
  m[OpKind::Cast] = {{x}, attrs({{"to", 6}})};  // to int32 (ONNX's INT32)
  // A [2,3,4] x W [K 4, N 5] in 4-bit blocks of 2: B u8[5, 2, 1], scales [5, 2].
  m[OpKind::MatMulNBits] = {{x, valuesOf({DType::kU8, {5, 2, 1}}, 17), valuesOf({DType::kF32, {5, 2}}, 18)},
                            attrs({{"bits", 4}, {"block_size", 2}})};
  m[OpKind::BitShift] = {{valuesOf({DType::kU32, {2, 3, 4}}, 5), valuesOf({DType::kU32, {4}}, 6)}, {}};
  m[OpKind::BitShift].attrs.set("direction", Attribute(std::string("LEFT")));
  m[OpKind::BatchNormalization] = {
      {x, valuesOf({DType::kF32, {3}}, 7), valuesOf({DType::kF32, {3}}, 8), valuesOf({DType::kF32, {3}}, 9),
       valuesOf({DType::kF32, {3}}, 10)},
      {}};
  // X [B, H, S, D] = [2, 2, 3, 4], the caches [max_position 5, D / 2] read at position_ids.
  m[OpKind::RotaryEmbedding] = {{valuesOf({DType::kF32, {2, 2, 3, 4}}, 15), valuesOf({DType::kF32, {5, 2}}, 16),
                                 valuesOf({DType::kF32, {5, 2}}, 17), i64({2, 3}, {0, 1, 2, 4, 3, 1})},
                                {}};
  return m;
}

/// \returns a call of `op` that its type inference accepts: the first of a
/// few input patterns (input 0 f32/i32/bool/u32 [2,3,4]; the others of the same
/// dtype or bool/f32 mixes, of shape [2,3,4], [4], [3] or []), or nullopt.
std::optional<Call> findCall(OpKind op) {
  auto special = specialCalls();
  if (special.count(op)) return special[op];
  const OpInfo& info = opInfo(op);
  int n = std::max(info.minInputs, 1);
  std::vector<std::vector<DType>> dtypes;
  for (DType d : {DType::kF32, DType::kI32, DType::kBool, DType::kU32}) dtypes.push_back(std::vector<DType>(n, d));
  std::vector<DType> where(n, DType::kF32);  // Where: a bool condition
  where[0] = DType::kBool;
  dtypes.push_back(where);
  for (const std::vector<DType>& ds : dtypes)
    for (Dims rest : {Dims{2, 3, 4}, Dims{4}, Dims{3}, Dims{}}) {
      Call c;
      std::vector<TensorType> types;
      for (int i = 0; i < n; ++i) {
        TensorType t{ds[i], i == 0 || ds[i] != ds[0] ? Dims{2, 3, 4} : rest};
        c.inputs.push_back(valuesOf(t, 20 + i));
        types.push_back(t);
      }
      InferArgs a;
      a.attrs = &c.attrs;
      a.inputs = types;
      for (const Tensor& t : c.inputs) a.constInputs.push_back(&t);
      if (inferFn(op)(a).ok()) return c;
    }
  return std::nullopt;
}

/// \returns `t` with its floats (a f32 call's inputs) narrowed to f16.
Tensor toHalf(const Tensor& t) {
  if (t.dtype() != DType::kF32) return t;
  Tensor h = Tensor::zeros(DType::kF16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) h.setDouble(i, t.getDouble(i));
  return h;
}

/// A tensor of `t` filled with 0xA5 bytes (a NaN for f32), in memory of its own.
Tensor poisoned(const TensorType& t) {
  Tensor r = Tensor::zeros(t);
  if (r.nbytes()) std::memset(r.mutableData(), 0xA5, r.nbytes());
  return r;
}

bool sameBits(const Tensor& a, const Tensor& b) {
  return a.type() == b.type() && (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

/// Runs `c` of `op` allocating and into poisoned planned outputs (or, with
/// `inPlace`, output 0 over a copy of input 0) and checks the kernel wrote
/// them. \returns a description of what went wrong, or "".
std::string checkWritesInto(OpKind op, const Call& c, bool inPlace) {
  std::vector<const Tensor*> args;
  std::vector<TensorType> types;
  for (const Tensor& t : c.inputs) {
    args.push_back(&t);
    types.push_back(t.type());
  }
  // Shape operands are known, as the plan's weights are; the rest computed.
  std::vector<const Tensor*> known(args.size(), nullptr);
  for (size_t i = 0; i < args.size(); ++i)
    if (isShapeOperand(op, i)) known[i] = args[i];
  auto k = OpKernel::prepare(op, c.attrs, types, known);
  if (!k.ok()) return "prepare: " + k.status().message();
  if (k->infersAtRun()) return "infers at run time";
  auto want = k->run(args);
  if (!want.ok()) return "run: " + want.status().message();
  std::vector<Tensor> planned;
  for (const TensorType& t : k->outputTypes()) planned.push_back(poisoned(t));
  Tensor x0;
  if (inPlace) {
    if (planned[0].dtype() != args[0]->dtype() || planned[0].numel() != args[0]->numel())
      return "output 0 cannot be over input 0";
    x0 = args[0]->clone();
    args[0] = &x0;
    planned[0] = Tensor::view(planned[0].dtype(), planned[0].shape(), x0.raw(), nullptr);
  }
  std::vector<const void*> addresses;
  for (const Tensor& t : planned) addresses.push_back(t.raw());
  uint64_t copies = OpKernel::outputCopies(op);
  Status st = k->runInto(args, planned);
  if (!st.ok()) return "runInto: " + st.message();
  if (k->lastCopied() || OpKernel::outputCopies(op) != copies) return "an output was copied into place";
  for (size_t i = 0; i < planned.size(); ++i) {
    if (planned[i].raw() != addresses[i]) return "output " + std::to_string(i) + " moved";
    if (!sameBits(planned[i], (*want)[i]))
      return "output " + std::to_string(i) + " is " + planned[i].str() + ", allocating gives " + (*want)[i].str();
  }
  return "";
}

std::vector<OpKind> writingKernels() {
  std::vector<OpKind> r;
  for (OpKind op : kernelRegistry().ops(Provider::kReference))
    if (kernelRegistry().find(op, Provider::kReference)->writesOutputs) r.push_back(op);
  return r;
}

TEST(OpsWritesOutputs, EveryWritingKernelFillsThePoisonedPlannedOutputs) {
  std::vector<OpKind> ops = writingKernels();
  // The ops converted so far: the elementwise families, shape ops, data
  // movement, the normalizations and global pools (docs/runtime.md#memory).
  EXPECT_GE(ops.size(), 85u);
  int halves = 0;
  for (OpKind op : ops) {
    std::optional<Call> c = findCall(op);
    ASSERT_TRUE(c.has_value()) << opName(op) << ": no input pattern its inference accepts; add one to specialCalls";
    EXPECT_EQ(checkWritesInto(op, *c, false), "") << opName(op);
    // The f16 path (computeViaF32) narrows into the planned outputs too.
    Call h = *c;
    bool anyF32 = false;
    for (Tensor& t : h.inputs)
      if (t.dtype() == DType::kF32) {
        t = toHalf(t);
        anyF32 = true;
      }
    if (!anyF32) continue;
    std::vector<TensorType> types;
    for (const Tensor& t : h.inputs) types.push_back(t.type());
    if (!OpKernel::prepare(op, h.attrs, types, {}).ok()) continue;  // the op takes no f16
    EXPECT_EQ(checkWritesInto(op, h, false), "") << opName(op) << " on f16";
    ++halves;
  }
  EXPECT_GE(halves, 40);
}

TEST(OpsWritesOutputs, ElementwiseKernelsComputeOverTheirInput0) {
  int tried = 0;
  for (OpKind op : writingKernels()) {
    if (!isElementwiseOp(op)) continue;
    std::optional<Call> c = findCall(op);
    ASSERT_TRUE(c.has_value()) << opName(op);
    std::vector<TensorType> types;
    for (const Tensor& t : c->inputs) types.push_back(t.type());
    auto k = OpKernel::prepare(op, c->attrs, types, {});
    ASSERT_TRUE(k.ok()) << k.status().message();
    ASSERT_FALSE(k->outputTypes().empty()) << opName(op) << " infers at run time";
    const TensorType& y = k->outputTypes()[0];
    if (y.dtype != types[0].dtype || y.shape != types[0].shape) continue;  // the memory plan never puts it there
    EXPECT_EQ(checkWritesInto(op, *c, true), "") << opName(op);
    ++tried;
    // Broadcasting the other operands over input 0 ([2,3,4] with [4] and []).
    for (Dims rest : {Dims{4}, Dims{}}) {
      Call b = *c;
      bool changed = false;
      for (size_t i = 1; i < b.inputs.size(); ++i)
        if (b.inputs[i].dtype() == b.inputs[0].dtype()) {
          b.inputs[i] = valuesOf({b.inputs[i].dtype(), rest}, 40 + i);
          changed = true;
        }
      std::vector<TensorType> bt;
      for (const Tensor& t : b.inputs) bt.push_back(t.type());
      if (!changed || !OpKernel::prepare(op, b.attrs, bt, {}).ok()) continue;
      EXPECT_EQ(checkWritesInto(op, b, true), "") << opName(op) << " broadcasting";
    }
  }
  EXPECT_GE(tried, 50);
}

TEST(OpsWritesOutputs, AnAllocatingKernelIsCopiedIntoPlaceAndCounted) {
  // TopK allocates its outputs (no kWritesOutputs): runInto copies them.
  ASSERT_FALSE(kernelRegistry().find(OpKind::TopK, Provider::kReference)->writesOutputs);
  Tensor x = f32({4}, {3, 1, 4, 2}), kv = ints({2});
  AttrMap attrs;  // outlives the kernel, which keeps a pointer to it
  auto k = OpKernel::prepare(OpKind::TopK, attrs, {x.type(), kv.type()}, {nullptr, &kv});
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::vector<Tensor> planned = {poisoned(k->outputTypes()[0]), poisoned(k->outputTypes()[1])};
  uint64_t before = OpKernel::outputCopies(OpKind::TopK);
  ASSERT_TRUE(k->runInto({&x, &kv}, planned).ok());
  EXPECT_TRUE(k->lastCopied());
  EXPECT_EQ(OpKernel::outputCopies(OpKind::TopK), before + 2);
  EXPECT_EQ(planned[0].getDouble(0), 4);
  EXPECT_EQ(planned[0].getDouble(1), 3);
}

}  // namespace
}  // namespace pcc::testing
