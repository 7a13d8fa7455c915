#!/usr/bin/env python3
"""Measures how much memory pcc needs to import a model whose weights are
stored as ONNX external data.

    python tools/bench_import.py [--bin build] [--work build/bench-import]
                                 [--sizes 1,2.25] [--keep]

For each size S (GiB of fp32 weights) it writes, with onnx.helper, a model
`y = relu(...relu(x @ W1)... @ Wn)` whose n weights of 64 MiB each live in one
`model.onnx.data` file (the .onnx file itself is a few KB), then runs pcc on it
in several modes and prints the peak resident set size next to the weight size:

  ir      pcc MODEL --gpus 1 --emit ir --quiet      (import, passes, IR printed; no plan)
  report  pcc MODEL --gpus 1 --emit report --quiet  (import, passes, report; no plan)
  plan    pcc MODEL --gpus 1 -o PLAN --quiet        (the plan, weights written to rank files)

"peak RSS" is what /usr/bin/time -v prints as "Maximum resident set size".
Pages of a mapped weight file count in RSS while they are resident, so a path
that reads every weight (a checksum, a copy into a rank file) can reach the
weight size without holding a private copy. The script therefore also samples
/proc/PID/status of pcc every 10 ms and reports the largest RssAnon (private
memory: heap, copies) and RssFile (file-backed pages: the mapped weights) it
saw. Weights that are copied show up in RssAnon; mapped ones do not.

Needs only onnx and numpy (the test venv).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

WIDTH = 4096  # one weight: 4096 x 4096 fp32 = 64 MiB
GIB = 1 << 30


def write_model(directory, gib):
    """Writes DIRECTORY/model.onnx with GIB GiB of external-data weights;
    \\returns (path, weight bytes)."""
    os.makedirs(directory, exist_ok=True)
    per = WIDTH * WIDTH * 4
    n = max(1, int(round(gib * GIB / per)))
    path = os.path.join(directory, "model.onnx")
    data_name = "model.onnx.data"
    rng = np.random.default_rng(1)
    inits, nodes = [], []
    prev = "x"
    with open(os.path.join(directory, data_name), "wb") as f:
        for k in range(n):
            w = (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH))
            offset = f.tell()
            f.write(w.tobytes())
            t = TensorProto()
            t.name = f"w{k}"
            t.data_type = TensorProto.FLOAT
            t.dims.extend([WIDTH, WIDTH])
            t.data_location = TensorProto.EXTERNAL
            for key, value in (("location", data_name), ("offset", str(offset)),
                               ("length", str(per))):
                e = t.external_data.add()
                e.key, e.value = key, value
            inits.append(t)
            nodes.append(helper.make_node("MatMul", [prev, t.name], [f"m{k}"], name=f"/l{k}/MatMul"))
            out = "y" if k == n - 1 else f"h{k}"
            nodes.append(helper.make_node("Relu", [f"m{k}"], [out], name=f"/l{k}/Relu"))
            prev = out
    graph = helper.make_graph(
        nodes, "bench_import",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="pcc-bench")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path, n * per


def _status_kib(pid):
    """\\returns {field: KiB} of /proc/PID/status's Rss* lines ({} once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {l.split(":")[0]: int(l.split()[1]) for l in f if l.startswith("Rss")}
    except (OSError, ValueError, IndexError):
        return {}


def _child(pid):
    """\\returns the first child of process pid, or None."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except (OSError, ValueError):
        return None


def measure(cmd, env=None):
    """Runs cmd under /usr/bin/time -v (stdout discarded; `env`: its
    environment, default this one's); \\returns (exit code,
    peak RSS, peak RssAnon, peak RssFile, wall seconds, CPU seconds, stderr
    tail), sizes in bytes.
    time's figure is used because the kernel's maximum RSS of a child forked from
    this (large) Python process would include Python's own pages."""
    start = time.time()
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        anon = filed = 0
        while p.poll() is None:
            child = _child(p.pid)
            if child:
                s = _status_kib(child)
                anon = max(anon, s.get("RssAnon", 0))
                filed = max(filed, s.get("RssFile", 0))
            time.sleep(0.01)
        err.seek(0)
        text = err.read()
    wall = time.time() - start

    def field(name):
        m = re.search(name + r": ([0-9.]+)", text)
        return float(m.group(1)) if m else -1.0

    rss = int(field(r"Maximum resident set size \(kbytes\)")) * 1024
    cpu = field(r"User time \(seconds\)") + field(r"System time \(seconds\)")
    tail = "\n".join(l for l in text.splitlines() if not l.startswith("\t"))[-400:]
    return p.returncode, rss, anon * 1024, filed * 1024, wall, cpu, tail


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(root, "build"))
    parser.add_argument("--work", default=os.path.join(root, "build", "bench-import"))
    parser.add_argument("--sizes", default="1,2.25", help="GiB of weights, comma-separated")
    parser.add_argument("--modes", default="ir,report,plan")
    parser.add_argument("--keep", action="store_true", help="keep the models and plans")
    args = parser.parse_args()

    pcc = os.path.join(args.bin, "pcc")
    rows = []
    for size in [float(s) for s in args.sizes.split(",") if s]:
        directory = os.path.join(args.work, f"w{size:g}gib")
        path, weight_bytes = write_model(directory, size)
        onnx_bytes = os.path.getsize(path)
        for mode in [m for m in args.modes.split(",") if m]:
            base = [pcc, path, "--gpus", "1", "--batch", "1", "--quiet"]
            plan = os.path.join(directory, "plan.pcc")
            cmd = {"ir": base + ["--emit", "ir"], "report": base + ["--emit", "report"],
                   "plan": base + ["-o", plan]}[mode]
            rc, rss, anon, filed, seconds, _, tail = measure(cmd)
            rows.append((weight_bytes, onnx_bytes, mode, rc, rss, anon, filed, seconds))
            print(f"{weight_bytes / GIB:6.2f} GiB weights  {mode:6s}  exit {rc}  "
                  f"peak RSS {rss / 2**20:8.1f} MiB ({rss / weight_bytes:6.1%} of the weights)  "
                  f"anon {anon / 2**20:8.1f} MiB  file {filed / 2**20:8.1f} MiB  {seconds:6.1f} s"
                  + (f"\n    {tail.strip()}" if rc else ""), flush=True)
            shutil.rmtree(plan, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)

    print("\n| weights | .onnx file | mode | exit | peak RSS | RSS / weights | peak RssAnon |"
          " peak RssFile | time |")
    print("|---|---|---|---|---|---|---|---|---|")
    for wb, ob, mode, rc, rss, anon, filed, seconds in rows:
        print(f"| {wb / GIB:.2f} GiB | {ob / 1024:.0f} KiB | `{mode}` | {rc} | "
              f"{rss / 2**20:.0f} MiB | {rss / wb:.1%} | {anon / 2**20:.1f} MiB | "
              f"{filed / 2**20:.0f} MiB | {seconds:.1f} s |")
    return 0 if all(r[3] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
