// Calibration of CPU ranks.
//
// Algorithm:
//  1. Kernels run on a fresh cpu backend (the oneDNN kernels where an op has
//     one, else the reference ones: what pcc-run runs) with threadsPerRank
//     OpenMP threads; weights are passed as constant inputs, as the executor
//     passes plan weights. Each case is called once untimed, then timed call
//     by call for secondsPerCase; its time is the fastest call (on a shared
//     machine, a call that other work preempted says nothing of the kernel).
//  2. Contractions (MatMul and Conv at a few sizes): the best rate is the
//     matrix rate, the median rate over it the matrix efficiency.
//  3. A large Add (16 MiB operands, several times a core's L2): memory
//     bandwidth, counting inputs and output once each. An Add whose three
//     operands fill half a core's L2: the cache's bandwidth.
//  4. A small Add (cache-resident): the vector rate in elements per second.
//  5. An Add of one element: the fixed cost of a kernel.
//  6. Common ops at one standard size each (CalibrationKind::kOp), a 512 KiB
//     activation whose operands fit in a core's L2 (so that the factor is
//     the op's, not the memory hierarchy's), for the per-op factors
//     pcc-calibrate derives from the model's time for them.
//  7. Gloo: `ranks` threads connect as one group and all-reduce one float
//     (latency: a ring all-reduce of n ranks takes 2(n-1) steps) and 16 MiB
//     (bandwidth, once the latency is taken off).
#include "runtime/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "runtime/backend.h"
#include "runtime/comm_gloo.h"
#include "runtime/cpu/fast_kernels.h"
#include "runtime/support/random.h"

namespace pcc {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string typesText(const std::vector<TensorType>& ts) {
  std::string s;
  for (const TensorType& t : ts) s += (s.empty() ? "" : ", ") + t.str();
  return s;
}

/// One kernel case: the op, its attributes, its input types (which of them
/// are weights) and its output types.
struct KernelCase {
  CalibrationKind kind;
  std::string op;
  AttrMap attrs;
  std::vector<TensorType> inputs;
  std::vector<bool> weight;
  std::vector<TensorType> outputs;
};

TensorType f32(Dims shape) { return TensorType{DType::kF32, std::move(shape)}; }

AttrMap ints(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> kv) {
  AttrMap a;
  for (const auto& p : kv) a.set(p.first, p.second);
  return a;
}

AttrMap one(const char* name, int64_t v) {
  AttrMap a;
  a.set(name, v);
  return a;
}

KernelCase matmul(int64_t m, int64_t k, int64_t n) {
  return {CalibrationKind::kMatrix, "MatMul", {}, {f32({m, k}), f32({k, n})}, {false, true}, {f32({m, n})}};
}

KernelCase conv(int64_t c, int64_t hw, int64_t cout, int64_t kernel) {
  AttrMap a = ints({{"kernel_shape", {kernel, kernel}}, {"pads", {kernel / 2, kernel / 2, kernel / 2, kernel / 2}},
                    {"strides", {1, 1}}});
  return {CalibrationKind::kMatrix, "Conv", a, {f32({1, c, hw, hw}), f32({cout, c, kernel, kernel}), f32({cout})},
          {false, true, true}, {f32({1, cout, hw, hw})}};
}

KernelCase unary(CalibrationKind kind, const std::string& op, const TensorType& t, AttrMap a = {}) {
  return {kind, op, std::move(a), {t}, {false}, {t}};
}

KernelCase binary(CalibrationKind kind, const std::string& op, const TensorType& t) {
  return {kind, op, {}, {t, t}, {false, false}, {t}};
}

/// The cases of steps 2 to 6 for a core's L2 of `cacheBytes`. The standard
/// size of step 6 is a 512 KiB activation [1, 16, 64, 128] (a per-row op
/// works on rows of 128).
std::vector<KernelCase> kernelCases(int64_t cacheBytes) {
  std::vector<KernelCase> c = {matmul(128, 768, 768), matmul(128, 768, 3072), matmul(128, 3072, 768),
                               matmul(512, 1024, 1024), conv(64, 56, 64, 3), conv(128, 28, 128, 3),
                               conv(256, 14, 256, 3), conv(256, 56, 64, 1), conv(512, 14, 2048, 1)};
  c.push_back(binary(CalibrationKind::kLaunch, "Add", f32({1})));
  c.push_back(binary(CalibrationKind::kMemory, "Add", f32({1 << 22})));
  c.push_back(binary(CalibrationKind::kCache, "Add", f32({std::max<int64_t>(1024, cacheBytes / 2 / 12)})));
  c.push_back(binary(CalibrationKind::kVector, "Add", f32({1 << 14})));
  const TensorType act = f32({1, 16, 64, 128});
  const TensorType row = f32({1, 16, 64, 1});
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Where"}) {
    if (std::string(op) == "Where") {
      c.push_back({CalibrationKind::kOp, op, {}, {TensorType{DType::kBool, act.shape}, act, act}, {false, false, false},
                   {act}});
      continue;
    }
    c.push_back(binary(CalibrationKind::kOp, op, act));
  }
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Sqrt", "Neg", "Gelu"})
    c.push_back(unary(CalibrationKind::kOp, op, act));
  c.push_back(unary(CalibrationKind::kOp, "Softmax", act, one("axis", -1)));
  c.push_back({CalibrationKind::kOp, "LayerNormalization", one("axis", -1), {act, f32({128}), f32({128})},
               {false, true, true}, {act}});
  c.push_back({CalibrationKind::kOp, "ReduceMean", ints({{"axes", {-1}}}), {act}, {false}, {row}});
  c.push_back({CalibrationKind::kOp, "Transpose", ints({{"perm", {0, 2, 1, 3}}}), {act}, {false},
               {f32({1, 64, 16, 128})}});
  c.push_back({CalibrationKind::kOp, "Concat", one("axis", 1), {act, act}, {false, false}, {f32({1, 32, 64, 128})}});
  c.push_back({CalibrationKind::kOp, "MaxPool", ints({{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}},
                                                       {"strides", {2, 2}}}),
               {act}, {false}, {f32({1, 16, 32, 64})}});
  c.push_back({CalibrationKind::kOp, "GlobalAveragePool", {}, {act}, {false}, {f32({1, 16, 1, 1})}});
  c.push_back({CalibrationKind::kOp, "Cast", one("to", 7), {act}, {false}, {TensorType{DType::kI64, act.shape}}});
  return c;
}

/// \returns the fastest call's seconds of `call` over about `budget` seconds
/// (at least 3 calls). The fastest, not the median: on a machine other work
/// shares, a call that other work preempts says nothing of the kernel.
template <typename Call>
StatusOr<double> timeCalls(Call call, double budget) {
  RETURN_IF_ERROR(call());  // untimed: first-touch, weight reorders
  std::vector<double> t;
  const Clock::time_point start = Clock::now();
  while (t.size() < 3 || (std::chrono::duration<double>(Clock::now() - start).count() < budget && t.size() < 20000)) {
    Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(call());
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return *std::min_element(t.begin(), t.end());
}

StatusOr<CalibrationSample> timeKernel(Backend& backend, const KernelCase& c, double budget, uint64_t seed) {
  std::vector<Tensor> values = pseudoRandomTensors(c.inputs, seed);
  KernelDesc k;
  k.op = c.op;
  k.attrs = &c.attrs;
  k.inputs = c.inputs;
  k.outputs = c.outputs;
  k.where = strCat("calibration: ", c.op, " ", typesText(c.inputs));
  for (size_t i = 0; i < values.size(); ++i) k.constInputs.push_back(c.weight[i] ? &values[i] : nullptr);
  for (size_t i = 0; i < c.outputs.size(); ++i) k.outputNames.push_back(strCat("output ", i));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernel> kernel, backend.prepareKernel(k));
  std::vector<const Tensor*> args;
  for (const Tensor& v : values) args.push_back(&v);
  std::vector<Tensor> outs;
  for (const TensorType& t : c.outputs) {
    ASSIGN_OR_RETURN(DeviceMemory m, backend.allocate(t.bytes()));
    outs.push_back(m.view(0, t));
  }
  CalibrationSample s;
  s.kind = c.kind;
  s.op = c.op;
  s.what = strCat(c.op, " ", typesText(c.inputs));
  s.work = opWork(c.op, c.inputs, c.outputs, c.attrs);
  ASSIGN_OR_RETURN(s.seconds, timeCalls([&] { return kernel->run(args, outs); }, budget));
  return s;
}

/// Step 7: \returns the fastest seconds of an all-reduce of `bytes` over
/// `ranks` rank threads (rank 0's), each of `iters` calls.
StatusOr<std::vector<double>> timeAllReduce(int ranks, const std::vector<int64_t>& bytes, int iters) {
  std::shared_ptr<GlooStore> store = GlooStore::inProcess();
  GlooOptions gopts;
  gopts.timeout = std::chrono::seconds(60);
  std::vector<int> all;
  for (int r = 0; r < ranks; ++r) all.push_back(r);
  std::vector<CommGroup> groups = {CommGroup{"dp", all}};
  std::vector<double> result(bytes.size(), 0);
  std::mutex mu;
  Status first;
  std::vector<RankComms> comms(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const Status& s) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = s;
      };
      auto c = connectGloo(*store, r, ranks, groups, false, gopts);
      if (!c.ok()) return fail(c.status());
      comms[r] = std::move(c).value();
      for (size_t b = 0; b < bytes.size(); ++b) {
        Tensor t = Tensor::zeros(DType::kF32, {std::max<int64_t>(1, bytes[b] / 4)});
        std::vector<double> times;
        for (int i = 0; i < iters + 1; ++i) {
          Clock::time_point t0 = Clock::now();
          Status st = comms[r].groups[0]->allReduceSum(t);
          if (!st.ok()) {
            comms[r].abortAll();
            return fail(st);
          }
          if (i > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (r == 0) result[b] = *std::min_element(times.begin(), times.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (!first.ok()) return first;
  return result;
}

}  // namespace

StatusOr<Calibration> calibrateCpu(const CalibrationOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  Calibration cal;
  cal.ranks = std::max(1, o.ranks);
  cal.threadsPerRank = o.threadsPerRank > 0 ? o.threadsPerRank : cpu::threadsPerRank(cal.ranks);
  const int64_t pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  cal.cacheBytes = l2 > 0 ? l2 : int64_t(1) << 20;
  cal.memoryBytesPerRank = pages > 0 && pageSize > 0 ? pages * pageSize / cal.ranks : int64_t(8) << 30;

  // Steps 1-6 on this thread, with the threads a rank's kernels get.
  cpu::setKernelThreads(cal.threadsPerRank);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, makeBackend("cpu", BackendOptions{}));
  std::vector<double> matrixRates;
  uint64_t seed = 1;
  for (const KernelCase& c : kernelCases(cal.cacheBytes)) {
    ASSIGN_OR_RETURN(CalibrationSample s, timeKernel(*backend, c, o.secondsPerCase, seed++));
    double us = s.seconds * 1e6;
    switch (s.kind) {
      case CalibrationKind::kMatrix:
        matrixRates.push_back(s.work.flops / s.seconds);
        say(strCat(s.what, ": ", us, " us, ", s.work.flops / s.seconds / 1e9, " GFLOP/s"));
        break;
      case CalibrationKind::kMemory:
        cal.memoryBandwidth = s.work.bytes / s.seconds;
        say(strCat(s.what, ": ", us, " us, ", cal.memoryBandwidth / 1e9, " GB/s"));
        break;
      case CalibrationKind::kCache:
        cal.cacheBandwidth = s.work.bytes / std::max(s.seconds - cal.launchOverhead, s.seconds / 2);
        say(strCat(s.what, ": ", us, " us, ", cal.cacheBandwidth / 1e9, " GB/s (", cal.cacheBytes >> 10,
                   " KiB L2)"));
        break;
      case CalibrationKind::kVector:
        cal.vectorFlops = s.work.flops / s.seconds;
        say(strCat(s.what, ": ", us, " us, ", cal.vectorFlops / 1e9, " G elements/s"));
        break;
      case CalibrationKind::kLaunch:
        cal.launchOverhead = s.seconds;
        say(strCat(s.what, ": ", us, " us"));
        break;
      default: say(strCat(s.what, ": ", us, " us")); break;
    }
    cal.samples.push_back(std::move(s));
  }
  std::vector<double> sorted = matrixRates;
  std::sort(sorted.begin(), sorted.end());
  cal.matrixFlops = sorted.back();
  cal.matrixEfficiency = median(sorted) / sorted.back();

  // Step 7.
  if (cal.ranks > 1) {
    const int64_t big = int64_t(16) << 20;
    ASSIGN_OR_RETURN(std::vector<double> t, timeAllReduce(cal.ranks, {4, big}, 30));
    const double n = cal.ranks;
    cal.linkLatency = t[0] / (2 * (n - 1));
    double transfer = std::max(t[1] - 2 * (n - 1) * cal.linkLatency, t[1] / 2);
    cal.linkBandwidth = 2 * (n - 1) / n * static_cast<double>(big) / transfer;
    for (int b = 0; b < 2; ++b) {
      CalibrationSample s;
      s.kind = CalibrationKind::kAllReduce;
      s.op = "all_reduce";
      s.what = strCat("all_reduce of ", b ? big : 4, " bytes over ", cal.ranks, " rank threads");
      s.work.bytes = b ? big : 4;
      s.seconds = t[b];
      say(strCat(s.what, ": ", t[b] * 1e6, " us"));
      cal.samples.push_back(s);
    }
    say(strCat("gloo: latency ", cal.linkLatency * 1e6, " us per step, ", cal.linkBandwidth / 1e9, " GB/s"));
  }
  return cal;
}

}  // namespace pcc
