#!/usr/bin/env python3
"""The rewrite passes (canonicalize, fold-batchnorm, recognize) end to end.

1. The committed exports (models/exported, both exporters): after `recognize`
   the IR holds exactly as many LayerNormalization / RMSNormalization / Gelu /
   Swish nodes as the architecture has (counted from the configurations
   models/export.py builds with --small, not from pcc's output), and none of
   the ops the exporters decompose them into is left. `--no-fuse` turns the
   recognition off.
2. Graphs built here with onnx.helper hold every decomposed form recognize
   knows, a Conv + BatchNormalization and what canonicalize removes; each is
   compiled at --gpus 1 and 2, run on CPU ranks with `pcc-run --check` and
   compared with onnxruntime, and its IR after the passes is checked.
3. `--print-after` takes `=PASS` or `PASS`, and an unknown pass is refused
   with exit 2 and the list of passes.
"""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

EXPORTED = os.path.join(e2e.MODELS_DIR, "exported")
BATCH = 4
RTOL, ATOL = 1e-4, 1e-5

# models/export.py --small: every one has 2 layers (num_hidden_layers, n_layer
# or num_layers = 2). Per layer a pre- or post-norm before attention and
# before the MLP, plus one more norm (BERT: on the embeddings; GPT-2, ViT,
# LLaMA, T5: the final one). Activations: BERT and ViT "gelu" (erf), GPT-2
# "gelu_new" (tanh), LLaMA "silu" (Swish), T5 "relu" (not rewritten).
LAYERS = 2
ARCH = {
    "bert": {"LayerNormalization": 2 * LAYERS + 1, "Gelu": LAYERS},
    "gpt2": {"LayerNormalization": 2 * LAYERS + 1, "Gelu": LAYERS},
    "vit": {"LayerNormalization": 2 * LAYERS + 1, "Gelu": LAYERS},
    "llama": {"RMSNormalization": 2 * LAYERS + 1, "Swish": LAYERS},
    "t5_encoder": {"RMSNormalization": 2 * LAYERS + 1},
}
COUNTED = ["LayerNormalization", "RMSNormalization", "Gelu", "Swish", "HardSwish"]
# What the exporters decompose those into: none may be left.
DECOMPOSED = ["Erf", "Tanh", "Sigmoid", "Sqrt", "Reciprocal", "Pow", "ReduceMean"]


def ir_after(suite, tools, case, model, pass_name, extra=()):
    """\returns the IR printed after `pass_name`, or None (a failed check)."""
    r = tools.run("pcc", [model, "--batch", BATCH, "--emit", "json", "--quiet",
                          f"--print-after={pass_name}"] + list(extra))
    if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
        return None
    marker = f"IR after {pass_name} "
    if not suite.check(f"{case}: IR printed after {pass_name}", marker in r.stderr, r.describe()):
        return None
    return r.stderr.split(marker, 1)[1]


def op_counts(ir):
    counts = {}
    for op in re.findall(r"^\s*%[^=]*= ([A-Za-z]+)\(", ir, re.M):
        counts[op] = counts.get(op, 0) + 1
    return counts


def check_export(suite, tools, name, exporter):
    case = f"{name}.{exporter}"
    model = os.path.join(EXPORTED, f"{case}.onnx")
    ir = ir_after(suite, tools, case, model, "recognize")
    if ir is None:
        return
    counts = op_counts(ir)
    want = ARCH[name]
    got = {op: counts.get(op, 0) for op in COUNTED}
    suite.check(f"{case}: one op per norm and activation block", got == {op: want.get(op, 0) for op in COUNTED},
                f"  got {got}, the architecture has {want}")
    left = {op: counts[op] for op in DECOMPOSED if op in counts}
    suite.check(f"{case}: nothing decomposed left", not left, f"  left: {left}")
    if name == "gpt2":
        tanh = len(re.findall(r"= Gelu\([^)]*\) \{approximate = \"tanh\"\}", ir))
        suite.check(f"{case}: GPT-2's Gelu is the tanh form", tanh == LAYERS, f"  {tanh} tanh Gelus")
    if exporter == "ts" and name in ("bert", "llama"):
        off = ir_after(suite, tools, case + " --no-fuse", model, "dce", ["--no-fuse"])
        if off is not None:
            c = op_counts(off)
            key = "Gelu" if name == "bert" else "Swish"
            suite.check(f"{case} --no-fuse: not recognized", c.get(key, 0) == 0 and
                        c.get("Erf" if name == "bert" else "Sigmoid", 0) == LAYERS, f"  ops {c}")


# --- graphs built with onnx.helper ------------------------------------------

D = 16


def const(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def make_model(path):
    """x[B,8,16] -> LayerNorm (decomposed, scale, bias) -> Gelu (erf) ->
    RMSNorm (Reciprocal(Sqrt)) * w -> Gelu (tanh) -> Swish -> HardSwish
    (Relu6 form) -> Identity -> Mul 1 -> Reshape/Unsqueeze/Reshape chain
    (one Reshape to [B,128] after canonicalize) -> y; and
    image[B,3,8,8] -> Conv -> BatchNormalization -> Relu -> z."""
    rng = np.random.default_rng(5)
    h = onnx.helper
    inits = [
        const("two", 2.0), const("three", 3.0), const("eps", 1e-5), const("one", 1.0), const("half", 0.5),
        const("sqrt2", np.sqrt(2.0)), const("k", 0.044715), const("c", np.sqrt(2 / np.pi)), const("zero", 0.0),
        const("six", 6.0), const("ln_w", rng.standard_normal(D)), const("ln_b", rng.standard_normal(D)),
        const("rms_w", rng.standard_normal(D)),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([0, -1, D], dtype=np.int64), "shape"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"),
        numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat"),
        const("conv_w", rng.standard_normal((4, 3, 3, 3)) / 3), const("conv_b", rng.standard_normal(4)),
        const("bn_s", rng.standard_normal(4)), const("bn_b", rng.standard_normal(4)),
        const("bn_m", rng.standard_normal(4)), const("bn_v", rng.uniform(0.5, 2.0, 4)),
    ]
    n = h.make_node
    nodes = [
        # LayerNormalization, as torch.onnx decomposes it (opset 18 axes input).
        n("ReduceMean", ["x", "axes"], ["m"]), n("Sub", ["x", "m"], ["d"]), n("Pow", ["d", "two"], ["p"]),
        n("ReduceMean", ["p", "axes"], ["v"]), n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["s"]),
        n("Div", ["d", "s"], ["nrm"]), n("Mul", ["nrm", "ln_w"], ["sc"]), n("Add", ["sc", "ln_b"], ["ln"]),
        # Gelu, erf form.
        n("Div", ["ln", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
        n("Mul", ["ln", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["ge"]),
        # RMSNormalization.
        n("Mul", ["ge", "ge"], ["r0"]), n("ReduceMean", ["r0", "axes"], ["r1"]), n("Add", ["r1", "eps"], ["r2"]),
        n("Sqrt", ["r2"], ["r3"]), n("Reciprocal", ["r3"], ["r4"]), n("Mul", ["ge", "r4"], ["r5"]),
        n("Mul", ["rms_w", "r5"], ["rms"]),
        # Gelu, tanh form.
        n("Mul", ["rms", "half"], ["t0"]), n("Pow", ["rms", "three"], ["t1"]), n("Mul", ["t1", "k"], ["t2"]),
        n("Add", ["rms", "t2"], ["t3"]), n("Mul", ["t3", "c"], ["t4"]), n("Tanh", ["t4"], ["t5"]),
        n("Add", ["t5", "one"], ["t6"]), n("Mul", ["t0", "t6"], ["gt"]),
        # Swish.
        n("Sigmoid", ["gt"], ["w0"]), n("Mul", ["gt", "w0"], ["sw"]),
        # HardSwish, Relu6 form.
        n("Add", ["sw", "three"], ["h0"]), n("Clip", ["h0", "zero", "six"], ["h1"]), n("Mul", ["sw", "h1"], ["h2"]),
        n("Div", ["h2", "six"], ["hs"]),
        # What canonicalize removes.
        n("Identity", ["hs"], ["i0"]), n("Mul", ["i0", "one"], ["i1"]),
        n("Reshape", ["i1", "shape"], ["i2"]), n("Unsqueeze", ["i2", "ax1"], ["i3"]),
        n("Reshape", ["i3", "flat"], ["y"]),
        # Conv + BatchNormalization.
        n("Conv", ["image", "conv_w", "conv_b"], ["cv"], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["cv", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-3),
        n("Relu", ["bn"], ["z"]),
    ]
    graph = h.make_graph(
        nodes, "decomposed",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 8, D]),
         h.make_tensor_value_info("image", onnx.TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 8 * D]),
         h.make_tensor_value_info("z", onnx.TensorProto.FLOAT, ["batch", 4, 8, 8])],
        inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def check_built(suite, tools, gpus):
    case = f"onnx.helper graph --gpus {gpus}"
    work = suite.tempdir("rewrite")
    try:
        model = os.path.join(work, "model.onnx")
        make_model(model)
        ir = ir_after(suite, tools, case, model, "dce")
        if ir is not None:
            counts = op_counts(ir)
            want = {"LayerNormalization": 1, "Gelu": 2, "RMSNormalization": 1, "Swish": 1, "HardSwish": 1,
                    "Reshape": 1, "Conv": 1, "Relu": 1}
            suite.check(f"{case}: IR after the passes", counts == want, f"  ops {counts}, want {want}")
        plan, data, outs = (os.path.join(work, d) for d in ("plan.pcc", "data", "outputs"))
        r = tools.run("pcc", [model, "--batch", BATCH, "--gpus", gpus, "-o", plan, "--quiet"])
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            return
        _, expected = e2e.write_case(data, model, BATCH, seed=7)
        r = tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check",
                                  "--rtol", RTOL, "--atol", ATOL])
        if not suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe()):
            return
        for k, want in enumerate(expected):
            got = e2e.read_tensor(os.path.join(outs, f"output_{k}.pb"))
            diff = e2e.compare(got, want, RTOL, ATOL)
            suite.check(f"{case}: output {k} matches onnxruntime", not diff, "  " + diff)
            wrong = [w for w, a in e2e.wrong_answers(want) if not e2e.compare(a.astype(want.dtype), want, RTOL, ATOL)]
            suite.check(f"{case}: output {k}'s comparison rejects wrong answers", not wrong, f"  accepted {wrong}")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def check_print_after(suite, tools):
    mlp = e2e.model_path("mlp.onnx")
    for form in (["--print-after=canonicalize"], ["--print-after", "canonicalize"]):
        r = tools.run("pcc", [mlp, "--batch", 2, "--emit", "json", "--quiet"] + form)
        suite.check(f"pcc {' '.join(form)}", r.returncode == 0 and "IR after canonicalize " in r.stderr, r.describe())
    for form in (["--print-after=nosuch"], ["--print-after", "nosuch"]):
        r = tools.run("pcc", [mlp, "--batch", 2, "--emit", "json"] + form)
        lines = r.stderr.splitlines()
        suite.check(f"pcc {' '.join(form)}: exit 2, one line naming it and the passes",
                    r.returncode == 2 and len(lines) == 1 and "nosuch" in lines[0] and
                    all(p in lines[0] for p in ("fold-constants", "canonicalize", "fold-batchnorm", "recognize",
                                                "cse", "dce")), r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_rewrite", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        for name in ARCH:
            for exporter in ("dynamo", "ts"):
                suite.run_case(f"{name}.{exporter}", check_export, suite, tools, name, exporter)
        for gpus in (1, 2):
            suite.run_case(f"onnx.helper graph --gpus {gpus}", check_built, suite, tools, gpus)
        suite.run_case("--print-after", check_print_after, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
