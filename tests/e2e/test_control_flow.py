#!/usr/bin/env python3
"""If, Loop and Scan through the user's path: models built with onnx.helper,
compiled by pcc, run on CPU ranks by pcc-run --check and compared with
onnxruntime, at --gpus 1 and 2. Static ones are folded (If on a constant
condition) or unrolled (Loop, Scan); dynamic ones (an If on an input, a Loop
whose trip count is an input or whose condition depends on the data, an If
nested in such a Loop, reading a graph input through both bodies, a Scan too
large to unroll) stay region nodes that the
runtime runs: each is run on inputs that take every path (both branches, zero
and several iterations). A Loop whose scan outputs would have no static shape
is refused with exit 2 and one line on stderr; a Loop that never stops is
ended by pcc-run's --timeout with one line naming the node."""

import os
import re
import shutil
import sys

import numpy as np
import onnx
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


B = TensorProto.BOOL
I64 = TensorProto.INT64


def opset_model(graph, opset=16):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def if_on_input():
    """If(c, an input): then x W + 1 (W an outer initializer) else Tanh(x) * 3."""
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["xw"]),
                                helper.make_node("Add", ["xw", "one"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [2, 4])])
    else_g = helper.make_graph([helper.make_node("Tanh", ["x"], ["th"]),
                                helper.make_node("Mul", ["th", "three"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [2, 4])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "if_on_input",
                          [helper.make_tensor_value_info("c", B, []), helper.make_tensor_value_info("x", F, [2, 4])],
                          [helper.make_tensor_value_info("y", F, [2, 4])],
                          [rng_init("W", [4, 4], 5), numpy_helper.from_array(np.array(1, np.float32), "one"),
                           numpy_helper.from_array(np.array(3, np.float32), "three")])
    return opset_model(g)


def loop_trip_input():
    """Loop(M an input, cond true): v = 0.5 v + sin(x) + i (the iteration number), no scan output."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["v", "half"], ["hv"]),
         helper.make_node("Sin", ["x"], ["sx"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Add", ["hv", "sx"], ["a"]),
         helper.make_node("Add", ["a", "fi"], ["v_next"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("v", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("v_next", F, [2, 3])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "go", "v0"], ["v_final"], body=body)], "loop_trip_input",
                          [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("v0", F, [2, 3]),
                           helper.make_tensor_value_info("x", F, [2, 3])],
                          [helper.make_tensor_value_info("v_final", F, [2, 3])],
                          [numpy_helper.from_array(np.array(True), "go"),
                           numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    return opset_model(g)


def loop_until(nested_if=False):
    """Loop(no M, cond true): v = 2 v (or, with nested_if, If(i is even) 2 v else v + 1)
    while the sum of v stays below 100: the body computes its condition from the data;
    a counter k counts the iterations."""
    nodes = []
    if nested_if:
        then_g = helper.make_graph([helper.make_node("Mul", ["v", "two"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", F, [3])])
        else_g = helper.make_graph([helper.make_node("Add", ["v", "onef"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", F, [3])])
        nodes += [helper.make_node("Mod", ["i", "two_i"], ["r"]),
                  helper.make_node("Equal", ["r", "zero_i"], ["even"]),
                  helper.make_node("If", ["even"], ["v_next"], then_branch=then_g, else_branch=else_g)]
    else:
        nodes.append(helper.make_node("Mul", ["v", "two"], ["v_next"]))
    nodes += [helper.make_node("ReduceSum", ["v_next"], ["s"], keepdims=0),
              helper.make_node("Less", ["s", "limit"], ["cond_out"]),
              helper.make_node("Add", ["k", "one_i"], ["k_next"])]
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("v", F, [3]), helper.make_tensor_value_info("k", I64, [])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("v_next", F, [3]),
         helper.make_tensor_value_info("k_next", I64, [])])
    name = "loop_nested_if" if nested_if else "loop_until"
    g = helper.make_graph([helper.make_node("Loop", ["", "go", "v0", "k0"], ["v_final", "k_final"], body=body)], name,
                          [helper.make_tensor_value_info("v0", F, [3])],
                          [helper.make_tensor_value_info("v_final", F, [3]), helper.make_tensor_value_info("k_final", I64, [])],
                          [numpy_helper.from_array(np.array(True), "go"), numpy_helper.from_array(np.array(0, np.int64), "k0"),
                           numpy_helper.from_array(np.array(2, np.float32), "two"),
                           numpy_helper.from_array(np.array(1, np.float32), "onef"),
                           numpy_helper.from_array(np.array(100, np.float32), "limit"),
                           numpy_helper.from_array(np.array(1, np.int64), "one_i"),
                           numpy_helper.from_array(np.array(2, np.int64), "two_i"),
                           numpy_helper.from_array(np.array(0, np.int64), "zero_i")])
    return opset_model(g)


def loop_if_capture():
    """Loop(M an input): v = If(i is even) v + x else v - x, the branches reading the
    graph input x by name (a capture through two levels of bodies)."""
    then_g = helper.make_graph([helper.make_node("Add", ["v", "x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["v", "x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [3])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two_i"], ["r"]), helper.make_node("Equal", ["r", "zero_i"], ["even"]),
         helper.make_node("If", ["even"], ["v_next"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_value_info("v", F, [3])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("v_next", F, [3])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "v0"], ["v_final"], body=body)], "loop_if_capture",
                          [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("v0", F, [3]),
                           helper.make_tensor_value_info("x", F, [3])],
                          [helper.make_tensor_value_info("v_final", F, [3])],
                          [numpy_helper.from_array(np.array(2, np.int64), "two_i"),
                           numpy_helper.from_array(np.array(0, np.int64), "zero_i")])
    return opset_model(g)


def loop_forever():
    """Loop(no M, cond an input): v = v + 1 while cond stays true, which it does."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "one"], ["v_next"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("v", F, [2])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("v_next", F, [2])])
    g = helper.make_graph([helper.make_node("Loop", ["", "c", "v0"], ["v_final"], body=body, name="forever")], "loop_forever",
                          [helper.make_tensor_value_info("c", B, []), helper.make_tensor_value_info("v0", F, [2])],
                          [helper.make_tensor_value_info("v_final", F, [2])],
                          [numpy_helper.from_array(np.array(1, np.float32), "one")])
    return opset_model(g)


def scan_reversed_large():
    """Scan over 20000 steps (too many to unroll): a running sum over axis 1 of xs [2,20000]
    read in reverse, with the partial sums stacked along axis 1 in reverse."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s_next"]), helper.make_node("Identity", ["s_next"], ["y"])],
        "body",
        [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("s_next", F, [2]), helper.make_tensor_value_info("y", F, [2])])
    scan = helper.make_node("Scan", ["s0", "xs"], ["s_last", "ys"], num_scan_inputs=1, body=body,
                            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                            scan_output_directions=[1])
    g = helper.make_graph([scan], "scan_large",
                          [helper.make_tensor_value_info("s0", F, [2]), helper.make_tensor_value_info("xs", F, [2, 20000])],
                          [helper.make_tensor_value_info("s_last", F, [2]), helper.make_tensor_value_info("ys", F, [2, 20000])])
    return opset_model(g)


def write_inputs(directory, model_file, arrays):
    """Writes `arrays` as input_K.pb and onnxruntime's outputs on them as output_K.pb."""
    model = onnx.load(model_file, load_external_data=False)
    os.makedirs(directory, exist_ok=True)
    outputs = e2e.onnxruntime_outputs(model_file, arrays)
    for k, (vi, a) in enumerate(zip(e2e.graph_inputs(model), arrays)):
        e2e.write_tensor(os.path.join(directory, f"input_{k}.pb"), a, vi.name)
    for k, (vi, a) in enumerate(zip(model.graph.output, outputs)):
        e2e.write_tensor(os.path.join(directory, f"output_{k}.pb"), a, vi.name)
    return outputs


def run_region_model(suite, tools, name, model, work, cases, regions, rtol=RTOL, atol=ATOL):
    """Compiles `model` at --gpus 1 and 2, checks that the ops in `regions` stay region
    nodes, and runs every input set of `cases` ({label: [arrays]}) with --check and
    against onnxruntime."""
    path = os.path.join(work, f"{name}.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    datas = {}
    for label, arrays in cases.items():
        datas[label] = os.path.join(work, f"{name}_{label}")
        write_inputs(datas[label], path, arrays)
    for gpus in ("1", "2"):
        case = f"{name} --gpus {gpus}"
        plan = os.path.join(work, f"{name}_{gpus}.pcc")
        r = tools.run("pcc", [path, "--gpus", gpus, "-o", plan])
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            continue
        ir = tools.run("pcc", [path, "--gpus", gpus, "--emit", "ir"])
        for op in regions:
            suite.check(f"{case}: {op} runs at run time", ir.returncode == 0 and re.search(rf"= {op}\(", ir.stdout),
                        ir.describe())
        for label, data in datas.items():
            r = tools.run("pcc-run", [plan, "--inputs", data, "--expect", data, "--check", "--rtol", rtol, "--atol", atol])
            suite.check(f"{case} [{label}]: --check and matches onnxruntime", r.returncode == 0, r.describe())


def region_cases(suite, tools, work):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    run_region_model(suite, tools, "if_on_input", if_on_input(), work,
                     {"then": [np.array(True), x], "else": [np.array(False), x]}, ["If"])
    v0, xs = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    run_region_model(suite, tools, "loop_trip_input", loop_trip_input(), work,
                     {f"M={m}": [np.array(m, np.int64), v0, xs] for m in (0, 1, 7)}, ["Loop"])
    run_region_model(suite, tools, "loop_until", loop_until(), work,
                     {"v0=1,2,3": [np.array([1, 2, 3], np.float32)], "v0=50": [np.array([50, 30, 40], np.float32)]},
                     ["Loop"])
    run_region_model(suite, tools, "loop_nested_if", loop_until(nested_if=True), work,
                     {"v0=1,2,3": [np.array([1, 2, 3], np.float32)], "v0=0.5": [np.array([0.5, 0.25, 0], np.float32)]},
                     ["Loop"])
    v3, x3 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    run_region_model(suite, tools, "loop_if_capture", loop_if_capture(), work,
                     {f"M={m}": [np.array(m, np.int64), v3, x3] for m in (0, 1, 5)}, ["Loop"])
    s0, big = rng.standard_normal(2).astype(np.float32), rng.standard_normal((2, 20000)).astype(np.float32)
    run_region_model(suite, tools, "scan_large", scan_reversed_large(), work, {"random": [s0, big]}, ["Scan"],
                     rtol=1e-3, atol=1e-3)


def loop_never_ends(suite, tools, work):
    path = os.path.join(work, "loop_forever.onnx")
    with open(path, "wb") as f:
        f.write(loop_forever().SerializeToString())
    data = os.path.join(work, "forever_data")
    os.makedirs(data, exist_ok=True)
    e2e.write_tensor(os.path.join(data, "input_0.pb"), np.array(True), "c")
    e2e.write_tensor(os.path.join(data, "input_1.pb"), np.zeros(2, np.float32), "v0")
    for gpus in ("1", "2"):
        plan = os.path.join(work, f"forever_{gpus}.pcc")
        r = tools.run("pcc", [path, "--gpus", gpus, "-o", plan])
        if not suite.check(f"never-ending loop --gpus {gpus}: compile", r.returncode == 0, r.describe()):
            continue
        r = tools.run("pcc-run", [plan, "--inputs", data, "--timeout", "2"], timeout=60)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        suite.check(f"never-ending loop --gpus {gpus}: ended by --timeout, exit 4, one line",
                    not r.timed_out and r.returncode == 4 and len(lines) == 1, r.describe())
        suite.check(f"never-ending loop --gpus {gpus}: message", bool(lines) and re.search(
            r"node 'forever' \(Loop\): still looping after \d+ iterations when the run's time limit of 2 s "
            r"\(--timeout\) passed; it has no trip count and its condition never turned false", lines[0]) is not None,
            r.describe())


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
    suite.check("dynamic trip count with scan outputs: exit 2, one line", r.returncode == 2 and len(lines) == 1,
                r.describe())
    suite.check("dynamic trip count with scan outputs: message", bool(lines) and re.search(
        r"node 'Loop_0' \(Loop, opset 13\): unsupported: dynamic trip count: the trip count M is computed at run time: "
        r"the Loop runs at run time and its scan outputs have no static shape", lines[0]) is not None, r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_control_flow", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        work = suite.tempdir("control")
        for name, build in (("scan_rnn", scan_rnn), ("loop_decay", loop_decay), ("if_on_shape", if_on_shape)):
            suite.run_case(name, run_model, suite, tools, name, build(), work)
        suite.run_case("dynamic loop", dynamic_loop, suite, tools, work)
        suite.run_case("regions at run time", region_cases, suite, tools, work)
        suite.run_case("never-ending loop", loop_never_ends, suite, tools, work)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
