#!/usr/bin/env python3
"""The input pipeline (`pcc-run --batches K`, docs/runtime.md#input-pipeline)
on CPU ranks.

1. Bit for bit: the outputs of K streamed batches (DIR/batch_k/input_*.pb)
   equal K single runs of the same plan on each batch, for threaded ranks on
   a one-rank plan, a dp=2 plan and a pp=2 plan with 2 micro-batches, with
   prefetch and with --no-prefetch, and for process ranks (RANK/WORLD_SIZE);
   --check passes on every batch and --expect reads DIR/batch_k/output_*.pb.
2. Seeded random batches (no --inputs) are seed + k: batch k of a streamed
   run equals a single run with --seed S+k.
3. A missing, truncated or wrongly shaped file in batch 3 of 5 ends the run
   with exit 2 and one line naming the file, the batch and the input, within
   a few seconds (threaded and process ranks).
4. The report lines exist; --profile-json's hidden fraction is in [0, 1] and
   is 1 - (sum of measured waits) / (sum of measured reads); a slow reader
   (the testing aid --read-delay-ms) makes the measured waits grow, and
   without prefetch the waits cover the reads (little hidden).
5. Usage: --prefetch without --batches, --iters with --batches are refused;
   --read-delay-ms is not in --help."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

BATCH = 8
K = 4
PLANS = [  # (name, model, pcc flags)
    ("one rank", "mlp.onnx", ["--gpus", 1]),
    ("dp=2", "mlp.onnx", ["--gpus", 2, "--strategy", "dp=2"]),
    ("pp=2 micro-batches 2", "gpt2_tiny.onnx", ["--gpus", 2, "--strategy", "pp=2", "--microbatches", 2,
                                                "--gpu", "cpu"]),
]


def compile_plan(suite, tools, work, name, model, flags):
    plan = os.path.join(work, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path(model), "--batch", BATCH, "-o", plan, "--quiet"] + flags)
    return plan if suite.check(f"{name}: compiles", r.returncode == 0, r.describe()) else None


def write_batches(data, model, batches, seed=100, with_outputs=False):
    """Writes data/batch_k/input_*.pb (and onnxruntime's output_*.pb)."""
    for k in range(batches):
        d = os.path.join(data, f"batch_{k}")
        if with_outputs:
            e2e.write_case(d, e2e.model_path(model), BATCH, seed + k)
        else:
            m = onnx.load(e2e.model_path(model), load_external_data=False)
            os.makedirs(d, exist_ok=True)
            for i, (vi, a) in enumerate(zip(e2e.graph_inputs(m), e2e.make_inputs(m, BATCH, seed + k))):
                e2e.write_tensor(os.path.join(d, f"input_{i}.pb"), a, vi.name)


def outputs_of(directory):
    """\returns the arrays of directory/output_*.pb, in order."""
    out, i = [], 0
    while os.path.exists(os.path.join(directory, f"output_{i}.pb")):
        out.append(e2e.read_tensor(os.path.join(directory, f"output_{i}.pb")))
        i += 1
    return out


def same_bits(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def check_bitwise(suite, case, streamed_dir, single_dirs):
    bad = []
    for k, single in enumerate(single_dirs):
        got = outputs_of(os.path.join(streamed_dir, f"batch_{k}"))
        want = outputs_of(single)
        if not want or not same_bits(got, want):
            bad.append(k)
    suite.check(f"{case}: every streamed batch equals its single run bit for bit", not bad,
                f"  batches that differ: {bad}")


def run_processes(tools, plan, world, rendezvous, run_id, extra, timeout=120):
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), PCC_RUN_ID=run_id)
        cmd = [tools.path("pcc-run"), plan, "--rendezvous", rendezvous, "--timeout", "60"] + [str(x) for x in extra]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out.append((p.returncode, o, e))
    return out


def plan_case(suite, tools, name, model, flags):
    work = suite.tempdir("stream")
    try:
        plan = compile_plan(suite, tools, work, name, model, flags)
        if not plan:
            return
        data = os.path.join(work, "data")
        write_batches(data, model, K, with_outputs=True)
        singles = []
        for k in range(K):
            single = os.path.join(work, f"single_{k}")
            r = tools.run("pcc-run", [plan, "--inputs", os.path.join(data, f"batch_{k}"), "--outputs", single])
            if not suite.check(f"{name}: single run of batch {k}", r.returncode == 0, r.describe()):
                return
            singles.append(single)
        for mode, extra in [("prefetch 2", []), ("--no-prefetch", ["--no-prefetch"]), ("prefetch 1", ["--prefetch", 1])]:
            case = f"{name}, {mode}"
            out = os.path.join(work, "streamed_" + mode.replace(" ", "_").strip("-"))
            r = tools.run("pcc-run", [plan, "--inputs", data, "--batches", K, "--outputs", out, "--check",
                                      "--expect", data, "--rtol", "1e-4", "--atol", "1e-5"] + extra)
            if not suite.check(f"{case}: streamed run exits 0", r.returncode == 0, r.describe()):
                continue
            suite.check(f"{case}: every batch checked against the reference and onnxruntime",
                        all(f"batch {k} output 0 " in r.stdout for k in range(K))
                        and r.stdout.count("vs reference") == r.stdout.count("vs expected") >= K
                        and "MISMATCH" not in r.stdout, r.describe())
            check_bitwise(suite, case, out, singles)
        if "dp=2" in name:
            case = f"{name}, process ranks"
            out = os.path.join(work, "streamed_procs")
            results = run_processes(tools, plan, 2, os.path.join(work, "rdzv"), "s1",
                                    ["--inputs", data, "--batches", K, "--outputs", out, "--check"])
            detail = "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent(o + e)}" for i, (rc, o, e) in enumerate(results))
            if suite.check(f"{case}: every rank exits 0", all(rc == 0 for rc, _, _ in results), detail):
                suite.check(f"{case}: rank 0 reports the stream", "stream input:" in results[0][1], detail)
                check_bitwise(suite, case, out, singles)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def random_case(suite, tools):
    work = suite.tempdir("stream-random")
    try:
        plan = compile_plan(suite, tools, work, "random", "mlp.onnx", ["--gpus", 2, "--strategy", "dp=2"])
        if not plan:
            return
        out = os.path.join(work, "streamed")
        r = tools.run("pcc-run", [plan, "--batches", 3, "--seed", 7, "--outputs", out, "--check"])
        if not suite.check("random batches: streamed run exits 0", r.returncode == 0, r.describe()):
            return
        singles = []
        for k in range(3):
            single = os.path.join(work, f"single_{k}")
            r = tools.run("pcc-run", [plan, "--seed", 7 + k, "--outputs", single])
            suite.check(f"random batches: single run with --seed {7 + k}", r.returncode == 0, r.describe())
            singles.append(single)
        check_bitwise(suite, "random batches (seed + k)", out, singles)
        # Different seeds make different batches: the comparison can fail.
        suite.check("random batches: batches differ from each other",
                    not same_bits(outputs_of(singles[0]), outputs_of(singles[1])))
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def error_case(suite, tools):
    work = suite.tempdir("stream-errors")
    try:
        plan = compile_plan(suite, tools, work, "errors", "mlp.onnx", ["--gpus", 2, "--strategy", "dp=2"])
        if not plan:
            return
        for what in ["missing", "truncated", "wrong shape"]:
            data = os.path.join(work, what.replace(" ", "_"))
            write_batches(data, "mlp.onnx", 5)
            bad = os.path.join(data, "batch_3", "input_0.pb")
            if what == "missing":
                os.remove(bad)
                patterns = [r"batch 3", re.escape(bad), r"input 0"]
            elif what == "truncated":
                raw = open(bad, "rb").read()
                with open(bad, "wb") as f:
                    f.write(raw[: len(raw) // 2])
                patterns = [r"batch 3", re.escape(bad), r"input 0"]
            else:
                a = e2e.read_tensor(bad)
                e2e.write_tensor(bad, np.concatenate([a, a]), "")
                patterns = [r"batch 3", re.escape(bad), r"input 0", r"expects"]
            t0 = time.time()
            ok = e2e.expect_one_line_error(suite, tools, f"error in batch 3 of 5, {what}", "pcc-run",
                                           [plan, "--inputs", data, "--batches", 5], patterns)
            took = time.time() - t0
            suite.check(f"error in batch 3 of 5, {what}: ends within 5 s", took < 5, f"  took {took:.1f} s")
            if what == "truncated" and ok:
                # With a slow reader and synchronous reads too: no hang.
                e2e.expect_one_line_error(suite, tools, f"error in batch 3 of 5, {what}, --no-prefetch, slow reader",
                                          "pcc-run", [plan, "--inputs", data, "--batches", 5, "--no-prefetch",
                                                      "--read-delay-ms", 50], patterns)
                t0 = time.time()
                results = run_processes(tools, plan, 2, os.path.join(work, "rdzv"), "e1",
                                        ["--inputs", data, "--batches", 5], timeout=60)
                took = time.time() - t0
                lines = [ln for ln in results[0][2].splitlines() if ln.strip()]
                suite.check(f"error in batch 3 of 5, {what}, process ranks: every rank exits 2 naming it within 10 s",
                            all(rc == 2 for rc, _, _ in results) and took < 10 and len(lines) == 1
                            and all(re.search(p, lines[0]) for p in patterns),
                            "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent(o + e)}"
                                      for i, (rc, o, e) in enumerate(results)) + f"\n  took {took:.1f} s")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def stream_profile(tools, plan, data, batches, extra, work, tag):
    """\returns (Result, the "stream" object of --profile-json or None)."""
    pj = os.path.join(work, f"profile_{tag}.json")
    r = tools.run("pcc-run", [plan, "--inputs", data, "--batches", batches, "--profile-json", pj] + extra)
    if r.returncode != 0 or not os.path.exists(pj):
        return r, None
    with open(pj) as f:
        return r, json.load(f).get("stream")


def report_case(suite, tools):
    work = suite.tempdir("stream-report")
    try:
        plan = compile_plan(suite, tools, work, "report", "mlp.onnx", ["--gpus", 2, "--strategy", "dp=2"])
        if not plan:
            return
        data = os.path.join(work, "data")
        batches = 6
        write_batches(data, "mlp.onnx", batches)
        r, st = stream_profile(tools, plan, data, batches, [], work, "plain")
        if not suite.check("report: --profile-json has the stream", st is not None, r.describe()):
            return
        suite.check("report: time per batch and throughput line",
                    re.search(r"^stream: 6 batches of 8 samples, prefetch 2: time per batch mean [0-9.]+ ms, "
                              r"min [0-9.]+ ms, max [0-9.]+ ms; throughput [0-9.]+ samples/s", r.stdout, re.M),
                    r.describe())
        suite.check("report: input line with the hidden fraction",
                    re.search(r"^stream input: reader busy [0-9.]+ ms per batch, ranks waited [0-9.]+ ms per batch; "
                              r"hidden [0-9.]+% \(1 - wait / read\)", r.stdout, re.M), r.describe())
        reads, waits = st["read_seconds"], st["wait_seconds"]
        suite.check("report: one measured read and wait per batch, all positive reads",
                    len(reads) == batches and len(waits) == batches and all(x > 0 for x in reads)
                    and all(x >= 0 for x in waits), json.dumps(st))
        want = min(1.0, max(0.0, 1 - sum(waits) / sum(reads)))
        suite.check("report: hidden fraction in [0, 1] and computed from the measured times",
                    0 <= st["hidden_fraction"] <= 1 and abs(st["hidden_fraction"] - want) < 1e-9, json.dumps(st))
        suite.check("report: min <= mean <= max, throughput = samples / total time",
                    st["min_batch_seconds"] <= st["mean_batch_seconds"] <= st["max_batch_seconds"]
                    and abs(st["samples_per_second"] - batches * 8 / st["total_seconds"]) < 1e-6 * st["samples_per_second"],
                    json.dumps(st))
        # A slow reader: 150 ms per batch, far more than this plan's compute.
        _, slow = stream_profile(tools, plan, data, batches, ["--read-delay-ms", 150], work, "slow")
        _, sync = stream_profile(tools, plan, data, batches, ["--read-delay-ms", 150, "--no-prefetch"], work, "sync")
        if not suite.check("report: slow-reader runs succeed", slow is not None and sync is not None):
            return
        suite.check("report: a slow reader's measured read times include the delay",
                    all(x >= 0.15 for x in slow["read_seconds"]), json.dumps(slow))
        suite.check("report: with a slow reader the ranks' measured wait grows",
                    sum(slow["wait_seconds"]) > sum(st["wait_seconds"]) + 0.5,
                    f"  fast {sum(st['wait_seconds']):.3f} s, slow {sum(slow['wait_seconds']):.3f} s")
        suite.check("report: without prefetch the waits cover the reads (hidden < 10%)",
                    sync["hidden_fraction"] < 0.1 and sum(sync["wait_seconds"]) >= 0.9 * sum(sync["read_seconds"]),
                    json.dumps(sync))
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def usage_case(suite, tools):
    e2e.expect_one_line_error(suite, tools, "--prefetch without --batches", "pcc-run",
                              ["plan.pcc", "--prefetch", 2], [r"--prefetch needs --batches"])
    e2e.expect_one_line_error(suite, tools, "--iters with --batches", "pcc-run",
                              ["plan.pcc", "--batches", 2, "--iters", 3], [r"--iters does not go with --batches"])
    r = tools.run("pcc-run", ["--help"])
    suite.check("--help lists --batches, --prefetch, --no-prefetch but not the testing aid",
                r.returncode == 0 and "--batches" in r.stdout and "--prefetch" in r.stdout
                and "--no-prefetch" in r.stdout and "read-delay" not in r.stdout, r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("stream", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        for name, model, flags in PLANS:
            suite.run_case(f"plan {name}", plan_case, suite, tools, name, model, flags)
        suite.run_case("random batches", random_case, suite, tools)
        suite.run_case("errors", error_case, suite, tools)
        suite.run_case("report", report_case, suite, tools)
        suite.run_case("usage", usage_case, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
