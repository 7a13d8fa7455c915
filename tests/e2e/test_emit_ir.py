#!/usr/bin/env python3
"""`pcc --emit ir|report|json` prints the partitioned program: data parallelism
shards the batch of the input; tensor parallelism splits the MLP's matmuls by
column then by row and sums the partial results with an AllReduce."""

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


def tp_ir(suite, tools):
    r = tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "--strategy", "tp=2", "--emit", "ir"])
    if not suite.check("tp: --emit ir exits 0", r.returncode == 0 and r.stdout.strip(),
                       r.describe()):
        return
    out = r.stdout
    # fc1 is a Gemm with transB=1: its weight [256,64] is split by output column,
    # which is dimension 0; the activation after it is split on its last dimension.
    suite.check("tp: fc1.weight column-split #shard<[tp,-]>",
                bool(lines_with(out, "fc1.weight", "#shard<[tp,-]>")), r.describe())
    suite.check("tp: hidden activation split #shard<[-,tp]>", "#shard<[-,tp]>" in out,
                r.describe())
    # fc2 is a MatMul: its weight [256,128] is split by input row, dimension 0.
    suite.check("tp: fc2.weight row-split #shard<[tp,-]>",
                bool(lines_with(out, "fc2.weight", "#shard<[tp,-]>")), r.describe())
    suite.check("tp: fc2's product is a partial sum #shard<[-,-] partial(tp)>",
                bool(lines_with(out, "MatMul(", "partial(tp)")), r.describe())
    ranks = rank_programs(out)
    suite.check("tp: a program per rank", sorted(ranks) == ["0", "1"] or sorted(ranks) == ["0"],
                f"  rank programs printed: {sorted(ranks)}\n" + r.describe())
    for k, text in ranks.items():
        n = text.count("AllReduce(")
        suite.check(f"tp: rank {k} program has exactly one AllReduce", n == 1,
                    f"  {n} AllReduce\n" + r.describe())


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
        suite.run_case("emit", other_emits, suite, tools)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
