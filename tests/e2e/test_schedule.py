#!/usr/bin/env python3
"""Overlap scheduling (passes/schedule.h), end to end.

Each plan is compiled twice, with the scheduler (the default) and with
`--no-schedule-overlap`, and read back (plan.pb, field numbers of
runtime/plan.proto):

- every rank of every group issues the group's collectives in one order
  (same kinds, dims and shapes), and each rank issues its collectives in the
  order of the unscheduled plan: the ranks still match;
- no instruction reads a buffer before one writes it, and no instruction
  between an all-gather, reduce-scatter or all-to-all and the first reader of
  its output writes over the collective's input in the arena (the memory
  plan keeps it while it is in flight);
- on a two-branch MLP under tp=2 (built here with onnx.helper, seeded) the
  first branch's all-reduce is followed by the second branch's kernels before
  its first reader, where the unscheduled plan reads it at once;
- the scheduled plans pass `pcc-run --check` (against the reference program)
  and give the unscheduled plans' outputs bit for bit (same seed).

Plans: the two-branch MLP at tp=2, gpt2_tiny.onnx at tp=2, dp=2,tp=2 and
pp=2, mlp.onnx at dp=2,tp=2, models/exported/bert.ts.onnx at dp=2 and
models/exported/llama.ts.onnx at tp=2 (kernels move there too), and
test_reshard.py's model at tp=2 and tp=4 (all-to-alls in flight). Prints
each plan's arena bytes and the nodes between collectives and their first
readers, with and without the scheduler.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, SEND, RECV, FREE, ALL_TO_ALL = 1, 2, 3, 4, 5, 6, 9
COLLECTIVES = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL)
BATCH = 4


def make_two_branch(path, width=64, hidden=256):
    """y = relu(x Wa1) Wa2 + relu(x Wb1) Wb2: two independent Megatron pairs."""
    rng = np.random.default_rng(11)
    H = onnx.helper
    inits, nodes = [], []
    for br in ("a", "b"):
        w1 = (rng.standard_normal((width, hidden)) / np.sqrt(width)).astype(np.float32)
        w2 = (rng.standard_normal((hidden, width)) / np.sqrt(hidden)).astype(np.float32)
        inits += [numpy_helper.from_array(w1, f"w{br}1"), numpy_helper.from_array(w2, f"w{br}2")]
        nodes += [H.make_node("MatMul", ["x", f"w{br}1"], [f"h{br}"], name=f"{br}_mm1"),
                  H.make_node("Relu", [f"h{br}"], [f"r{br}"], name=f"{br}_relu"),
                  H.make_node("MatMul", [f"r{br}", f"w{br}2"], [f"y{br}"], name=f"{br}_mm2")]
    nodes.append(H.make_node("Add", ["ya", "yb"], ["y"], name="sum"))
    graph = H.make_graph(nodes, "two_branch", [H.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", width])],
                         [H.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", width])], inits)
    model = H.make_model(graph, opset_imports=[H.make_opsetid("", 17)])
    onnx.save(model, path)


def read_plan(bundle):
    """\\returns (groups [ranks], programs): each program a dict with rank and
    instructions (kind, op, node, inputs, outputs, group, dim), plus arena_bytes
    and the output shapes by buffer id."""
    with open(os.path.join(bundle, "plan.pb"), "rb") as f:
        top = e2e.decode_fields(f.read())
    groups = [e2e._ints(e2e.decode_fields(g).get(2, [])) for g in top.get(7, [])]
    programs = []
    for raw in top.get(8, []):
        prog = e2e.read_program(raw)
        fields = e2e.decode_fields(raw)
        for ins, ins_raw in zip(prog["instructions"], fields.get(7, [])):
            f = e2e.decode_fields(ins_raw)
            ins["group"] = e2e._signed(f.get(6, [0])[0])
            ins["dim"] = e2e._signed(f.get(8, [0])[0])
        prog["shapes"] = {b["id"]: b["shape"] for b in prog["buffers"]}
        programs.append(prog)
    return groups, programs


def collectives(prog):
    """\\returns the signature of each collective of `prog`, in order: (kind, group, dim, output shape)."""
    return [(i["kind"], i["group"], i["dim"], tuple(prog["shapes"][i["outputs"][0]]))
            for i in prog["instructions"] if i["kind"] in COLLECTIVES]


def between(prog):
    """\\returns the kernels (not FREE, not a collective) between each collective and its first reader, summed."""
    total = 0
    ins = prog["instructions"]
    for k, c in enumerate(ins):
        if c["kind"] not in COLLECTIVES:
            continue
        for j in range(k + 1, len(ins)):
            if c["outputs"][0] in ins[j]["inputs"]:
                break
            if ins[j]["kind"] not in COLLECTIVES + (FREE,):
                total += 1
    return total


def overlap(a, b):
    """\returns whether arena buffers `a` and `b` share a byte (one outside the arena shares none)."""
    if a["arena_offset"] < 0 or b["arena_offset"] < 0 or a["id"] == b["id"]:
        return False
    return a["arena_offset"] < b["arena_offset"] + b["nbytes"] and b["arena_offset"] < a["arena_offset"] + a["nbytes"]


def order_problems(groups, programs):
    """\\returns what breaks the matching of collectives or the data order of `programs`."""
    problems = []
    by_rank = {p["rank"]: p for p in programs}
    for g, ranks in enumerate(groups):
        seqs = {r: [c for c in collectives(by_rank[r]) if c[1] == g] for r in ranks if r in by_rank}
        first = next(iter(seqs.values()), [])
        for r, s in seqs.items():
            if s != first:
                problems.append(f"group {g} {ranks}: rank {r} issues {s}, rank {ranks[0]} {first}")
    for p in programs:
        ins = p["instructions"]
        bufs = {b["id"]: b for b in p["buffers"]}
        for k, c in enumerate(ins):
            if c["kind"] not in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL):
                continue
            j = next((j for j in range(k + 1, len(ins))
                      if ins[j]["kind"] != FREE and c["outputs"][0] in ins[j]["inputs"]), len(ins))
            # What runs while it is in flight must not write the input's arena
            # bytes (the executor would wait for the collective there).
            src = bufs[c["inputs"][0]]
            for n in range(k + 1, j):
                if ins[n]["kind"] == FREE:
                    continue
                for o in ins[n]["outputs"]:
                    if o >= 0 and overlap(src, bufs[o]):
                        problems.append(f"rank {p['rank']}: instruction {n} ({ins[n]['op']} {ins[n]['node']}) "
                                        f"writes over the input of {c['op']} {c['node']} (instruction {k}) "
                                        f"while it is in flight (first reader at {j})")
        written = set(p["inputs"])
        for b in p["buffers"]:
            if b["weight"] >= 0:
                written.add(b["id"])
        for n, i in enumerate(p["instructions"]):
            if i["kind"] == FREE:
                continue
            for x in i["inputs"]:
                if x >= 0 and x not in written:
                    problems.append(f"rank {p['rank']}: instruction {n} ({i['op']} {i['node']}) reads buffer {x} "
                                    "before any instruction writes it")
            written.update(i["outputs"])
    return problems


class Schedule:
    def __init__(self, suite, tools):
        self.suite, self.tools = suite, tools
        self.work = suite.tempdir("schedule")

    def compile(self, name, model, args, scheduled):
        plan = os.path.join(self.work, f"{name}{'' if scheduled else '.off'}.pcc")
        extra = [] if scheduled else ["--no-schedule-overlap"]
        r = self.tools.run("pcc", [model, "--batch", BATCH, "--gpu", "cpu", "-o", plan, "--quiet"] + args + extra,
                           timeout=600)
        ok = self.suite.check(f"{name}: compiles{'' if scheduled else ' with --no-schedule-overlap'}",
                              r.returncode == 0, r.describe())
        return plan if ok else None

    def outputs(self, name, plan, tag):
        out = os.path.join(self.work, f"{name}.{tag}.out")
        r = self.tools.run("pcc-run", [plan, "--check", "--seed", 3, "--outputs", out, "--iters", 1, "--warmup", 0],
                           timeout=600)
        ok = self.suite.check(f"{name}: pcc-run --check ({tag})", r.returncode == 0, r.describe())
        return out if ok else None

    def case(self, name, model, args, expect_overlap=False):
        on = self.compile(name, model, args, True)
        off = self.compile(name, model, args, False)
        if not on or not off:
            return
        groups, progs = read_plan(on)
        _, progs_off = read_plan(off)
        problems = order_problems(groups, progs)
        self.suite.check(f"{name}: collectives match across each group, data read after written",
                         not problems, "\n".join(problems[:10]))
        same = [p["rank"] for p, q in zip(progs, progs_off) if collectives(p) != collectives(q)]
        self.suite.check(f"{name}: each rank issues its collectives in the unscheduled order", not same,
                         f"ranks {same} differ")
        # The check itself must catch an order that does not match: rank 0's
        # first two collectives of one group with different signatures, swapped.
        ins = progs[0]["instructions"]
        coll = [k for k, i in enumerate(ins) if i["kind"] in COLLECTIVES and len(groups[i["group"]]) > 1]
        sig = collectives({"instructions": [ins[k] for k in coll], "shapes": progs[0]["shapes"]})
        pair = next(((coll[x], coll[y]) for x in range(len(coll)) for y in range(x + 1, len(coll))
                     if sig[x][1] == sig[y][1] and sig[x] != sig[y]), None)
        if pair:
            a, b = pair
            ins[a], ins[b] = ins[b], ins[a]
            self.suite.check(f"{name}: a swapped pair of collectives is caught", bool(order_problems(groups, progs)))
            ins[a], ins[b] = ins[b], ins[a]
        n_on, n_off = sum(between(p) for p in progs), sum(between(p) for p in progs_off)
        arena_on = max(p["arena_bytes"] for p in progs)
        arena_off = max(p["arena_bytes"] for p in progs_off)
        print(f"{name}: kernels between collectives and their first readers {n_off} -> {n_on}; "
              f"largest rank arena {arena_off} -> {arena_on} bytes")
        if expect_overlap:
            self.suite.check(f"{name}: the unscheduled plan reads each collective at once", n_off == 0, f"{n_off}")
            self.suite.check(f"{name}: independent kernels run between a collective and its reader", n_on > 0,
                             f"{n_on}")
        out_on, out_off = self.outputs(name, on, "on"), self.outputs(name, off, "off")
        if out_on and out_off:
            files = sorted(os.listdir(out_off))
            diff = [f for f in files if not os.path.exists(os.path.join(out_on, f)) or
                    open(os.path.join(out_on, f), "rb").read() != open(os.path.join(out_off, f), "rb").read()]
            self.suite.check(f"{name}: outputs bit for bit those of --no-schedule-overlap", files and not diff,
                             f"files {files}, differing {diff}")


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("schedule", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        sys.exit(suite.finish())
    s = Schedule(suite, tools)
    two = os.path.join(s.work, "two_branch.onnx")
    make_two_branch(two)
    # test_reshard.py's model: all-to-alls and reduce-scatters whose inputs
    # must outlive the kernels scheduled while they are in flight.
    import test_reshard  # noqa: E402 (same folder)
    reshard = os.path.join(s.work, "reshard.onnx")
    test_reshard.make_model(reshard)
    gpt2, mlp = e2e.model_path("gpt2_tiny.onnx"), e2e.model_path("mlp.onnx")
    bert = e2e.model_path("exported/bert.ts.onnx")
    cases = [("two-branch tp=2", two, ["--strategy", "tp=2"], True),
             ("gpt2_tiny tp=2", gpt2, ["--strategy", "tp=2"], False),
             ("gpt2_tiny dp=2,tp=2", gpt2, ["--strategy", "dp=2,tp=2"], False),
             ("gpt2_tiny pp=2", gpt2, ["--strategy", "pp=2", "--microbatches", 2], False),
             ("mlp dp=2,tp=2", mlp, ["--strategy", "dp=2,tp=2"], False),
             ("bert.ts dp=2", bert, ["--strategy", "dp=2"], False),
             ("llama.ts tp=2", e2e.model_path("exported/llama.ts.onnx"), ["--strategy", "tp=2"], True),
             ("reshard tp=2", reshard, ["--strategy", "tp=2"], False),
             ("reshard tp=4", reshard, ["--strategy", "tp=4"], False)]
    for name, model, extra, overlap in cases:
        if suite.selected(name):
            suite.run_case(name, s.case, name, model, extra, overlap)
    sys.exit(suite.finish())


if __name__ == "__main__":
    main()
