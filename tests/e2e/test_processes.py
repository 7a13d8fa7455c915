#!/usr/bin/env python3
"""Ranks as processes: the same plan, started as one pcc-run process per rank
(RANK / WORLD_SIZE in the environment, as a job launcher sets them), meets
through a FileStore rendezvous; rank 0 assembles the outputs, which must match
the reference program and onnxruntime.

A rank killed with SIGKILL mid-run makes every other rank exit within the
timeout with code 4 and one line naming the dead rank; a rank that never
arrives does the same within the timeout (not once per group); a pipeline
stage that stalls (SIGSTOP) makes the next stage's rank exit within the
timeout, naming its rank, stage and micro-batch and the silent peer; with
dp=2,pp=2 every other rank (those that never talk to the stopped one too)
exits 4 within the timeout (+5 s), naming the rank that stopped answering.
A rank killed while the others connect (one of them not started yet) makes
every other rank exit 4 within seconds, not at the timeout, naming it."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

CASES = [  # (model, batch, compile flags)
    ("gpt2_tiny.onnx", 4, ["--gpus", 4, "--strategy", "dp=2,tp=2"]),
    ("mlp.onnx", 6, ["--gpus", 4]),
    # Pipeline stages as processes: the transfers and the micro-batch pieces
    # of the outputs travel between processes.
    ("gpt2_tiny.onnx", 8, ["--gpus", 4, "--strategy", "tp=2,pp=2", "--microbatches", 2]),
]


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
    results = e2e.run_ranks(tools, plan, world, os.path.join(d, "rdzv"), "run1",
                        ["--inputs", data, "--expect", data, "--check", "--rtol", "1e-4", "--atol", "1e-5",
                         "--profile"])
    detail = "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent(o + e)}" for i, (rc, o, e) in enumerate(results))
    suite.check(f"{name}: every rank exits 0", all(rc == 0 for rc, _, _ in results), detail)
    rc0, out0, _ = results[0]
    suite.check(f"{name}: rank 0 reports every rank's time",
                all(f"rank {i}:" in out0 for i in range(world)), detail)
    suite.check(f"{name}: rank 0 checked against the reference and onnxruntime",
                "vs reference" in out0 and "vs expected" in out0 and "MISMATCH" not in out0.upper(), detail)
    suite.check(f"{name}: rank 0 reports every rank's peak memory and its process's peak RSS",
                all(re.search(rf"^memory rank {i}: peak .*; process peak RSS [0-9.]+ MiB$", out0, re.M)
                    for i in range(world)), detail)
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


def start_ranks(tools, plan, world, rendezvous, run_id, extra, skip=()):
    """Starts the pcc-run processes of `world` ranks but those in `skip`; \returns {rank: Popen}."""
    procs = {}
    for r in range(world):
        if r in skip:
            continue
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), PCC_RUN_ID=run_id)
        procs[r] = subprocess.Popen([tools.path("pcc-run"), plan, "--rendezvous", rendezvous] + [str(a) for a in extra], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return procs


def finish(procs, limit):
    """\returns {rank: (rc, stderr, seconds until it exited)} (e2e.finish_processes without stdout)."""
    return {r: (v[0], v[2], v[3]) for r, v in e2e.finish_processes(procs, limit).items()}


def killed_rank(suite, tools):
    """4 ranks of a long run (dp=2,tp=2, many iterations); rank 2 is killed
    with SIGKILL once every rank has connected."""
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 4, "--gpus", 4, "--strategy", "dp=2,tp=2",
                          "-o", plan, "--quiet"])
    if not suite.check("killed rank: compiles", r.returncode == 0, r.describe()):
        return
    timeout, world, victim = 20, 4, 2
    rdzv = os.path.join(d, "rdzv")
    procs = start_ranks(tools, plan, world, rdzv, "kill", ["--timeout", timeout, "--iters", 10 ** 9])
    # Every rank writes rank<R>.pid before connecting; give them time to connect and run.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(rdzv, "kill", f"rank{k}.pid")) for k in range(world)):
        time.sleep(0.1)
    time.sleep(3)
    running = all(p.poll() is None for p in procs.values())
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    del procs[victim]
    results = finish(procs, timeout + 10)
    detail = "\n".join(f"  rank {k}: exit {rc} after {t:.1f} s\n{e2e.indent(e)}" for k, (rc, e, t) in results.items())
    suite.check("killed rank: every rank was running when rank 2 was killed", running, detail)
    print("  exit times after the kill: " + ", ".join(f"rank {k} {t:.2f} s" for k, (_, _, t) in results.items()))
    for k, (rc, e, t) in results.items():
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"killed rank: rank {k} exits 4 within half the timeout ({timeout} s), one line naming rank 2",
                    rc == 4 and t < timeout / 2 and len(lines) == 1 and "rank 2 (process" in lines[0]
                    and "died" in lines[0], detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def missing_rank(suite, tools):
    """Rank 3 of 4 never starts: the others give up within the timeout, naming it."""
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 4, "--gpus", 4, "--strategy", "dp=2,tp=2",
                          "-o", plan, "--quiet"])
    if not suite.check("missing rank: compiles", r.returncode == 0, r.describe()):
        return
    timeout = 4
    procs = start_ranks(tools, plan, 4, os.path.join(d, "rdzv"), "missing", ["--timeout", timeout], skip=(3,))
    results = finish(procs, 5 * timeout + 10)
    detail = "\n".join(f"  rank {k}: exit {rc} after {t:.1f} s\n{e2e.indent(e)}" for k, (rc, e, t) in results.items())
    for k, (rc, e, t) in results.items():
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"missing rank: rank {k} exits 4 within the timeout (+2 s), one line naming rank 3",
                    rc == 4 and t < timeout + 2 and len(lines) == 1 and "rank 3 never arrived" in lines[0], detail)
    shutil.rmtree(d, ignore_errors=True)


def stalled_stage(suite, tools):
    """pp=2 on 2 processes; rank 0 (stage 0) is stopped with SIGSTOP once
    both run: rank 1, waiting in a receive, gives up within the timeout."""
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 8, "--gpus", 2, "--strategy", "pp=2",
                          "--microbatches", 2, "-o", plan, "--quiet"])
    if not suite.check("stalled stage: compiles", r.returncode == 0, r.describe()):
        return
    timeout = 5
    rdzv = os.path.join(d, "rdzv")
    procs = start_ranks(tools, plan, 2, rdzv, "stall", ["--timeout", timeout, "--iters", 10 ** 9])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(rdzv, "stall", f"rank{k}.pid")) for k in range(2)):
        time.sleep(0.1)
    time.sleep(2)
    running = all(p.poll() is None for p in procs.values())
    stopped = procs.pop(0)
    stopped.send_signal(signal.SIGSTOP)
    try:
        results = finish(procs, timeout + 15)
    finally:
        stopped.kill()
        stopped.communicate()
    rc, e, t = results[1]
    detail = f"  rank 1: exit {rc} after {t:.1f} s\n{e2e.indent(e)}"
    suite.check("stalled stage: both ranks were running when rank 0 stopped", running, detail)
    lines = [ln for ln in e.splitlines() if ln.strip()]
    suite.check(f"stalled stage: rank 1 exits 4 within the timeout ({timeout} s, +3 s)",
                rc == 4 and t < timeout + 3, detail)
    said = lines[-1] if lines else ""
    suite.check("stalled stage: one line naming the rank, its stage and micro-batch, and the peer",
                len(lines) == 1 and "rank 1 (stage 1, micro-batch " in said and "rank 0" in said, detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def stalled_dp_pp(suite, tools):
    """dp=2,pp=2 on 4 processes (gpt2_tiny); rank 2 (stage 1 of replica 0)
    is stopped with SIGSTOP: rank 0 sends to it, and ranks 1 and 3 (replica
    1) never talk to it until the end: each must still exit 4 within the
    timeout (+5 s), one line naming rank 2 as the rank that stopped answering."""
    name = "stalled dp=2,pp=2"
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("gpt2_tiny.onnx"), "--batch", 8, "--gpus", 4, "--strategy", "dp=2,pp=2",
                          "-o", plan, "--quiet"])
    if not suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
        return
    timeout, world, victim = 6, 4, 2
    rdzv = os.path.join(d, "rdzv")
    procs = start_ranks(tools, plan, world, rdzv, "stall4", ["--timeout", timeout, "--iters", 10 ** 9, "--threads", 1])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(rdzv, "stall4", f"rank{k}.pid")) for k in range(world)):
        time.sleep(0.1)
    time.sleep(3)  # connected and running
    running = all(p.poll() is None for p in procs.values())
    stopped = procs.pop(victim)
    stopped.send_signal(signal.SIGSTOP)
    try:
        results = finish(procs, timeout + 20)
    finally:
        stopped.kill()
        stopped.communicate()
    detail = "\n".join(f"  rank {k}: exit {rc} after {t:.1f} s\n{e2e.indent(e)}" for k, (rc, e, t) in results.items())
    suite.check(f"{name}: every rank was running when rank {victim} stopped", running, detail)
    print("  exit times after the stop: " + ", ".join(f"rank {k} {t:.2f} s" for k, (_, _, t) in results.items()))
    for k, (rc, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"{name}: rank {k} exits 4 within the timeout ({timeout} s, +5 s), one line naming rank {victim} "
                    "as stopped", rc == 4 and t < timeout + 5 and len(lines) == 1
                    and lines[0].find(f"rank {victim} (process ") >= 0 and "stopped answering" in lines[0], detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def killed_while_connecting(suite, tools):
    """Ranks 0-2 of 4 start, rank 3 starts 2 s later; rank 1 is killed with
    SIGKILL 1 s after it started, while the others wait to connect: every
    other rank (the late one too) exits 4 within seconds, not at the
    timeout, naming rank 1."""
    name = "killed while connecting"
    d = suite.tempdir("proc")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 4, "--gpus", 4, "--strategy", "dp=2,tp=2",
                          "-o", plan, "--quiet"])
    if not suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
        return
    timeout, victim = 30, 1
    rdzv = os.path.join(d, "rdzv")
    procs = start_ranks(tools, plan, 4, rdzv, "kc", ["--timeout", timeout], skip=(3,))
    time.sleep(1)
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    del procs[victim]
    time.sleep(1)
    procs.update(start_ranks(tools, plan, 4, rdzv, "kc", ["--timeout", timeout], skip=(0, 1, 2)))
    results = finish(procs, timeout + 20)  # times from 1 s after the kill
    detail = "\n".join(f"  rank {k}: exit {rc} after {t:.1f} s\n{e2e.indent(e)}" for k, (rc, e, t) in results.items())
    print("  exit times after the kill: " + ", ".join(f"rank {k} {t + 1:.2f} s" for k, (_, _, t) in results.items()))
    for k, (rc, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"{name}: rank {k} exits 4 within 8 s of the kill (timeout {timeout} s), one line naming rank 1",
                    rc == 4 and t + 1 < 8 and len(lines) == 1 and "rank 1 (process" in lines[0] and "died" in lines[0],
                    detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_processes", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, needed=("pcc", "pcc-run")):
        for model, batch, flags in CASES:
            suite.run_case(model, case, suite, tools, model, batch, flags)
        suite.run_case("errors", missing_run_id, suite, tools)
        suite.run_case("killed rank", killed_rank, suite, tools)
        suite.run_case("missing rank", missing_rank, suite, tools)
        suite.run_case("stalled stage", stalled_stage, suite, tools)
        suite.run_case("stalled dp=2,pp=2", stalled_dp_pp, suite, tools)
        suite.run_case("killed while connecting", killed_while_connecting, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
