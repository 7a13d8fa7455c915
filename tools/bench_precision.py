#!/usr/bin/env python3
"""What --precision buys and costs (docs/precision.md#figures).

    build/venv/bin/python tools/bench_precision.py [--bin build] [--iters 50] [--warmup 5]
        [--threads 1] [--skip-exports] [--skip-structures] [--precisions fp16,bf16,int8,int4]
        [MODEL.onnx ...]

Exports (default: every models/exported/*.ts.onnx): each is compiled at its
own float32, at each precision (fp16, bf16: --precision; int8, int4:
--quantize), and run on CPU ranks (`pcc-run --iters
--warmup --threads`, the committed inputs) in one run with onnxruntime on the
float32 model as the peer. One row per model and precision: the worst
output's cosine similarity, max relative error and top-1 agreement as the
compile measured them (report.json "precision"), the nodes kept in float32,
the weight bytes, pcc's time, and the ratios to the float32 plan and to
onnxruntime.

Structures: tools/bench_compile_scale.py's LLaMA-13B decode step written in
float32 (as exporters write by default; sparse weights, nothing read), planned
with `--emit json` for an a100-40g and an h100: the fewest devices a plan fits
on (the first of --gpus 1, 2, 4, 8 that compiles) and, at --gpus 8, the mesh,
the estimated decode step and the memory per device, at float32 and at bf16.

Measurements, never pass/fail: the machine is shared and noisy.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import pcc_e2e as e2e  # noqa: E402
import bench_compile_scale as scale  # noqa: E402
from bench_cpu import inputs_for, ort_time, pcc_time  # noqa: E402

GIB = 1 << 30


def compile_plan(tools, model, out, extra):
    m = e2e.onnx.load(model, load_external_data=False)
    data = model[:-len(".onnx")]
    batch = []
    if any(not d.HasField("dim_value") for vi in e2e.graph_inputs(m) for d in vi.type.tensor_type.shape.dim):
        arrays, b = inputs_for(model, 1)
        batch = ["--batch", str(b)]
    r = tools.run("pcc", [model, *batch, "-o", out, "--quiet", *extra], timeout=1800)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1][:160] if r.stderr.strip() else f"exit {r.returncode}"
    rep = tools.run("pcc-report", [out, "--format", "json"])
    return json.loads(rep.stdout), data


def exports(args, tools, work):
    models = args.models or sorted(glob.glob(os.path.join(ROOT, "models", "exported", "*.ts.onnx")))
    print(f"{'model':<22} {'precision':<9} {'cosine':>10} {'max rel':>9} {'top-1':>6} {'kept':>5} "
          f"{'weights':>10} {'pcc ms':>8} {'/fp32':>6} {'/ort':>6}")
    for model in models:
        name = os.path.basename(model)[:-len(".onnx")]
        arrays, _ = inputs_for(model, 1)
        ort = ort_time(model, arrays, args)
        base = None
        for precision in ["fp32-model"] + args.precisions:
            out = os.path.join(work, f"{name}.{precision}.pcc")
            extra = ([] if precision == "fp32-model" else
                     ["--quantize", precision] if precision.startswith("int") else ["--precision", precision])
            rep, data = compile_plan(tools, model, out, extra)
            if rep is None:
                print(f"{name:<22} {precision:<9} compile failed: {data}")
                continue
            t = pcc_time(tools, out, data, args)
            if isinstance(t, str):
                print(f"{name:<22} {precision:<9} {t}")
                continue
            base = base or t
            weights = sum(r["weight_bytes"] for r in rep["ranks"])
            p = rep.get("precision")
            if p and p["outputs"]:
                worst = min(p["outputs"], key=lambda o: o["cosine"] if o["cosine"] is not None else -1)
                cos = f"{worst['cosine']:.6f}" if worst["cosine"] is not None else "nan"
                rel = f"{worst['max_rel']:.2g}"
                top = f"{100 * worst['top1']:.0f}%" if "top1" in worst else "-"
                kept = str(len(p["kept"]))
            else:
                cos, rel, top, kept = "-", "-", "-", "-"
            print(f"{name:<22} {precision:<9} {cos:>10} {rel:>9} {top:>6} {kept:>5} {weights / 1024:>8.0f}Ki "
                  f"{t * 1e3:>8.3f} {t / base:>6.2f} {t / ort:>6.2f}", flush=True)


def structures(args, tools, work):
    path, weight_bytes, _, _ = scale.write_structure(os.path.join(work, "llama13b_fp32"), "llama13b_decode",
                                                     float32=True)
    print(f"\nLLaMA-13B decode step exported in float32 ({weight_bytes / GIB:.1f} GiB of weights), "
          f"--max-context 2048, batch 1:")
    print(f"{'gpu':<9} {'precision':<9} {'fewest':>6} {'mesh at 8':>12} {'step ms':>8} {'weights/dev':>12} "
          f"{'memory/dev':>11} {'plan s':>7}")
    for gpu in ("a100-40g", "h100"):
        for precision in ("fp32", "bf16"):
            extra = [] if precision == "fp32" else ["--precision", precision]
            fewest = "-"
            for g in (1, 2, 4, 8):
                r = tools.run("pcc", [path, "--gpus", str(g), "--gpus-per-node", "8", "--gpu", gpu, "--batch", "1",
                                      "--max-context", "2048", "--emit", "json", "--quiet", *extra], timeout=1800)
                if r.returncode == 0:
                    fewest = str(g)
                    break
            start = time.monotonic()
            r = tools.run("pcc", [path, "--gpus", "8", "--gpus-per-node", "8", "--gpu", gpu, "--batch", "1",
                                  "--max-context", "2048", "--emit", "json", "--quiet", *extra], timeout=1800)
            seconds = time.monotonic() - start
            if r.returncode != 0:
                print(f"{gpu:<9} {precision:<9} {fewest:>6} failed: {r.stderr.strip()[-200:]}")
                continue
            d = json.loads(r.stdout)
            mesh = d["mesh"]
            weights = max(rk["weight_bytes"] for rk in d["ranks"])
            memory = max(rk["peak_memory_bytes"] for rk in d["ranks"])
            print(f"{gpu:<9} {precision:<9} {fewest:>6} {'dp%d,tp%d,pp%d' % (mesh['dp'], mesh['tp'], mesh['pp']):>12} "
                  f"{d['generation']['estimate']['step_ms']:>8.2f} {weights / GIB:>10.2f}Gi "
                  f"{memory / GIB:>9.2f}Gi {seconds:>7.1f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*")
    p.add_argument("--bin", default=os.path.join(ROOT, "build"))
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--precisions", default="fp16,bf16,int8,int4")
    p.add_argument("--skip-exports", action="store_true")
    p.add_argument("--skip-structures", action="store_true")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    args.precisions = [x for x in args.precisions.split(",") if x]
    args.cpu_time = False
    tools = e2e.Tools(args.bin)
    work = tempfile.mkdtemp(prefix="pcc-bench-precision-")
    try:
        if not args.skip_exports:
            exports(args, tools, work)
        if not args.skip_structures:
            structures(args, tools, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
