#!/usr/bin/env python3
"""Compiles each model in models/ for several device counts and strategies
(the mesh search at batch 8 on 2, 3, 4, 6 and 8 devices, forced tp=4 and
dp=2,tp=2), runs every plan on CPU ranks and compares it with onnxruntime and with the
reference evaluator (`pcc-run --check`)."""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MODELS = ["mlp.onnx", "gpt2_tiny.onnx", "cnn_small.onnx"]
CONFIGS = [
    ["--gpus", "1"],
    ["--gpus", "2"],
    ["--gpus", "4"],
    ["--gpus", "2", "--strategy", "tp=2"],
    ["--gpus", "4", "--strategy", "tp=4"],
]
BATCH = 4
# (batch, config): a batch that does not divide evenly, and one smaller than the device count.
EXTRA = [(3, ["--gpus", "2"]), (2, ["--gpus", "4"])]
# The mesh search and the tp search at batch 8: auto on 2, 3, 4, 6 and 8
# devices, and two forced meshes.
SEARCHED = [(8, ["--gpus", str(n)]) for n in (3, 6, 8)] + [
    (8, ["--gpus", "2"]), (8, ["--gpus", "4"]),
    (8, ["--gpus", "4", "--strategy", "dp=2,tp=2"]), (8, ["--gpus", "4", "--strategy", "tp=4"])]
RTOL, ATOL = 1e-4, 1e-5
SEED = 7


def option(config, flag):
    return config[config.index(flag) + 1] if flag in config else None


def mentions_rank(report, k):
    """\returns True if the text report names rank k ("rank 3", "Rank #3", "rank=3")."""
    return re.search(rf"\brank\s*[#:=]?\s*{k}\b", report, re.IGNORECASE) is not None


def run_case(suite, tools, model, batch, config):
    case = f"{model} --batch {batch} {' '.join(config)}"
    work = suite.tempdir(model.split(".")[0])
    try:
        _run_case(suite, tools, case, work, model, batch, config)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run_case(suite, tools, case, work, model, batch, config):
    plan = os.path.join(work, "plan.pcc")
    data = os.path.join(work, "data")
    outs = os.path.join(work, "outputs")
    gpus = int(option(config, "--gpus"))
    strategy = option(config, "--strategy")

    r = tools.run("pcc", [e2e.model_path(model), "--batch", batch, *config, "-o", plan])
    if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
        return
    info = e2e.PlanInfo(plan)
    n_ranks = len(info.ranks)
    suite.check(f"{case}: 1 <= ranks <= gpus", 1 <= n_ranks <= gpus,
                f"  plan has {n_ranks} ranks for --gpus {gpus}; mesh {info.mesh}")
    suite.check(f"{case}: dp <= batch", info.mesh["dp"] <= batch,
                f"  mesh {info.mesh} splits a batch of {batch} over more than {batch} ranks")

    report = tools.run("pcc-report", [plan])
    if suite.check(f"{case}: pcc-report", report.returncode == 0 and report.stdout.strip(),
                   report.describe()):
        missing = [k for k in range(n_ranks) if not mentions_rank(report.stdout, k)]
        suite.check(f"{case}: report names every rank", not missing,
                    f"  ranks not named: {missing}\n{report.describe()}")
        if n_ranks < gpus:
            said = re.search(r"fewer|unused|idle|only \d+|\d+ of \d+", report.stdout, re.I)
            suite.check(f"{case}: report says fewer ranks are used", said is not None,
                        f"  {n_ranks} of {gpus} ranks used but the report does not say so\n"
                        + report.describe())
        # Convolutions are not split by tp: the plan may replicate them, but must say so.
        tp_fell_back = (strategy and strategy.startswith("tp=")
                        and (info.mesh["tp"] != int(strategy[3:]) or model == "cnn_small.onnx"))
        if tp_fell_back:
            said = re.search(r"fall(s|ing)?\s*back|fallback|does not apply|not applicable|replicat",
                             report.stdout, re.I)
            suite.check(f"{case}: report explains the tp fallback", said is not None,
                        f"  --strategy {strategy} gave mesh {info.mesh} without a reason\n"
                        + report.describe())

    _, expected = e2e.write_case(data, e2e.model_path(model), batch, SEED)
    r = tools.run("pcc-run", [plan, "--inputs", data, "--expect", data, "--outputs", outs,
                              "--check", "--rtol", RTOL, "--atol", ATOL])
    if not suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe()):
        return
    # Compare here as well, so a run that skips the comparison cannot pass.
    for k, want in enumerate(expected):
        path = os.path.join(outs, f"output_{k}.pb")
        if not suite.check(f"{case}: output_{k}.pb written", os.path.exists(path),
                           f"  {path} missing\n{r.describe()}"):
            continue
        diff = e2e.compare(e2e.read_tensor(path), want, RTOL, ATOL)
        suite.check(f"{case}: output_{k} matches onnxruntime", not diff, "  " + diff)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_models", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools):
        for model in MODELS:
            cases = [(BATCH, c) for c in CONFIGS] + EXTRA + SEARCHED
            for batch, config in cases:
                name = f"{model} --batch {batch} {' '.join(config)}"
                suite.run_case(name, run_case, suite, tools, model, batch, config)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
