#!/usr/bin/env python3
"""Measures a 4-stage pipeline on CPU ranks against the cost model's prediction.

    python tools/bench_pipeline.py [--bin build] [--work build/bench-pipeline]
                                   [--layers 16] [--width 1024] [--batch 32]
                                   [--microbatches 1,2,4,8] [--stages 4]
                                   [--cluster SPEC.json] [--iters 5]

It writes a deep MLP with onnx.helper (LAYERS x (MatMul WIDTH x WIDTH, Relu),
float32, input [BATCH, WIDTH]), compiles it with `--strategy pp=STAGES
--microbatches M` for each M (on the `cpu` device spec, or the spec
`pcc-calibrate` wrote with --cluster), runs each plan on STAGES CPU ranks with
`pcc-run --warmup 1 --iters N --profile --check`, and prints per M:

  - the measured time per batch (the slowest rank's mean) beside the cost
    model's estimate (report.json `estimated_time_ms`), and their ratio;
  - the measured bubble (time the stages spend waiting on transfers, over
    their run time; `pcc-run --profile`) beside the predicted one
    (fill-drain: 1 - m * sum(t_s) / (p * time)).

Two things the prediction (one batch, fill-drain, stages on devices of
their own) does not see: the ranks are threads of one process sharing this
machine's cores (with fewer cores than ranks a stage also waits for a
core), and pcc-run's timed runs follow each other without a barrier, so a
stage starts the next batch as soon as its sends are taken: successive
batches overlap across the stages, and the measured time per batch and
bubble fall below one batch's fill-drain. The output is a benchmark's, not
a pass/fail test.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def write_mlp(path, layers, width, batch):
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]))
        nodes.append(helper.make_node("Relu", [f"h{i}"], [f"a{i}"]))
        x = f"a{i}"
    graph = helper.make_graph(nodes, "deep_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build")
    ap.add_argument("--work", default=os.path.join("build", "bench-pipeline"))
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--microbatches", default="1,2,4,8")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--cluster", help="a cluster spec (pcc-calibrate's) in place of --gpu cpu")
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "deep_mlp.onnx")
    write_mlp(model, a.layers, a.width, a.batch)
    device = ["--cluster", a.cluster] if a.cluster else ["--gpu", "cpu"]
    print(f"deep MLP: {a.layers} x (MatMul {a.width}x{a.width}, Relu), batch {a.batch}, float32; "
          f"pp={a.stages} on CPU ranks ({os.cpu_count()} cores), {' '.join(device)}")
    rows = []
    for m in [int(v) for v in a.microbatches.split(",")]:
        plan = os.path.join(a.work, f"pp{a.stages}_mb{m}.pcc")
        run([os.path.join(a.bin, "pcc"), model, "--gpus", a.stages, "--strategy", f"pp={a.stages}", "--microbatches", m,
             *device, "--quiet", "-o", plan])
        with open(os.path.join(plan, "report.json")) as f:
            report = json.load(f)
        predicted_ms = report["estimated_time_ms"]
        predicted_bubble = report["pipeline"]["predicted_bubble"]
        t0 = time.time()
        r = run([os.path.join(a.bin, "pcc-run"), plan, "--warmup", 1, "--iters", a.iters, "--profile", "--check"])
        wall = time.time() - t0
        ranks = [float(v) for v in re.findall(r"^rank \d+: ([0-9.]+) ms", r.stdout, re.M)]
        bubble = re.search(r"pipeline bubble: measured ([0-9.]+)%", r.stdout)
        measured_ms = max(ranks)
        rows.append((m, measured_ms, predicted_ms, float(bubble.group(1)) / 100, predicted_bubble, wall))
    print()
    print("| micro-batches | measured ms/batch | predicted ms/batch | measured/predicted "
          "| measured bubble | predicted bubble |")
    print("|---|---|---|---|---|---|")
    for m, meas, pred, bub, pbub, _ in rows:
        print(f"| {m} | {meas:.2f} | {pred:.2f} | {meas / pred:.2f} | {100 * bub:.1f}% | {100 * pbub:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
