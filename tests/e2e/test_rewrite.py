#!/usr/bin/env python3
"""The rewrite passes (canonicalize, fold-batchnorm, recognize) end to end.

1. The committed exports (models/exported, both exporters): after `recognize`
   the IR holds exactly as many LayerNormalization / RMSNormalization / Gelu /
   Swish / Attention nodes as the architecture has (from its number of
   layers, read from the model's weight and module names, not from pcc's
   output), and none of
   the ops the exporters decompose them into is left. `--no-fuse` turns the
   recognition off.
2. Graphs built here with onnx.helper hold every decomposed form recognize
   knows, a Conv + BatchNormalization and what canonicalize removes; each is
   compiled at --gpus 1 and 2, run on CPU ranks with `pcc-run --check` and
   compared with onnxruntime, and its IR after the passes is checked. A
   second graph holds attention in the 3-D and 4-D layouts and with grouped
   K/V heads and a bool mask; it is checked the same way at --gpus 1 and
   under tp=2 and dp=2.
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

# Per layer a pre- or post-norm before attention and before the MLP, plus one
# more norm (BERT: on the embeddings; GPT-2, ViT, LLaMA, T5: the final one),
# one self-attention block, and one activation: BERT and ViT "gelu" (erf),
# GPT-2 "gelu_new" (tanh), LLaMA "silu" (Swish), T5 "relu" (not rewritten).
# The number of layers is read from each model (layers_of), not assumed.
ARCH = {
    "bert": lambda n: {"LayerNormalization": 2 * n + 1, "Gelu": n, "Attention": n},
    "gpt2": lambda n: {"LayerNormalization": 2 * n + 1, "Gelu": n, "Attention": n},
    "vit": lambda n: {"LayerNormalization": 2 * n + 1, "Gelu": n, "Attention": n},
    "llama": lambda n: {"RMSNormalization": 2 * n + 1, "Swish": n, "Attention": n},
    "t5_encoder": lambda n: {"RMSNormalization": 2 * n + 1, "Attention": n},
}
# The module list each architecture's layers live in (HF names: encoder.layer.N,
# transformer.h.N, layers.N, encoder.block.N).
LAYER_LIST = {"bert": "layer", "gpt2": "h", "vit": "layers?", "llama": "layers", "t5_encoder": "block"}


def layers_of(model_path, name):
    """\returns the number of layers of export `model_path` of architecture
    `name`: the distinct indices N of its layer list in the names of its
    weights and nodes and in the module paths the dynamo exporter records
    in node metadata."""
    model = onnx.load(model_path, load_external_data=False)
    texts = [i.name for i in model.graph.initializer]
    for n in model.graph.node:
        texts += [n.name, *n.output, *(p.value for p in n.metadata_props)]
    pattern = re.compile(rf"(?:^|[./: ']){LAYER_LIST[name]}[./](\d+)(?:[./: ']|$)")
    return len({m.group(1) for t in texts for m in pattern.finditer(t)})


COUNTED = ["LayerNormalization", "RMSNormalization", "Gelu", "Swish", "HardSwish", "Attention"]
# What the exporters decompose those into: none may be left.
DECOMPOSED = ["Erf", "Tanh", "Sigmoid", "Sqrt", "Reciprocal", "Pow", "ReduceMean", "Softmax", "IsNaN"]


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
    layers = layers_of(model, name)
    if not suite.check(f"{case}: the layer count is read from the model", layers > 0, f"  {layers} layers"):
        return
    want = ARCH[name](layers)
    got = {op: counts.get(op, 0) for op in COUNTED}
    print(f"  {case}: {layers} layers; attention blocks {want['Attention']}, recognized {got['Attention']}")
    suite.check(f"{case}: one op per norm, activation and attention block",
                got == {op: want.get(op, 0) for op in COUNTED}, f"  got {got}, the architecture has {want}")
    left = {op: counts[op] for op in DECOMPOSED if op in counts}
    suite.check(f"{case}: nothing decomposed left", not left, f"  left: {left}")
    if name == "gpt2":
        tanh = len(re.findall(r"= Gelu\([^)]*\) \{approximate = \"tanh\"\}", ir))
        suite.check(f"{case}: GPT-2's Gelu is the tanh form", tanh == layers, f"  {tanh} tanh Gelus")
    if exporter == "ts" and name in ("bert", "llama"):
        off = ir_after(suite, tools, case + " --no-fuse", model, "dce", ["--no-fuse"])
        if off is not None:
            c = op_counts(off)
            key = "Gelu" if name == "bert" else "Swish"
            suite.check(f"{case} --no-fuse: not recognized", c.get(key, 0) == 0 and c.get("Attention", 0) == 0 and
                        c.get("Erf" if name == "bert" else "Sigmoid", 0) == layers and
                        c.get("Softmax", 0) == layers, f"  ops {c}")


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


BUILT_OPS = {"LayerNormalization": 1, "Gelu": 2, "RMSNormalization": 1, "Swish": 1, "HardSwish": 1,
             "Reshape": 1, "Conv": 1, "Relu": 1}


def make_attention_model(path):
    """Three attention blocks on x[B,S,32] (2 heads of 16):
    - 3-D: projections, head Reshape/Transpose (Kᵀ by perm [0,2,3,1]), the
      scale 16^-1/4 on Q and on Kᵀ, an additive float mask [B,1,S,S], the NaN
      guard, ·V, Transpose and Reshape back -> y3 [B,S,32];
    - 4-D: the same heads with Kᵀ = Transpose(K, [0,1,3,2]), scores divided by
      4, no mask -> y4 [B,2,S,16];
    - grouped: one K/V head repeated for both query heads (Unsqueeze, Expand,
      Reshape), a bool mask Where(keep, scores, -inf) with keep = m > -1, the
      NaN guard -> yg [B,2,S,16]."""
    rng = np.random.default_rng(11)
    h = onnx.helper
    S, H, HD = 6, 2, 16
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    inits = [const(f"w{c}", rng.standard_normal((H * HD, H * HD)) / 6) for c in "qkv"] + [
        const("wk1", rng.standard_normal((H * HD, HD)) / 6), const("wv1", rng.standard_normal((H * HD, HD)) / 6),
        i64("heads", [0, 0, H, HD]), i64("one_head", [0, 0, 1, HD]), i64("flat", [0, 0, H * HD]),
        i64("ax2", [2]), i64("rep", [1, 1, H, 1, 1]), const("qs", 16 ** -0.25), const("four", 4.0),
        const("zero", 0.0), const("ninf", -np.inf), const("minus1", -1.0),
    ]
    n = h.make_node
    nodes = []
    for c in "qkv":
        nodes += [n("MatMul", ["x", f"w{c}"], [f"{c}3"]), n("Reshape", [f"{c}3", "heads"], [f"{c}r"])]
    nodes += [
        n("Transpose", ["qr"], ["q4"], perm=[0, 2, 1, 3]), n("Transpose", ["vr"], ["v4"], perm=[0, 2, 1, 3]),
        n("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
        # 3-D block.
        n("Mul", ["q4", "qs"], ["a0"]), n("Mul", ["kt", "qs"], ["a1"]), n("MatMul", ["a0", "a1"], ["a2"]),
        n("Add", ["a2", "mask"], ["a3"]), n("Softmax", ["a3"], ["a4"], axis=-1), n("IsNaN", ["a4"], ["a5"]),
        n("Where", ["a5", "zero", "a4"], ["a6"]), n("MatMul", ["a6", "v4"], ["a7"]),
        n("Transpose", ["a7"], ["a8"], perm=[0, 2, 1, 3]), n("Reshape", ["a8", "flat"], ["y3"]),
        # 4-D block.
        n("Transpose", ["kr"], ["k4"], perm=[0, 2, 1, 3]), n("Transpose", ["k4"], ["b0"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q4", "b0"], ["b1"]), n("Div", ["b1", "four"], ["b2"]), n("Softmax", ["b2"], ["b3"], axis=-1),
        n("MatMul", ["b3", "v4"], ["y4"]),
        # Grouped block: one K/V head.
        n("MatMul", ["x", "wk1"], ["g0"]), n("Reshape", ["g0", "one_head"], ["g1"]),
        n("Transpose", ["g1"], ["g2"], perm=[0, 2, 1, 3]), n("Unsqueeze", ["g2", "ax2"], ["g3"]),
        n("Expand", ["g3", "rep"], ["g4"]), n("Reshape", ["g4", "heads_bhsd"], ["gk"]),
        n("MatMul", ["x", "wv1"], ["h0"]), n("Reshape", ["h0", "one_head"], ["h1"]),
        n("Transpose", ["h1"], ["h2"], perm=[0, 2, 1, 3]), n("Unsqueeze", ["h2", "ax2"], ["h3"]),
        n("Expand", ["h3", "rep"], ["h4"]), n("Reshape", ["h4", "heads_bhsd"], ["gv"]),
        n("Transpose", ["gk"], ["c0"], perm=[0, 1, 3, 2]), n("MatMul", ["q4", "c0"], ["c1"]),
        n("Div", ["c1", "four"], ["c2"]), n("Greater", ["m", "minus1"], ["keep"]),
        n("Where", ["keep", "c2", "ninf"], ["c3"]), n("Softmax", ["c3"], ["c4"], axis=-1),
        n("IsNaN", ["c4"], ["c5"]), n("Where", ["c5", "zero", "c4"], ["c6"]), n("MatMul", ["c6", "gv"], ["yg"]),
    ]
    inits.append(i64("heads_bhsd", [0, H, S, HD]))
    graph = h.make_graph(
        nodes, "attention",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", S, H * HD]),
         h.make_tensor_value_info("mask", onnx.TensorProto.FLOAT, ["batch", 1, S, S]),
         h.make_tensor_value_info("m", onnx.TensorProto.FLOAT, [S, S])],
        [h.make_tensor_value_info("y3", onnx.TensorProto.FLOAT, ["batch", S, H * HD]),
         h.make_tensor_value_info("y4", onnx.TensorProto.FLOAT, ["batch", H, S, HD]),
         h.make_tensor_value_info("yg", onnx.TensorProto.FLOAT, ["batch", H, S, HD])],
        inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


# The attention graph after the passes: three Attention nodes (the 3-D one
# reads the projections, the grouped one its single K/V head before the
# repeat), the five projections, the head Reshapes and Transposes the 4-D
# ones read (one for K, made by recognize), and the bool mask.
ATTENTION_OPS = {"Attention": 3, "MatMul": 5, "Reshape": 5, "Transpose": 5, "Greater": 1}


def check_built(suite, tools, what, maker, want, config):
    case = f"onnx.helper {what} graph {' '.join(config)}"
    work = suite.tempdir("rewrite")
    try:
        model = os.path.join(work, "model.onnx")
        maker(model)
        ir = ir_after(suite, tools, case, model, "dce")
        if ir is not None:
            counts = op_counts(ir)
            suite.check(f"{case}: IR after the passes", counts == want, f"  ops {counts}, want {want}")
        plan, data, outs = (os.path.join(work, d) for d in ("plan.pcc", "data", "outputs"))
        r = tools.run("pcc", [model, "--batch", BATCH, *config, "-o", plan, "--quiet"])
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
        for gpus in ("1", "2"):
            suite.run_case(f"onnx.helper graph --gpus {gpus}", check_built, suite, tools, "decomposed", make_model,
                           BUILT_OPS, ["--gpus", gpus])
        for config in (["--gpus", "1"], ["--gpus", "2", "--strategy", "tp=2"], ["--gpus", "2", "--strategy", "dp=2"]):
            suite.run_case(f"onnx.helper attention graph {' '.join(config)}", check_built, suite, tools, "attention",
                           make_attention_model, ATTENTION_OPS, config)
        suite.run_case("--print-after", check_print_after, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
