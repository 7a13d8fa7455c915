"""pcc.Session(plan, distributed=True): one process per rank, started the way
each launcher starts them, each process running its rank three times; rank
0's outputs equal the single-process session's bit for bit, and every other
rank's own part of each output (Session.own_slices) equals that output's
slice (one kernel
thread per rank in both). torch and Slurm are not in the test environment:
torchrun's and srun's variables are set by hand exactly as each sets them;
Open MPI's mpirun starts the processes for real (tools/setup.sh installs it).
Every rank presents the run's secret (PCC_RDZV_SECRET). A generation plan
split tp=2,pp=2 generates under mpirun as four processes: the tokens
transformers' generate recorded, on every rank, twice in one session."""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import BIN, SOURCE_DIR

import pcc

WORLD = 4
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_worker.py")
GENERATE_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "generate_worker.py")
DECODERS = os.path.join(SOURCE_DIR, "models", "exported", "decoders")
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
               "PMIX_NAMESPACE", "PCC_RUN_ID", "PCC_RENDEZVOUS", "PCC_RDZV_PORT", "PCC_RDZV_SECRET")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """A dp=2,tp=2 plan of the tiny GPT-2 at batch 4, its feeds and the single-process outputs."""
    d = tmp_path_factory.mktemp("launch")
    plan = pcc.compile(os.path.join(SOURCE_DIR, "models", "gpt2_tiny.onnx"), gpus=WORLD, strategy="dp=2,tp=2",
                       batch=4, output=str(d / "plan.pcc"), quiet=True)
    rng = np.random.default_rng(5)
    feeds = {i.name: (rng.integers(0, 64, size=i.shape) if i.type.startswith("int") else
                      rng.standard_normal(i.shape)).astype(i.type) for i in plan.inputs}
    np.savez(d / "feeds.npz", **feeds)
    want = pcc.Session(plan, threads=1).run_dict(feeds)
    return d, plan, want


def base_env():
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS and not k.startswith("SLURM_")}
    env["PYTHONPATH"] = os.path.join(BIN, "python")
    env["PCC_RDZV_SECRET"] = secrets.token_hex(16)
    return env


def finish(procs, limit=180):
    out = {}
    for r, p in procs.items():
        try:
            o, e = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out[r] = (p.returncode, o, e)
    return out


def check_outputs(out, want):
    """Rank 0's outputs equal the single-process run's; every other rank's own
    part of each output equals that run's output at the place own_slices names."""
    with np.load(out + ".npz") as got:
        assert set(got.files) == set(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k} differs from the single-process run")
    parts = 0
    for r in range(1, WORLD):
        with open(f"{out}.rank{r}.json") as f:
            slices = json.load(f)
        assert set(slices) == set(want)
        with np.load(f"{out}.rank{r}.npz") as got:
            assert set(got.files) == {k for k, v in slices.items() if v is not None}
            for k, where in slices.items():
                if where is None:
                    continue
                dim, start, length = where
                expected = want[k] if dim < 0 else np.take(want[k], range(start, start + length), axis=dim)
                np.testing.assert_array_equal(got[k], expected, err_msg=f"rank {r}'s part of {k} ({where})")
                parts += 1
    assert parts > 0, "no rank but 0 computed any part of an output"


@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
def test_launcher_variables(case, launcher):
    d, plan, want = case
    out = str(d / launcher)
    port = free_port()
    env0 = base_env()
    procs = {}
    for r in range(WORLD):
        env = dict(env0)
        if launcher == "torchrun":  # as torchrun --standalone --nproc-per-node 4 sets them
            env.update(RANK=str(r), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(WORLD),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1), TORCHELASTIC_RUN_ID="pytest")
        else:  # as srun -n 4 sets them (the port pcc's store uses: PCC_RDZV_PORT)
            env.update(SLURM_PROCID=str(r), SLURM_NTASKS=str(WORLD), SLURM_LOCALID=str(r),
                       SLURM_JOB_NODELIST="localhost", SLURM_STEP_NODELIST="localhost", SLURM_JOB_ID="7",
                       SLURM_STEP_ID="0", PCC_RDZV_PORT=str(port))
        procs[r] = subprocess.Popen([sys.executable, WORKER, plan.path, str(d / "feeds.npz"), out], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = finish(procs)
    for r, (rc, o, e) in got.items():
        assert rc == 0 and f"rank {r} of {WORLD}: ok" in o, f"rank {r} exit {rc}\n{o}\n{e}"
    check_outputs(out, want)


def mpirun_cmd():
    """\returns mpirun's command prefix for WORLD local processes."""
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found (tools/setup.sh installs openmpi-bin)"
    cmd = [mpirun, "--oversubscribe", "-np", str(WORLD), "-x", "PCC_RDZV_SECRET", "-x", "PYTHONPATH"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


@pytest.mark.parametrize("rendezvous", ["directory", "tcp"])
def test_mpirun(case, rendezvous):
    d, plan, want = case
    out = str(d / f"mpirun_{rendezvous}")
    where = str(d / "rdzv") if rendezvous == "directory" else f"tcp:127.0.0.1:{free_port()}"
    cmd = mpirun_cmd() + [sys.executable, WORKER, plan.path, str(d / "feeds.npz"), out, where]
    p = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"{' '.join(cmd)}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert all(f"rank {r} of {WORLD}: ok" in p.stdout for r in range(WORLD)), p.stdout
    check_outputs(out, want)


def test_mpirun_generates(tmp_path):
    """Four processes generate at tp=2,pp=2 (a prefill program shorter than
    the longer prompt, which goes on through the decode step): every rank gets
    transformers' greedy tokens, each step checked on rank 0, twice."""
    with open(os.path.join(DECODERS, "manifest.json")) as f:
        info = json.load(f)["models"]["llama"]
    export = next(e for _, e in sorted(info["exports"].items()) if e.get("ok"))
    plan = pcc.compile(os.path.join(DECODERS, export["file"]), gpus=WORLD, strategy="tp=2,pp=2", batch=2,
                       max_context=64, max_prompt=3, output=str(tmp_path / "plan.pcc"), quiet=True)
    new_tokens = len(info["generated"][0])
    with open(tmp_path / "prompts.json", "w") as f:
        json.dump(info["prompts"], f)
    out = str(tmp_path / "gen")
    cmd = mpirun_cmd() + [sys.executable, GENERATE_WORKER, plan.path, str(tmp_path / "prompts.json"),
                          str(new_tokens), out, str(tmp_path / "rdzv")]
    p = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"{' '.join(cmd)}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}"
    for r in range(WORLD):
        with open(f"{out}.rank{r}.json") as f:
            got = json.load(f)
        assert got["tokens"] == [info["generated"]] * 2, f"rank {r}: {got['tokens']}"
        assert all(n > 0 for n in got["checked_steps"]) if r == 0 else got["checked_steps"] == [0, 0], got


def test_distributed_needs_a_launcher(case, monkeypatch):
    _, plan, _ = case
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(pcc.BadInputError, match="names no rank"):
        pcc.Session(plan, distributed=True)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("PCC_RENDEZVOUS", "/tmp/unused")
    monkeypatch.setenv("PCC_RUN_ID", "pytest")
    with pytest.raises(pcc.BadInputError, match="started 2 processes, the plan has 4 ranks"):
        pcc.Session(plan, distributed=True)
    with pytest.raises(pcc.BadInputError, match="only a distributed session"):
        pcc.Session(plan, rendezvous="/tmp/unused")


def test_a_peer_that_never_arrives_raises_peer_error(tmp_path, monkeypatch):
    """Rank 1 of a two-rank plan alone (a directory rendezvous): the session
    gives up at its timeout with pcc.PeerError naming the rank that never
    arrived."""
    plan = pcc.compile(os.path.join(SOURCE_DIR, "models", "mlp.onnx"), gpus=2, strategy="tp=2", batch=4, quiet=True)
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("PCC_RUN_ID", "alone")
    t0 = time.monotonic()
    with pytest.raises(pcc.PeerError) as e:
        pcc.Session(plan, distributed=True, timeout=2, rendezvous=str(tmp_path / "rdzv"))
    took = time.monotonic() - t0
    assert "rank 0 never arrived" in str(e.value) and e.value.exit_code == 4
    # Within the timeout and the moment a failure takes to name the lost peer
    # (gloo's file store alone would wait 30 s).
    assert took < 15, f"gave up after {took:.1f} s with a 2 s timeout"
