#!/usr/bin/env python3
"""Tensor parallelism of Gemm with a bias, end to end.

A two-layer model whose second Gemm consumes the first's column-split output,
so that it is split by row and each rank holds a partial sum: the bias (scaled
by beta) must be added exactly once after the all-reduce, not once per rank.
The hidden layer is wide (8192) and the output narrow, so that on the `cpu`
device's link the tp search prefers the row split's all-reduce of the [B, 8]
output to an all-gather of the [B, 8192] activation.
Built with onnx.helper (seeded), compiled with `--strategy tp=2` and
`dp=2,tp=2`, run on CPU ranks with `--check`, and compared with onnxruntime.
The plan must really split: every rank all-reduces and holds half of each
weight matrix; a plan that replicated the model would not test the bias.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

BATCH, D_IN, D_HIDDEN, D_OUT = 4, 16, 8192, 8
RTOL, ATOL = 1e-4, 1e-5
CONFIGS = [("tp=2", 2), ("dp=2,tp=2", 4)]


def make_model(path, trans_b, alpha, beta, bias_shape):
    """x[B,16] -> Gemm(W1, b1) -> Relu -> Gemm(W2, b2; alpha, beta, transB) -> y[B,8]."""
    rng = np.random.default_rng(11)
    w1 = rng.standard_normal((D_IN, D_HIDDEN)).astype(np.float32) / 4
    b1 = rng.standard_normal(D_HIDDEN).astype(np.float32)
    w2 = rng.standard_normal((D_OUT, D_HIDDEN) if trans_b else (D_HIDDEN, D_OUT)).astype(np.float32) / 4
    # A bias large against the product, so that adding it twice cannot hide in the tolerance.
    b2 = (3.0 + rng.standard_normal(bias_shape)).astype(np.float32)
    h = onnx.helper
    nodes = [
        h.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
        h.make_node("Relu", ["h"], ["a"], name="act"),
        h.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", alpha=alpha, beta=beta, transB=trans_b),
    ]
    graph = h.make_graph(
        nodes, "gemm_bias",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", D_IN])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", D_OUT])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


VARIANTS = [
    # name, transB, alpha, beta, bias shape
    ("bias[N]", 0, 1.0, 1.0, (D_OUT,)),
    ("bias[1,N] transB alpha=2 beta=0.5", 1, 2.0, 0.5, (1, D_OUT)),
    ("bias[B,N] beta=-1.5", 0, 1.0, -1.5, (BATCH, D_OUT)),
]


def run_case(suite, tools, variant, strategy, gpus):
    name, trans_b, alpha, beta, bias_shape = variant
    case = f"Gemm {name} --strategy {strategy}"
    work = suite.tempdir("gemm-bias")
    try:
        model = os.path.join(work, "model.onnx")
        make_model(model, trans_b, alpha, beta, bias_shape)
        plan, data, outs = (os.path.join(work, d) for d in ("plan.pcc", "data", "outputs"))
        r = tools.run("pcc", [model, "--batch", BATCH, "--gpus", gpus, "--strategy", strategy, "--gpu", "cpu", "-o", plan])
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            return
        with open(os.path.join(plan, "report.json")) as f:
            report = json.load(f)
        ranks = report["ranks"]
        suite.check(f"{case}: mesh tp=2", report["mesh"]["tp"] == 2, f"  mesh {report['mesh']}")
        suite.check(f"{case}: {gpus} ranks", len(ranks) == gpus, f"  {len(ranks)} ranks")
        quiet = [r["rank"] for r in ranks if not r.get("comm_count", {}).get("all_reduce")]
        suite.check(f"{case}: every rank all-reduces the partial sum", not quiet, f"  ranks without: {quiet}")
        whole = report["reference"]["weight_bytes"]
        heavy = [r["rank"] for r in ranks if r["weight_bytes"] >= whole]
        suite.check(f"{case}: every rank holds a share of the weights", not heavy,
                    f"  ranks holding all {whole} weight bytes: {heavy}")

        _, expected = e2e.write_case(data, model, BATCH, seed=3)
        r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check",
                                  "--rtol", RTOL, "--atol", ATOL])
        if not suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe()):
            return
        got = e2e.read_tensor(os.path.join(outs, "output_0.pb"))
        diff = e2e.compare(got, expected[0], RTOL, ATOL)
        suite.check(f"{case}: output matches onnxruntime", not diff, "  " + diff)
        # The bias counted once per rank would be off by (tp-1) * beta * b2.
        twice = expected[0] + beta * np.broadcast_to(
            numpy_helper.to_array(onnx.load(model).graph.initializer[3]), expected[0].shape)
        suite.check(f"{case}: the comparison rejects a bias added twice",
                    bool(e2e.compare(twice.astype(np.float32), expected[0], RTOL, ATOL)))
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_gemm_bias_tp", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        for variant in VARIANTS:
            for strategy, gpus in CONFIGS:
                name = f"Gemm {variant[0]} --strategy {strategy}"
                suite.run_case(name, run_case, suite, tools, variant, strategy, gpus)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
