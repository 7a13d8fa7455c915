#!/usr/bin/env python3
"""Slice with extreme starts, ends and steps, against the specification.

ONNX adjusts negative starts and ends by the axis length, then clamps them
by the step's sign (positive: both to [0, dim]; negative: starts to
[0, dim-1], ends to [-1, dim-1]), and allows any non-zero step, so a step of
INT64_MAX or INT64_MIN takes one element. Every combination below is one
Slice node of one model (the data is a run-time input, so nothing is folded
at compile time); the plan's outputs must equal, exactly, the elements that
the specification's rule (written out in `spec_slice`, independently of
pcc's kernel) selects. The reference evaluator (`--check`) shares pcc's
kernel, so it is not the independent side.

onnxruntime, numpy and onnx.reference are compared too, and their
disagreements reported, not gated: onnx.reference and numpy slicing do not
clamp a start below the axis to 0 for negative steps (they return nothing
where the specification takes element 0), and onnxruntime reads an end of
INT64_MAX with a negative step as "to the far end".
"""

import itertools
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

LO, HI = np.iinfo(np.int64).min, np.iinfo(np.int64).max
DIM = 5
POSITIONS = [LO, LO + 1, -DIM - 1, -1, 0, 2, DIM, HI]
STEPS = [LO, LO + 1, -DIM, -2, -1, 1, 3, DIM, HI]


def make_model(path):
    """x[5] and y[3,5]: one Slice of x per (start, end, step), and for the 2-D
    input the same on axis 1 with axis 0 sliced [1, HI) by HI (one row)."""
    h = onnx.helper
    nodes, outputs, inits = [], [], []
    combos = list(itertools.product(POSITIONS, POSITIONS, STEPS))
    for k, (s, e, st) in enumerate(combos):
        names = [f"s{k}", f"e{k}", f"a{k}", f"t{k}"]
        inits += [numpy_helper.from_array(np.array(v, np.int64), n) for v, n in
                  zip(([s], [e], [0], [st]), names)]
        nodes.append(h.make_node("Slice", ["x"] + names, [f"o{k}"]))
        outputs.append(h.make_tensor_value_info(f"o{k}", onnx.TensorProto.FLOAT, None))
    for k, (s, e, st) in enumerate(combos[::7]):
        names = [f"s2_{k}", f"e2_{k}", f"a2_{k}", f"t2_{k}"]
        inits += [numpy_helper.from_array(np.array(v, np.int64), n) for v, n in
                  zip(([1, s], [HI, e], [0, -1], [HI, st]), names)]
        nodes.append(h.make_node("Slice", ["y"] + names, [f"p{k}"]))
        outputs.append(h.make_tensor_value_info(f"p{k}", onnx.TensorProto.FLOAT, None))
    graph = h.make_graph(nodes, "slices",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [DIM]),
                          h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, DIM])],
                         outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return combos


def spec_slice(x, start, end, step):
    """The elements of 1-D `x` that ONNX's Slice selects (its specification's
    words, in Python's unbounded integers)."""
    dim = len(x)
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return x[list(range(start, end, step))] if dim else x[:0]


def spec_answers(combos, x, y):
    """\\returns the specification's answer for every output of the model."""
    want = [spec_slice(x, int(s), int(e), int(st)) for s, e, st in combos]
    for s, e, st in combos[::7]:
        row = spec_slice(np.arange(len(y)), 1, int(HI), int(HI))  # axis 0: [1, HI) by HI: row 1
        want.append(np.stack([spec_slice(y[r], int(s), int(e), int(st)) for r in row]))
    return want


def differ(a, b):
    return a.shape != b.shape or not np.array_equal(a, b)


def compare_outputs(suite, model, combos, outs, data, ort_outs):
    from onnx.reference import ReferenceEvaluator

    x = e2e.read_tensor(os.path.join(data, "input_0.pb"))
    y = e2e.read_tensor(os.path.join(data, "input_1.pb"))
    want = spec_answers(combos, x, y)
    m = onnx.load(model)
    names = [o.name for o in m.graph.output]

    def describe(k):
        return combos[k] if k < len(combos) else ("2-D", combos[::7][k - len(combos)])

    wrong = []
    for k, (name, w) in enumerate(zip(names, want)):
        got = e2e.read_tensor(os.path.join(outs, f"output_{k}.pb"))
        if differ(got, w):
            wrong.append(f"{name} start,end,step={describe(k)}: got {got.tolist()}, want {w.tolist()}")
    suite.check(f"{len(names)} slices equal the specification's", not wrong,
                "  " + "\n  ".join(wrong[:20]) + (f"\n  ... {len(wrong)} in all" if len(wrong) > 20 else ""))
    ref = ReferenceEvaluator(m).run(None, {"x": x, "y": y})
    plain = [k for k, (s, e, st) in enumerate(combos) if -DIM <= s <= DIM and -DIM <= e <= DIM]
    suite.check("the specification's rule agrees with onnx.reference where starts and ends are in range",
                not [k for k in plain if differ(ref[k], want[k])])
    print(f"note: onnx.reference differs from the specification on "
          f"{sum(differ(a, b) for a, b in zip(ref, want))} of {len(names)} slices, onnxruntime on "
          f"{sum(differ(a, b) for a, b in zip(ort_outs, want))}")


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_slice_extremes", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        return suite.finish()
    work = suite.tempdir("slice")
    try:
        model = os.path.join(work, "slices.onnx")
        combos = make_model(model)
        plan, data, outs = (os.path.join(work, d) for d in ("plan.pcc", "data", "outputs"))
        r = tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if suite.check("compile", r.returncode == 0, r.describe()):
            _, expected = e2e.write_case(data, model, 1, seed=5)
            r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check",
                                      "--rtol", 0, "--atol", 0])
            if suite.check("pcc-run --check", r.returncode == 0, r.describe()):
                compare_outputs(suite, model, combos, outs, data, expected)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
