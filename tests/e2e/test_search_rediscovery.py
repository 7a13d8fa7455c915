#!/usr/bin/env python3
"""The plans a parallelism expert would write, found by the search with no
model-specific code, on compile-only structures built with onnx.helper (fp16,
weights in a sparse external-data file, so no weight byte is stored or read):

- a LLaMA-13B-like model (40 layers, width 5120, FFN 13824, 40 heads) at
  batch 1, sequence 2048, `--gpus 8 --gpu h100`, latency objective: tensor
  parallelism over the 8 devices with every attention split by its heads, and
  no more communication than Megatron's two all-reduces of the residual
  stream a layer (a ring all-reduce moves twice what an all-gather of the same
  tensor moves). On time alone the search halves that: it runs each MLP on an
  eighth of the positions with whole weights (20 GB a rank, which fits), one
  all-gather a half layer. With `--strategy tp=8` (weight matrices first) it
  is Megatron's plan: every weight an eighth on each rank, and exactly the
  communication of two all-reduces a layer;
- a GPT-2-small-like model (12 layers, width 768) at batch 64, throughput
  objective, `--gpus 8`: pure data parallelism;
- a LLaMA-65B-like model (80 layers, width 8192, FFN 22016, 64 heads) at
  batch 16, sequence 512, `--gpus 8 --gpus-per-node 2 --gpu a100-40g`,
  throughput objective: no node (2 × 40 GB) holds its 130 GB of weights, so
  the plan has pipeline stages across the nodes, with micro-batches, and any
  tensor parallelism inside a node; every rank fits. On `--gpus 2` no plan
  fits: exit 2, naming the memory the smallest plan needs per device;
- the LLaMA-13B-like model's decode step with its KV cache (batch 1, context
  2048) on 8 H100s: tp=8 with the weights and the cache an eighth on each
  rank, and a time per token not under the memory-bound floor.
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
import pcc_e2e as e2e  # noqa: E402
import bench_compile_scale as bench  # noqa: E402

bench.STRUCTURES["llama13b"] = dict(kind="llama", layers=40, width=5120, ffn=13824, heads=40, vocab=32000,
                                    seq=2048, batch=1, gpu="h100")
bench.STRUCTURES["llama65b_b16"] = dict(kind="llama", layers=80, width=8192, ffn=22016, heads=64, vocab=32000,
                                        seq=512, batch=16, gpu="a100-40g")
bench.STRUCTURES["gpt2small_conv1d"] = dict(kind="gpt2", layers=12, width=768, ffn=3072, heads=12, vocab=50257,
                                            seq=1024, batch=8, gpu="h100", float32=True, conv1d=True)
bench.STRUCTURES["gpt2small"] = dict(kind="gpt2", layers=12, width=768, ffn=3072, heads=12, vocab=50257,
                                     seq=1024, batch=64, gpu="h100")


MODELS = {}


# Planning reads no weight: the pages inside every weight of 64 KiB or more
# are unreadable (runtime/support/mapped_file.h), so a read kills pcc.
NO_WEIGHT_READS = {"PCC_FORBID_WEIGHT_READS": "65536"}


def compile_json(suite, tools, name, work, gpus, objective, extra=()):
    """Plans `name` with the repeated layers folded (the default) and with
    every layer searched (--no-fold-repeats): both read no weight, and the
    folded plan is estimated no slower. \returns (the folded plan's report,
    the weight bytes)."""
    if name not in MODELS:
        MODELS[name] = bench.write_structure(os.path.join(work, name), name)
    path, weight_bytes, _, inputs = MODELS[name]
    c = bench.STRUCTURES[name]
    docs = []
    for fold in ([], ["--no-fold-repeats"]):
        r = tools.run("pcc", [path, "--gpus", gpus, "--gpu", c["gpu"], "--objective", objective, "--emit", "json",
                              "--quiet", *extra, *fold] + bench.shape_args(name, inputs, c["batch"]),
                      env=NO_WEIGHT_READS)
        if not suite.check(f"{name}: pcc --gpus {gpus} --objective {objective} {' '.join(extra + tuple(fold))} "
                           "--emit json, reading no weight", r.returncode == 0, r.describe()):
            return None, weight_bytes
        docs.append(json.loads(r.stdout))
    folded, full = docs
    suite.check(f"{name}: the plan with the repeated layers folded is estimated as fast as searching every layer "
                f"({folded['estimated_time_ms']:.4f} ms against {full['estimated_time_ms']:.4f} ms)",
                folded["estimated_time_ms"] <= full["estimated_time_ms"] * (1 + 1e-9), "")
    return folded, weight_bytes


def gpt2_conv1d(suite, tools, work):
    """A GPT-2-small-like structure in float32 whose fused QKV projection is a
    Gemm over the flattened positions (as Hugging Face's Conv1D exports): at
    tp=8 the partitioner splits each into one product per piece, taking views
    of the weight, not copies, so planning still reads no weight."""
    name = "gpt2small_conv1d"
    doc, weights = compile_json(suite, tools, name, work, 8, "latency", ("--strategy", "tp=8"))
    if doc is None:
        return
    suite.check(f"{name}: the 12 fused projections were split", any(
        "12 fused projections read by a Split were split" in n for n in doc["notes"]), f"  {doc['notes']}")
    suite.check(f"{name}: each rank holds an eighth of the weight matrices or less",
                all(rk["weight_bytes"] < weights / 4 for rk in doc["ranks"]),
                f"  {[rk['weight_bytes'] for rk in doc['ranks']]} of {weights}")


def stream_units(rank, stream, tp):
    """The rank's communication in units of the stream moved once by an
    all-gather: an all-reduce of the stream counts 2, an all-gather of its
    1/tp pieces 1, a reduce-scatter of the stream 1, an all-to-all of a
    tensor the size of the stream 1 (each device sends (tp-1)/tp of its input,
    as an all-gather sends (tp-1)/tp of its output); the report counts a
    collective's input bytes."""
    moved = rank.get("comm_bytes", {})
    return (2 * moved.get("all_reduce", 0) + tp * moved.get("all_gather", 0) + moved.get("reduce_scatter", 0)
            + moved.get("all_to_all", 0)) / stream


def llama(suite, tools, work):
    c = bench.STRUCTURES["llama13b"]
    stream = 1 * c["seq"] * c["width"] * 2  # the fp16 residual stream [1, 2048, 5120]
    megatron = 4 * c["layers"]
    doc, weights = compile_json(suite, tools, "llama13b", work, 8, "latency")
    if doc is None:
        return
    suite.check("llama13b: tensor parallelism over the 8 devices", doc["mesh"] == {"pp": 1, "dp": 1, "tp": 8},
                f"  mesh {doc['mesh']}, alternatives {doc['alternatives'][:3]}")
    heads = [t for t in doc["tensor_parallel"] if t.startswith("Attention ")]
    suite.check("llama13b: every layer's attention splits by its heads", len(heads) == c["layers"],
                f"  {len(heads)} Attention nodes split of {c['layers']}")
    for rank in doc["ranks"]:
        units = stream_units(rank, stream, 8)
        print(f"  time first, rank {rank['rank']}: {rank.get('comm_count')}, {units:.2f} stream units "
              f"(Megatron {megatron}), {rank['weight_bytes'] / 2**30:.1f} GiB of weights")
        suite.check(f"llama13b: rank {rank['rank']} communicates no more than Megatron's plan",
                    0 < units <= megatron + 2, f"  {units:.2f} units")
    doc, weights = compile_json(suite, tools, "llama13b", work, 8, "latency", ("--strategy", "tp=8"))
    if doc is None:
        return
    for rank in doc["ranks"]:
        k = rank["rank"]
        units = stream_units(rank, stream, 8)
        others = set(rank.get("comm_count", {})) - {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
        print(f"  --strategy tp=8, rank {k}: {rank.get('comm_count')}, {units:.2f} stream units")
        suite.check(f"llama13b --strategy tp=8: rank {k} holds an eighth of the weights",
                    weights / 8 * 0.99 <= rank["weight_bytes"] <= weights / 8 * 1.01,
                    f"  {rank['weight_bytes']} bytes of {weights}")
        suite.check(f"llama13b --strategy tp=8: rank {k} communicates what two all-reduces a layer do",
                    not others and abs(units - megatron) <= 2, f"  {units:.2f} units, Megatron's {megatron}")


def gpt2(suite, tools, work):
    doc, _ = compile_json(suite, tools, "gpt2small", work, 8, "throughput")
    if doc is None:
        return
    suite.check("gpt2small batch 64: pure data parallelism over the 8 devices",
                doc["mesh"] == {"pp": 1, "dp": 8, "tp": 1}, f"  mesh {doc['mesh']}")
    quiet = all(not r.get("comm_count") for r in doc["ranks"])
    suite.check("gpt2small batch 64: no collective on the forward path", quiet,
                f"  {[r.get('comm_count') for r in doc['ranks']]}")


def llama65b(suite, tools, work):
    name = "llama65b_b16"
    doc, weights = compile_json(suite, tools, name, work, 8, "throughput", ("--gpus-per-node", "2"))
    if doc is None:
        return
    mesh = doc["mesh"]
    print(f"  mesh {mesh}, pipeline {doc.get('pipeline')}, search {doc['search_time_ms']:.0f} ms")
    suite.check("llama65b: no node holds it, so the plan has pipeline stages", mesh["pp"] > 1, f"  mesh {mesh}")
    nodes = {r["rank"] // 2 for r in doc["ranks"]}
    suite.check("llama65b: the stages span nodes (each node holds 2 devices)", len(nodes) > 1,
                f"  mesh {mesh} on nodes {sorted(nodes)}")
    suite.check("llama65b: tensor parallelism kept inside a node", mesh["tp"] <= 2, f"  mesh {mesh}")
    mb = doc.get("pipeline", {}).get("microbatches", 1)
    suite.check("llama65b: micro-batches", mb > 1, f"  pipeline {doc.get('pipeline')}")
    cap = doc["device"]["memory_bytes"]
    worst = max(r["estimated_memory_bytes"] for r in doc["ranks"])
    suite.check("llama65b: every rank fits one a100-40g", 0 < worst <= cap,
                f"  {worst / 2**30:.1f} GiB of {cap / 2**30:.1f} GiB")
    stages = {r["stage"] for r in doc["ranks"]}
    suite.check("llama65b: every stage has ranks", stages == set(range(mesh["pp"])), f"  stages {sorted(stages)}")
    path, _, _, inputs = MODELS[name]
    c = bench.STRUCTURES[name]
    r = tools.run("pcc", [path, "--gpus", 2, "--gpu", c["gpu"], "--objective", "throughput", "--emit", "json",
                          "--quiet"] + bench.shape_args(name, inputs, c["batch"]))
    line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    suite.check("llama65b on 2 a100-40g: exit 2 with the memory the smallest plan needs",
                r.returncode == 2 and "GiB" in line and "needs" in line and "fits" in line, r.describe())


def llama13b_decode(suite, tools, work):
    """The decode step of LLaMA-13B with its KV cache (batch 1, context 2048)
    on 8 H100s: the search splits the weights and the cache by heads over the
    8 devices (each rank reads an eighth of both per token); the estimate is
    not under its memory-bound floor."""
    name = "llama13b_decode"
    if name not in MODELS:
        MODELS[name] = bench.write_structure(os.path.join(work, name), name)
    path, weights = MODELS[name][0], MODELS[name][1]
    c = bench.STRUCTURES[name]
    r = tools.run("pcc", [path, "--gpus", 8, "--gpu", "h100", "--batch", 1, "--max-context", 2048, "--emit", "json",
                          "--quiet"])
    if not suite.check(f"{name}: pcc --gpus 8 --max-context 2048 plans a generation plan", r.returncode == 0,
                       r.describe()):
        return
    doc = json.loads(r.stdout)
    gen = doc["generation"]
    e = gen["estimate"]
    head_dim = c["width"] // c["heads"]
    cache = 2 * c["layers"] * c["heads"] * 2048 * head_dim * 2  # fp16 keys and values, batch 1
    print(f"  mesh {doc['mesh']}: {e['step_ms']:.3f} ms per token ({e['tokens_per_second']:.0f} tokens/s), floor "
          f"{e['roofline_ms']:.3f} ms, collectives {e['comm_ms']:.3f} ms; cache {gen['state_bytes'] / 2**30:.2f} GiB, "
          f"per rank {[rk['state_bytes'] for rk in doc['ranks']]}")
    suite.check(f"{name}: tensor parallelism over the 8 devices", doc["mesh"] == {"pp": 1, "dp": 1, "tp": 8},
                f"  mesh {doc['mesh']}")
    # Each layer's written cache is live only until its attention reads it:
    # the tp search is exact (kept live to the end, the 80 caches multiplied
    # its states past the cap).
    suite.check(f"{name}: the tp search is exact", not any("capped" in n for n in doc["notes"]), f"  {doc['notes']}")
    comm = [rk.get("comm_count", {}) for rk in doc["ranks"]]
    suite.check(f"{name}: two all-reduces a layer (Megatron's plan), beside the embedding's and the logits'",
                all(c.get("all_reduce") == 2 * bench.STRUCTURES[name]["layers"] and c.get("all_gather", 0) <= 2
                    and not set(c) - {"all_reduce", "all_gather"} for c in comm), f"  {comm[0]}")
    suite.check(f"{name}: the cache is {cache} bytes, an eighth on each rank",
                gen["state_bytes"] == cache and all(rk["state_bytes"] == cache // 8 for rk in doc["ranks"]),
                f"  {gen['state_bytes']}, per rank {[rk['state_bytes'] for rk in doc['ranks']]}")
    suite.check(f"{name}: each rank holds an eighth of the weights",
                all(weights / 8 * 0.99 <= rk["weight_bytes"] <= weights / 8 * 1.01 for rk in doc["ranks"]),
                f"  {[rk['weight_bytes'] for rk in doc['ranks']]} of {weights}")
    floor = (weights + cache) / 8 / e["memory_bandwidth"] * 1e3
    suite.check(f"{name}: the floor is an eighth of the weights and cache over the bandwidth ({floor:.3f} ms)",
                abs(e["roofline_ms"] - floor) <= 0.01 * floor, f"  {e}")
    suite.check(f"{name}: the estimate is not under the floor, and the collectives are part of it",
                e["roofline_ms"] <= e["step_ms"] and 0 < e["comm_ms"] < e["step_ms"], f"  {e}")


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_search_rediscovery", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc",)):
        work = suite.tempdir("rediscovery")
        try:
            suite.run_case("LLaMA-13B at batch 1 on 8 H100s", llama, suite, tools, work)
            suite.run_case("GPT-2 small at batch 64, throughput", gpt2, suite, tools, work)
            suite.run_case("LLaMA-65B at batch 16 on 4 nodes of 2 A100-40GB", llama65b, suite, tools, work)
            suite.run_case("LLaMA-13B decode step on 8 H100s", llama13b_decode, suite, tools, work)
            suite.run_case("GPT-2 small with Conv1D projections at tp=8", gpt2_conv1d, suite, tools, work)
        finally:
            if not suite.keep:
                shutil.rmtree(work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
