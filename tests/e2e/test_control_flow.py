#!/usr/bin/env python3
"""If, Loop and Scan through the user's path: models built with onnx.helper,
compiled by pcc (If folded on a constant condition, Loop and Scan unrolled),
run on CPU ranks by pcc-run and compared with onnxruntime, at --gpus 1 and 2.
A Loop whose trip count is a run-time input is refused with exit 2 and one
line on stderr."""

import os
import re
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
F = TensorProto.FLOAT


def rng_init(name, shape, seed):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name)


def scan_rnn():
    """An RNN cell as a Scan over the time axis (0) of xs [6,4,3]: h = tanh(x W + h U);
    W and U are outer initializers the body reads by name."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("MatMul", ["h", "U"], ["hu"]),
         helper.make_node("Add", ["xw", "hu"], ["s"]),
         helper.make_node("Tanh", ["s"], ["h_next"]),
         helper.make_node("Identity", ["h_next"], ["y"])],
        "cell",
        [helper.make_tensor_value_info("h", F, [4, 8]), helper.make_tensor_value_info("x", F, [4, 3])],
        [helper.make_tensor_value_info("h_next", F, [4, 8]), helper.make_tensor_value_info("y", F, [4, 8])])
    scan = helper.make_node("Scan", ["h0", "xs"], ["h_last", "ys"], num_scan_inputs=1, body=body,
                            scan_output_axes=[1])
    g = helper.make_graph([scan], "scan_rnn",
                          [helper.make_tensor_value_info("h0", F, [4, 8]), helper.make_tensor_value_info("xs", F, [6, 4, 3])],
                          [helper.make_tensor_value_info("h_last", F, [4, 8]), helper.make_tensor_value_info("ys", F, [4, 6, 8])],
                          [rng_init("W", [3, 8], 1), rng_init("U", [8, 8], 2)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def loop_decay(trip_as_input=False):
    """Loop of 5 iterations (M an initializer, or a run-time input): v = 0.5 v + sin(x),
    x a graph input read by name; the scan output records v each step."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["v", "half"], ["hv"]),
         helper.make_node("Sin", ["x"], ["sx"]),
         helper.make_node("Add", ["hv", "sx"], ["v_next"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["v_next"], ["v_scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", F, [2, 3]),
         helper.make_tensor_value_info("v_scan", F, [2, 3])])
    loop = helper.make_node("Loop", ["M", "go", "v0"], ["v_final", "vs"], body=body)
    inputs = [helper.make_tensor_value_info("v0", F, [2, 3]), helper.make_tensor_value_info("x", F, [2, 3])]
    inits = [numpy_helper.from_array(np.array(True), "go"), numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    if trip_as_input:
        inputs.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
    else:
        inits.append(numpy_helper.from_array(np.array(5, np.int64), "M"))
    g = helper.make_graph([loop], "loop_decay", inputs,
                          [helper.make_tensor_value_info("v_final", F, [2, 3]), helper.make_tensor_value_info("vs", F, [5, 2, 3])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def if_on_shape():
    """If(dim 0 of x > 2): then Relu(x) else Neg(x) — the condition folds once shapes are bound."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [4, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [4, 3])])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
             helper.make_node("Greater", ["rows", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "if_on_shape", [helper.make_tensor_value_info("x", F, [4, 3])],
                          [helper.make_tensor_value_info("y", F, [4, 3])],
                          [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                           numpy_helper.from_array(np.array(2, np.int64), "two")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def run_model(suite, tools, name, model, work):
    path = os.path.join(work, f"{name}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    data = os.path.join(work, f"{name}_data")
    e2e.write_case(data, path, batch=1, seed=3)
    for gpus in ("1", "2"):
        case = f"{name} --gpus {gpus}"
        plan = os.path.join(work, f"{name}_{gpus}.pcc")
        r = tools.run("pcc", [path, "--gpus", gpus, "-o", plan])
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            continue
        ir = tools.run("pcc", [path, "--gpus", gpus, "--emit", "ir"])
        suite.check(f"{case}: no If/Loop/Scan left", ir.returncode == 0 and not re.search(r"= (If|Loop|Scan)\(", ir.stdout),
                    ir.describe())
        r = tools.run("pcc-run", [plan, "--inputs", data, "--expect", data, "--rtol", RTOL, "--atol", ATOL])
        suite.check(f"{case}: matches onnxruntime", r.returncode == 0, r.describe())


def dynamic_loop(suite, tools, work):
    path = os.path.join(work, "loop_dynamic.onnx")
    with open(path, "wb") as f:
        f.write(loop_decay(trip_as_input=True).SerializeToString())
    r = tools.run("pcc", [path, "--gpus", "1", "-o", os.path.join(work, "dyn.pcc")])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    suite.check("dynamic trip count: exit 2, one line", r.returncode == 2 and len(lines) == 1, r.describe())
    suite.check("dynamic trip count: message", bool(lines) and re.search(
        r"node 'Loop_0' \(Loop, opset 13\): unsupported: dynamic trip count", lines[0]) is not None, r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_control_flow", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        work = suite.tempdir("control")
        for name, build in (("scan_rnn", scan_rnn), ("loop_decay", loop_decay), ("if_on_shape", if_on_shape)):
            suite.run_case(name, run_model, suite, tools, name, build(), work)
        suite.run_case("dynamic loop", dynamic_loop, suite, tools, work)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
