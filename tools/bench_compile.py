#!/usr/bin/env python3
"""Measures pcc's compile time on a long graph (thousands of nodes).

    python tools/bench_compile.py [--bin build] [--nodes 4000] [--width 32]
                                  [--gpus 2] [--repeat 3] [--keep DIR]
                                  [--compare OTHER_PCC]

It writes, with onnx.helper, a chain of layers `x = relu(x @ W_i + b_i)`
(MatMul, Add, Relu: three nodes a layer; with --duplicate the Add is computed
twice and multiplied, five nodes a layer, so CSE has one merge a layer) with
--nodes nodes in all, and small random weights, then times `pcc MODEL --batch 8 --gpus N --emit json` (import,
passes, partition, lowering; no plan written) --repeat times and prints the
best CPU time (user + system, which a loaded machine disturbs less than wall
time). --compare times a second pcc binary on the same model (a build
of another commit) and prints both.

Needs only onnx and numpy (the test venv).
"""

import argparse
import os
import subprocess
import sys
import resource
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def make_chain(path, nodes, width, duplicate=False, seed=0):
    rng = np.random.default_rng(seed)
    per_layer = 5 if duplicate else 3
    layers = max(1, nodes // per_layer)
    inits, graph_nodes = [], []
    cur = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = (0.01 * rng.standard_normal(width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        graph_nodes += [
            helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        if duplicate:
            # A second Add of the same operands and a Mul reading both: CSE merges
            # the two Adds (one replace-all-uses per layer).
            graph_nodes[-1:] = [
                helper.make_node("Add", [f"m{i}", f"b{i}"], [f"d{i}"], name=f"dup{i}"),
                helper.make_node("Mul", [f"a{i}", f"d{i}"], [f"s{i}"], name=f"mul{i}"),
                helper.make_node("Relu", [f"s{i}"], [f"r{i}"], name=f"relu{i}"),
            ]
        cur = f"r{i}"
    g = helper.make_graph(graph_nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, ["batch", width])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, path)
    return len(graph_nodes)


def best_time(pcc, model, gpus, repeat, extra):
    best = None
    for _ in range(repeat):
        t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([pcc, model, "--batch", "8", "--gpus", str(gpus), "--emit", "json"] + extra,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        dt = (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)
        if r.returncode != 0:
            sys.exit(f"{pcc} failed ({r.returncode}): {r.stderr.strip()}")
        best = dt if best is None else min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser(description="pcc compile time on a long MatMul/Add/Relu chain")
    ap.add_argument("--bin", default="build")
    ap.add_argument("--nodes", type=int, default=4000)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duplicate", action="store_true",
                    help="five nodes a layer: a duplicated Add (merged by CSE) and a Mul of both")
    ap.add_argument("--strategy", help="passed to pcc (e.g. tp=2)")
    ap.add_argument("--keep", help="write the model into this directory and keep it")
    ap.add_argument("--compare", help="another pcc binary to time on the same model")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, f"chain_{a.nodes}.onnx")
        n = make_chain(model, a.nodes, a.width, a.duplicate)
        extra = ["--strategy", a.strategy] if a.strategy else []
        print(f"model: {n} nodes, width {a.width}{' (duplicated Adds)' if a.duplicate else ''}, "
              f"--gpus {a.gpus} {' '.join(extra)}")
        for label, pcc in [("pcc", os.path.join(a.bin, "pcc"))] + ([("compare", a.compare)] if a.compare else []):
            print(f"{label:8s} {pcc}: best of {a.repeat}: {best_time(pcc, model, a.gpus, a.repeat, extra):.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
