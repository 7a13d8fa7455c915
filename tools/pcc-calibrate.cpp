// pcc-calibrate: measures this machine's CPU ranks with the kernels and the
// gloo communicators pcc-run uses (runtime/calibrate.h) and writes a cluster
// spec that `pcc --cluster FILE.json` reads (docs/cost-model.md#calibration).
//
// Algorithm:
//  1. Measure (calibrateCpu): contraction rates, memory bandwidth, the
//     vector rate, a kernel's fixed cost, common ops at a standard size, and
//     a gloo all-reduce over --ranks rank threads.
//  2. The spec's rates: the best contraction rate (matrix_flops.f32) with the
//     median contraction's share of it (efficiency.matrix); the vector rate
//     and the bandwidths (memory, and a core's L2 as the cache) as measured
//     (their efficiencies 1); the all-reduce's alpha and beta as the
//     intra-node link.
//  3. Per-op factors: for each op timed at its standard size, the measured
//     time less the fixed cost over the cost model's roofline time under the
//     rates of step 2. The model multiplies that op's roofline time by it.
//     Contractions get none (step 2's median rate stands for them all).
//  4. The spec is parsed back (parseClusterSpec) before it is written, so a
//     file this tool writes is one pcc accepts.
//
// Exit codes: 0 ok, 2 bad usage, 3 internal error, 4 environment (gloo).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "passes/partition/cost_model.h"
#include "passes/partition/device_spec.h"
#include "runtime/calibrate.h"
#include "tools/cli.h"

namespace {

using namespace pcc;

constexpr const char* kAbout =
    "Measures this machine's CPU ranks (oneDNN contraction rates, memory bandwidth,\n"
    "kernel overhead, common ops, gloo all-reduce latency and bandwidth between rank\n"
    "threads) and writes a cluster spec for pcc --cluster.";
constexpr const char* kFooter = "exit codes: 0 ok, 2 bad usage, 3 internal error, 4 a connection failed";

struct Args {
  std::string output, name = "cpu-calibrated";
  CalibrationOptions cal;
};

int fail(const Status& s) {
  std::fprintf(stderr, "pcc-calibrate: error: %s\n", s.message().c_str());
  return s.exitCode();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Step 2: the spec of the measured rates, with no per-op factors yet.
ClusterSpec baseSpec(const Calibration& c, const ClusterSpec& cpu, const std::string& name) {
  ClusterSpec s;
  s.name = name;
  s.description = strCat("CPU ranks of this machine, measured by pcc-calibrate: ", c.ranks, " ranks of ",
                         c.threadsPerRank, " kernel thread(s), gloo over loopback TCP");
  s.source = "pcc-calibrate (oneDNN and reference kernels, gloo all-reduce between rank threads); the "
             "inter-node link is not measured: it is the shipped cpu spec's guess";
  DeviceSpec& d = s.device;
  d.memoryBytes = c.memoryBytesPerRank;
  d.reservedBytes = std::min<int64_t>(int64_t(256) << 20, d.memoryBytes / 4);
  d.memoryBandwidth = c.memoryBandwidth;
  if (c.cacheBandwidth > c.memoryBandwidth) {  // a cache slower than memory says nothing
    d.cacheBytes = c.cacheBytes;
    d.cacheBandwidth = c.cacheBandwidth;
  }
  d.matrixFlops = {{"f32", c.matrixFlops}};
  d.vectorFlops = {{"f32", c.vectorFlops}};
  d.launchOverhead = c.launchOverhead;
  d.matrixEfficiency = c.matrixEfficiency;
  d.vectorEfficiency = d.memoryEfficiency = 1;
  s.gpusPerNode = cpu.gpusPerNode;
  s.intraNode = cpu.intraNode;
  if (c.linkBandwidth > 0) {
    s.intraNode = LinkSpec{"gloo over loopback TCP (measured)", c.linkBandwidth, c.linkLatency, 1.0};
  }
  s.interNode = cpu.interNode;
  return s;
}

/// Step 3: \returns the per-op factors.
std::map<std::string, double> opFactors(const Calibration& c, const ClusterSpec& base) {
  CostModel cm(base);
  std::map<std::string, std::vector<double>> ratios;
  for (const CalibrationSample& s : c.samples) {
    // Contractions are not given factors: their rates differ by shape far
    // more than by op, and efficiency.matrix already takes the median one.
    if (s.kind != CalibrationKind::kOp) continue;
    const double launch = base.device.launchOverhead;
    const double model = cm.computeTime(s.work, DType::kF32) - launch;
    if (model <= 0) continue;
    ratios[s.op].push_back(std::clamp((s.seconds - launch) / model, 1e-3, 1e4));
  }
  std::map<std::string, double> out;
  for (const auto& [op, r] : ratios) out[op] = median(r);
  return out;
}

std::string specJson(const ClusterSpec& s) {
  using Json = nlohmann::ordered_json;
  auto rates = [](const std::map<std::string, double>& m) {
    Json j = Json::object();
    for (const auto& [k, v] : m) j[k] = v;
    return j;
  };
  auto link = [](const LinkSpec& l) {
    return Json{{"name", l.name}, {"bandwidth", l.bandwidth}, {"latency_s", l.latency}, {"efficiency", l.efficiency}};
  };
  const DeviceSpec& d = s.device;
  Json doc;
  doc["name"] = s.name;
  doc["description"] = s.description;
  doc["source"] = s.source;
  doc["device"] = Json{{"memory_bytes", d.memoryBytes},
                       {"reserved_bytes", d.reservedBytes},
                       {"memory_bandwidth", d.memoryBandwidth},
                       {"matrix_flops", rates(d.matrixFlops)},
                       {"vector_flops", rates(d.vectorFlops)},
                       {"launch_overhead_s", d.launchOverhead},
                       {"efficiency", Json{{"matrix", d.matrixEfficiency},
                                           {"vector", d.vectorEfficiency},
                                           {"memory", d.memoryEfficiency}}},
                       {"op_factors", rates(d.opFactors)}};
  if (d.cacheBytes > 0) doc["device"]["cache"] = Json{{"bytes", d.cacheBytes}, {"bandwidth", d.cacheBandwidth}};
  doc["gpus_per_node"] = s.gpusPerNode;
  doc["intra_node"] = link(s.intraNode);
  doc["inter_node"] = link(s.interNode);
  return doc.dump(2) + "\n";
}

int run(const Args& a) {
  StatusOr<ClusterSpec> cpu = builtinClusterSpec("cpu");
  if (!cpu.ok()) return fail(cpu.status());
  // Opened first: a path that cannot be written fails before a minute of measuring.
  std::ofstream f;
  if (!a.output.empty()) {
    f.open(a.output);
    if (!f) return fail(invalidInput(a.output, ": cannot write"));
  }
  std::fprintf(stderr, "pcc-calibrate: %d rank(s); timing each case for %.2f s\n", a.cal.ranks, a.cal.secondsPerCase);
  StatusOr<Calibration> cal = calibrateCpu(a.cal);
  if (!cal.ok()) return fail(cal.status());
  ClusterSpec spec = baseSpec(*cal, *cpu, a.name);
  spec.device.opFactors = opFactors(*cal, spec);
  std::string text = specJson(spec);
  StatusOr<ClusterSpec> back = parseClusterSpec(text, a.output.empty() ? "<stdout>" : a.output);
  if (!back.ok()) return fail(internalError("the spec written does not parse: ", back.status().message()));
  std::fprintf(stderr,
               "pcc-calibrate: matrix %.1f GFLOP/s (median %.0f%% of it), vector %.2f G elements/s, memory %.1f GB/s, "
               "kernel overhead %.2f us",
               spec.device.matrixRate(DType::kF32) / 1e9, spec.device.matrixEfficiency * 100,
               spec.device.vectorRate(DType::kF32) / 1e9, spec.device.memoryBandwidth / 1e9,
               spec.device.launchOverhead * 1e6);
  if (cal->linkBandwidth > 0)
    std::fprintf(stderr, ", gloo %.1f us, %.2f GB/s", spec.intraNode.latency * 1e6, spec.intraNode.bandwidth / 1e9);
  std::fprintf(stderr, "\n");
  if (a.output.empty()) {
    std::cout << text;
    return 0;
  }
  f << text;
  f.close();
  if (!f) return fail(invalidInput(a.output, ": cannot write"));
  std::fprintf(stderr, "pcc-calibrate: wrote %s (use: pcc MODEL --cluster %s)\n", a.output.c_str(), a.output.c_str());
  return 0;
}

}  // namespace

int toolMain(int argc, char** argv) {
  Args a;
  CLI::App app(kAbout, "pcc-calibrate");
  cli::setDefaults(app, kFooter);
  app.add_option("-o,--output", a.output, "write the spec to FILE (default: standard output)")->type_name("FILE");
  app.add_option("--name", a.name, "the spec's name (default cpu-calibrated)")->type_name("NAME");
  cli::addInteger(app, "--ranks", 1, 64, [&](int64_t n) { a.cal.ranks = static_cast<int>(n); },
                  "rank threads sharing this machine (default 2): the gloo\n"
                  "all-reduce runs between them, and each kernel runs with\n"
                  "the threads one of them gets");
  cli::addInteger(app, "--threads", 1, 4096, [&](int64_t n) { a.cal.threadsPerRank = static_cast<int>(n); },
                  "OpenMP threads of a rank's kernels (default: the\n"
                  "processors this process may use / --ranks, as pcc-run)");
  cli::addNumber(app, "--seconds", 0.001, a.cal.secondsPerCase, "seconds spent timing each case (default 0.15)", "S");
  a.cal.progress = [](const std::string& line) { std::fprintf(stderr, "pcc-calibrate: %s\n", line.c_str()); };
  auto extras = [&](const std::vector<std::string>& rest) -> std::string {
    for (const std::string& r : rest)
      if (r != "--" && !(r.size() > 1 && r[0] == '-')) return strCat("unexpected argument '", r, "' (it takes no model)");
    return cli::describeExtras(rest, "argument", "");
  };
  if (auto code = cli::parse(app, argc, argv, "pcc-calibrate: error: ", extras)) return *code;
  return run(a);
}

int main(int argc, char** argv) {
  return pcc::cli::finishStdout("pcc-calibrate",
                                pcc::cli::guardedMain("pcc-calibrate", [&] { return toolMain(argc, argv); }));
}
