#!/usr/bin/env python3
"""Calibration end to end: `pcc-calibrate` writes a spec that `pcc --cluster`
accepts and records in the plan; `pcc-report --format costs` gives the
compiler's estimate of every instruction of every rank; `pcc-run
--profile-json` lists every instruction of every rank with a measured time,
the same instructions in the same order; and bad calibrate flags are refused
with one line. (The accuracy of the estimates is measured by
tools/bench_calibration.py, not here: it depends on the machine's load.)
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MLP = e2e.model_path("mlp.onnx")
GPT2 = e2e.model_path("gpt2_tiny.onnx")


class CalibrationTests:
    def __init__(self, suite, tools):
        self.suite = suite
        self.tools = tools
        self.work = suite.tempdir("calibration")
        self.spec = os.path.join(self.work, "spec.json")

    def calibrate(self):
        r = self.tools.run("pcc-calibrate", ["--ranks", 2, "--seconds", 0.01, "-o", self.spec], timeout=120)
        if not self.suite.check("pcc-calibrate exits 0", r.returncode == 0, r.describe()):
            return
        self.suite.check("pcc-calibrate prints progress lines", r.stderr.count("pcc-calibrate: ") >= 10, r.describe())
        with open(self.spec) as f:
            spec = json.load(f)
        dev = spec["device"]
        self.suite.check("the spec holds measured rates",
                         dev["matrix_flops"]["f32"] > 1e8 and dev["memory_bandwidth"] > 1e8
                         and dev["vector_flops"]["f32"] > 1e6 and 0 < dev["launch_overhead_s"] < 1e-2
                         and 0 < dev["efficiency"]["matrix"] <= 1,
                         f"  {json.dumps(dev)[:800]}")
        self.suite.check("the spec holds per-op factors for common ops, none for the contractions",
                         all(op in dev["op_factors"] for op in ("Softmax", "LayerNormalization", "Transpose", "Add"))
                         and not any(op in dev["op_factors"] for op in ("MatMul", "Conv")),
                         f"  {dev.get('op_factors')}")
        link = spec["intra_node"]
        self.suite.check("the spec holds the measured gloo link",
                         "measured" in link["name"] and link["bandwidth"] > 0 and link["latency_s"] > 0, f"  {link}")

    def compile_and_profile(self):
        if not os.path.exists(self.spec):
            self.suite.check("a spec to compile with", False, "  pcc-calibrate wrote none")
            return
        for model, gpus, extra in ((MLP, 2, []), (GPT2, 2, ["--strategy", "tp=2"])):
            name = os.path.basename(model)
            plan = os.path.join(self.work, name + f".{gpus}.pcc")
            r = self.tools.run("pcc", [model, "--batch", 4, "--gpus", gpus, "--cluster", self.spec, "-o", plan] + extra)
            if not self.suite.check(f"{name}: pcc --cluster takes the calibrated spec", r.returncode == 0, r.describe()):
                continue
            r = self.tools.run("pcc-report", [plan, "--format", "json"])
            doc = json.loads(r.stdout) if r.returncode == 0 else {}
            self.suite.check(f"{name}: the plan records the calibrated device",
                             doc.get("device", {}).get("name") == "cpu-calibrated", r.describe())
            r = self.tools.run("pcc-report", [plan, "--format", "costs"])
            if not self.suite.check(f"{name}: pcc-report --format costs", r.returncode == 0, r.describe()):
                continue
            costs = json.loads(r.stdout)
            prof = os.path.join(self.work, name + ".profile.json")
            r = self.tools.run("pcc-run", [plan, "--check", "--warmup", 1, "--iters", 2, "--profile-json", prof])
            if not self.suite.check(f"{name}: pcc-run --profile-json --check", r.returncode == 0, r.describe()):
                continue
            with open(prof) as f:
                profile = json.load(f)
            self.suite.check(f"{name}: the profile has every rank", len(profile["ranks"]) == len(costs["ranks"]) == gpus,
                             f"  {len(profile['ranks'])} profiled, {len(costs['ranks'])} in the plan")
            for est, got in zip(costs["ranks"], profile["ranks"]):
                rank = est["rank"]
                same = [(e["index"], e["kind"], e["op"], e["node"]) for e in est["instructions"]] == \
                       [(g["index"], g["kind"], g["op"], g["node"]) for g in got["instructions"]]
                self.suite.check(f"{name} rank {rank}: the profile lists every instruction of the plan, in order",
                                 same and got["rank"] == rank and len(got["instructions"]) > 0,
                                 f"  {len(got['instructions'])} profiled, {len(est['instructions'])} in the plan")
                # An instruction folded into an earlier one's kernel (a GEMM's epilogue) does not run.
                folded = [g for g in got["instructions"] if g["provider"].startswith("folded into instruction ")]
                self.suite.check(f"{name} rank {rank}: a folded instruction names an earlier one that ran",
                                 all(g["calls"] == 0 and
                                     got["instructions"][int(g["provider"].rsplit(" ", 1)[1])]["calls"] == 2 and
                                     int(g["provider"].rsplit(" ", 1)[1]) < g["index"] for g in folded),
                                 f"  {folded[:3]}")
                ran = [g for g in got["instructions"] if g["kind"] != "free" and g not in folded]
                self.suite.check(f"{name} rank {rank}: every instruction ran once per timed run with a time",
                                 all(g["calls"] == 2 and g["seconds"] >= 0 for g in ran)
                                 and all(g["calls"] == 0 for g in got["instructions"] if g["kind"] == "free")
                                 and sum(g["seconds"] for g in ran) > 0,
                                 f"  {[g for g in ran if g['calls'] != 2][:3]}")
                self.suite.check(f"{name} rank {rank}: kernels name their provider",
                                 all(g["provider"] for g in ran if g["kind"] == "kernel"),
                                 f"  {[g for g in ran if g['kind'] == 'kernel' and not g['provider']][:3]}")
                collectives = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
                kernels = [e for e in est["instructions"] if e["kind"] in ("kernel",) + collectives]
                matmuls = [e for e in kernels if e["op"] in ("MatMul", "Gemm")]
                self.suite.check(f"{name} rank {rank}: contractions and collectives have estimates",
                                 matmuls and all(e["estimated_seconds"] > 0 for e in matmuls)
                                 and all(e["estimated_seconds"] > 0 for e in kernels if e["kind"] in collectives)
                                 and all(e["estimated_seconds"] == 0 for e in est["instructions"] if e["kind"] == "free"),
                                 f"  {kernels[:4]}")
                total = sum(e["estimated_seconds"] for e in est["instructions"])
                self.suite.check(f"{name} rank {rank}: the rank's estimate is the sum of its instructions'",
                                 abs(est["estimated_seconds"] - total) <= 1e-9 * max(1.0, total), f"  {est['estimated_seconds']} vs {total}")
            if extra:
                kinds = {e["kind"] for e in costs["ranks"][0]["instructions"]}
                # The row-split halves leave partial sums: all-reduced, or
                # reduce-scattered where a reader takes them split.
                self.suite.check(f"{name}: tensor parallelism puts the partial sums' collectives in the profile",
                                 bool(kinds & {"all_reduce", "reduce_scatter"}), f"  {kinds}")

    def bad_flags(self):
        cases = [
            ("pcc-calibrate --ranks 0", ["--ranks", "0"], [r"--ranks"]),
            ("pcc-calibrate --seconds x", ["--seconds", "x"], [r"--seconds"]),
            ("pcc-calibrate unwritable output", ["--seconds", "0.001", "--ranks", "1", "-o",
                                                 os.path.join(self.work, "no", "such", "dir", "s.json")],
             [r"cannot write"]),
        ]
        for case, args, patterns in cases:
            e2e.expect_one_line_error(self.suite, self.tools, case, "pcc-calibrate", args, patterns)
        plan = os.path.join(self.work, "mlp.onnx.2.pcc")
        if os.path.isdir(plan):
            e2e.expect_one_line_error(self.suite, self.tools, "pcc-run --profile-json unwritable", "pcc-run",
                                      [plan, "--profile-json", os.path.join(self.work, "no", "p.json")],
                                      [r"cannot write"])


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_calibration", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run", "pcc-report", "pcc-calibrate")):
        t = CalibrationTests(suite, tools)
        suite.run_case("calibrate", t.calibrate)
        suite.run_case("compile and profile", t.compile_and_profile)
        suite.run_case("bad flags", t.bad_flags)
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
