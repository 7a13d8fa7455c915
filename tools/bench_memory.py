#!/usr/bin/env python3
"""Estimated against measured peak memory per rank on CPU ranks.

    build/venv/bin/python tools/bench_memory.py [--bin build] [--threads N] [--keep]

Compiles every e2e model (models/mlp.onnx, gpt2_tiny.onnx, cnn_small.onnx) at
batch 8 under the mesh search at --gpus 2 and 4 and forced dp=2,tp=2 and tp=4
(--gpus 4), and every committed export (models/exported/*.onnx) at --gpus 2
(batch from its test data), runs each plan on CPU ranks (`pcc-run
--profile-json --warmup 1 --iters 1`: the first run makes what kernels keep,
such as oneDNN Conv's reordered weights, so the second holds all of it; one
thread per rank; its test data or seeded inputs) and
prints, per model and mesh, the largest estimate over the ranks
(report.json's `peak_memory_bytes`), the largest measurement over the ranks
(pcc-run's `peak_memory_bytes`, docs/runtime.md#memory-accounting), their
ratio measured / estimated, the search's upper bound (weights plus live
activations with no reuse) for comparison, and the largest per-rank
|measured / estimated - 1|. Then the number of cases whose every rank is
within 15% of its estimate.
This is a measurement, not a test: it never fails on a ratio.
"""

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import pcc_e2e as e2e  # noqa: E402

E2E_MODELS = ["mlp.onnx", "gpt2_tiny.onnx", "cnn_small.onnx"]
E2E_CONFIGS = [["--gpus", "2"], ["--gpus", "4"], ["--gpus", "4", "--strategy", "dp=2,tp=2"],
               ["--gpus", "4", "--strategy", "tp=4"]]
BATCH = 8
TOLERANCE = 0.15


def kib(b):
    return f"{b / 1024:.1f}"


def export_batch(model_path, data_dir):
    """\\returns the --batch arguments an export needs (its test data's batch when its batch dim is symbolic)."""
    proto = e2e.onnx.load(model_path, load_external_data=False)
    symbolic = any(d.dim_param for i in proto.graph.input for d in i.type.tensor_type.shape.dim)
    if not symbolic:
        return []
    first = e2e.read_tensor(os.path.join(data_dir, "input_0.pb"))
    return ["--batch", first.shape[0] if first.ndim else 1]


def measure(tools, work, name, model_path, compile_args, data_dir, threads):
    """\\returns (estimates, measured, bounds) per rank, or an error string."""
    plan = os.path.join(work, "plan.pcc")
    shutil.rmtree(plan, ignore_errors=True)
    r = tools.run("pcc", [model_path, *compile_args, "-o", plan, "--quiet"], timeout=1200)
    if r.returncode != 0:
        return "pcc: " + (r.stderr or r.stdout).strip().splitlines()[-1][:160]
    with open(os.path.join(plan, "report.json")) as f:
        ranks = json.load(f)["ranks"]
    est = [rk["peak_memory_bytes"] for rk in ranks]
    bound = [rk.get("memory_estimate", {}).get("search_bytes", 0) for rk in ranks]
    prof = os.path.join(work, "profile.json")
    args = [plan, "--profile-json", prof, "--threads", threads, "--warmup", 1, "--iters", 1]
    if data_dir:
        args += ["--inputs", data_dir]
    r = tools.run("pcc-run", args, timeout=1200)
    if r.returncode != 0:
        return "pcc-run: " + (r.stderr or r.stdout).strip().splitlines()[-1][:160]
    with open(prof) as f:
        got = [rk["peak_memory_bytes"] for rk in json.load(f)["ranks"]]
    return est, got, bound


def cases():
    for model in E2E_MODELS:
        for config in E2E_CONFIGS:
            mesh = f"gpus {config[1]}" if "--strategy" not in config else config[-1]
            yield model, mesh, e2e.model_path(model), ["--batch", BATCH, *config], None
    for path in sorted(glob.glob(os.path.join(e2e.MODELS_DIR, "exported", "*.onnx"))):
        data = path[:-len(".onnx")]
        yield os.path.basename(path)[:-len(".onnx")], "gpus 2", path, [*export_batch(path, data), "--gpus", 2], data


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1", help="OpenMP threads per rank (default 1)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    tools = e2e.Tools(args.bin)
    work = tempfile.mkdtemp(prefix="bench_memory-")
    print(f"{'model':<22} {'mesh':<10} {'est KiB':>10} {'meas KiB':>10} {'meas/est':>8} "
          f"{'bound KiB':>10} {'worst rank':>10}")
    within = total = 0
    try:
        for name, mesh, path, compile_args, data in cases():
            got = measure(tools, work, name, path, compile_args, data, args.threads)
            total += 1
            if isinstance(got, str):
                print(f"{name:<22} {mesh:<10} {got}")
                continue
            est, meas, bound = got
            worst = max(abs(m / e - 1) for e, m in zip(est, meas))
            ok = worst <= TOLERANCE
            within += ok
            print(f"{name:<22} {mesh:<10} {kib(max(est)):>10} {kib(max(meas)):>10} {max(meas) / max(est):>8.3f} "
                  f"{kib(max(bound)):>10} {100 * worst:>9.1f}%{'' if ok else '  *'}")
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{within} of {total} cases have every rank's measured peak within {100 * TOLERANCE:.0f}% of its estimate"
          " (* marks the others)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
