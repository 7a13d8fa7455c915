#!/usr/bin/env python3
"""Attention in the forms exporters write it, in decoders with a KV cache.

Each variant is a 2-layer decoder built with onnx.helper (hidden 32, 4 query
heads, 2 kv heads of width 8, vocabulary 64, random weights, the cache
[batch, kv heads, positions, 8] as `past_key_values.N.key/value` →
`present.N.key/value`, `position_ids` feeding the rotary embedding). They
differ in one way each from the base form:

  scale      by Div on the scores, by Mul on the scores, folded into q, or
             split between q and k (d^-1/4 each)
  mask       a float mask added, or a bool mask applied by Where with the
             scores in either branch (Where(m, s, -inf), Where(Not m, -inf, s))
  k          transposed by one permutation of the cache, or by two
  kv heads   repeated per group by Unsqueeze/Expand/Reshape (repeat_kv),
             by Tile, or not grouped (4 kv heads)
  rotary     half rotation over the whole head, interleaved pairs, partial
             (the first half of each head rotated, the rest passed through)

For each: `pcc --gpus 1` and `--strategy tp=2` compile it as a generation
plan with both layers' attention recognized as one Attention node (under
`make sanitize`, PCC_E2E_SUBSET=sanitize, tp=2 for the base form only); at tp=2
each attention splits by its heads, each layer communicates Megatron's two
all-reduces (beside at most four all-gathers outside the layers: the
embedding, the rotary tables, the logits), the cache is split over the two
ranks and no collective touches it; `pcc-run --generate 8 --check` matches the export's
own decode step every step, and the greedy tokens equal those onnxruntime
chooses running the export step by step with its cache passed in and out.
"""

import json
import os
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
import test_generate as tg  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
WIDTH, HEADS, HEAD_DIM, VOCAB, LAYERS, MAX_POS = 32, 4, 8, 64, 2, 64
CONTEXT = 32
NEW_TOKENS = 8
PROMPTS = [[3, 17, 42, 9, 5], [11, 2, 60]]

BASE = dict(scale="div", mask="add", k="one", kv="repeat_kv", rotary="half")
VARIANTS = [
    ("base", {}),
    ("scale by Mul", dict(scale="mul")),
    ("scale folded into q", dict(scale="q")),
    ("scale split between q and k", dict(scale="qk")),
    ("mask by Where", dict(mask="where")),
    ("mask by Where, branches swapped", dict(mask="where_not")),
    ("k transposed twice", dict(k="two")),
    ("kv heads by Tile", dict(kv="tile")),
    ("no grouped heads", dict(kv="none")),
    ("interleaved rotary", dict(rotary="interleaved")),
    ("partial rotary", dict(rotary="partial")),
]


class Graph:
    def __init__(self, seed):
        self.nodes, self.inits = [], []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def const(self, value, dtype=np.float32):
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, *dims, scale=0.3):
        return self.const(self.rng.standard_normal(dims).astype(np.float32) * scale)

    def op(self, op, *inputs, outputs=1, **attrs):
        self.n += 1
        outs = [f"t{self.n}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=f"n{self.n}_{op}", **attrs))
        return outs[0] if outputs == 1 else outs


def rms_norm(g, x):
    mean = g.op("ReduceMean", g.op("Pow", x, g.const(2.0)), axes=[-1], keepdims=1)
    return g.op("Mul", g.op("Div", x, g.op("Sqrt", g.op("Add", mean, g.const(1e-5)))), g.weight(WIDTH, scale=1.0))


def rotary(g, x, cos, sin, form):
    """x [B, h, S, D]; cos, sin [B, 1, S, R] for the R rotated dims."""
    rot = HEAD_DIM // 2 if form == "partial" else HEAD_DIM
    if form == "partial":
        x, rest = g.op("Split", x, g.const([rot, HEAD_DIM - rot], np.int64), axis=-1, outputs=2)
    if form == "interleaved":
        # pairs (x0, x1), (x2, x3), ...: (x0 cos - x1 sin, x1 cos + x0 sin)
        pairs = g.op("Reshape", x, g.const([0, 0, 0, rot // 2, 2], np.int64))
        a, b = g.op("Split", pairs, g.const([1, 1], np.int64), axis=-1, outputs=2)
        flat = g.const([0, 0, 0, rot // 2], np.int64)
        a, b = g.op("Reshape", a, flat), g.op("Reshape", b, flat)
        c = g.op("Slice", cos, g.const([0], np.int64), g.const([rot], np.int64), g.const([3], np.int64),
                 g.const([2], np.int64))
        s = g.op("Slice", sin, g.const([0], np.int64), g.const([rot], np.int64), g.const([3], np.int64),
                 g.const([2], np.int64))
        ra = g.op("Sub", g.op("Mul", a, c), g.op("Mul", b, s))
        rb = g.op("Add", g.op("Mul", b, c), g.op("Mul", a, s))
        both = g.op("Concat", g.op("Unsqueeze", ra, g.const([4], np.int64)),
                    g.op("Unsqueeze", rb, g.const([4], np.int64)), axis=4)
        out = g.op("Reshape", both, g.const([0, 0, 0, rot], np.int64))
    else:
        x1, x2 = g.op("Split", x, g.const([rot // 2, rot // 2], np.int64), axis=-1, outputs=2)
        half = g.op("Concat", g.op("Neg", x2), x1, axis=-1)
        out = g.op("Add", g.op("Mul", x, cos), g.op("Mul", half, sin))
    return g.op("Concat", out, rest, axis=-1) if form == "partial" else out


def shape_part(g, x, start, end):
    return g.op("Slice", g.op("Shape", x), g.const([start], np.int64), g.const([end], np.int64))


def repeat_kv(g, x, kv_heads, form):
    """x [B, kv, T, D] -> [B, HEADS, T, D]: each kv head repeated HEADS / kv times."""
    rep = HEADS // kv_heads
    if form == "none":
        return x
    u = g.op("Unsqueeze", x, g.const([2], np.int64))  # [B, kv, 1, T, D]
    if form == "tile":
        r = g.op("Tile", u, g.const([1, 1, rep, 1, 1], np.int64))
    else:  # LLaMA's repeat_kv: Expand to [B, kv, rep, T, D] from the runtime shape
        shape = g.op("Concat", shape_part(g, x, 0, 2), g.const([rep], np.int64), shape_part(g, x, 2, 4), axis=0)
        r = g.op("Expand", u, shape)
    return g.op("Reshape", r, g.op("Concat", shape_part(g, x, 0, 1), g.const([HEADS], np.int64),
                                   shape_part(g, x, 2, 4), axis=0))


def build(path, v, seed):
    """Writes the decoder of variant `v` (BASE's keys) to `path`."""
    g = Graph(seed)
    kv_heads = HEADS if v["kv"] == "none" else 2
    rot = HEAD_DIM // 2 if v["rotary"] == "partial" else HEAD_DIM
    # rotary tables [MAX_POS, rot]: half rotation repeats the frequencies
    # over the two halves, interleaved repeats each for its pair
    freqs = 1.0 / (10000 ** (np.arange(0, rot, 2) / rot))
    angles = np.outer(np.arange(MAX_POS), freqs)
    angles = np.repeat(angles, 2, axis=1) if v["rotary"] == "interleaved" else np.concatenate([angles, angles], 1)
    cos_table, sin_table = g.const(np.cos(angles)), g.const(np.sin(angles))
    cos = g.op("Unsqueeze", g.op("Gather", cos_table, "position_ids"), g.const([1], np.int64))  # [B, 1, S, rot]
    sin = g.op("Unsqueeze", g.op("Gather", sin_table, "position_ids"), g.const([1], np.int64))
    # masks from attention_mask [B, T]: padding and causal (query i at
    # position past + i sees keys 0..past + i)
    total = shape_part(g, "attention_mask", 1, 2)
    seq = shape_part(g, "input_ids", 1, 2)
    past = g.op("Sub", total, seq)
    rows = g.op("Range", g.op("Squeeze", past, g.const([0], np.int64)),
                g.op("Squeeze", total, g.const([0], np.int64)), g.const(1, np.int64))
    cols = g.op("Range", g.const(0, np.int64), g.op("Squeeze", total, g.const([0], np.int64)), g.const(1, np.int64))
    causal = g.op("LessOrEqual", g.op("Unsqueeze", cols, g.const([0], np.int64)),
                  g.op("Unsqueeze", rows, g.const([1], np.int64)))  # [S, T]
    padding = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=TensorProto.BOOL), g.const([1, 2], np.int64))
    keep = g.op("And", padding, causal)  # [B, 1, S, T]
    additive = g.op("Mul", g.op("Sub", g.const(1.0), g.op("Cast", keep, to=F32)), g.const(-1e9))
    x = g.op("Gather", g.weight(VOCAB, WIDTH, scale=1.0), "input_ids")
    heads_of = lambda t, h: g.op("Transpose", g.op("Reshape", t, g.const([0, 0, h, HEAD_DIM], np.int64)),  # noqa
                                 perm=[0, 2, 1, 3])
    inputs, outputs = [], []
    for layer in range(LAYERS):
        n = rms_norm(g, x)
        q = heads_of(g.op("MatMul", n, g.weight(WIDTH, HEADS * HEAD_DIM)), HEADS)
        k = heads_of(g.op("MatMul", n, g.weight(WIDTH, kv_heads * HEAD_DIM)), kv_heads)
        val = heads_of(g.op("MatMul", n, g.weight(WIDTH, kv_heads * HEAD_DIM)), kv_heads)
        q, k = rotary(g, q, cos, sin, v["rotary"]), rotary(g, k, cos, sin, v["rotary"])
        caches = []
        for kind, new in (("key", k), ("value", val)):
            past_name, present = f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}"
            g.nodes.append(helper.make_node("Concat", [past_name, new], [present], name=f"cache_{layer}_{kind}", axis=2))
            inputs.append(helper.make_tensor_value_info(past_name, F32, ["batch", kv_heads, "past", HEAD_DIM]))
            outputs.append(helper.make_tensor_value_info(present, F32, ["batch", kv_heads, "total", HEAD_DIM]))
            caches.append(present)
        k_all, v_all = (repeat_kv(g, c, kv_heads, v["kv"]) for c in caches)
        if v["k"] == "one":
            kt = g.op("Transpose", k_all, perm=[0, 1, 3, 2])
        else:  # [B, H, T, D] -> [B, T, H, D] -> [B, H, D, T]
            kt = g.op("Transpose", g.op("Transpose", k_all, perm=[0, 2, 1, 3]), perm=[0, 2, 3, 1])
        d = float(HEAD_DIM)
        if v["scale"] == "q":
            q = g.op("Mul", q, g.const(d ** -0.5))
        elif v["scale"] == "qk":
            q, kt = g.op("Mul", q, g.const(d ** -0.25)), g.op("Mul", kt, g.const(d ** -0.25))
        s = g.op("MatMul", q, kt)
        if v["scale"] == "div":
            s = g.op("Div", s, g.const(d ** 0.5))
        elif v["scale"] == "mul":
            s = g.op("Mul", s, g.const(d ** -0.5))
        if v["mask"] == "add":
            s = g.op("Add", s, additive)
        elif v["mask"] == "where":
            s = g.op("Where", keep, s, g.const(-np.inf))
        else:
            s = g.op("Where", g.op("Not", keep), g.const(-np.inf), s)
        a = g.op("MatMul", g.op("Softmax", s, axis=-1), v_all)
        a = g.op("Reshape", g.op("Transpose", a, perm=[0, 2, 1, 3]), g.const([0, 0, HEADS * HEAD_DIM], np.int64))
        x = g.op("Add", x, g.op("MatMul", a, g.weight(HEADS * HEAD_DIM, WIDTH)))
        n = rms_norm(g, x)
        gate = g.op("MatMul", n, g.weight(WIDTH, 2 * WIDTH))
        up = g.op("MatMul", n, g.weight(WIDTH, 2 * WIDTH))
        silu = g.op("Mul", gate, g.op("Sigmoid", gate))
        x = g.op("Add", x, g.op("MatMul", g.op("Mul", silu, up), g.weight(2 * WIDTH, WIDTH)))
    g.nodes.append(helper.make_node("MatMul", [rms_norm(g, x), g.weight(WIDTH, VOCAB, scale=1.0)], ["logits"],
                                    name="lm_head"))
    graph = helper.make_graph(
        g.nodes, "decoder",
        [helper.make_tensor_value_info("input_ids", I64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", I64, ["batch", "total"]),
         helper.make_tensor_value_info("position_ids", I64, ["batch", "seq"])] + inputs,
        [helper.make_tensor_value_info("logits", F32, ["batch", "seq", VOCAB])] + outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    with open(path[:-len(".onnx")] + ".config.json", "w") as f:
        json.dump({"max_position_embeddings": MAX_POS, "eos_token_id": VOCAB + 1}, f)  # no eos: 8 tokens each
    return kv_heads


def onnxruntime_greedy(path, prompt, kv_heads):
    """The export run step by step by onnxruntime, one token a step, its cache
    passed back in: \\returns NEW_TOKENS greedy tokens after `prompt`."""
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    cache = {f"past_key_values.{i}.{k}": np.zeros((1, kv_heads, 0, HEAD_DIM), np.float32)
             for i in range(LAYERS) for k in ("key", "value")}
    tokens, out = list(prompt), []
    for pos in range(len(prompt) + NEW_TOKENS - 1):
        feed = dict(cache)
        feed["input_ids"] = np.array([[tokens[pos]]], np.int64)
        feed["attention_mask"] = np.ones((1, pos + 1), np.int64)
        feed["position_ids"] = np.array([[pos]], np.int64)
        names = [o.name for o in sess.get_outputs()]
        results = dict(zip(names, sess.run(names, feed)))
        for name in cache:
            cache[name] = results["present." + name[len("past_key_values."):]]
        if pos >= len(prompt) - 1:
            t = int(np.argmax(results["logits"][0, -1]))
            out.append(t)
            tokens.append(t)
    return out


def run_variant(suite, tools, name, changes, seed):
    v = dict(BASE, **changes)
    work = suite.tempdir("attn")
    try:
        model = os.path.join(work, "decoder.onnx")
        kv_heads = build(model, v, seed)
        want = {i: onnxruntime_greedy(model, p, kv_heads) for i, p in enumerate(PROMPTS)}
        meshes = [("gpus1", ["--gpus", "1"]), ("tp2", ["--gpus", "2", "--strategy", "tp=2"])]
        if e2e.sanitizer_subset() and name != VARIANTS[0][0]:
            meshes = meshes[:1]  # under the sanitizers, tp=2 for the base form only (see main)
        for mesh, args in meshes:
            case = f"{name} {mesh}"
            bundle = os.path.join(work, f"{mesh}.pcc")
            r = tools.run("pcc", [model, "--batch", "2", "--max-context", CONTEXT, "-o", bundle, "--quiet"] + args)
            if not suite.check(f"{case}: compiles", r.returncode == 0, r.describe()):
                continue
            rep = tools.run("pcc-report", [bundle, "--format", "json"])
            doc = json.loads(rep.stdout) if rep.returncode == 0 else {}
            # recognize counts each Attention it makes (report.json fusion.patterns)
            found = doc.get("fusion", {}).get("patterns", {}).get("Attention")
            suite.check(f"{case}: both layers' attention recognized as Attention", found == LAYERS,
                        f"  {found} recognized\n" + rep.describe(800))
            why = tg.cache_stays(bundle, 2 * LAYERS)
            suite.check(f"{case}: the cache stays on its ranks, written in place", not why, why)
            if mesh == "tp2":
                split = [t for t in doc.get("tensor_parallel", []) if t.startswith("Attention ")]
                suite.check(f"{case}: each attention splits by its heads", len(split) == LAYERS,
                            f"  {doc.get('tensor_parallel')}\n" + rep.describe(800))
                comm = doc["ranks"][0].get("comm_count", {}) if doc.get("ranks") else {}
                print(f"  {case}: rank 0 collectives {comm}")
                suite.check(f"{case}: two all-reduces a layer, as Megatron's plan, and no other collective in the "
                            "layers", comm.get("all_reduce") == 2 * LAYERS and not set(comm) - {"all_reduce", "all_gather"}
                            and comm.get("all_gather", 0) <= 4, f"  {comm}")
                pieces = tg.cache_pieces(bundle)
                suite.check(f"{case}: the cache is split over the 2 tp ranks", len(pieces) == 2,
                            f"  pieces at {sorted(pieces)}")
            run_args = [bundle, "--generate", NEW_TOKENS, "--check"]
            for p in PROMPTS:
                run_args += ["--prompt-ids", ",".join(map(str, p))]
            r = tools.run("pcc-run", run_args)
            if not suite.check(f"{case}: every step matches the export's own decode step",
                               r.returncode == 0 and "check: " in r.stdout, r.describe()):
                continue
            got = tg.tokens_of(r.stdout)
            suite.check(f"{case}: greedy tokens equal onnxruntime's, run step by step", got == want,
                        f"  got  {got}\n  want {want}")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("e2e_attention_variants", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools):
        if e2e.sanitizer_subset():
            print(f"{e2e.SUBSET_VARIABLE}=sanitize: tp=2 for the base form only ({len(VARIANTS) - 1} tp=2 cases "
                  "left out; `make test` runs them)", flush=True)
        for i, (name, changes) in enumerate(VARIANTS):
            suite.run_case(name, run_variant, suite, tools, name, changes, 100 + i)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
