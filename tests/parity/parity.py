#!/usr/bin/env python3
"""Parity of pcc with onnxruntime on the full-size exports of models/export.py --full.

    python tests/parity/parity.py --bin build [--cache build/parity-cache]
                                  [--only NAME,...] [--gpus 1,4] [-o TABLE.md]

For every export the manifest lists, and every device count: compiles the model
with pcc (--batch as its test data has), runs the plan with pcc-run on CPU
ranks, and compares the outputs with onnxruntime's on the same inputs (rtol
1e-3, atol 1e-4). Prints one table row per case: model, exporter, gpus, the
largest absolute and relative error, whether it is within tolerance, the
seconds of one pcc-run pass (the slowest rank's time as pcc-run prints it:
execution only, not loading the plan), the seconds of one onnxruntime run on
the same inputs (session creation not counted) and the compile time; a case
that does not compile or run says where it stopped. Exit 1 if any case fails.

Runs with the test venv (onnx, onnxruntime, numpy); torch is only needed to
make the exports (tools/parity.sh does both).
"""

import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
import pcc_e2e as e2e  # noqa: E402

RTOL, ATOL = 1e-3, 1e-4


def read_dir(directory, prefix):
    paths = sorted(glob.glob(os.path.join(directory, f"{prefix}_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    return [e2e.read_tensor(p) for p in paths]


def errors(got, want):
    """\returns (max abs error, max relative error, within tolerance)."""
    if got.shape != want.shape:
        return float("inf"), float("inf"), False
    g, w = got.astype(np.float64), want.astype(np.float64)
    diff = np.abs(g - w)
    rel = diff / np.maximum(np.abs(w), 1e-30)
    ok = bool(np.all(diff <= ATOL + RTOL * np.abs(w)))
    return float(diff.max(initial=0)), float(rel.max(initial=0)), ok


def first_line(result):
    text = (result.stderr or result.stdout or "").strip().splitlines()
    return (text[-1] if text else f"exit {result.returncode}")[:160]


def onnxruntime_timed(path, arrays):
    """\returns (onnxruntime's outputs, seconds of the run without session creation)."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = dict(zip([i.name for i in session.get_inputs()], arrays))
    start = time.time()
    outs = session.run(None, feed)
    return outs, time.time() - start


def run_case(tools, entry, cache, gpus, ort_outs, work):
    """\returns (max abs, max rel, ok, note, compile seconds, run seconds) for one
    export at `gpus` devices; run seconds is None where it did not run."""
    model = os.path.join(cache, entry["file"])
    data = os.path.join(cache, entry["data"])
    plan = os.path.join(work, "plan.pcc")
    outs = os.path.join(work, "outputs")
    args = [model, "--gpus", gpus, "-o", plan, "--quiet"]
    proto = e2e.onnx.load(model, load_external_data=False)
    if any(not d.HasField("dim_value") for vi in e2e.graph_inputs(proto)
           for d in vi.type.tensor_type.shape.dim):
        args[1:1] = ["--batch", entry["batch"]]
    start = time.time()
    r = tools.run("pcc", args, timeout=3600)
    compile_s = time.time() - start
    if r.returncode != 0:
        return None, None, False, "compile: " + first_line(r), compile_s, None
    r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs], timeout=3600)
    if r.returncode != 0:
        return None, None, False, "run: " + first_line(r), compile_s, None
    rank_ms = [float(m) for m in re.findall(r"^rank \d+: ([0-9.]+) ms$", r.stdout, re.M)]
    run_s = max(rank_ms) / 1e3 if rank_ms else None
    worst_abs = worst_rel = 0.0
    ok = True
    for k, want in enumerate(ort_outs):
        path = os.path.join(outs, f"output_{k}.pb")
        if not os.path.exists(path):
            return None, None, False, f"output_{k}.pb not written", compile_s, run_s
        a, rel, good = errors(e2e.read_tensor(path), want)
        worst_abs, worst_rel, ok = max(worst_abs, a), max(worst_rel, rel), ok and good
    return worst_abs, worst_rel, ok, "", compile_s, run_s


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(root, "build"))
    parser.add_argument("--cache", default=os.path.join(root, "build", "parity-cache"))
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--gpus", default="1,4")
    parser.add_argument("-o", dest="table", default="", help="also write the table here")
    args = parser.parse_args()

    with open(os.path.join(args.cache, "manifest.json")) as f:
        manifest = json.load(f)
    only = [n for n in args.only.split(",") if n]
    tools = e2e.Tools(args.bin)
    header = ("| model | exporter | gpus | max abs err | max rel err | ok | pcc run s | onnxruntime s "
              "| compile s | note |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    rows = [header]
    print(header, flush=True)
    failed = 0
    for entry in manifest["exports"]:
        if only and entry["name"] not in only:
            continue
        cells = [entry["name"], entry["exporter"]]
        if not entry.get("ok"):
            row = f"| {' | '.join(cells)} | - | - | - | no | - | - | - | export failed: {entry['error'][:160]} |"
            rows.append(row)
            print(row, flush=True)
            failed += 1
            continue
        model = os.path.join(args.cache, entry["file"])
        data = os.path.join(args.cache, entry["data"])
        inputs = read_dir(data, "input")
        ort_outs, ort_s = onnxruntime_timed(model, inputs)
        torch_outs = read_dir(data, "output")
        vs_torch = max(errors(o, t)[0] for o, t in zip(ort_outs, torch_outs))
        for gpus in [int(g) for g in args.gpus.split(",") if g]:
            work = tempfile.mkdtemp(prefix="pcc-parity-")
            try:
                a, rel, ok, note, compile_s, run_s = run_case(tools, entry, args.cache, gpus, ort_outs, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            failed += not ok
            note = note or f"onnxruntime vs torch max abs {vs_torch:.2g}"
            fmt = (lambda x: "-" if x is None else f"{x:.3g}")
            row = (f"| {' | '.join(cells)} | {gpus} | {fmt(a)} | {fmt(rel)} | "
                   f"{'yes' if ok else 'NO'} | {fmt(run_s)} | {ort_s:.3g} | {compile_s:.0f} | "
                   f"{note.replace('|', '/')} |")
            rows.append(row)
            print(row, flush=True)
    if args.table:
        with open(args.table, "w") as f:
            f.write("\n".join(rows) + "\n")
    print(f"parity: {len(rows) - 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
