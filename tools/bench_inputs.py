#!/usr/bin/env python3
"""Measures the input pipeline (`pcc-run --batches K`): prefetch against
`--no-prefetch` on a model whose input files are large.

    python tools/bench_inputs.py [--bin build] [--work build/bench-inputs]
                                 [--batch 16] [--rows 512] [--width 1024]
                                 [--hidden 256] [--batches 8] [--repeat 3]
                                 [--delay-ms 100]

It writes a model with onnx.helper whose input is big beside its compute:
x float32 [BATCH, ROWS, WIDTH] (BATCH*ROWS*WIDTH*4 bytes per batch file),
y = MatMul(Relu(MatMul(x, W1 [WIDTH, HIDDEN])), W2 [HIDDEN, 64]), compiles it
for one device, writes BATCHES batch folders of seeded inputs
(DIR/batch_k/input_0.pb), and runs `pcc-run --inputs DIR --batches K
--profile-json` REPEAT times in each mode (prefetch 2, prefetch 1,
--no-prefetch), keeping the run with the least total time; then again with
the testing aid `--read-delay-ms DELAY` (the reader sleeps DELAY ms per
batch: storage latency that costs no processor, labelled as simulated). Per mode it prints
the time per batch (mean, min, max), the throughput, the reader's busy time
per batch, the ranks' wait per batch and the hidden fraction (1 - wait /
read), all measured by pcc-run. The first run of each file reads it from disk
or the page cache as the machine allows; the later runs find it in the page
cache (the figures are for a warm cache). A benchmark, not a test.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def write_model(path, batch, rows, width, hidden):
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((width, hidden)) / np.sqrt(width)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, 64)) / np.sqrt(hidden)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("MatMul", ["a", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "wide_input",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, rows, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, rows, 64])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def write_batches(data, batches, shape):
    rng = np.random.default_rng(1)
    for k in range(batches):
        d = os.path.join(data, f"batch_{k}")
        os.makedirs(d, exist_ok=True)
        a = rng.standard_normal(shape).astype(np.float32)
        with open(os.path.join(d, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, "x").SerializeToString())


def run(bin_dir, plan, data, batches, extra, profile):
    cmd = [os.path.join(bin_dir, "pcc-run"), plan, "--inputs", data, "--batches", str(batches),
           "--profile-json", profile] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    with open(profile) as f:
        return json.load(f)["stream"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build")
    ap.add_argument("--work", default="build/bench-inputs")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--delay-ms", type=int, default=100, help="simulated read latency of the second table (0: none)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "wide_input.onnx")
    plan = os.path.join(args.work, "plan.pcc")
    data = os.path.join(args.work, "data")
    write_model(model, args.batch, args.rows, args.width, args.hidden)
    p = subprocess.run([os.path.join(args.bin, "pcc"), model, "--gpus", "1", "-o", plan, "--quiet"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pcc failed:\n{p.stdout}{p.stderr}")
    shape = (args.batch, args.rows, args.width)
    write_batches(data, args.batches, shape)
    mib = np.prod(shape) * 4 / 2**20
    print(f"input x f32{list(shape)}: {mib:.1f} MiB per batch file, {args.batches} batches, "
          f"best of {args.repeat} runs per mode")
    print(f"{'mode':<20} {'ms/batch':>9} {'min':>8} {'max':>8} {'samples/s':>10} {'read ms':>8} "
          f"{'wait ms':>8} {'hidden':>7}")
    modes = [("prefetch 2", ["--prefetch", "2"]), ("prefetch 1", ["--prefetch", "1"]),
             ("no prefetch", ["--no-prefetch"])]
    rows = [(n, e) for n, e in modes]
    if args.delay_ms > 0:
        rows += [(f"{n} +{args.delay_ms}ms", e + ["--read-delay-ms", str(args.delay_ms)]) for n, e in modes]
    for name, extra in rows:
        runs = [run(args.bin, plan, data, args.batches, extra, os.path.join(args.work, "profile.json"))
                for _ in range(args.repeat)]
        s = min(runs, key=lambda r: r["total_seconds"])
        n = s["batches"]
        print(f"{name:<20} {1e3 * s['mean_batch_seconds']:9.2f} {1e3 * s['min_batch_seconds']:8.2f} "
              f"{1e3 * s['max_batch_seconds']:8.2f} {s['samples_per_second']:10.1f} "
              f"{1e3 * s['read_seconds_total'] / n:8.2f} {1e3 * s['wait_seconds_total'] / n:8.2f} "
              f"{100 * s['hidden_fraction']:6.1f}%")


if __name__ == "__main__":
    main()
