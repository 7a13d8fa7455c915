#!/usr/bin/env python3
"""How well the calibrated cost model predicts per-instruction times on CPU ranks.

    build/venv/bin/python tools/bench_calibration.py [--bin build] [--gpus 2]
        [--iters 5] [--warmup 2] [--seconds 0.15] [--spec FILE] [--out DIR]
        [--models resnet50,bert_base]

1. Calibrates this machine: `pcc-calibrate --ranks GPUS -o OUT/spec.json`
   (or takes --spec FILE).
2. Builds, with onnx.helper and seeded random weights, a ResNet-50-sized
   model (the ResNet-50 v1.5 layout at batch GPUS, 224x224, BatchNormalization
   after every Conv) and a BERT-base-sized encoder (12 layers, hidden 768, 12
   heads, FFN 3072, sequence 128, batch GPUS, the exporters' Gelu-by-erf and
   LayerNormalization) into OUT/ (default build/bench_calibration).
3. Compiles each with `pcc --cluster OUT/spec.json --gpus GPUS`, reads the
   compiler's per-instruction estimates (`pcc-report --format costs`), runs
   the plan with `pcc-run --profile-json` (--warmup untimed runs, then the
   mean of --iters timed ones), and pairs every instruction of every rank.
4. Prints, per model, the median relative error |predicted - measured| /
   measured and the Spearman rank correlation (ties get their mean rank) over
   the instructions the model gives a time to, twice: against each
   instruction's fastest timed run and against its mean run (on a machine
   other work shares, the mean carries the preemptions; the calibration
   itself times each case by its fastest call). Instructions it says are free
   (FREE, and the views: Reshape, Squeeze, ... that run no kernel) are left
   out and counted on their own line.

Goal (docs/cost-model.md#calibration): median relative error <= 25% and
Spearman >= 0.9 for both models. This is a measurement, not a test (the
machine's load moves it); it exits 0 whatever the figures.
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Builder:
    """Nodes and seeded random initializers of one graph."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def weight(self, shape, scale=None, offset=0.0):
        self.n += 1
        name = f"w{self.n}"
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = scale if scale is not None else 1.0 / math.sqrt(max(fan_in, 1))
        data = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def const(self, array):
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, **attrs):
        self.n += 1
        name = f"{op}_{self.n}"
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def model(self, name, inputs, output, shape):
        self.nodes[-1].output[0] = "output"
        graph = helper.make_graph(self.nodes, name, inputs,
                                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_calibration")
        m.ir_version = 8
        return m


def resnet50(batch):
    b = Builder(50)

    def conv_bn(x, cin, cout, k, stride, relu=True):
        y = b.node("Conv", [x, b.weight([cout, cin, k, k])], kernel_shape=[k, k], strides=[stride, stride],
                   pads=[k // 2] * 4)
        y = b.node("BatchNormalization", [y, b.weight([cout], 0.1, 1.0), b.weight([cout], 0.1),
                                          b.weight([cout], 0.1), b.weight([cout], 0.1, 1.0)], epsilon=1e-5)
        # running variance must be positive
        b.inits[-1] = numpy_helper.from_array(np.abs(numpy_helper.to_array(b.inits[-1])) + 0.5, b.inits[-1].name)
        return b.node("Relu", [y]) if relu else y

    x = conv_bn("input", 3, 64, 7, 2)
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            y = conv_bn(x, cin, width, 1, 1)
            y = conv_bn(y, width, width, 3, stride)
            y = conv_bn(y, width, width * 4, 1, 1, relu=False)
            short = conv_bn(x, cin, width * 4, 1, stride, relu=False) if i == 0 else x
            x = b.node("Relu", [b.node("Add", [y, short])])
            cin = width * 4
    x = b.node("GlobalAveragePool", [x])
    x = b.node("Flatten", [x], axis=1)
    b.node("Gemm", [x, b.weight([1000, 2048]), b.weight([1000], 0.01)], transB=1)
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])
    return b.model("resnet50", [inp], "output", [batch, 1000])


def bert_base(batch, seq=128, hidden=768, heads=12, ffn=3072, layers=12):
    b = Builder(12)
    hd = hidden // heads

    def linear(x, n_in, n_out):
        return b.node("Add", [b.node("MatMul", [x, b.weight([n_in, n_out])]), b.weight([n_out], 0.02)])

    def layer_norm(x):
        return b.node("LayerNormalization", [x, b.weight([hidden], 0.1, 1.0), b.weight([hidden], 0.1)], axis=-1,
                      epsilon=1e-12)

    heads_shape = b.const(np.array([batch, seq, heads, hd], np.int64))
    flat_shape = b.const(np.array([batch, seq, hidden], np.int64))
    scale = b.const(np.array(math.sqrt(hd), np.float32))
    mask = b.const(np.zeros([batch, 1, 1, seq], np.float32))
    half, one, sqrt2 = (b.const(np.array(v, np.float32)) for v in (0.5, 1.0, math.sqrt(2.0)))
    x = "input"
    for _ in range(layers):
        q, k, v = (b.node("Reshape", [linear(x, hidden, hidden), heads_shape]) for _ in range(3))
        q = b.node("Transpose", [q], perm=[0, 2, 1, 3])
        k = b.node("Transpose", [k], perm=[0, 2, 3, 1])
        v = b.node("Transpose", [v], perm=[0, 2, 1, 3])
        s = b.node("Add", [b.node("Div", [b.node("MatMul", [q, k]), scale]), mask])
        p = b.node("Softmax", [s], axis=-1)
        ctx = b.node("Transpose", [b.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
        ctx = b.node("Reshape", [ctx, flat_shape])
        x = layer_norm(b.node("Add", [linear(ctx, hidden, hidden), x]))
        h = linear(x, hidden, ffn)
        g = b.node("Mul", [b.node("Mul", [h, b.node("Add", [b.node("Erf", [b.node("Div", [h, sqrt2])]), one])]), half])
        x = layer_norm(b.node("Add", [linear(g, ffn, hidden), x]))
    b.node("Identity", [x])
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, seq, hidden])
    return b.model("bert_base", [inp], "output", [batch, seq, hidden])


def tool(bindir, name, args, **kw):
    cmd = [os.path.join(bindir, name)] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"bench_calibration: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def ranks_of(values):
    """\returns the ranks of `values` (1-based), ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x, y):
    """\returns the Pearson correlation of the ranks of x and y."""
    rx, ry = ranks_of(x), ranks_of(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (vx * vy) if vx > 0 and vy > 0 else float("nan")


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def pair(costs, profile, key):
    """\returns [(rank, index, op, predicted, measured)] of the costed
    instructions, measured being the profile's `key` ("seconds": the mean
    run, "min_seconds": the fastest), and [(op, measured)] of those the model
    calls free."""
    measured = {r["rank"]: r["instructions"] for r in profile["ranks"]}
    rows, free = [], []
    for rank in costs["ranks"]:
        got = measured[rank["rank"]]
        if len(got) != len(rank["instructions"]):
            sys.exit(f"bench_calibration: rank {rank['rank']}: {len(got)} instructions profiled, "
                     f"{len(rank['instructions'])} in the plan")
        for est, m in zip(rank["instructions"], got):
            if est["index"] != m["index"] or est["op"] != m["op"]:
                sys.exit(f"bench_calibration: instruction {est['index']} differs between plan and profile")
            if est["kind"] == "free":
                continue
            if est["estimated_seconds"] <= 0:
                free.append((est["op"], m["seconds"]))
                continue
            rows.append((rank["rank"], est["index"], est["op"], est["estimated_seconds"], m[key]))
    return rows, free


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench_calibration"))
    ap.add_argument("--gpus", type=int, default=2, help="CPU ranks (default 2)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=0.15, help="pcc-calibrate --seconds")
    ap.add_argument("--spec", help="use this spec instead of calibrating")
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--worst", type=int, default=8, help="print the N worst instructions per model")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    spec = args.spec
    if not spec:
        spec = os.path.join(args.out, "spec.json")
        r = tool(args.bin, "pcc-calibrate", ["--ranks", args.gpus, "--seconds", args.seconds, "-o", spec])
        print(r.stderr.strip().splitlines()[-2])
    builders = {"resnet50": lambda: resnet50(args.gpus), "bert_base": lambda: bert_base(args.gpus)}
    results = {}
    for name in args.models.split(","):
        path = os.path.join(args.out, f"{name}.onnx")
        if not os.path.exists(path):
            onnx.save(builders[name](), path)
        plan = os.path.join(args.out, f"{name}.pcc")
        tool(args.bin, "pcc", [path, "--gpus", args.gpus, "--cluster", spec, "-o", plan, "--quiet"])
        costs = json.loads(tool(args.bin, "pcc-report", [plan, "--format", "costs"]).stdout)
        prof_path = os.path.join(args.out, f"{name}.profile.json")
        tool(args.bin, "pcc-run", [plan, "--warmup", args.warmup, "--iters", args.iters, "--profile-json", prof_path])
        with open(prof_path) as f:
            profile = json.load(f)
        for key, label in (("min_seconds", "fastest run"), ("seconds", "mean run")):
            rows, free = pair(costs, profile, key)
            pred = [r[3] for r in rows]
            meas = [r[4] for r in rows]
            rel = [abs(p - m) / m for p, m in zip(pred, meas) if m > 0]
            med, rho = median(rel), spearman(pred, meas)
            results[(name, label)] = (med, rho)
            print(f"{name} ({label} of {args.iters}): {len(rows)} instructions on {len(profile['ranks'])} rank(s), "
                  f"{profile['threads_per_rank']} thread(s) each; predicted {sum(pred) * 1e3:.1f} ms, measured "
                  f"{sum(meas) * 1e3:.1f} ms (sum over ranks); median relative error {med * 100:.1f}%, "
                  f"Spearman {rho:.3f}")
        if free:
            print(f"{name}: {len(free)} instructions the model calls free (views) took "
                  f"{sum(m for _, m in free) * 1e3:.3f} ms in all")
        by_op = {}
        for r in rows:
            by_op.setdefault(r[2], []).append(abs(r[3] - r[4]) / r[4])
        print(f"{name}: per op, mean run (count, median rel error): " +
              ", ".join(f"{op} {len(v)} {median(v) * 100:.0f}%" for op, v in sorted(by_op.items())))
        for r in sorted(rows, key=lambda r: -abs(r[3] - r[4]) / r[4])[:args.worst]:
            print(f"  rank {r[0]} #{r[1]} {r[2]}: predicted {r[3] * 1e6:.1f} us, measured {r[4] * 1e6:.1f} us (mean)")
    for label in ("fastest run", "mean run"):
        got = {n: v for (n, lab), v in results.items() if lab == label}
        ok = all(m <= 0.25 and s >= 0.9 for m, s in got.values())
        print(f"goal (median rel error <= 25%, Spearman >= 0.9) against the {label}: " + ("met" if ok else "NOT met") +
              " for " + ", ".join(f"{n} ({m * 100:.1f}%, {s:.3f})" for n, (m, s) in got.items()))
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} processors")


if __name__ == "__main__":
    main()
