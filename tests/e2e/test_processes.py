#!/usr/bin/env python3
"""Ranks as processes: the same plan, started as one pcc-run process per rank
(RANK / WORLD_SIZE in the environment, as a job launcher sets them), meets
through a FileStore rendezvous; rank 0 assembles the outputs, which must match
the reference program and onnxruntime."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

CASES = [  # (model, batch, compile flags)
    ("gpt2_tiny.onnx", 4, ["--gpus", 4, "--strategy", "dp=2,tp=2"]),
    ("mlp.onnx", 6, ["--gpus", 4]),
]


def run_ranks(tools, plan, world, rendezvous, run_id, extra):
    """Starts `world` pcc-run processes; \returns their (returncode, stdout, stderr)."""
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), PCC_RUN_ID=run_id)
        cmd = [tools.path("pcc-run"), plan, "--rendezvous", rendezvous, "--timeout", "60"] + extra
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out.append((p.returncode, o, e))
    return out


def case(suite, tools, model, batch, flags):
    name = f"{model} {' '.join(map(str, flags))}"
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path(model), "--batch", batch, "-o", plan, "--quiet"] + flags)
    if not suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
        return
    data = os.path.join(d, "data")
    e2e.write_case(data, e2e.model_path(model), batch, seed=3)
    world = 4
    results = run_ranks(tools, plan, world, os.path.join(d, "rdzv"), "run1",
                        ["--inputs", data, "--expect", data, "--check", "--rtol", "1e-4", "--atol", "1e-5"])
    detail = "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent(o + e)}" for i, (rc, o, e) in enumerate(results))
    suite.check(f"{name}: every rank exits 0", all(rc == 0 for rc, _, _ in results), detail)
    rc0, out0, _ = results[0]
    suite.check(f"{name}: rank 0 reports every rank's time",
                all(f"rank {i}:" in out0 for i in range(world)), detail)
    suite.check(f"{name}: rank 0 checked against the reference and onnxruntime",
                "vs reference" in out0 and "vs expected" in out0 and "MISMATCH" not in out0.upper(), detail)
    suite.check(f"{name}: other ranks stay quiet",
                all(o.strip() == "" for _, o, _ in results[1:]), detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def missing_run_id(suite, tools):
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 2, "--gpus", 2, "-o", plan, "--quiet"])
    if not suite.check("no run id: compiles", r.returncode == 0, r.describe()):
        return
    env = {k: v for k, v in os.environ.items() if k not in ("PCC_RUN_ID", "PMIX_NAMESPACE")}
    env.update(RANK="0", WORLD_SIZE="2")
    p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", d], env=env, capture_output=True,
                       text=True, timeout=60)
    suite.check("no run id: exit 2 with one line naming PCC_RUN_ID",
                p.returncode == 2 and "PCC_RUN_ID" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
                f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    env.update(PCC_RUN_ID="x", WORLD_SIZE="3")
    p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", d], env=env, capture_output=True,
                       text=True, timeout=60)
    suite.check("world size differs from the plan: exit 2",
                p.returncode == 2 and "3 processes" in p.stderr, f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    shutil.rmtree(d, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_processes", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, needed=("pcc", "pcc-run")):
        for model, batch, flags in CASES:
            suite.run_case(model, case, suite, tools, model, batch, flags)
        suite.run_case("errors", missing_run_id, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
