#!/usr/bin/env python3
"""Resharding by all-to-all and reduce-scatter, end to end.

A model whose tensor-parallel plan moves splits between dimensions (the
model of tests/lit/partition/reshard.ir): x[B,S,64] -> MatMul(W1) ->
Softmax(axis 2) -> y1, and x -> MatMul(Wa) -> Relu -> MatMul(Wb) ->
Softmax(axis 2) -> y2. With tp forced the weight matrices are split; the
Softmax over the columns a column-split MatMul produces needs them whole and
can split the sequence instead, so that activation goes from [-,-,tp] to
[-,tp,-] by one all-to-all; the Megatron pair Wa (columns), Wb (rows) leaves
a partial sum that the second Softmax takes split by the sequence, by one
reduce-scatter (passes/partition/reshard.cpp). Built with onnx.helper
(seeded), compiled for tp=2, tp=4 and dp=2,tp=2 (a batch of 3: uneven over
dp); the plans must hold the collectives the search picks on every rank
(with dp the outputs are gathered over tp, so only the reduce-scatter
pays); each runs on CPU ranks as threads with `--check` and
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

BATCH, SEQ, D_IN, D_HIDDEN, D_OUT = 3, 8, 64, 512, 256
RTOL, ATOL = 1e-4, 1e-6
# strategy, ranks, collectives every rank must run, collectives no rank may run
CONFIGS = [("tp=2", 2, ("all_to_all", "reduce_scatter"), ("all_gather", "all_reduce")),
           ("tp=4", 4, ("all_to_all", "reduce_scatter"), ("all_gather", "all_reduce")),
           ("dp=2,tp=2", 4, ("reduce_scatter",), ("all_reduce",))]


def make_model(path):
    """The two branches above, seeded."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((D_IN, D_HIDDEN)).astype(np.float32) / 4
    wa = rng.standard_normal((D_IN, D_HIDDEN)).astype(np.float32) / 4
    wb = rng.standard_normal((D_HIDDEN, D_OUT)).astype(np.float32) / 8
    h = onnx.helper
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        h.make_node("Softmax", ["h"], ["y1"], name="sm1", axis=2),
        h.make_node("MatMul", ["x", "wa"], ["a"], name="fca"),
        h.make_node("Relu", ["a"], ["r"], name="act"),
        h.make_node("MatMul", ["r", "wb"], ["p"], name="fcb"),
        h.make_node("Softmax", ["p"], ["y2"], name="sm2", axis=2),
    ]
    graph = h.make_graph(
        nodes, "reshard",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", SEQ, D_IN])],
        [h.make_tensor_value_info("y1", onnx.TensorProto.FLOAT, ["batch", SEQ, D_HIDDEN]),
         h.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, ["batch", SEQ, D_OUT])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (wa, "wa"), (wb, "wb"))])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def check_plan(suite, case, plan, gpus, needed, banned):
    """The report: every rank runs the `needed` collectives, none the `banned` ones."""
    with open(os.path.join(plan, "report.json")) as f:
        report = json.load(f)
    ranks = report["ranks"]
    suite.check(f"{case}: {gpus} ranks", len(ranks) == gpus, f"  {len(ranks)} ranks")
    counts = {r["rank"]: r.get("comm_count", {}) for r in ranks}
    for kind in needed:
        without = [r for r, c in counts.items() if not c.get(kind)]
        suite.check(f"{case}: every rank runs an {kind}", not without, f"  ranks without: {without}\n  {counts}")
    for kind in banned:
        using = [r for r, c in counts.items() if c.get(kind)]
        suite.check(f"{case}: no rank runs an {kind}", not using, f"  ranks that do: {using}\n  {counts}")


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


def run_case(suite, tools, strategy, gpus, needed, banned):
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
        check_plan(suite, case, plan, gpus, needed, banned)
        _, expected = e2e.write_case(data, model, BATCH, seed=3)
        r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check", "--poison-memory",
                                  "--rtol", RTOL, "--atol", ATOL])
        if suite.check(f"{case}: pcc-run --check --poison-memory (threads)", r.returncode == 0, r.describe()):
            for k in range(2):
                got = e2e.read_tensor(os.path.join(outs, f"output_{k}.pb"))
                diff = e2e.compare(got, expected[k], RTOL, ATOL)
                suite.check(f"{case}: output {k} matches onnxruntime", not diff, "  " + diff)
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
        for strategy, gpus, needed, banned in CONFIGS:
            suite.run_case(f"--strategy {strategy}", run_case, suite, tools, strategy, gpus, needed, banned)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
