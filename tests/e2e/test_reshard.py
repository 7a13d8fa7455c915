#!/usr/bin/env python3
"""Resharding by all-to-all and reduce-scatter, end to end.

A model whose tensor-parallel plan moves a split between dimensions: x[B,16]
-> MatMul(W1) -> Softmax(axis 1) -> MatMul(W2) -> Softmax(axis 1). With tp
forced the weight matrices are split; a Softmax over the columns a
column-split MatMul produces needs them whole and can split the rows
instead, so the activation goes from [-,tp] to [tp,-] by one all-to-all; the
second MatMul splits its contraction and its partial sum goes to the second
Softmax split by rows, by one reduce-scatter (passes/partition/reshard.cpp).
Built with onnx.helper (seeded), compiled for tp=2, tp=3 (uneven: a batch of
5 and a hidden width of 1000 do not divide by 3) and dp=2,tp=2; the plan must
hold both collectives on every tp rank and no all-gather of the hidden
activation; it runs on CPU ranks as threads with `--check` and
`--poison-memory`, and as one process per rank, against the reference
evaluator and onnxruntime.
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

BATCH, D_IN, D_HIDDEN, D_OUT = 5, 16, 1000, 12
RTOL, ATOL = 1e-4, 1e-6
CONFIGS = [("tp=2", 2), ("tp=3", 3), ("dp=2,tp=2", 4)]


def make_model(path):
    """x[B,16] -> MatMul(W1) -> Softmax -> MatMul(W2) -> Softmax -> y[B,12]."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((D_IN, D_HIDDEN)).astype(np.float32)
    w2 = (rng.standard_normal((D_HIDDEN, D_OUT)) * 30).astype(np.float32)
    h = onnx.helper
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        h.make_node("Softmax", ["h"], ["s"], name="sm1", axis=1),
        h.make_node("MatMul", ["s", "w2"], ["p"], name="fc2"),
        h.make_node("Softmax", ["p"], ["y"], name="sm2", axis=1),
    ]
    graph = h.make_graph(
        nodes, "reshard",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", D_IN])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", D_OUT])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def check_plan(suite, case, plan, gpus):
    """The report: every rank exchanges by all-to-all and reduce-scatter, none gathers."""
    with open(os.path.join(plan, "report.json")) as f:
        report = json.load(f)
    ranks = report["ranks"]
    suite.check(f"{case}: {gpus} ranks", len(ranks) == gpus, f"  {len(ranks)} ranks")
    counts = {r["rank"]: r.get("comm_count", {}) for r in ranks}
    for kind in ("all_to_all", "reduce_scatter"):
        without = [r for r, c in counts.items() if not c.get(kind)]
        suite.check(f"{case}: every rank runs an {kind}", not without, f"  ranks without: {without}\n  {counts}")
    gathers = [r for r, c in counts.items() if c.get("all_gather")]
    suite.check(f"{case}: no rank all-gathers", not gathers, f"  ranks that do: {gathers}\n  {counts}")


def run_processes(tools, plan, world, work, data):
    """Runs the plan as one pcc-run process per rank; \returns [(rc, stdout, stderr)]."""
    procs = {}
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), PCC_RUN_ID="reshard")
        cmd = [tools.path("pcc-run"), plan, "--rendezvous", os.path.join(work, "rdzv"), "--timeout", "60",
               "--inputs", data, "--check", "--poison-memory", "--rtol", str(RTOL), "--atol", str(ATOL)]
        procs[r] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = e2e.finish_processes(procs, 120)
    return [done[r][:3] for r in range(world)]


def run_case(suite, tools, strategy, gpus):
    case = f"--strategy {strategy}"
    work = suite.tempdir("reshard")
    try:
        model = os.path.join(work, "model.onnx")
        make_model(model)
        plan, data, outs = (os.path.join(work, d) for d in ("plan.pcc", "data", "outputs"))
        r = tools.run("pcc", [model, "--batch", BATCH, "--gpus", gpus, "--strategy", strategy, "--gpu", "cpu",
                              "-o", plan])
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            return
        check_plan(suite, case, plan, gpus)
        _, expected = e2e.write_case(data, model, BATCH, seed=3)
        r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check", "--poison-memory",
                                  "--rtol", RTOL, "--atol", ATOL])
        if suite.check(f"{case}: pcc-run --check --poison-memory (threads)", r.returncode == 0, r.describe()):
            got = e2e.read_tensor(os.path.join(outs, "output_0.pb"))
            diff = e2e.compare(got, expected[0], RTOL, ATOL)
            suite.check(f"{case}: output matches onnxruntime", not diff, "  " + diff)
        results = run_processes(tools, plan, gpus, work, data)
        detail = "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent((o or '') + (e or ''))}"
                           for i, (rc, o, e) in enumerate(results))
        suite.check(f"{case}: pcc-run --check as {gpus} processes", all(rc == 0 for rc, _, _ in results), detail)
        suite.check(f"{case}: rank 0 checked against the reference",
                    "vs reference" in results[0][1] and "MISMATCH" not in results[0][1].upper(), detail)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_reshard", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        for strategy, gpus in CONFIGS:
            suite.run_case(f"--strategy {strategy}", run_case, suite, tools, strategy, gpus)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
