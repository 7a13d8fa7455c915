#!/usr/bin/env python3
"""Generation plans (docs/generation.md): every decoder export committed in
models/exported/decoders/ (tiny LLaMA with grouped-query attention, GPT-2 and
Qwen2, each from both PyTorch exporters) is compiled with its KV cache as rank
state and generates 32 new tokens from two prompts of different lengths in one
batch. The greedy tokens must equal those `transformers`' own `generate`
produced when the exports were made (manifest.json), and every step's logits
must match the export's own decode step run by the reference evaluator with its
past and present tensors (`pcc-run --check`). Meshes: --gpus 1, tp=2 (the two
kv heads split), tp=4 (fewer kv heads than ranks: replicated), pp=2, dp=2 (one
sequence per replica, one prefill program only), tp=2,pp=2 (with a prefill
program shorter than the prompts). Each plan carries prefill programs
partitioned as its decode step, for --max-prompt tokens and for half and a
quarter as many; the shortest that holds the prompts writes them in one run,
its weights the decode step's (at --gpus 1 the first prompt alone takes a
shorter program than both, with the same tokens); at
--gpus 1 and tp=2 the prompts also go through the decode step
(--no-prefill), with the same tokens. Each plan is also read back: its cache
lives in state bindings written in place by TensorScatter, and no collective,
send or receive touches a cache buffer (the cache never moves between ranks
or steps); the communicators' byte counts per decode step equal what the
plan's collectives and transfers move. At tp=2,pp=2 (and the builder model at
tp=2) the ranks also generate as processes, one pcc-run per rank meeting
through a directory: the same tokens, the same check and byte counts, and
(sampling) the same tokens as the ranks as threads.
"""

import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

DECODERS = os.path.join(e2e.MODELS_DIR, "exported", "decoders")
MAX_CONTEXT = 64
NEW_TOKENS = 32

# (name, pcc arguments): the meshes every export runs at, and those only the
# first export of each family runs at (the partitioner's cases; the exporters
# differ only before it).
MESHES = [("gpus1", ["--gpus", "1"]), ("tp2", ["--gpus", "2", "--strategy", "tp=2"])]
MORE_MESHES = [("tp4", ["--gpus", "4", "--strategy", "tp=4"]),
               ("pp2", ["--gpus", "2", "--strategy", "pp=2"]),
               # one prefill program, for --max-prompt tokens (the default adds shorter ones)
               ("dp2", ["--gpus", "2", "--strategy", "dp=2", "--prefill-programs", "1"]),
               # a prefill program shorter than the prompts: they go on through the decode step
               ("tp2pp2", ["--gpus", "4", "--strategy", "tp=2,pp=2", "--max-prompt", "3"])]
DEFAULT_MAX_PROMPT = MAX_CONTEXT // 2  # min(256, max_context / 2)


def prefill_lengths(args):
    """\returns the prompt tokens of the prefill programs pcc compiles with
    `args`, ascending: --max-prompt's, then half of the one before while at
    least 8, --prefill-programs in all (default 3)."""
    longest = int(args[args.index("--max-prompt") + 1]) if "--max-prompt" in args else DEFAULT_MAX_PROMPT
    programs = int(args[args.index("--prefill-programs") + 1]) if "--prefill-programs" in args else 3
    lengths = [longest]
    while len(lengths) < programs and lengths[-1] // 2 >= 8:
        lengths.append(lengths[-1] // 2)
    return lengths[::-1]


def prefill_ran(args, prompts):
    """\returns the prompt tokens of the prefill program a run on `prompts`
    takes: the shortest that holds the longest prompt, else the longest."""
    lengths = prefill_lengths(args)
    longest = max(len(p) for p in prompts)
    return next((n for n in lengths if n >= longest), lengths[-1])

KERNEL, ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, SEND, RECV, FREE, REGION, LAUNCH, ALL_TO_ALL = range(10)
MOVES = {ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, SEND, RECV, ALL_TO_ALL}


def tokens_of(stdout):
    """\\returns {sequence: [ids]} from pcc-run's `tokens[i]: ...` lines."""
    out = {}
    for m in re.finditer(r"^tokens\[(\d+)\]:((?: \d+)*)$", stdout, re.M):
        out[int(m.group(1))] = [int(t) for t in m.group(2).split()]
    return out


def cache_stays(bundle, states):
    """\\returns "" when every rank's cache pieces are written only in place by
    TensorScatter and never read or written by a collective or transfer, else why not."""
    progs, _ = e2e.read_programs(bundle)
    seen = set()
    for p in progs:
        ids = {}
        for sb in p["states"]:
            ids[sb["buffer"]] = sb
            ids[sb["out_buffer"]] = sb
            seen.add(sb["state"])
        for sb in p["states"]:
            writers = [i for i in p["instructions"] if sb["out_buffer"] in i["outputs"]]
            if len(writers) != 1 or writers[0]["op"] != "TensorScatter" or writers[0]["inputs"][:1] != [sb["buffer"]]:
                return f"rank {p['rank']}: state {sb['state']} is not written in place by one TensorScatter: {writers}"
        for i in p["instructions"]:
            if i["kind"] in MOVES and any(b in ids for b in i["inputs"] + i["outputs"]):
                return f"rank {p['rank']}: instruction {i} moves a cache buffer"
    if seen != set(range(states)):
        return f"the ranks hold states {sorted(seen)}, the model has {states}"
    return ""


def cache_pieces(bundle):
    """\returns the distinct start offsets of state 0's pieces over the ranks."""
    progs, _ = e2e.read_programs(bundle)
    return {tuple(sb["offsets"]) for p in progs for sb in p["states"] if sb["state"] == 0}


SAMPLING = ["--temperature", "0.8", "--top-k", "40", "--top-p", "0.95", "--seed", "7", "--ignore-eos"]


def estimate_wrong(rep, batch):
    """\returns why report.json's decode estimate disagrees with its own ranks
    (docs/generation.md#estimates), or "" when it agrees."""
    e = rep.get("generation", {}).get("estimate")
    if not e:
        return f"  no generation.estimate in {rep.get('generation')}"
    busiest, floor = {}, {}
    for rk in rep["ranks"]:
        b = rk["weight_bytes"] + rk["state_bytes"]
        busiest[rk["stage"]] = max(busiest.get(rk["stage"], 0), b)
    roofline = sum(busiest.values()) / e["memory_bandwidth"] * 1e3 if e["memory_bandwidth"] > 0 else -1
    problems = []
    if not e["step_ms"] > 0 or abs(e["tokens_per_second"] - batch / (e["step_ms"] / 1e3)) > 1e-6 * e["tokens_per_second"]:
        problems.append(f"tokens/s {e['tokens_per_second']} is not {batch} / {e['step_ms']} ms")
    if e["bytes_per_step"] != max(busiest.values()):
        problems.append(f"bytes per step {e['bytes_per_step']}, the busiest rank reads {max(busiest.values())}")
    if abs(e["roofline_ms"] - roofline) > 1e-9 + 1e-6 * roofline:
        problems.append(f"floor {e['roofline_ms']} ms, the stages' busiest ranks give {roofline} ms")
    if not 0 <= e["comm_ms"] <= e["step_ms"]:
        problems.append(f"collectives {e['comm_ms']} ms of a {e['step_ms']} ms step")
    return "\n".join("  " + p for p in problems) + (f"\n  {e}" if problems else "")


COMM_LINE = (r"^communication: (\d+) bytes per decode step on all ranks \(the plan's collectives and "
             r"transfers: (\d+)\)$")


def as_processes(suite, case, tools, bundle, run_args, want, work, sampled, mesh):
    """The same generation with one pcc-run process per rank: rank 0 chooses
    each step's tokens and tells the others; it alone prints."""
    world = len(e2e.read_programs(bundle)[0])
    extra = [str(a) for a in run_args[1:]]
    results = e2e.run_ranks(tools, bundle, world, os.path.join(work, "rdzv-greedy"), "greedy", extra)
    detail = "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent(o + e)}" for i, (rc, o, e) in enumerate(results))
    if not suite.check(f"{case}: as {world} processes: every rank exits 0", all(rc == 0 for rc, _, _ in results),
                       detail):
        return
    out0 = results[0][1]
    m = re.search(COMM_LINE, out0, re.M)
    suite.check(f"{case}: as {world} processes: transformers' tokens, every step matching the export's, the "
                "communicators moving the plan's bytes", tokens_of(out0) == want and "check: " in out0
                and m is not None and m.group(1) == m.group(2) and int(m.group(1)) > 0, detail)
    suite.check(f"{case}: as {world} processes: the other ranks stay quiet",
                all(o.strip() == "" for _, o, _ in results[1:]), detail)
    # (The sanitizer subset leaves the sampled run out: the greedy one covers the processes' code.)
    if sampled is not None and mesh in sampled and not e2e.sanitizer_subset():
        plain = [a for a in extra if a != "--check"] + SAMPLING
        results = e2e.run_ranks(tools, bundle, world, os.path.join(work, "rdzv-sampled"), "sampled", plain)
        detail = "\n".join(f"  rank {i}: exit {rc}\n{e2e.indent(o + e)}" for i, (rc, o, e) in enumerate(results))
        suite.check(f"{case}: as {world} processes: sampling with --seed 7 gives the threads' tokens",
                    all(rc == 0 for rc, _, _ in results) and tokens_of(results[0][1]) == sampled[mesh],
                    f"  threads: {sampled[mesh]}\n{detail}")


def run_case(suite, tools, family, info, export, mesh, args, sampled=None):
    case = f"{family}.{export['exporter']} {mesh}"
    work = suite.tempdir("generate")
    try:
        bundle = os.path.join(work, "plan.pcc")
        model = os.path.join(DECODERS, export["file"])
        r = tools.run("pcc", [model, "--batch", "2", "--max-context", MAX_CONTEXT, "-o", bundle] + args)
        if not suite.check(f"{case}: compiles", r.returncode == 0, r.describe()):
            return
        states = 2 * info["config"]["num_layers"]
        why = cache_stays(bundle, states)
        suite.check(f"{case}: the cache stays on its ranks", not why, why)
        # Split over tp when the kv heads (or the 2 sequences) divide by it:
        # each tp rank holds its own piece; else whole on every rank.
        tp = int(args[args.index("--strategy") + 1].split("tp=")[1].split(",")[0]) if "tp=" in " ".join(args) else 1
        if tp > 1:
            cfg = info["config"]
            divides = cfg["num_kv_heads"] % tp == 0 or 2 % tp == 0
            pieces = cache_pieces(bundle)
            suite.check(f"{case}: the cache is {'split over' if divides else 'whole on each of'} the {tp} tp ranks",
                        (len(pieces) == tp) if divides else (pieces == {(0, 0, 0, 0)}), f"  pieces at {sorted(pieces)}")
        # The report counts the cache: all of it, and each rank's piece.
        cfg = info["config"]
        whole = 2 * cfg["num_layers"] * 2 * cfg["num_kv_heads"] * MAX_CONTEXT * cfg["head_dim"] * 4
        r = tools.run("pcc-report", [bundle, "--format", "json"])
        if suite.check(f"{case}: pcc-report reads the plan", r.returncode == 0, r.describe()):
            rep = json.loads(r.stdout)
            per_rank = [rk["state_bytes"] for rk in rep["ranks"]]
            if mesh == "gpus1":
                want = [whole]
            elif mesh in ("tp2", "dp2"):
                want = [whole // 2] * 2  # split over the two ranks
            elif mesh == "pp2":
                want = [whole // 2] * 2  # one layer's caches per stage
            else:
                want = per_rank if all(0 < b <= whole for b in per_rank) else None
            gen = rep.get("generation", {})
            suite.check(f"{case}: the plan carries the context and the end-of-sequence id of the config beside "
                        "the model", gen.get("max_context") == MAX_CONTEXT and
                        gen.get("eos_token_ids") == [cfg["eos_token_id"]], f"  generation {gen}")
            suite.check(f"{case}: the report counts the KV cache ({whole} bytes; per rank {per_rank})",
                        rep.get("generation", {}).get("state_bytes") == whole and per_rank == want,
                        f"  generation {rep.get('generation')}\n  ranks {per_rank}, want {want}")
            if mesh == "tp2":
                # Megatron's plan: each layer's attention (split by kv heads)
                # and MLP end in one all-reduce each; one all-gather for the
                # embedding or the logits.
                comm = [rk.get("comm_count", {}) for rk in rep["ranks"]]
                megatron = all(c.get("all_reduce") == 2 * cfg["num_layers"] and c.get("all_gather", 0) <= 2
                               and not set(c) - {"all_reduce", "all_gather"} for c in comm)
                suite.check(f"{case}: each layer communicates two all-reduces (Megatron's plan)", megatron,
                            f"  {comm}")
            # The prefill program: partitioned as the decode step, its weights the decode step's.
            pre = gen.get("prefill")
            lengths = prefill_lengths(args)
            weights = sum(rk["weight_bytes"] for rk in rep["ranks"])
            suite.check(f"{case}: prefill programs for {lengths} prompt tokens, their weights shared with the "
                        "decode step (at most 5% of their own: constants folded at the prompt's shapes), their "
                        "logits the last prompt position's only",
                        pre is not None and pre["max_prompt"] == lengths[-1] and pre["estimate_ms"] > 0
                        and [s["max_prompt"] for s in pre["shorter"]] == lengths[:-1]
                        and all(s["estimate_ms"] > 0 for s in pre["shorter"])
                        # the vocabulary's product on each sequence's last prompt position only
                        and pre["logits_last_only"] is True
                        and 0 <= pre["extra_weight_bytes"] <= 0.05 * weights,
                        f"  prefill {pre}, decode weights {weights} bytes\n  notes {rep.get('notes')}")
            why = estimate_wrong(rep, batch=2)
            suite.check(f"{case}: the decode estimate: tokens/s from the step time, the memory-bound floor from "
                        "each stage's busiest rank", not why, why)
        run_args = [bundle, "--generate", NEW_TOKENS, "--check"]
        for p in info["prompts"]:
            run_args += ["--prompt-ids", ",".join(str(t) for t in p)]
        r = tools.run("pcc-run", run_args)
        if not suite.check(f"{case}: generates, every step's logits match the export's", r.returncode == 0 and
                           "check: " in r.stdout, r.describe()):
            return
        got = tokens_of(r.stdout)
        want = {i: g for i, g in enumerate(info["generated"])}
        suite.check(f"{case}: greedy tokens equal transformers' generate", got == want,
                    f"  got  {got}\n  want {want}\n" + r.describe(1500))
        # The communicators' traffic per decode step is exactly what the plan's collectives and
        # transfers move, whose buffers are no cache (cache_stays above): no cache byte moves.
        m = re.search(COMM_LINE, r.stdout, re.M)
        suite.check(f"{case}: the communicators move per decode step exactly the plan's collective bytes "
                    f"({m.group(2) if m else '?'})", m is not None and m.group(1) == m.group(2)
                    and (mesh != "gpus1" or m.group(1) == "0"), r.describe(1500))
        ran = prefill_ran(args, info["prompts"])
        written = sum(min(len(p), ran) for p in info["prompts"])
        suite.check(f"{case}: the prefill program for {ran} tokens (the shortest holding the prompts) wrote "
                    f"{written} prompt tokens in one run",
                    f"the prefill program for {ran} tokens wrote {written} prompt tokens in 1 run" in r.stdout,
                    r.describe(1500))
        if mesh == "gpus1" and prefill_ran(args, info["prompts"][:1]) != ran:
            # The first prompt alone takes a shorter prefill program: its tokens are the same.
            one = run_args[:run_args.index("--prompt-ids")] + ["--prompt-ids", ",".join(map(str, info["prompts"][0]))]
            r = tools.run("pcc-run", one)
            short = prefill_ran(args, info["prompts"][:1])
            suite.check(f"{case}: the first prompt alone: the prefill program for {short} tokens, the same "
                        "tokens, every step matching the export's",
                        r.returncode == 0 and tokens_of(r.stdout) == {0: want[0]} and
                        f"the prefill program for {short} tokens wrote" in r.stdout, r.describe(1500))
        if mesh in ("gpus1", "tp2"):
            # The same tokens with the prompts fed through the decode step, one token per run.
            r = tools.run("pcc-run", run_args + ["--no-prefill"])
            suite.check(f"{case}: --no-prefill: the same tokens, every step matching the export's",
                        r.returncode == 0 and tokens_of(r.stdout) == want and "one token per step" in r.stdout,
                        r.describe(1500))
        if mesh == "tp2":
            # An untimed generation first leaves the cache written: the timed one must not read it.
            r = tools.run("pcc-run", run_args + ["--warmup", "1"])
            suite.check(f"{case}: --warmup 1: the same tokens, every step matching the export's",
                        r.returncode == 0 and tokens_of(r.stdout) == want, r.describe(1500))
        if sampled is not None:
            # Sampling with a fixed seed: the same tokens at every mesh (compared in main).
            r = tools.run("pcc-run", run_args[:run_args.index("--check")] + run_args[run_args.index("--check") + 1:] +
                          SAMPLING)
            if suite.check(f"{case}: samples with a seed", r.returncode == 0, r.describe()):
                sampled[mesh] = tokens_of(r.stdout)
        if mesh == "tp2pp2" or (export["exporter"] == "genai" and mesh == "tp2"):
            as_processes(suite, case, tools, bundle, run_args, want, work, sampled, mesh)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def throughput_choice(suite, tools, family, info, export):
    """--objective throughput with no --batch: the sequences per step of the
    most estimated tokens/s that fit, each point's memory holding its cache."""
    model = os.path.join(DECODERS, export["file"])
    r = tools.run("pcc", [model, "--gpus", "1", "--objective", "throughput", "--max-context", MAX_CONTEXT,
                          "--emit", "json"])
    if not suite.check(f"{family}: --objective throughput compiles a generation plan", r.returncode == 0,
                       r.describe()):
        return
    doc = json.loads(r.stdout)
    b = doc.get("batch", {})
    curve = b.get("curve", [])
    batches = [p["batch"] for p in curve]
    if not suite.check(f"{family}: the sequences per step are pcc's choice over 1, 2, 4, ...",
                       b.get("automatic") is True and len(batches) > 1
                       and batches == [2 ** i for i in range(len(batches))], f"  {b}"):
        return
    best = None
    for p in (p for p in curve if p["feasible"]):  # a larger batch must be more than 1% faster
        if best is None or p["samples_per_second"] > best["samples_per_second"] * 1.01:
            best = p
    gen = doc.get("generation", {})
    suite.check(f"{family}: the plan decodes the batch of the most estimated tokens/s",
                best is not None and b["batch"] == best["batch"] == gen.get("batch"),
                f"  chosen {b['batch']}, generation batch {gen.get('batch')}, curve {curve}")
    cfg = info["config"]
    per_sequence = 2 * cfg["num_layers"] * cfg["num_kv_heads"] * MAX_CONTEXT * cfg["head_dim"] * 4
    grows = all(q["memory_bytes"] - p["memory_bytes"] >= per_sequence * (q["batch"] - p["batch"])
                for p, q in zip(curve, curve[1:]) if p["feasible"] and q["feasible"])
    suite.check(f"{family}: each point's memory holds its sequences' caches ({per_sequence} bytes a sequence)",
                grows, f"  {[(p['batch'], p['memory_bytes']) for p in curve]}")
    why = estimate_wrong(doc, batch=b["batch"])
    suite.check(f"{family}: the decode estimate at the chosen batch", not why, why)


def refusals(suite, tools):
    """Cache layouts pcc does not recognize exit 2 naming what is missing,
    never a silently wrong plan; --no-generation compiles the plain step."""
    import onnx
    from onnx import TensorProto, helper
    work = suite.tempdir("generate_bad")
    try:
        def decoder(name, present_nodes, extra_outputs=()):
            f = TensorProto.FLOAT
            ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])
            mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "t"])
            past = helper.make_tensor_value_info("past_key_values.0.key", f, ["b", 2, "p", 4])
            past_v = helper.make_tensor_value_info("past_key_values.0.value", f, ["b", 2, "p", 4])
            emb = helper.make_tensor("emb", f, [8, 8], [0.1 * i for i in range(64)])
            nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["h"]),
                     helper.make_node("Reshape", ["h", "shape"], ["new"]),
                     helper.make_node("ReduceSum", ["h"], ["logits"], keepdims=1)] + present_nodes
            shape = helper.make_tensor("shape", TensorProto.INT64, [4], [0, 2, -1, 4])
            outs = [helper.make_tensor_value_info("logits", f, None),
                    helper.make_tensor_value_info("present.0.key", f, None),
                    helper.make_tensor_value_info("present.0.value", f, None)] + \
                [helper.make_tensor_value_info(o, f, None) for o in extra_outputs]
            g = helper.make_graph(nodes, name, [ids, mask, past, past_v], outs, [emb, shape])
            path = os.path.join(work, name + ".onnx")
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
            return path

        ok_value = helper.make_node("Concat", ["past_key_values.0.value", "new"], ["present.0.value"], axis=2)
        cases = [
            ("past read twice", decoder("twice", [
                helper.make_node("Concat", ["past_key_values.0.key", "new"], ["present.0.key"], axis=2), ok_value,
                helper.make_node("Identity", ["past_key_values.0.key"], ["peek"])], ["peek"]),
             "the past is also read elsewhere"),
            ("new before past", decoder("swapped", [
                helper.make_node("Concat", ["new", "past_key_values.0.key"], ["present.0.key"], axis=2), ok_value]),
             "it is not a Concat of the past and one new tensor, in that order"),
            ("not a Concat", decoder("added", [
                helper.make_node("Add", ["past_key_values.0.key", "past_key_values.0.key"], ["present.0.key"]),
                ok_value]), "it is not a Concat"),
        ]
        for what, model, why in cases:
            r = tools.run("pcc", [model, "--max-context", "16", "-o", os.path.join(work, "x.pcc")])
            lines = [l for l in r.stderr.splitlines() if l.startswith("pcc: error")]
            suite.check(f"refused: {what}: exit 2, one line naming the present and why",
                        r.returncode == 2 and len(lines) == 1 and "present.0.key" in lines[0] and why in lines[0]
                        and "cache layout not recognized" in lines[0], r.describe())
        genai = os.path.join(DECODERS, "llama.genai", "model.onnx")
        # The builder model with what pcc does not import: exit 2 naming the node and the attribute.
        for attr, value, why in (("softcap", 30.0, "softcap"), ("local_window_size", 16, "sliding-window"),
                                 ("smooth_softmax", 1, "smooth_softmax")):
            folder = os.path.join(work, f"genai_{attr}")
            shutil.copytree(os.path.dirname(genai), folder)
            m = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
            node = next(n for n in m.graph.node if n.op_type == "GroupQueryAttention")
            for a in list(node.attribute):
                if a.name == attr:
                    node.attribute.remove(a)
            node.attribute.append(helper.make_attribute(attr, value))
            onnx.save(m, os.path.join(folder, "model.onnx"))
            r = tools.run("pcc", [os.path.join(folder, "model.onnx"), "--gpus", "2", "-o", os.path.join(work, "g.pcc")])
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            suite.check(f"refused: a GroupQueryAttention with {attr} = {value}: exit 2, one line naming the node and "
                        "what is not imported", r.returncode == 2 and len(lines) == 1 and node.name in lines[0]
                        and "GroupQueryAttention" in lines[0] and why in lines[0], r.describe())
        r = tools.run("pcc", [genai, "--max-context", "256", "-o", os.path.join(work, "g.pcc")])
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        suite.check("refused: a context longer than the builder model's rotary table (128): exit 2 naming the node",
                    r.returncode == 2 and len(lines) == 1 and "RotaryEmbedding" in lines[0]
                    and "128 positions" in lines[0] and "--max-context 256" in lines[0], r.describe())
        model = decoder("plain", [helper.make_node("Concat", ["past_key_values.0.key", "new"], ["present.0.key"],
                                                   axis=2), ok_value])
        r = tools.run("pcc", [model, "--no-generation", "--batch", "1", "--shape", "past_key_values.0.key=1x2x3x4",
                              "--shape", "past_key_values.0.value=1x2x3x4", "--shape", "input_ids=1x2",
                              "--shape", "attention_mask=1x5", "-o", os.path.join(work, "p.pcc")])
        suite.check("--no-generation compiles a decoder as its plain forward pass", r.returncode == 0 and
                    "generation:" not in r.stderr, r.describe())
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("e2e_generate", args)
    tools = e2e.Tools(args.bin)
    e2e.require_tools(suite, tools)
    suite.run_case("refusals", refusals, suite, tools)
    with open(os.path.join(DECODERS, "manifest.json")) as f:
        manifest = json.load(f)
    for family, info in sorted(manifest["models"].items()):
        exports = [e for _, e in sorted(info["exports"].items()) if e.get("ok")]
        suite.check(f"{family}: the manifest has both exports", len(exports) == 2, str(list(info["exports"])))
        exports = e2e.exporter_subset(exports, lambda e: e["file"])
        more = MORE_MESHES
        if e2e.sanitizer_subset():
            more = [m for m in MORE_MESHES if m[0] == "tp2pp2"]
            print(f"{e2e.SUBSET_VARIABLE}=sanitize: {family}: meshes tp4, pp2 and dp2 left out (tp2pp2 covers tp, pp "
                  "and a prefill shorter than the prompts; `make test` runs them); its ranks as processes sample "
                  "nothing (the greedy run covers them)", flush=True)
        if exports:
            suite.run_case(f"{family} throughput", throughput_choice, suite, tools, family, info, exports[0])
        for k, export in enumerate(exports):
            sampled = {} if k == 0 else None
            for mesh, margs in MESHES + (more if k == 0 else []):
                suite.run_case(f"{family}.{export['exporter']} {mesh}", run_case, suite, tools, family, info, export,
                               mesh, margs, sampled)
            if sampled is not None:
                first = sampled.get("gpus1")
                same = first is not None and len(sampled) == len(more) + len(MESHES) and \
                    all(t == first for t in sampled.values())
                greedy = {i: g for i, g in enumerate(info["generated"])}
                suite.check(f"{family}.{export['exporter']}: sampling with --seed 7 gives the same tokens at every mesh "
                            "(and not the greedy ones)", same and first != greedy,
                            "\n".join(f"  {m}: {t}" for m, t in sampled.items()))
    # onnxruntime-genai's builder model (GroupQueryAttention, SkipSimplifiedLayerNormalization, ... in
    # com.microsoft), built from the same random-weight LLaMA: transformers' tokens at --gpus 1 and tp=2.
    builder = {"file": os.path.join(manifest["genai"]["folder"], "model.onnx"), "exporter": "genai"}
    for mesh, margs in MESHES:
        suite.run_case(f"llama.genai {mesh}", run_case, suite, tools, "llama", manifest["models"]["llama"], builder,
                       mesh, margs)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
