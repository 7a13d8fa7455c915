#!/usr/bin/env python3
"""Pipeline parallelism on CPU ranks: each e2e model at batch 8 under forced
pp=2, dp=2,pp=2, tp=2,pp=2 and dp=2,tp=2,pp=2 (and the CNN under pp=4), for
1, 2 and 4 micro-batches. Every plan must have one stage per pp coordinate,
every rank running its program once per micro-batch, with transfers between
the stages; `pcc-run --check` must match the reference evaluator and the
outputs onnxruntime's (float32, rtol 1e-4). With micro-batches, the later
stages post their receives a micro-batch ahead (`--profile`), and for the MLP
the outputs equal those of `--no-overlap` (nothing overlapped) bit for bit."""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MODELS = ["mlp.onnx", "gpt2_tiny.onnx", "cnn_small.onnx"]
STRATEGIES = ["pp=2", "dp=2,pp=2", "tp=2,pp=2", "dp=2,tp=2,pp=2"]
EXTRA = [("cnn_small.onnx", "pp=4")]
MICROBATCHES = [1, 2, 4]
BATCH = 8
RTOL, ATOL = 1e-4, 1e-5
SEED = 11


def devices(strategy):
    n = 1
    for part in strategy.split(","):
        n *= int(part.split("=")[1])
    return n


def run_case(suite, tools, model, strategy, mb):
    case = f"{model} --strategy {strategy} --microbatches {mb}"
    work = suite.tempdir(model.split(".")[0])
    try:
        _run_case(suite, tools, case, work, model, strategy, mb)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run_case(suite, tools, case, work, model, strategy, mb):
    plan = os.path.join(work, "plan.pcc")
    data = os.path.join(work, "data")
    outs = os.path.join(work, "outputs")
    gpus = devices(strategy)
    pp = int(dict(p.split("=") for p in strategy.split(","))["pp"])
    r = tools.run("pcc", [e2e.model_path(model), "--batch", BATCH, "--gpus", gpus, "--strategy", strategy,
                          "--microbatches", mb, "--gpu", "cpu", "-o", plan])
    if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
        return
    with open(os.path.join(plan, "report.json")) as f:
        report = json.load(f)
    suite.check(f"{case}: mesh pp={pp}", report["mesh"]["pp"] == pp, f"  mesh {report['mesh']}")
    stages = sorted({rk["stage"] for rk in report["ranks"]})
    suite.check(f"{case}: one stage per pp coordinate", stages == list(range(pp)),
                f"  stages {stages}")
    suite.check(f"{case}: every rank runs {mb} micro-batches",
                all(rk["microbatches"] == mb for rk in report["ranks"]),
                f"  {[rk['microbatches'] for rk in report['ranks']]}")
    p2p = [c for c in report["collectives"] if c["kind"] in ("send", "recv")]
    suite.check(f"{case}: stages exchange activations", len(p2p) > 0,
                f"  collectives {report['collectives']}")
    suite.check(f"{case}: report.json has the pipeline", report.get("pipeline", {}).get("stages") == pp,
                f"  {report.get('pipeline')}")

    _, expected = e2e.write_case(data, e2e.model_path(model), BATCH, SEED)
    r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check", "--rtol", RTOL,
                              "--atol", ATOL, "--profile"])
    if not suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe()):
        return
    suite.check(f"{case}: --profile shows the stages' bubble", "bubble" in r.stdout, r.describe())
    if mb > 1:
        suite.check(f"{case}: receives posted a micro-batch ahead", "posted a micro-batch ahead" in r.stdout,
                    r.describe())
    if model == "mlp.onnx":
        blocking = os.path.join(work, "outputs_no_overlap")
        rb = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", blocking, "--no-overlap"])
        if suite.check(f"{case}: pcc-run --no-overlap", rb.returncode == 0, rb.describe()):
            for k in range(len(expected)):
                with open(os.path.join(outs, f"output_{k}.pb"), "rb") as a, \
                        open(os.path.join(blocking, f"output_{k}.pb"), "rb") as b:
                    suite.check(f"{case}: output_{k} equals --no-overlap's bit for bit", a.read() == b.read())
    for k, want in enumerate(expected):
        path = os.path.join(outs, f"output_{k}.pb")
        if not suite.check(f"{case}: output_{k}.pb written", os.path.exists(path), r.describe()):
            continue
        diff = e2e.compare(e2e.read_tensor(path), want, RTOL, ATOL)
        suite.check(f"{case}: output_{k} matches onnxruntime", not diff, "  " + diff)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_pipeline", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools):
        cases = [(m, s) for m in MODELS for s in STRATEGIES] + EXTRA
        for model, strategy in cases:
            for mb in MICROBATCHES:
                name = f"{model} --strategy {strategy} --microbatches {mb}"
                suite.run_case(name, run_case, suite, tools, model, strategy, mb)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
