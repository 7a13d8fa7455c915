#!/usr/bin/env python3
"""Builds the small ONNX models committed in models/ for tests and the demo.

    python models/make_models.py [--out DIR] [--no-check]

Every model has random weights from a fixed seed, so running the script twice
writes byte-identical files. Each model is validated with onnx.checker and
run once with onnxruntime (unless --no-check).

The graphs are written node by node with onnx.helper (no exporter) but follow
what exporters emit: gpt2_tiny.onnx uses the PyTorch opset-17 patterns
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape for dynamic shapes,
Constant nodes for scalars, Gelu as its erf formula, Where for the causal mask).
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20240611
PRODUCER = "pcc-models"


class GraphBuilder:
    """Collects nodes and initializers; names nodes PyTorch-style (/scope/Op_N)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.counts = {}

    def _name(self, scope, op):
        key = (scope, op)
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        suffix = "" if n == 0 else f"_{n}"
        return f"{scope}/{op}{suffix}"

    def weight(self, name, shape, fan_in=None, scale=None, offset=0.0):
        """Adds a float32 initializer drawn from N(offset, scale^2)."""
        if scale is None:
            scale = 1.0 / math.sqrt(fan_in if fan_in else shape[-1])
        data = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(data, name))
        return name

    def init(self, name, array):
        """Adds an initializer with exactly `array`'s dtype and value."""
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, scope="", n_out=1, **attrs):
        """Adds a node; \returns its output name (or names when n_out > 1)."""
        name = self._name(scope, op)
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, array, scope=""):
        """Adds a Constant node, as PyTorch exports literals."""
        value = numpy_helper.from_array(np.asarray(array))
        return self.node("Constant", [], scope=scope, value=value)

    def model(self, name, inputs, outputs, opset, rename_outputs):
        """\returns a ModelProto; rename_outputs maps internal names to graph output names."""
        for node in self.nodes:
            node.output[:] = [rename_outputs.get(o, o) for o in node.output]
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name=PRODUCER)
        model.ir_version = 8
        return model


def make_mlp():
    """x f32[batch,64] -> Gemm 64->256 (transB) -> Relu -> MatMul 256->128 + bias
    -> Tanh -> MatMul 128->16 -> y f32[batch,16]."""
    b = GraphBuilder(SEED + 1)
    w1 = b.weight("fc1.weight", [256, 64], fan_in=64)
    b1 = b.weight("fc1.bias", [256], scale=0.1)
    w2 = b.weight("fc2.weight", [256, 128], fan_in=256)
    b2 = b.weight("fc2.bias", [128], scale=0.1)
    w3 = b.weight("fc3.weight", [128, 16], fan_in=128)
    h = b.node("Gemm", ["x", w1, b1], scope="/fc1", transB=1)
    h = b.node("Relu", [h], scope="/act1")
    h = b.node("MatMul", [h, w2], scope="/fc2")
    h = b.node("Add", [h, b2], scope="/fc2")
    h = b.node("Tanh", [h], scope="/act2")
    y = b.node("MatMul", [h, w3], scope="/fc3")
    return b.model(
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        opset=17, rename_outputs={y: "y"})


# gpt2_tiny dimensions.
VOCAB, SEQ, D, HEADS = 128, 16, 64, 4
HEAD_DIM = D // HEADS
LAYERS = 2


def _dim(b, x, index, scope):
    """PyTorch's x.size(index) as a 1-D tensor: Shape -> Gather -> Unsqueeze."""
    shape = b.node("Shape", [x], scope=scope)
    d = b.node("Gather", [shape, b.const(np.array(index, dtype=np.int64), scope)],
               scope=scope, axis=0)
    return b.node("Unsqueeze", [d, b.const(np.array([0], dtype=np.int64), scope)], scope=scope)


def _reshape_dynamic(b, x, tail, scope):
    """x.view(x.size(0), x.size(1), *tail) the way PyTorch exports it."""
    parts = [_dim(b, x, 0, scope), _dim(b, x, 1, scope)]
    parts += [b.const(np.array([t], dtype=np.int64), scope) for t in tail]
    shape = b.node("Concat", parts, scope=scope, axis=0)
    return b.node("Reshape", [x, shape], scope=scope)


def _layer_norm(b, x, prefix, scope):
    g = b.weight(f"{prefix}.weight", [D], scale=0.1, offset=1.0)
    beta = b.weight(f"{prefix}.bias", [D], scale=0.1)
    return b.node("LayerNormalization", [x, g, beta], scope=scope, axis=-1, epsilon=1e-5)


def _linear(b, x, n_in, n_out, prefix, scope):
    w = b.weight(f"{prefix}.weight", [n_in, n_out], fan_in=n_in)
    bias = b.weight(f"{prefix}.bias", [n_out], scale=0.05)
    h = b.node("MatMul", [x, w], scope=scope)
    return b.node("Add", [bias, h], scope=scope)


def _gelu_erf(b, x, scope):
    """0.5 * x * (1 + erf(x / sqrt(2))): the opset-17 PyTorch export of nn.GELU."""
    t = b.node("Div", [x, b.const(np.array(math.sqrt(2.0), dtype=np.float32), scope)], scope=scope)
    t = b.node("Erf", [t], scope=scope)
    t = b.node("Add", [t, b.const(np.array(1.0, dtype=np.float32), scope)], scope=scope)
    t = b.node("Mul", [x, t], scope=scope)
    return b.node("Mul", [t, b.const(np.array(0.5, dtype=np.float32), scope)], scope=scope)


def _attention(b, x, layer, causal_mask):
    scope = f"/h.{layer}/attn"
    p = f"h.{layer}.attn"
    qkv = _linear(b, x, D, 3 * D, f"{p}.c_attn", f"{scope}/c_attn")
    split = b.const(np.array([D, D, D], dtype=np.int64), scope)
    q, k, v = b.node("Split", [qkv, split], scope=scope, n_out=3, axis=2)
    heads = []
    for t in (q, k, v):
        heads.append(_reshape_dynamic(b, t, [HEADS, HEAD_DIM], scope))
    q = b.node("Transpose", [heads[0]], scope=scope, perm=[0, 2, 1, 3])
    kt = b.node("Transpose", [heads[1]], scope=scope, perm=[0, 2, 3, 1])
    v = b.node("Transpose", [heads[2]], scope=scope, perm=[0, 2, 1, 3])
    scores = b.node("MatMul", [q, kt], scope=scope)
    scale = b.const(np.array(math.sqrt(HEAD_DIM), dtype=np.float32), scope)
    scores = b.node("Div", [scores, scale], scope=scope)
    neg = b.const(np.array(-1e4, dtype=np.float32), scope)
    scores = b.node("Where", [causal_mask, scores, neg], scope=scope)
    probs = b.node("Softmax", [scores], scope=scope, axis=-1)
    ctx = b.node("MatMul", [probs, v], scope=scope)
    ctx = b.node("Transpose", [ctx], scope=scope, perm=[0, 2, 1, 3])
    ctx = _reshape_dynamic(b, ctx, [D], scope)
    return _linear(b, ctx, D, D, f"{p}.c_proj", f"{scope}/c_proj")


def make_gpt2_tiny():
    """A two-layer GPT-2-style decoder: input_ids i64[batch,16] -> logits f32[batch,16,128]."""
    b = GraphBuilder(SEED + 2)
    wte = b.weight("wte.weight", [VOCAB, D], scale=0.5)
    wpe = b.weight("wpe.weight", [SEQ, D], scale=0.1)
    positions = b.init("position_ids", np.arange(SEQ, dtype=np.int64))
    causal_mask = b.init("causal_mask", np.tril(np.ones((SEQ, SEQ), dtype=bool)))

    tok = b.node("Gather", [wte, "input_ids"], scope="/wte", axis=0)
    pos = b.node("Gather", [wpe, positions], scope="/wpe", axis=0)
    x = b.node("Add", [tok, pos], scope="/embed")
    for layer in range(LAYERS):
        s = f"/h.{layer}"
        p = f"h.{layer}"
        h = _layer_norm(b, x, f"{p}.ln_1", f"{s}/ln_1")
        x = b.node("Add", [x, _attention(b, h, layer, causal_mask)], scope=s)
        h = _layer_norm(b, x, f"{p}.ln_2", f"{s}/ln_2")
        h = _linear(b, h, D, 4 * D, f"{p}.mlp.c_fc", f"{s}/mlp/c_fc")
        h = _gelu_erf(b, h, f"{s}/mlp/act")
        h = _linear(b, h, 4 * D, D, f"{p}.mlp.c_proj", f"{s}/mlp/c_proj")
        x = b.node("Add", [x, h], scope=s + "/mlp")
    x = _layer_norm(b, x, "ln_f", "/ln_f")
    lm_head = b.weight("lm_head.weight", [D, VOCAB], fan_in=D)
    logits = b.node("MatMul", [x, lm_head], scope="/lm_head")
    return b.model(
        "gpt2_tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", SEQ])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", SEQ, VOCAB])],
        opset=17, rename_outputs={logits: "logits"})


def make_cnn_small():
    """image f32[batch,3,32,32] -> three convolutions (plain, grouped, dilated),
    batch norm, max/average/global pooling -> Gemm -> logits f32[batch,10]."""
    b = GraphBuilder(SEED + 3)
    c1w = b.weight("conv1.weight", [8, 3, 3, 3], fan_in=27)
    c1b = b.weight("conv1.bias", [8], scale=0.1)
    bn_scale = b.weight("bn1.weight", [8], scale=0.1, offset=1.0)
    bn_bias = b.weight("bn1.bias", [8], scale=0.1)
    bn_mean = b.weight("bn1.running_mean", [8], scale=0.1)
    bn_var = b.init("bn1.running_var",
                    (b.rng.uniform(0.5, 1.5, size=[8])).astype(np.float32))
    c2w = b.weight("conv2.weight", [16, 4, 3, 3], fan_in=36)
    c2b = b.weight("conv2.bias", [16], scale=0.1)
    c3w = b.weight("conv3.weight", [16, 16, 3, 3], fan_in=144)
    c3b = b.weight("conv3.bias", [16], scale=0.1)
    fcw = b.weight("fc.weight", [10, 16], fan_in=16)
    fcb = b.weight("fc.bias", [10], scale=0.1)

    h = b.node("Conv", ["image", c1w, c1b], scope="/conv1", kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[1, 1])
    h = b.node("BatchNormalization", [h, bn_scale, bn_bias, bn_mean, bn_var], scope="/bn1",
               epsilon=1e-5)
    h = b.node("Relu", [h], scope="/act1")
    h = b.node("MaxPool", [h], scope="/pool1", kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("Conv", [h, c2w, c2b], scope="/conv2", kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[1, 1], group=2)
    h = b.node("Relu", [h], scope="/act2")
    h = b.node("AveragePool", [h], scope="/pool2", kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("Conv", [h, c3w, c3b], scope="/conv3", kernel_shape=[3, 3],
               pads=[2, 2, 2, 2], dilations=[2, 2])
    h = b.node("Relu", [h], scope="/act3")
    h = b.node("GlobalAveragePool", [h], scope="/gap")
    h = b.node("Flatten", [h], scope="/flatten", axis=1)
    y = b.node("Gemm", [h, fcw, fcb], scope="/fc", transB=1)
    return b.model(
        "cnn_small",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        opset=13, rename_outputs={y: "logits"})


def make_block_f16():
    """A float16 transformer-style block: x f16[batch,16,64] -> LayerNorm ->
    MatMul 64->128 + bias -> Gelu (erf formula) -> MatMul 128->64 + bias ->
    residual Add -> LayerNorm -> MatMul 64->32 -> Tanh (-> t f16) -> Mul by 4 ->
    Softmax -> Cast -> probs f32[batch,16,32]. Weights and constants float16."""
    b = GraphBuilder(SEED + 4)
    f16 = np.float16

    def weight(name, shape, fan_in=None, scale=None, offset=0.0):
        if scale is None:
            scale = 1.0 / math.sqrt(fan_in if fan_in else shape[-1])
        data = (b.rng.standard_normal(shape) * scale + offset).astype(f16)
        return b.init(name, data)

    def layer_norm(x, prefix, scope):
        g = weight(f"{prefix}.weight", [D], scale=0.1, offset=1.0)
        beta = weight(f"{prefix}.bias", [D], scale=0.1)
        return b.node("LayerNormalization", [x, g, beta], scope=scope, axis=-1, epsilon=1e-5)

    def linear(x, n_in, n_out, prefix, scope, bias=True):
        h = b.node("MatMul", [x, weight(f"{prefix}.weight", [n_in, n_out], fan_in=n_in)], scope=scope)
        if bias:
            h = b.node("Add", [h, weight(f"{prefix}.bias", [n_out], scale=0.05)], scope=scope)
        return h

    h = layer_norm("x", "ln_1", "/ln_1")
    h = linear(h, D, 2 * D, "fc1", "/fc1")
    t = b.node("Div", [h, b.const(np.array(math.sqrt(2.0), dtype=f16), "/act")], scope="/act")
    t = b.node("Erf", [t], scope="/act")
    t = b.node("Add", [t, b.const(np.array(1.0, dtype=f16), "/act")], scope="/act")
    t = b.node("Mul", [h, t], scope="/act")
    h = b.node("Mul", [t, b.const(np.array(0.5, dtype=f16), "/act")], scope="/act")
    h = linear(h, 2 * D, D, "fc2", "/fc2")
    x = b.node("Add", ["x", h], scope="/residual")
    h = layer_norm(x, "ln_2", "/ln_2")
    t = b.node("Tanh", [linear(h, D, 32, "head", "/head", bias=False)], scope="/head")
    # "t" is also a graph output: its producer's output is renamed to "t" (model()).
    s = b.node("Mul", ["t", b.const(np.array(4.0, dtype=f16), "/softmax")], scope="/softmax")
    s = b.node("Softmax", [s], scope="/softmax", axis=-1)
    probs = b.node("Cast", [s], scope="/softmax", to=TensorProto.FLOAT)
    return b.model(
        "block_f16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", SEQ, D])],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT16, ["batch", SEQ, 32]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", SEQ, 32])],
        opset=17, rename_outputs={t: "t", probs: "probs"})


MODELS = {
    "mlp.onnx": make_mlp,
    "gpt2_tiny.onnx": make_gpt2_tiny,
    "cnn_small.onnx": make_cnn_small,
    "block_f16.onnx": make_block_f16,
}


def sample_inputs(model, batch, seed=0):
    """\returns {input name: array} for `model` with the symbolic dims bound to `batch`.
    Integer inputs (token ids) are drawn from [0, 128), the smallest vocabulary here."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else batch for d in t.shape.dim]
        if t.elem_type == TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, VOCAB, size=shape, dtype=np.int64)
        elif t.elem_type == TensorProto.FLOAT16:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float16)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def check(path):
    """Validates the model and runs it once with onnxruntime; \returns output shapes."""
    import onnxruntime as ort

    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outs = session.run(None, sample_inputs(model, batch=3))
    for o in outs:
        if not np.all(np.isfinite(o)):
            raise RuntimeError(f"{path}: onnxruntime produced non-finite values")
    return [list(o.shape) for o in outs]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=here, help="output folder (default: models/)")
    parser.add_argument("--no-check", action="store_true", help="skip checker and onnxruntime")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for file_name, make in MODELS.items():
        path = os.path.join(args.out, file_name)
        onnx.save(make(), path)
        line = f"{file_name}: {os.path.getsize(path)} bytes"
        if not args.no_check:
            line += f", onnxruntime outputs {check(path)} at batch 3"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
