#!/usr/bin/env python3
"""Launching ranks as processes on one machine as on several: pcc-run
processes meet through the TCP store rank 0 serves (`--rendezvous
tcp:127.0.0.1:PORT`, and over IPv6 `tcp:[::1]:PORT` with `--gloo-host ::1`)
under Open MPI's mpirun (directory and TCP rendezvous), and with torchrun's
and Slurm's variables set by hand and no --rendezvous (torch and Slurm are
not installed here); their outputs equal the threaded run's bit for bit. LOCAL_RANK
reaches rank 0's report. Every rank presents the run's secret
(PCC_RDZV_SECRET; mpirun passes it with -x): without it a rank is a usage
error, and a stranger with a wrong one claims no rank. A store nobody serves
makes every rank exit 4 within the timeout with one line naming its rank and
HOST:PORT; a rank killed with SIGKILL (also while the others connect) makes
the others exit 4 within the timeout, naming it; a stage stopped with SIGSTOP
(dp=2,pp=2) makes every other rank exit 4 within the timeout (+5 s), naming
the rank that stopped answering.

mpirun is required (tools/setup.sh installs openmpi-bin): without it the mpirun
cases fail."""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

CASES = [  # (model, batch, compile flags, how gloo's address is chosen: pcc-run flags, environment; store host)
    ("mlp.onnx", 4, ["--gpus", 2, "--strategy", "tp=2"], ["--gloo-iface", "lo"], {}, "127.0.0.1"),
    ("gpt2_tiny.onnx", 4, ["--gpus", 4, "--strategy", "dp=2,tp=2"], [], {"PCC_GLOO_HOST": "127.0.0.1"}, "127.0.0.1"),
    # IPv6: the store on ::1 (in brackets), gloo on ::1.
    ("mlp.onnx", 4, ["--gpus", 2, "--strategy", "tp=2"], ["--gloo-host", "::1"], {}, "::1"),
]
# Same kernel threads in every run, so that the numbers can be equal bit for bit.
THREADS = ["--threads", "1"]


def free_port(host="127.0.0.1"):
    """\returns a TCP port free on `host` (127.0.0.1 or ::1) right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tcp_rendezvous(host, port):
    """\returns `--rendezvous`'s tcp:HOST:PORT, an IPv6 HOST in brackets."""
    return f"tcp:[{host}]:{port}" if ":" in host else f"tcp:{host}:{port}"


# The run's rendezvous secret, as a launcher would make one.
SECRET = secrets.token_hex(16)


def base_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PCC_RUN_ID", "PMIX_NAMESPACE", "PCC_RENDEZVOUS", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE", "PCC_RDZV_SECRET")}
    env["PCC_RDZV_SECRET"] = SECRET
    return env


def start_ranks(tools, plan, world, rendezvous, extra, skip=(), run_id=None, env_extra=None):
    """Starts the pcc-run processes of `world` ranks but those in `skip`
    (LOCAL_RANK = rank); \returns {rank: Popen}."""
    procs = {}
    for r in range(world):
        if r in skip:
            continue
        env = dict(base_env(), RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), **(env_extra or {}))
        if run_id:
            env["PCC_RUN_ID"] = run_id
        cmd = [tools.path("pcc-run"), plan, "--rendezvous", rendezvous] + [str(a) for a in extra]
        procs[r] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return procs


def finish(procs, limit):
    """\returns e2e.finish_processes(procs, limit)."""
    return e2e.finish_processes(procs, limit)


def cpu_seconds(pid):
    """\returns the processor seconds process `pid` used (user + system)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def describe(results):
    return "\n".join(f"  rank {k}: exit {rc} after {t:.1f} s\n{e2e.indent(o + e)}"
                     for k, (rc, o, e, t) in sorted(results.items()))


def same_bytes(dir_a, dir_b, count):
    """\returns '' when output_K.pb, K < count, are byte-identical in both dirs, else what differs."""
    for k in range(count):
        a, b = (os.path.join(d, f"output_{k}.pb") for d in (dir_a, dir_b))
        if not os.path.exists(a) or not os.path.exists(b):
            return f"output_{k}.pb missing in {a if not os.path.exists(a) else b}"
        with open(a, "rb") as fa, open(b, "rb") as fb:
            if fa.read() != fb.read():
                return f"output_{k}.pb differs"
    return ""


def compile_case(suite, tools, d, model, batch, flags, name):
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path(model), "--batch", batch, "-o", plan, "--quiet"] + flags)
    if not suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
        return None, None, 0
    data = os.path.join(d, "data")
    e2e.write_case(data, e2e.model_path(model), batch, seed=5)
    threaded = os.path.join(d, "threaded")
    r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", threaded] + THREADS)
    if not suite.check(f"{name}: the threaded run", r.returncode == 0, r.describe()):
        return None, None, 0
    outputs = len([f for f in os.listdir(threaded) if f.startswith("output_")])
    return plan, data, outputs


def tcp_case(suite, tools, model, batch, flags, gloo_flags, gloo_env, host):
    port = free_port(host)
    rendezvous = tcp_rendezvous(host, port)
    name = (f"{rendezvous} {model} {' '.join(map(str, flags + gloo_flags))} "
            f"{' '.join(f'{k}={v}' for k, v in gloo_env.items())}")
    d = suite.tempdir("launch")
    plan, data, outputs = compile_case(suite, tools, d, model, batch, flags, name)
    if not plan:
        return
    world = int(flags[flags.index("--gpus") + 1])
    procs_out = os.path.join(d, "procs")
    procs = start_ranks(tools, plan, world, rendezvous,
                        ["--inputs", data, "--outputs", procs_out, "--check", "--profile", "--timeout", 60] + THREADS
                        + gloo_flags, env_extra=gloo_env)
    results = finish(procs, 120)
    detail = describe(results)
    suite.check(f"{name}: every rank exits 0", all(rc == 0 for rc, _, _, _ in results.values()), detail)
    out0 = results[0][1]
    suite.check(f"{name}: rank 0 checked against the reference", "vs reference" in out0 and "MISMATCH" not in out0,
                detail)
    suite.check(f"{name}: rank 0 reports every rank's LOCAL_RANK",
                all(f"(local rank {r})" in out0 for r in range(world)), detail)
    diff = same_bytes(os.path.join(d, "threaded"), procs_out, outputs)
    suite.check(f"{name}: outputs equal the threaded run's bit for bit", outputs > 0 and not diff, diff)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def mpirun_cmd():
    """\returns mpirun's command prefix for 4 local processes, or None when it is not installed."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        return None
    cmd = [mpirun, "--oversubscribe", "-np", "4", "-x", "PCC_RDZV_SECRET"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def mpirun_case(suite, tools):
    """dp=2,tp=2 on 4 processes started by mpirun: with the directory
    rendezvous (run id: mpirun's PMIX_NAMESPACE) and with tcp:."""
    name = "mpirun gpt2_tiny dp=2,tp=2"
    cmd = mpirun_cmd()
    if not suite.check("mpirun is installed (tools/setup.sh installs openmpi-bin)", cmd is not None,
                       "  mpirun not found on PATH"):
        return
    d = suite.tempdir("launch")
    plan, data, outputs = compile_case(suite, tools, d, "gpt2_tiny.onnx", 4,
                                       ["--gpus", 4, "--strategy", "dp=2,tp=2"], name)
    if not plan:
        return
    for kind, rendezvous in (("directory", os.path.join(d, "rdzv")), ("tcp", f"tcp:127.0.0.1:{free_port()}")):
        out = os.path.join(d, f"mpi_{kind}")
        argv = cmd + [tools.path("pcc-run"), plan, "--rendezvous", rendezvous, "--inputs", data, "--outputs", out,
                      "--check", "--profile", "--timeout", "60"] + THREADS
        try:
            p = subprocess.run(argv, env=base_env(), capture_output=True, text=True, timeout=180)
            rc, o, e = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as t:
            rc, o, e = None, str(t.stdout or ""), str(t.stderr or "")
        detail = f"  {' '.join(argv)}\n  exit {rc}\n{e2e.indent(o + e)}"
        suite.check(f"{name} ({kind} rendezvous): exits 0", rc == 0, detail)
        suite.check(f"{name} ({kind} rendezvous): one report, checked",
                    o.count("vs reference") == outputs and "MISMATCH" not in o
                    and all(f"rank {r}:" in o for r in range(4)), detail)
        suite.check(f"{name} ({kind} rendezvous): OMPI_COMM_WORLD_LOCAL_RANK reaches the report",
                    all(f"(local rank {r})" in o for r in range(4)), detail)
        diff = same_bytes(os.path.join(d, "threaded"), out, outputs)
        suite.check(f"{name} ({kind} rendezvous): outputs equal the threaded run's bit for bit",
                    outputs > 0 and not diff, diff)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def compile_mlp4(suite, tools, d, name):
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 4, "--gpus", 4, "--strategy", "dp=2,tp=2",
                          "-o", plan, "--quiet"])
    return plan if suite.check(f"{name}: compiles", r.returncode == 0, r.describe()) else None


def no_store(suite, tools):
    """Ranks 1-3 of 4 with no rank 0 (nothing serves the port): each exits 4
    within the timeout with one line naming its rank and the address."""
    name = "no store"
    d = suite.tempdir("launch")
    plan = compile_mlp4(suite, tools, d, name)
    if not plan:
        return
    timeout, port = 3, free_port()
    procs = start_ranks(tools, plan, 4, f"tcp:127.0.0.1:{port}", ["--timeout", timeout], skip=(0,))
    results = finish(procs, 5 * timeout + 10)
    detail = describe(results)
    for k, (rc, _, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"{name}: rank {k} exits 4 within the timeout (+2 s), one line naming rank {k} and the address",
                    rc == 4 and t < timeout + 2 and len(lines) == 1 and f"rank {k}:" in lines[0]
                    and f"127.0.0.1:{port}" in lines[0], detail)
    # An interface this machine does not have: every rank says so, exit 4.
    port = free_port()
    procs = start_ranks(tools, plan, 4, f"tcp:127.0.0.1:{port}", ["--timeout", timeout, "--gloo-iface", "nosuch0"])
    results = finish(procs, 5 * timeout + 10)
    detail = describe(results)
    # Rank 0 fails at once and its store closes with it: a rank that had not
    # reached the store yet, or was saying HELLO, names the store instead.
    for k, (rc, _, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        said = lines[0] if lines else ""
        suite.check(f"{name}: --gloo-iface nosuch0: rank {k} exits 4 within the timeout, one line naming the "
                    "interface" + (" (or, rank 0 gone, the store)" if k else ""),
                    rc == 4 and t < timeout + 4 and len(lines) == 1
                    and ("interface nosuch0" in said or (k > 0 and f"rendezvous store at 127.0.0.1:{port}" in said)),
                    detail)
    # The same over IPv6: the rank names the address in brackets.
    port = free_port("::1")
    procs = start_ranks(tools, plan, 4, f"tcp:[::1]:{port}", ["--timeout", timeout], skip=(0, 2, 3))
    results = finish(procs, 5 * timeout + 10)
    rc, _, e, t = results[1]
    lines = [ln for ln in e.splitlines() if ln.strip()]
    suite.check(f"{name}: tcp:[::1]:PORT: rank 1 exits 4 within the timeout (+2 s), one line naming rank 1 and "
                "[::1]:PORT", rc == 4 and t < timeout + 2 and len(lines) == 1 and "rank 1:" in lines[0]
                and f"[::1]:{port}" in lines[0], describe(results))
    # A bad address is a usage error before anything waits; a bare IPv6
    # address is told to take brackets.
    env = dict(base_env(), RANK="1", WORLD_SIZE="4")
    for bad, said in (("tcp:127.0.0.1:0", "tcp:HOST:PORT"), ("tcp:127.0.0.1", "tcp:HOST:PORT"),
                      ("tcp:127.0.0.1:99999", "tcp:HOST:PORT"), ("tcp:::1:29500", "brackets: tcp:[::1]:29500"),
                      ("tcp:[::1]", "tcp:[IPV6]:PORT"), ("tcp:[127.0.0.1]:29500", "tcp:[IPV6]:PORT")):
        p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", bad], env=env, capture_output=True,
                           text=True, timeout=30)
        suite.check(f"{name}: --rendezvous {bad}: exit 2, one line",
                    p.returncode == 2 and said in p.stderr and len(p.stderr.strip().splitlines()) == 1,
                    f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    for bad in ("[::1", "[127.0.0.1]", "fd00:::2"):
        p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", f"tcp:[::1]:{free_port('::1')}",
                            "--gloo-host", bad], env=env, capture_output=True, text=True, timeout=30)
        suite.check(f"{name}: --gloo-host {bad}: exit 2, one line naming it",
                    p.returncode == 2 and f"'{bad}'" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
                    f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    # --rendezvous for a run that names no rank (no RANK, no Open MPI) is a
    # usage error, not a run of threads that ignores it.
    env_none = {k: v for k, v in env.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
                and not k.startswith("OMPI_COMM_WORLD_")}
    for rdzv in (f"tcp:127.0.0.1:{free_port()}", "tcp:::1:29500", os.path.join(d, "rdzv-none")):
        p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", rdzv], env=env_none,
                           capture_output=True, text=True, timeout=30)
        suite.check(f"{name}: --rendezvous {rdzv} without RANK/WORLD_SIZE: exit 2, one line",
                    p.returncode == 2 and "RANK and WORLD_SIZE" in p.stderr
                    and len(p.stderr.strip().splitlines()) == 1, f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    # A rank has one spelling: a sign or a leading zero would let "-0" or
    # "01" stand in for rank 0 or 1.
    for var, bad in (("RANK", "-0"), ("RANK", "-00"), ("RANK", "01"), ("RANK", "+1"), ("RANK", "1 "),
                     ("WORLD_SIZE", "04"), ("LOCAL_RANK", "-0")):
        env_bad = dict(env, **{var: bad})
        p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", f"tcp:127.0.0.1:{free_port()}"],
                           env=env_bad, capture_output=True, text=True, timeout=30)
        suite.check(f"{name}: {var}='{bad}': exit 2, one line naming {var}",
                    p.returncode == 2 and var in p.stderr and len(p.stderr.strip().splitlines()) == 1,
                    f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    shutil.rmtree(d, ignore_errors=True)


def killed_rank(suite, tools):
    """4 ranks of a long run meeting through the TCP store; rank 2 is killed
    with SIGKILL once every rank runs: the store sees its connection close."""
    name = "tcp killed rank"
    d = suite.tempdir("launch")
    plan = compile_mlp4(suite, tools, d, name)
    if not plan:
        return
    timeout, world, victim = 20, 4, 2
    procs = start_ranks(tools, plan, world, f"tcp:127.0.0.1:{free_port()}",
                        ["--timeout", timeout, "--iters", 10 ** 9])
    # Connected and running once each has computed for a while (waiting to
    # connect takes next to no processor time).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            p.poll() is not None or cpu_seconds(p.pid) >= 1.0 for p in procs.values()):
        time.sleep(0.1)
    running = all(p.poll() is None for p in procs.values())
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    del procs[victim]
    results = finish(procs, timeout + 10)
    detail = describe(results)
    suite.check(f"{name}: every rank was running when rank 2 was killed", running, detail)
    print("  exit times after the kill: " + ", ".join(f"rank {k} {t:.2f} s" for k, (_, _, _, t) in results.items()))
    for k, (rc, _, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"{name}: rank {k} exits 4 within half the timeout ({timeout} s), one line naming rank 2",
                    rc == 4 and t < timeout / 2 and len(lines) == 1 and "rank 2 (process" in lines[0]
                    and "died" in lines[0], detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def secret_cases(suite, tools):
    """Without PCC_RDZV_SECRET (or with one too short) a tcp: rank is a usage
    error naming it; a stranger presenting a wrong secret as rank 1 is
    refused (exit 4, naming the secret) and claims nothing: the real ranks
    then run as usual."""
    name = "secret"
    d = suite.tempdir("launch")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", 4, "--gpus", 2, "--strategy", "tp=2", "-o", plan,
                          "--quiet"])
    if not suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
        return
    port = free_port()
    for bad in (None, "short"):
        env = dict(base_env(), RANK="1", WORLD_SIZE="2")
        env.pop("PCC_RDZV_SECRET")
        if bad:
            env["PCC_RDZV_SECRET"] = bad
        p = subprocess.run([tools.path("pcc-run"), plan, "--rendezvous", f"tcp:127.0.0.1:{port}"], env=env,
                           capture_output=True, text=True, timeout=30)
        suite.check(f"{name}: PCC_RDZV_SECRET {'unset' if bad is None else repr(bad)}: exit 2, one line naming it",
                    p.returncode == 2 and "PCC_RDZV_SECRET" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
                    f"  exit {p.returncode}\n{e2e.indent(p.stderr)}")
    rendezvous = f"tcp:127.0.0.1:{port}"
    procs = start_ranks(tools, plan, 2, rendezvous, ["--timeout", 20], skip=(1,))
    time.sleep(1)  # rank 0 serves the store
    stranger = start_ranks(tools, plan, 2, rendezvous, ["--timeout", 5], skip=(0,),
                           env_extra={"PCC_RDZV_SECRET": secrets.token_hex(16)})
    got = finish(stranger, 30)
    rc, _, e, _ = got[1]
    suite.check(f"{name}: a stranger with a wrong secret is refused: exit 4 naming the secret",
                rc == 4 and "secret" in e and len(e.strip().splitlines()) == 1, describe(got))
    procs.update(start_ranks(tools, plan, 2, rendezvous, ["--timeout", 20], skip=(0,)))
    results = finish(procs, 60)
    suite.check(f"{name}: the real ranks then run: every rank exits 0",
                all(rc == 0 for rc, _, _, _ in results.values()), describe(results))
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def stalled_dp_pp(suite, tools):
    """dp=2,pp=2 on 4 processes meeting through the TCP store (gpt2_tiny);
    rank 3 (stage 1 of replica 1) is stopped with SIGSTOP: every other rank
    exits 4 within the timeout (+5 s), one line naming rank 3 as the rank
    that stopped answering (ranks 0 and 2 never talk to it until the end)."""
    name = "tcp stalled dp=2,pp=2"
    d = suite.tempdir("launch")
    plan = os.path.join(d, "plan.pcc")
    r = tools.run("pcc", [e2e.model_path("gpt2_tiny.onnx"), "--batch", 8, "--gpus", 4, "--strategy", "dp=2,pp=2",
                          "-o", plan, "--quiet"])
    if not suite.check(f"{name}: compiles", r.returncode == 0, r.describe()):
        return
    timeout, world, victim = 6, 4, 3
    procs = start_ranks(tools, plan, world, f"tcp:127.0.0.1:{free_port()}",
                        ["--timeout", timeout, "--iters", 10 ** 9] + THREADS)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            p.poll() is not None or cpu_seconds(p.pid) >= 1.0 for p in procs.values()):
        time.sleep(0.1)
    running = all(p.poll() is None for p in procs.values())
    stopped = procs.pop(victim)
    stopped.send_signal(signal.SIGSTOP)
    try:
        results = finish(procs, timeout + 20)
    finally:
        stopped.kill()
        stopped.communicate()
    detail = describe(results)
    suite.check(f"{name}: every rank was running when rank {victim} stopped", running, detail)
    print("  exit times after the stop: " + ", ".join(f"rank {k} {t:.2f} s" for k, (_, _, _, t) in results.items()))
    for k, (rc, _, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"{name}: rank {k} exits 4 within the timeout ({timeout} s, +5 s), one line naming rank {victim} "
                    "as stopped", rc == 4 and t < timeout + 5 and len(lines) == 1
                    and f"rank {victim} (process " in lines[0] and "stopped answering" in lines[0], detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def killed_while_connecting(suite, tools):
    """Ranks 0-2 of 4 meet through the TCP store, rank 3 does not start;
    rank 2 is killed with SIGKILL 1 s after it started, while the others
    wait to connect: they exit 4 within seconds, not at the timeout, naming
    rank 2. (A rank started after rank 0 is gone finds no store: the case
    `no store`.)"""
    name = "tcp killed while connecting"
    d = suite.tempdir("launch")
    plan = compile_mlp4(suite, tools, d, name)
    if not plan:
        return
    timeout, victim = 30, 2
    rendezvous = f"tcp:127.0.0.1:{free_port()}"
    procs = start_ranks(tools, plan, 4, rendezvous, ["--timeout", timeout], skip=(3,))
    time.sleep(1)
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    del procs[victim]
    results = finish(procs, timeout + 20)
    detail = describe(results)
    print("  exit times after the kill: " + ", ".join(f"rank {k} {t:.2f} s" for k, (_, _, _, t) in results.items()))
    for k, (rc, _, e, t) in sorted(results.items()):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        suite.check(f"{name}: rank {k} exits 4 within 8 s of the kill (timeout {timeout} s), one line naming rank 2",
                    rc == 4 and t < 8 and len(lines) == 1 and "rank 2 (process" in lines[0]
                    and "died" in lines[0], detail)
    if not suite.keep:
        shutil.rmtree(d, ignore_errors=True)


def launcher_envs(suite, tools):
    """torchrun's and Slurm's variables, set by hand as each launcher sets them
    (torch is not in the test environment), with no --rendezvous: the ranks
    meet at torchrun's MASTER_ADDR:MASTER_PORT+1 and at Slurm's first node
    list host, PCC_RDZV_PORT; their outputs equal the threaded run's bit for
    bit, and LOCAL_RANK / SLURM_LOCALID reach rank 0's report."""
    d = suite.tempdir("launchers")
    plan, data, outputs = compile_case(suite, tools, d, "mlp.onnx", 4, ["--gpus", "4", "--strategy", "dp=2,tp=2"],
                                       "launchers")
    if not plan:
        return
    # The dp = 1 ranks run the dp = 0 ranks' programs and map their weight
    # files (docs/partitioning.md, step 8); each process below maps its own.
    files = [r["weight_file"] for r in e2e.PlanInfo(plan).ranks]
    suite.check("launchers: the replicas share their leads' weight files",
                files == ["rank0.bin", "rank1.bin", "rank0.bin", "rank1.bin"], str(files))
    world = 4
    for name in ("torchrun", "srun"):
        out = os.path.join(d, name)
        port = free_port()
        procs = {}
        for r in range(world):
            env = base_env()
            for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                      "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "PCC_RDZV_PORT"):
                env.pop(k, None)
            if name == "torchrun":
                env.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(world),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1), TORCHELASTIC_RUN_ID="e2e")
            else:
                env.update(SLURM_PROCID=str(r), SLURM_NTASKS=str(world), SLURM_LOCALID=str(r),
                           SLURM_JOB_NODELIST="localhost", SLURM_STEP_NODELIST="localhost", SLURM_JOB_ID="7",
                           SLURM_STEP_ID="0", PCC_RDZV_PORT=str(port))
            cmd = [tools.path("pcc-run"), plan, "--inputs", data, "--outputs", out, "--profile"] + THREADS
            procs[r] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        got = finish(procs, 120)
        ok = all(rc == 0 for rc, _, _, _ in got.values())
        if not suite.check(f"{name} variables: {world} processes meet and run", ok, describe(got)):
            continue
        why = same_bytes(os.path.join(d, "threaded"), out, outputs)
        suite.check(f"{name} variables: outputs equal the threaded run's bit for bit", not why, why)
        report = got[0][1]
        suite.check(f"{name} variables: the local ranks reach rank 0's report",
                    all(f"(local rank {r})" in report for r in range(world)), e2e.indent(report))


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_launch", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, needed=("pcc", "pcc-run")):
        for model, batch, flags, gloo_flags, gloo_env, host in CASES:
            suite.run_case(f"tcp {host} {model}", tcp_case, suite, tools, model, batch, flags, gloo_flags, gloo_env,
                           host)
        suite.run_case("mpirun", mpirun_case, suite, tools)
        suite.run_case("launcher variables", launcher_envs, suite, tools)
        suite.run_case("no store", no_store, suite, tools)
        suite.run_case("killed rank", killed_rank, suite, tools)
        suite.run_case("secret", secret_cases, suite, tools)
        suite.run_case("stalled dp=2,pp=2", stalled_dp_pp, suite, tools)
        suite.run_case("killed while connecting", killed_while_connecting, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
