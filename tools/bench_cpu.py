#!/usr/bin/env python3
"""CPU speed of pcc-run against onnxruntime on the same models, inputs and threads.

    build/venv/bin/python tools/bench_cpu.py [--bin build] [--threads N] [--iters N]
        [--warmup N] [--gpus 1] [--reference] [--no-fuse] [--no-kernels-too] [--no-fold-too]
        [--cpu-time] [--full] [--exports] [--rounds R]
        [MODEL.onnx ...]

For each model: compiles it with pcc (--gpus, --batch from its test data), runs
the plan with `pcc-run --iters --warmup --threads` and takes the slowest rank's
mean time, runs onnxruntime's CPU provider with intra_op_num_threads = N (one
session, the same number of warmup and timed runs), and prints one row:
model, batch, pcc ms, onnxruntime ms and the ratio pcc / onnxruntime.
--threads N is what each pcc rank gets, so at --gpus G pcc uses G*N threads;
compare at --gpus 1 for the same total. --reference adds the time of the same
plan on pcc's reference kernels (pcc-run --reference-kernels).
--no-kernels-too adds the time and ratio of the same model compiled with
`pcc --no-kernels` (fused groups op by op instead of generated kernels), in
the same run, for a before/after comparison (docs/kernels.md). --no-fold-too
adds the time and ratio of the same plan run with `pcc-run --no-fold` (GEMMs
and convolutions without their epilogues folded in as oneDNN post-ops).

Inputs: a model's sibling folder NAME/ with input_K.pb files (what
models/export.py writes) when there is one, else seeded random inputs at
--batch. Default models: the committed small ones and small exports; with
--full, also the full-size exports found in build/parity-cache.

--cpu-time (with --threads 1 only) compares processor time instead of wall
time: onnxruntime's process time over its timed runs, and for pcc the
difference between two pcc-run processes, one with --iters 1 and one with
--iters N+1 (the same start, plan load and warmup cancel out), divided by N,
where N is --iters or more, enough runs for about one second of pcc's wall
time (rusage's clock is coarse), and onnxruntime runs N times as well.
On a machine that other work keeps busy, wall time measures the scheduler
more than the kernels (a run waits for a core); processor time does not
(caches and memory bandwidth shared with the other work still count).
--rounds R (default 5) repeats the pair, pcc then onnxruntime, R times and
reports the median of each and the median of the R ratios: a burst of other
work on the machine falls on one round of both rather than on one side.
--exports adds every committed export (models/exported/*.onnx).
This is a measurement, not a test: it never fails on a slow ratio.
"""

import argparse
import glob
import os
import re
import resource
import shutil
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import pcc_e2e as e2e  # noqa: E402

DEFAULT_MODELS = ["models/mlp.onnx", "models/cnn_small.onnx", "models/gpt2_tiny.onnx",
                  "models/exported/resnet.ts.onnx", "models/exported/inception_v3.ts.onnx",
                  "models/exported/bert.ts.onnx", "models/exported/vit.ts.onnx"]
FULL_MODELS = ["resnet.ts", "mobilenet_v2.ts", "bert.ts", "gpt2.ts", "vit.ts", "t5_encoder.ts"]


def inputs_for(model_path, batch):
    """\returns (arrays, batch): the test data next to the model, else random inputs."""
    data = model_path[:-len(".onnx")]
    files = sorted(glob.glob(os.path.join(data, "input_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    if files:
        arrays = [e2e.read_tensor(p) for p in files]
        return arrays, (arrays[0].shape[0] if arrays[0].ndim else 1)
    proto = e2e.onnx.load(model_path, load_external_data=False)
    return e2e.make_inputs(proto, batch, seed=0), batch


def pcc_time(tools, plan, data, args, extra=()):
    """\returns the slowest rank's mean seconds per run, or an error string."""
    r = tools.run("pcc-run", [plan, "--inputs", data, "--iters", args.iters, "--warmup", args.warmup,
                              "--threads", args.threads, *extra], timeout=3600)
    if r.returncode != 0:
        return "pcc-run: " + (r.stderr or r.stdout).strip().splitlines()[-1][:120]
    times = [float(m) for m in re.findall(r"^rank \d+: ([0-9.]+) ms$", r.stdout, re.M)]
    return max(times) / 1e3 if times else "pcc-run printed no times"


def children_cpu_seconds():
    """\returns the user + system seconds of this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pcc_cpu_time(tools, plan, data, args, iters, extra=()):
    """\returns pcc-run's processor seconds per run over `iters` runs (--cpu-time), or an error string."""
    spent = []
    for n in (1, iters + 1):
        c0 = children_cpu_seconds()
        r = tools.run("pcc-run", [plan, "--inputs", data, "--iters", n, "--warmup", args.warmup,
                                  "--threads", args.threads, *extra], timeout=3600)
        if r.returncode != 0:
            return "pcc-run: " + (r.stderr or r.stdout).strip().splitlines()[-1][:120]
        spent.append(children_cpu_seconds() - c0)
    return max(spent[1] - spent[0], 0.0) / iters


def ort_time(model_path, arrays, args, iters=None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    feed = dict(zip([i.name for i in s.get_inputs()], arrays))
    for _ in range(args.warmup):
        s.run(None, feed)
    iters = iters or args.iters
    clock = time.process_time if args.cpu_time else time.perf_counter
    t0 = clock()
    for _ in range(iters):
        s.run(None, feed)
    return (clock() - t0) / iters


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*")
    p.add_argument("--bin", default=os.path.join(ROOT, "build"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--batch", type=int, default=4, help="for models without test data")
    p.add_argument("--reference", action="store_true", help="also time pcc's reference kernels")
    p.add_argument("--no-fuse", action="store_true", help="compile with pcc --no-fuse (no recognize, no fuse)")
    p.add_argument("--no-kernels-too", action="store_true",
                   help="also time the model compiled with pcc --no-kernels")
    p.add_argument("--no-fold-too", action="store_true",
                   help="also time the plan with pcc-run --no-fold (epilogues not folded)")
    p.add_argument("--cpu-time", action="store_true",
                   help="compare processor time per run instead of wall time (--threads 1 only)")
    p.add_argument("--full", action="store_true", help="add the full-size exports of --cache")
    p.add_argument("--exports", action="store_true", help="add every committed export (models/exported/*.onnx)")
    p.add_argument("--rounds", type=int, default=5,
                   help="paired rounds (pcc, then onnxruntime) per model; the medians are reported")
    p.add_argument("--cache", default=os.path.join(ROOT, "build", "parity-cache"))
    args = p.parse_args()
    if args.cpu_time and args.threads != 1:
        p.error("--cpu-time needs --threads 1 (with more threads it counts waiting threads too)")
    models = args.models or [os.path.join(ROOT, m) for m in DEFAULT_MODELS]
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.exports:
        models += [f for f in sorted(glob.glob(os.path.join(ROOT, "models", "exported", "*.onnx"))) if f not in models]
    if args.full:
        models += [f for f in (os.path.join(args.cache, n + ".onnx") for n in FULL_MODELS) if os.path.exists(f)]
    tools = e2e.Tools(args.bin)
    print(f"threads {args.threads}, gpus {args.gpus}, {args.warmup} warmup + {args.iters} timed runs, "
          f"median of {args.rounds} paired round{'s' if args.rounds > 1 else ''}"
          + (", processor time" if args.cpu_time else ""))
    head = "| model | batch | pcc ms | onnxruntime ms | pcc / onnxruntime |"
    if args.reference:
        head += " pcc reference kernels ms |"
    if args.no_kernels_too:
        head += " pcc --no-kernels ms | --no-kernels / onnxruntime |"
    if args.no_fold_too:
        head += " pcc --no-fold ms | --no-fold / onnxruntime |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    ratios = []  # (pcc / onnxruntime, model)
    for m in models:
        name = os.path.relpath(m, ROOT)
        work = tempfile.mkdtemp(prefix="pcc-bench-")
        try:
            arrays, batch = inputs_for(m, args.batch)
            data = os.path.join(work, "data")
            os.makedirs(data)
            proto = e2e.onnx.load(m, load_external_data=False)
            for k, (vi, a) in enumerate(zip(e2e.graph_inputs(proto), arrays)):
                e2e.write_tensor(os.path.join(data, f"input_{k}.pb"), a, vi.name)
            plan = os.path.join(work, "plan.pcc")
            r = tools.run("pcc", [m, "--batch", batch, "--gpus", args.gpus, "-o", plan, "--quiet"]
                          + (["--no-fuse"] if args.no_fuse else []), timeout=3600)
            if r.returncode != 0:
                print(f"| {name} | {batch} | compile failed: {(r.stderr or r.stdout).strip()[-120:]} | | |")
                continue
            iters = args.iters
            pccs, orts = [], []
            for _ in range(args.rounds):
                t_pcc = pcc_time(tools, plan, data, args)
                if args.cpu_time and not isinstance(t_pcc, str):
                    # Enough runs for about a second (the rusage clock ticks coarsely), at least --iters.
                    iters = max(args.iters, min(100000, int(1.0 / max(t_pcc, 1e-6))))
                    t_pcc = pcc_cpu_time(tools, plan, data, args, iters)
                t_ort = ort_time(m, arrays, args, iters)
                if isinstance(t_pcc, str):
                    break
                pccs.append(t_pcc)
                orts.append(t_ort)
            cells = [name, str(batch)]
            if isinstance(t_pcc, str):
                cells += [t_pcc, f"{t_ort * 1e3:.3f}", "-"]
            else:
                ratio = float(np.median([a / b for a, b in zip(pccs, orts)]))
                t_pcc, t_ort = float(np.median(pccs)), float(np.median(orts))
                cells += [f"{t_pcc * 1e3:.3f}", f"{t_ort * 1e3:.3f}", f"{ratio:.2f}"]
                ratios.append((ratio, name))
            if args.reference:
                t_ref = pcc_time(tools, plan, data, args, ["--reference-kernels"])
                cells.append(t_ref if isinstance(t_ref, str) else f"{t_ref * 1e3:.1f}")
            if args.no_kernels_too:
                plain = os.path.join(work, "plain.pcc")
                r = tools.run("pcc", [m, "--batch", batch, "--gpus", args.gpus, "-o", plain, "--quiet", "--no-kernels"]
                              + (["--no-fuse"] if args.no_fuse else []), timeout=3600)
                t_plain = pcc_time(tools, plain, data, args) if r.returncode == 0 else "compile failed"
                cells += ([t_plain, "-"] if isinstance(t_plain, str)
                          else [f"{t_plain * 1e3:.1f}", f"{t_plain / t_ort:.2f}"])
            if args.no_fold_too:
                t_nf = (pcc_cpu_time(tools, plan, data, args, iters, ["--no-fold"]) if args.cpu_time
                        else pcc_time(tools, plan, data, args, ["--no-fold"]))
                cells += ([t_nf, "-"] if isinstance(t_nf, str) else [f"{t_nf * 1e3:.3f}", f"{t_nf / t_ort:.2f}"])
            print("| " + " | ".join(cells) + " |", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if ratios:
        geo = float(np.exp(np.mean([np.log(r) for r, _ in ratios])))
        worst = max(ratios)
        print(f"\ngeometric mean of pcc / onnxruntime over {len(ratios)} models: {geo:.2f}; "
              f"worst {worst[0]:.2f} ({worst[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
