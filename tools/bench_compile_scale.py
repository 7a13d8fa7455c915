#!/usr/bin/env python3
"""Measures pcc's planning time and memory on LLM-sized structures.

    python tools/bench_compile_scale.py [--bin build] [--work build/bench-scale]
                                        [--cases llama65b:8,gpt2xl:64,write]
                                        [--batch B] [--keep] [--compare-unfolded]

It writes, with onnx.helper, compile-only transformer structures in fp16 whose
weights live in one external-data file with holes (the file is truncated to
its size, so a 122 GiB structure takes no disk: every weight reads as zeros
but for its first 32 values, 1 to 32, so that none is a splat):

  llama65b  80 layers, width 8192, FFN 22016, 64 heads, vocabulary 32000:
            RMSNorm (Pow, ReduceMean, Add, Sqrt, Div, Mul), q/k/v/o
            projections, attention (MatMul, Softmax, MatMul), SwiGLU MLP
            (gate, up, down; SiLU as x * Sigmoid(x)); ~120 GiB of weights
  gpt2xl    48 layers, width 1600, 25 heads, FFN 6400, vocabulary 50257:
            LayerNorm, a fused QKV projection split in three, Gelu (Erf),
            MLP; ~3 GiB of weights
  llama65b_20, llama65b_40, llama65b_160
            the llama65b layer repeated 20, 40 and 160 times
  gpt3      GPT-3-175B-like: the gpt2 structure with 96 layers, width
            12288, 96 heads, FFN 49152, sequence 2048; ~326 GiB
  gpt2xl32  the gpt2xl structure in float32 (~6 GiB), its fused QKV
            projection a Gemm with its bias over the flattened positions,
            reshaped back (as Hugging Face's Conv1D exports), which the
            partitioner splits into one product per piece at tp > 1 (as
            views of the weight, not copies)
  gpt2xl16  the gpt2xl structure cut to 16 layers: ~1.1 GiB, for the plan
            write

Cases (comma-separated):
  NAME:G    `pcc MODEL --shape ... --gpus G --gpus-per-node 8 --gpu GPU
            --emit json`, llama65b at batch 1 (sequence 2048) and gpt2xl
            at batch 8 (sequence 1024), for an h100;
            planning only: import, passes, the mesh search, lowering, the
            plan in memory, the JSON report; no weight file written
  write     `pcc gpt2xl16 --gpus 4 --strategy tp=4 -o PLAN` and the same at
            `--gpus 1`: the weights streamed into the rank files (each rank's
            column or row pieces of the MLP weights cut on the fly, plus the
            reference program's whole weights), with peak memory against the
            bytes written

For each it prints wall time, CPU time (user + system: a machine shared with
other jobs stretches wall time, not CPU time), peak RSS (/usr/bin/time -v,
"Maximum resident set size") and the largest RssAnon (private memory) and
RssFile (mapped file pages) sampled every 10 ms.
Every --emit json case runs with PCC_FORBID_WEIGHT_READS=65536 (planning
must read no weight: a read kills pcc). --compare-unfolded runs each again
with --no-fold-repeats. Goals on a 2-core machine, each under 1 GiB peak RSS
(docs/cost-model.md#repeated-blocks): llama65b under 2, 3, 5 and 8 s at
--gpus 8, 64, 512 and 1024; gpt2xl32 under 1 s at 8 and 2 s at 64; gpt3
under 10 s at 1024; the llama65b_20/40/llama65b/llama65b_160 series at 64
within 1.3x of each other.

Needs only onnx and numpy (the test venv).
"""

import argparse
import os
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_import import measure  # noqa: E402

GIB = 1 << 30
F16 = TensorProto.FLOAT16

STRUCTURES = {
    # 122 GiB: more than one h100 holds, so the search must split the weights.
    "llama65b": dict(kind="llama", layers=80, width=8192, ffn=22016, heads=64, vocab=32000, seq=2048,
                     batch=1, gpu="h100"),
    "gpt2xl": dict(kind="gpt2", layers=48, width=1600, ffn=6400, heads=25, vocab=50257, seq=1024,
                   batch=8, gpu="h100"),
    # The LLaMA-65B layer repeated 20, 40 and 160 times (80 is llama65b):
    # planning time should not grow with depth beyond reading the graph.
    **{f"llama65b_{n}": dict(kind="llama", layers=n, width=8192, ffn=22016, heads=64, vocab=32000, seq=2048, batch=1,
                             gpu="h100") for n in (20, 40, 160)},
    # GPT-3 175B: 96 layers of width 12288 (96 heads, FFN 49152), ~326 GiB.
    "gpt3": dict(kind="gpt2", layers=96, width=12288, ffn=49152, heads=96, vocab=50257, seq=2048, batch=1,
                 gpu="h100"),
    "gpt2xl32": dict(kind="gpt2", layers=48, width=1600, ffn=6400, heads=25, vocab=50257, seq=1024,
                     batch=8, gpu="h100", float32=True, conv1d=True),
    "gpt2xl16": dict(kind="gpt2", layers=16, width=1600, ffn=6400, heads=25, vocab=50257, seq=1024),
    # The decode steps (a KV cache per layer, docs/generation.md), for
    # tools/bench_decode_estimates.py and test_search_rediscovery.py.
    "llama65b_decode": dict(kind="llama", decode=True, layers=80, width=8192, ffn=22016, heads=64, vocab=32000,
                            seq=1, batch=1, gpu="h100"),
    "llama13b_decode": dict(kind="llama", decode=True, layers=40, width=5120, ffn=13824, heads=40, vocab=32000,
                            seq=1, batch=1, gpu="h100"),
}


class Builder:
    """Collects nodes and external-data initializers (offsets into one sparse file)."""

    def __init__(self, data_name, ft=TensorProto.FLOAT16):
        self.data_name = data_name
        self.ft = ft  # the float type of weights and activations
        self.offset = 0
        self.starts = []  # offset of every weight
        self.inits = []
        self.nodes = []
        self.count = 0

    def weight(self, name, dims):
        dtype = self.ft
        size = 4 if dtype == TensorProto.FLOAT else 2
        t = TensorProto()
        t.name = name
        t.data_type = dtype
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(dims)) * size
        self.starts.append(self.offset)
        for key, value in (("location", self.data_name), ("offset", str(self.offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = key, value
        self.offset = (self.offset + length + 4095) // 4096 * 4096
        self.inits.append(t)
        return name

    def const(self, name, values, dtype):
        self.inits.append(helper.make_tensor(name, dtype, [len(values)] if values is not None else [], values))
        return name

    def scalar(self, name, value, dtype):
        self.inits.append(helper.make_tensor(name, dtype, [], [value]))
        return name

    def node(self, op, inputs, name, **attrs):
        self.count += 1
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out


def build_llama(b, c):
    """The LLaMA structure; with c["decode"], its decode step as the PyTorch
    exporters write it: `input_ids`, `attention_mask`, `position_ids` and per
    layer `past_key_values.N.key/value` [batch, heads, past, head width] in,
    `logits` and `present.N.key/value` (Concat(past, new) along the
    positions) out; rotary embeddings (half rotation) of q and k at
    `position_ids`, and a causal mask (query i of the new positions sees the
    keys up to past + i) with the padding mask added to the scores."""
    w, h, f = c["width"], c["heads"], c["ffn"]
    decode = c.get("decode", False)
    eps = b.const("eps", [1e-5], b.ft)
    two = b.const("two", [2.0], b.ft)
    scale = b.const("scale", [1.0 / np.sqrt(w // h)], b.ft)
    heads_shape = b.const("heads_shape", [0, 0, h, w // h], TensorProto.INT64)
    flat_shape = b.const("flat_shape", [0, 0, w], TensorProto.INT64)
    rows_shape = b.const("rows_shape", [-1, w], TensorProto.INT64)
    qkv_last = b.const("qkv_last", [3 * w], TensorProto.INT64)
    zero1 = b.const("zero1", [0], TensorProto.INT64)
    two1 = b.const("two1", [2], TensorProto.INT64)
    ids = "input_ids" if decode else "ids"
    if decode:
        # (1 - mask) * -65504 as an additive [batch, 1, 1, total] mask
        one = b.const("one", [1.0], b.ft)
        lowest = b.const("lowest", [-65504.0], b.ft)
        axes = b.const("mask_axes", [1, 2], TensorProto.INT64)
        m = b.node("Cast", ["attention_mask"], "mask/cast", to=b.ft)
        m = b.node("Mul", [b.node("Sub", [one, m], "mask/sub"), lowest], "mask/mul")
        mask = b.node("Unsqueeze", [m, axes], "mask/unsqueeze")
        # causal: key j is seen by new position i when j <= (total - seq) + i
        zero_i = b.scalar("zero_i", 0, TensorProto.INT64)
        one_i = b.scalar("one_i", 1, TensorProto.INT64)
        at1 = b.scalar("at1", 1, TensorProto.INT64)
        total = b.node("Gather", [b.node("Shape", ["attention_mask"], "mask/shape"), at1], "mask/total")
        seq = b.node("Gather", [b.node("Shape", ["input_ids"], "ids/shape"), at1], "ids/seq")
        kpos = b.node("Unsqueeze", [b.node("Range", [zero_i, total, one_i], "mask/keys"),
                                    b.const("axis0", [0], TensorProto.INT64)], "mask/keys_row")
        qpos = b.node("Unsqueeze", [b.node("Range", [b.node("Sub", [total, seq], "mask/past"), total, one_i],
                                           "mask/queries"), b.const("axis1", [1], TensorProto.INT64)],
                      "mask/queries_col")
        causal = b.node("Where", [b.node("LessOrEqual", [kpos, qpos], "mask/causal"), b.const("zero_h", [0.0], b.ft),
                                  lowest], "mask/causal_add")
        mask = b.node("Add", [mask, causal], "mask/full")
        # rotary tables [positions, head width], gathered at position_ids -> [batch, 1, seq, head width]
        hd = w // h
        axes_1 = b.const("axes_1", [1], TensorProto.INT64)
        cos_table = b.weight("rotary.cos", [c.get("positions", 4096), hd])
        sin_table = b.weight("rotary.sin", [c.get("positions", 4096), hd])
        halves = b.const("rotary_halves", [hd // 2, hd // 2], TensorProto.INT64)
        b.presents = []

    def rotary(x, p):
        # each layer gathers its own rows of the tables
        cos = b.node("Unsqueeze", [b.node("Gather", [cos_table, "position_ids"], f"{p}/cos_rows"), axes_1],
                     f"{p}/cos_heads")
        sin = b.node("Unsqueeze", [b.node("Gather", [sin_table, "position_ids"], f"{p}/sin_rows"), axes_1],
                     f"{p}/sin_heads")
        x1, x2 = f"{p}/x1", f"{p}/x2"
        b.nodes.append(helper.make_node("Split", [x, halves], [x1, x2], name=f"{p}/split", axis=-1))
        rot = b.node("Concat", [b.node("Neg", [x2], f"{p}/neg"), x1], f"{p}/rotate_half", axis=-1)
        return b.node("Add", [b.node("Mul", [x, cos], f"{p}/cos"), b.node("Mul", [rot, sin], f"{p}/sin")], f"{p}/rotary")

    def rmsnorm(x, p):
        sq = b.node("Pow", [x, two], f"{p}/pow")
        mean = b.node("ReduceMean", [sq], f"{p}/mean", axes=[-1], keepdims=1)
        rs = b.node("Sqrt", [b.node("Add", [mean, eps], f"{p}/add")], f"{p}/sqrt")
        return b.node("Mul", [b.node("Div", [x, rs], f"{p}/div"), b.weight(f"{p}.weight", [w])], f"{p}/mul")

    x = b.node("Gather", [b.weight("embed", [c["vocab"], w]), ids], "embed/gather")
    for i in range(c["layers"]):
        p = f"layers.{i}"
        n = rmsnorm(x, f"{p}/input_norm")
        q, k, v = (b.node("Transpose", [b.node("Reshape", [b.node("MatMul", [n, b.weight(f"{p}.{t}_proj", [w, w])],
                                                                  f"{p}/{t}_proj"), heads_shape], f"{p}/{t}_heads")],
                          f"{p}/{t}_t", perm=[0, 2, 1, 3]) for t in "qkv")
        if decode:
            q, k = rotary(q, f"{p}/q_rotary"), rotary(k, f"{p}/k_rotary")
            for t, new in (("key", "k"), ("value", "v")):
                present = f"present.{i}.{t}"
                b.nodes.append(helper.make_node("Concat", [f"past_key_values.{i}.{t}", k if new == "k" else v],
                                                [present], name=f"{p}/{t}_cache", axis=2))
                b.presents.append(present)
            k, v = f"present.{i}.key", f"present.{i}.value"
        kt = b.node("Transpose", [k], f"{p}/k_tt", perm=[0, 1, 3, 2])
        s = b.node("Mul", [b.node("MatMul", [q, kt], f"{p}/scores"), scale], f"{p}/scaled")
        if decode:
            s = b.node("Add", [s, mask], f"{p}/masked")
        a = b.node("MatMul", [b.node("Softmax", [s], f"{p}/softmax", axis=-1), v], f"{p}/attn")
        a = b.node("Reshape", [b.node("Transpose", [a], f"{p}/attn_t", perm=[0, 2, 1, 3]), flat_shape], f"{p}/attn_flat")
        x = b.node("Add", [x, b.node("MatMul", [a, b.weight(f"{p}.o_proj", [w, w])], f"{p}/o_proj")], f"{p}/res1")
        n = rmsnorm(x, f"{p}/post_norm")
        g = b.node("MatMul", [n, b.weight(f"{p}.gate_proj", [w, f])], f"{p}/gate_proj")
        u = b.node("MatMul", [n, b.weight(f"{p}.up_proj", [w, f])], f"{p}/up_proj")
        silu = b.node("Mul", [g, b.node("Sigmoid", [g], f"{p}/sigmoid")], f"{p}/silu")
        d = b.node("MatMul", [b.node("Mul", [silu, u], f"{p}/swiglu"), b.weight(f"{p}.down_proj", [f, w])],
                   f"{p}/down_proj")
        x = b.node("Add", [x, d], f"{p}/res2")
    x = rmsnorm(x, "norm")
    return b.node("MatMul", [x, b.weight("lm_head", [w, c["vocab"]])], "lm_head"), [ids]


def build_gpt2(b, c):
    w, h, f = c["width"], c["heads"], c["ffn"]
    eps = b.const("eps", [1e-5], b.ft)
    two = b.const("two", [2.0], b.ft)
    half = b.const("half", [0.5], b.ft)
    one = b.const("one", [1.0], b.ft)
    rsqrt2 = b.const("rsqrt2", [1 / np.sqrt(2)], b.ft)
    scale = b.const("scale", [1.0 / np.sqrt(w // h)], b.ft)
    split = b.const("qkv_split", [w, w, w], TensorProto.INT64)
    heads_shape = b.const("heads_shape", [0, 0, h, w // h], TensorProto.INT64)
    flat_shape = b.const("flat_shape", [0, 0, w], TensorProto.INT64)
    rows_shape = b.const("rows_shape", [-1, w], TensorProto.INT64)
    qkv_last = b.const("qkv_last", [3 * w], TensorProto.INT64)
    zero1 = b.const("zero1", [0], TensorProto.INT64)
    two1 = b.const("two1", [2], TensorProto.INT64)

    def layernorm(x, p):
        mean = b.node("ReduceMean", [x], f"{p}/mean", axes=[-1], keepdims=1)
        d = b.node("Sub", [x, mean], f"{p}/sub")
        var = b.node("ReduceMean", [b.node("Pow", [d, two], f"{p}/pow")], f"{p}/var", axes=[-1], keepdims=1)
        rs = b.node("Sqrt", [b.node("Add", [var, eps], f"{p}/add_eps")], f"{p}/sqrt")
        y = b.node("Mul", [b.node("Div", [d, rs], f"{p}/div"), b.weight(f"{p}.weight", [w])], f"{p}/mul")
        return b.node("Add", [y, b.weight(f"{p}.bias", [w])], f"{p}/add")

    x = b.node("Add", [b.node("Gather", [b.weight("wte", [c["vocab"], w]), "ids"], "wte/gather"),
                       b.node("Gather", [b.weight("wpe", [c["seq"], w]), "pos"], "wpe/gather")], "embed")
    for i in range(c["layers"]):
        p = f"h.{i}"
        n = layernorm(x, f"{p}/ln_1")
        if c.get("conv1d"):
            # As Hugging Face's Conv1D exports: a Gemm with its bias over the
            # flattened positions, reshaped back (what the fused-projection split
            # of the partitioner takes apart, passes/partition/split_projections.cpp).
            flat = b.node("Reshape", [n, rows_shape], f"{p}/c_attn_flat")
            mm = b.node("Gemm", [flat, b.weight(f"{p}.c_attn.weight", [w, 3 * w]),
                                 b.weight(f"{p}.c_attn.bias", [3 * w])], f"{p}/c_attn")
            lead = b.node("Slice", [b.node("Shape", [n], f"{p}/c_attn_shape"), zero1, two1], f"{p}/c_attn_lead")
            qkv = b.node("Reshape", [mm, b.node("Concat", [lead, qkv_last], f"{p}/c_attn_to", axis=0)],
                         f"{p}/c_attn_bias")
        else:
            qkv = b.node("Add", [b.node("MatMul", [n, b.weight(f"{p}.c_attn.weight", [w, 3 * w])], f"{p}/c_attn"),
                                 b.weight(f"{p}.c_attn.bias", [3 * w])], f"{p}/c_attn_bias")
        outs = [f"{p}/{t}" for t in "qkv"]
        b.nodes.append(helper.make_node("Split", [qkv, split], outs, name=f"{p}/split", axis=-1))
        q, k, v = (b.node("Transpose", [b.node("Reshape", [o, heads_shape], f"{o}_heads")], f"{o}_t", perm=[0, 2, 1, 3])
                   for o in outs)
        kt = b.node("Transpose", [k], f"{p}/k_tt", perm=[0, 1, 3, 2])
        s = b.node("Mul", [b.node("MatMul", [q, kt], f"{p}/scores"), scale], f"{p}/scaled")
        a = b.node("MatMul", [b.node("Softmax", [s], f"{p}/softmax", axis=-1), v], f"{p}/attn")
        a = b.node("Reshape", [b.node("Transpose", [a], f"{p}/attn_t", perm=[0, 2, 1, 3]), flat_shape], f"{p}/attn_flat")
        a = b.node("Add", [b.node("MatMul", [a, b.weight(f"{p}.c_proj.weight", [w, w])], f"{p}/c_proj"),
                           b.weight(f"{p}.c_proj.bias", [w])], f"{p}/c_proj_bias")
        x = b.node("Add", [x, a], f"{p}/res1")
        n = layernorm(x, f"{p}/ln_2")
        u = b.node("Add", [b.node("MatMul", [n, b.weight(f"{p}.c_fc.weight", [w, f])], f"{p}/c_fc"),
                           b.weight(f"{p}.c_fc.bias", [f])], f"{p}/c_fc_bias")
        erf = b.node("Erf", [b.node("Mul", [u, rsqrt2], f"{p}/gelu_div")], f"{p}/gelu_erf")
        gl = b.node("Mul", [b.node("Mul", [u, half], f"{p}/gelu_half"), b.node("Add", [erf, one], f"{p}/gelu_add")],
                    f"{p}/gelu")
        d = b.node("Add", [b.node("MatMul", [gl, b.weight(f"{p}.mlp_proj.weight", [f, w])], f"{p}/mlp_proj"),
                           b.weight(f"{p}.mlp_proj.bias", [w])], f"{p}/mlp_proj_bias")
        x = b.node("Add", [x, d], f"{p}/res2")
    x = layernorm(x, "ln_f")
    return b.node("MatMul", [x, b.weight("lm_head", [w, c["vocab"]])], "lm_head"), ["ids", "pos"]


def write_structure(directory, name, float32=False):
    """Writes DIRECTORY/NAME.onnx and its sparse NAME.data, in fp16 (or in
    float32, as exporters write by default). \\returns (path, weight bytes,
    nodes, inputs)."""
    c = STRUCTURES[name]
    os.makedirs(directory, exist_ok=True)
    data_name = f"{name}.data"
    float32 = float32 or c.get("float32", False)
    b = Builder(data_name, TensorProto.FLOAT if float32 else TensorProto.FLOAT16)
    out, inputs = (build_llama if c["kind"] == "llama" else build_gpt2)(b, c)
    # A file of holes (no disk, reads as zeros), but each weight starts with 32
    # distinct fp16 values: real weights are never a splat, and an all-zero
    # bias would be removed by canonicalize as a neutral Add (reading it whole).
    head = np.arange(1, 33, dtype=np.float32 if float32 else np.float16).tobytes()
    with open(os.path.join(directory, data_name), "wb") as fdata:
        fdata.truncate(b.offset)
        for start in b.starts:
            fdata.seek(start)
            fdata.write(head)
    ins = [helper.make_tensor_value_info(i, TensorProto.INT64, ["batch", "seq"]) for i in inputs]
    outs = [helper.make_tensor_value_info(out, b.ft, ["batch", "seq", c["vocab"]])]
    if c.get("decode"):
        # the decode step's interface (docs/generation.md): pcc binds batch,
        # seq = 1 and the past to --max-context - 1 positions
        b.nodes.append(helper.make_node("Identity", [out], ["logits"], name="logits"))
        outs = [helper.make_tensor_value_info("logits", b.ft, ["batch", "seq", c["vocab"]])]
        ins.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]))
        ins.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]))
        cache = ["batch", c["heads"], "past", c["width"] // c["heads"]]
        for present in b.presents:
            past = "past_key_values." + present[len("present."):]
            ins.append(helper.make_tensor_value_info(past, b.ft, cache))
            outs.append(helper.make_tensor_value_info(present, b.ft, ["batch", c["heads"], "total",
                                                                      c["width"] // c["heads"]]))
    graph = helper.make_graph(b.nodes, name, ins, outs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pcc-bench")
    model.ir_version = 8
    path = os.path.join(directory, f"{name}.onnx")
    with open(path, "wb") as fm:
        fm.write(model.SerializeToString())
    return path, b.offset, b.count, inputs


def shape_args(name, inputs, batch):
    seq = STRUCTURES[name]["seq"]
    args = []
    for i in inputs:
        args += ["--shape", f"{i}={batch}x{seq}"]
    return args


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(root, "build"))
    ap.add_argument("--work", default=os.path.join(root, "build", "bench-scale"))
    ap.add_argument("--cases", default="llama65b:8,llama65b:64,llama65b:512,llama65b:1024,gpt2xl32:8,gpt2xl32:64,"
                                       "gpt3:1024,llama65b_20:64,llama65b_40:64,llama65b_160:64,write")
    ap.add_argument("--batch", type=int, help="batch of the --emit json cases (default: llama65b 1, gpt2xl 8)")
    ap.add_argument("--keep", action="store_true", help="keep the models and plans")
    ap.add_argument("--compare-unfolded", action="store_true",
                    help="run each --emit json case again with --no-fold-repeats (every repeated block searched)")
    a = ap.parse_args()
    pcc = os.path.join(a.bin, "pcc")
    rows, models = [], {}

    def model(name):
        if name not in models:
            models[name] = write_structure(os.path.join(a.work, name), name)
            path, wb, nodes, _ = models[name]
            print(f"{name}: {nodes} nodes, {wb / GIB:.1f} GiB of weights (sparse file), {path}", flush=True)
        return models[name]

    for case in [c for c in a.cases.split(",") if c]:
        if case == "write":
            path, wb, _, inputs = model("gpt2xl16")
            for gpus, extra in ((4, ["--strategy", "tp=4"]), (1, [])):
                plan = os.path.join(a.work, "gpt2xl16", f"plan{gpus}.pcc")
                cmd = [pcc, path, "--gpus", str(gpus), "--quiet", "-o", plan] + extra + shape_args("gpt2xl16", inputs, 1)
                rc, rss, anon, filed, seconds, cpu, tail = measure(cmd)
                written = sum(os.path.getsize(os.path.join(plan, f)) for f in os.listdir(plan)
                              if f.endswith(".bin")) if rc == 0 else 0
                label = f"gpt2xl16 -o, --gpus {gpus} {' '.join(extra)}".strip()
                rows.append((label, rc, rss, anon, filed, seconds, cpu, f"{written / GIB:.2f} GiB written"))
                print(f"{label}: exit {rc}, {seconds:.1f} s ({cpu:.1f} s CPU), peak RSS {rss / 2**20:.0f} MiB "
                      f"(anon {anon / 2**20:.0f}, file {filed / 2**20:.0f}), {written / GIB:.2f} GiB written"
                      + (f"\n    {tail.strip()}" if rc else ""), flush=True)
                if not a.keep:
                    shutil.rmtree(plan, ignore_errors=True)
            continue
        name, gpus = case.split(":")
        path, wb, _, inputs = model(name)
        c = STRUCTURES[name]
        for extra in ([], ["--no-fold-repeats"]) if a.compare_unfolded else ([],):
            cmd = [pcc, path, "--gpus", gpus, "--gpus-per-node", "8", "--gpu", c["gpu"], "--emit", "json", "--quiet"]
            cmd += shape_args(name, inputs, a.batch or c["batch"]) + extra
            # Planning must read no weight byte: the pages inside every weight
            # of 64 KiB or more are made unreadable (a read kills pcc).
            rc, rss, anon, filed, seconds, cpu, tail = measure(cmd, env=dict(os.environ,
                                                                            PCC_FORBID_WEIGHT_READS="65536"))
            label = f"{name} --emit json --gpus {gpus} --gpu {c['gpu']}, batch {a.batch or c['batch']}" + \
                (" " + " ".join(extra) if extra else "")
            rows.append((label, rc, rss, anon, filed, seconds, cpu, f"{wb / GIB:.1f} GiB weights"))
            print(f"{label}: exit {rc}, {seconds:.2f} s ({cpu:.2f} s CPU), peak RSS {rss / 2**20:.0f} MiB "
                  f"(anon {anon / 2**20:.0f}, file {filed / 2**20:.0f})" + (f"\n    {tail.strip()}" if rc else ""),
                  flush=True)
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)

    print("\n| case | exit | wall time | CPU time | peak RSS | peak RssAnon | peak RssFile | size |")
    print("|---|---|---|---|---|---|---|---|")
    for label, rc, rss, anon, filed, seconds, cpu, size in rows:
        print(f"| `{label}` | {rc} | {seconds:.2f} s | {cpu:.2f} s | {rss / 2**20:.0f} MiB | {anon / 2**20:.0f} MiB | "
              f"{filed / 2**20:.0f} MiB | {size} |")
    return 0 if all(r[1] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
