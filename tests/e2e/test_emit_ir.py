#!/usr/bin/env python3
"""`pcc --emit ir|report|json` prints the partitioned program: data parallelism
shards the batch of the input; a forced tensor parallelism splits every weight
matrix of the MLP in two (the search chooses along which dimension) and
combines the pieces with collectives over the tp group."""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MLP = e2e.model_path("mlp.onnx")


def lines_with(text, *needles):
    return [line for line in text.splitlines() if all(n in line for n in needles)]


def dp_ir(suite, tools):
    r = tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "--emit", "ir"])
    if not suite.check("dp: --emit ir exits 0", r.returncode == 0 and r.stdout.strip(),
                       r.describe()):
        return
    suite.check("dp: input %x is sharded #shard<[dp,-]>",
                bool(lines_with(r.stdout, "%x", "#shard<[dp,-]>")), r.describe())
    suite.check("dp: no collective on the forward path", "AllReduce" not in r.stdout,
                r.describe())
    ranks = rank_programs(r.stdout)
    suite.check("dp: a program per rank", sorted(ranks) == ["0", "1"],
                f"  rank programs printed: {sorted(ranks)}\n" + r.describe())
    for k, text in ranks.items():
        suite.check(f"dp: rank {k} takes half the batch, f32[2,64]", bool(lines_with(text, "%x: f32[2,64]")), text)
        suite.check(f"dp: rank {k} keeps whole weights, fc1.weight f32[256,64]",
                    bool(lines_with(text, "%fc1.weight: f32[256,64]")), text)


def tp_ir(suite, tools):
    r = tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "--strategy", "tp=2", "--emit", "ir"])
    if not suite.check("tp: --emit ir exits 0", r.returncode == 0 and r.stdout.strip(),
                       r.describe()):
        return
    out = r.stdout
    suite.check("tp: the printed IR annotates tp splits", "tp]>" in out or "tp," in out, r.describe())
    ranks = rank_programs(out)
    suite.check("tp: a program per rank", sorted(ranks) == ["0", "1"],
                f"  rank programs printed: {sorted(ranks)}\n" + r.describe())
    for k, text in ranks.items():
        check_rank(suite, f"tp: rank {k}", text, batch=4, tp_coord=int(k) % 2)


WEIGHTS = {"fc1.weight": (256, 64), "fc2.weight": (256, 128), "fc3.weight": (128, 16)}


def check_rank(suite, what, text, batch, tp_coord):
    """One rank's program of the MLP under tp=2: half of each weight matrix
    (along whichever dimension the search chose), its share of the batch,
    collectives over the tp group of 2 only, and the output: whole from the
    tp group's first rank (the others return nothing), or one piece per rank."""
    suite.check(f"{what}: input is f32[{batch},64]", bool(lines_with(text, "%x: f32[" + f"{batch},64]")),
                text)
    for name, (rows, cols) in WEIGHTS.items():
        halves = (f"%{name}: f32[{rows // 2},{cols}]", f"%{name}: f32[{rows},{cols // 2}]")
        suite.check(f"{what}: {name} is a half of [{rows},{cols}]",
                    any(lines_with(text, h) for h in halves), text)
    collectives = [ln for ln in text.splitlines() if re.search(r"= (AllReduce|AllGather|ReduceScatter)\(", ln)]
    suite.check(f"{what}: the pieces are combined by collectives over the tp group of 2",
                collectives and all('axis = "tp"' in ln and "group_size = 2" in ln for ln in collectives),
                "\n".join(collectives) + "\n" + text)
    whole = bool(re.search(r"-> \(%\S+: f32\[" + f"{batch},16" + r"\]\)", text))
    piece = bool(re.search(r"-> \(%\S+: f32\[" + f"({batch},8|{batch // 2 if batch > 1 else 1},16)" + r"\]\)", text))
    silent = bool(lines_with(text, "-> ()"))
    suite.check(f"{what}: returns the output whole if it is its tp group's first rank (else nothing), or a piece",
                piece or (whole if tp_coord == 0 else silent), text)


def dp_tp_ir(suite, tools):
    """dp=2,tp=2 on 4 ranks: every rank takes half the batch and half of each
    split weight."""
    r = tools.run("pcc", [MLP, "--batch", 4, "--gpus", 4, "--strategy", "dp=2,tp=2", "--emit", "ir"])
    if not suite.check("dp,tp: --emit ir exits 0", r.returncode == 0 and r.stdout.strip(), r.describe()):
        return
    ranks = rank_programs(r.stdout)
    suite.check("dp,tp: a program per rank", sorted(ranks) == ["0", "1", "2", "3"],
                f"  rank programs printed: {sorted(ranks)}\n" + r.describe())
    for k, text in sorted(ranks.items()):
        check_rank(suite, f"dp,tp: rank {k}", text, batch=2, tp_coord=int(k) % 2)


def rank_programs(ir):
    """\returns {rank: text} of the `// rank K program` sections of --emit ir."""
    sections, current = {}, None
    for line in ir.splitlines():
        m = re.match(r"//\s*rank\s+(\d+)", line)
        if m:
            current = m.group(1)
            sections[current] = ""
        elif line.startswith("//"):
            current = None
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def other_emits(suite, tools):
    r = tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "--emit", "report"])
    suite.check("--emit report names rank 0 and rank 1",
                r.returncode == 0 and "rank 0" in r.stdout.lower()
                and "rank 1" in r.stdout.lower(), r.describe())
    r = tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "--emit", "json"])
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        doc = None
        err = str(e)
    suite.check("--emit json prints one JSON document", r.returncode == 0 and doc is not None,
                ("" if doc is not None else f"  {err}\n") + r.describe())
    r = tools.run("pcc", [MLP, "--batch", 4, "--emit", "bogus"])
    suite.check("--emit bogus exits 2", r.returncode == 2, r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_emit_ir", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, needed=("pcc",)):
        suite.run_case("dp", dp_ir, suite, tools)
        suite.run_case("tp", tp_ir, suite, tools)
        suite.run_case("dp,tp", dp_tp_ir, suite, tools)
        suite.run_case("emit", other_emits, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
