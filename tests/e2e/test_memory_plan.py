#!/usr/bin/env python3
"""Checks the memory plan of every e2e model, independently of the planner's
code: reads plan.pb back (field numbers of runtime/plan.proto), recomputes each
buffer's lifetime from the instruction list, and fails if two arena buffers
that are live at the same instruction share a byte (unless the plan declares
the later one in place over the earlier at the instruction where the earlier
dies), if a buffer leaves the arena or is misaligned, or if a weight or model
input/output is placed in the arena. Then runs the plan with `pcc-run --check`
(outputs unchanged against the reference program), again with the memory
poisoned (`--poison-memory`, NaN everywhere before the run: every kernel must
write all of its outputs), on the oneDNN and on the reference kernels, checks
which reference kernels still copy their result into the arena (`--profile`,
STILL_COPIED), and checks that pcc-report and report.json show the planned
arena next to the naive sum.

The models of test_models.py run at --gpus 1, 2 and tp=2; the committed
exports are compiled at --gpus 1 and their plans checked (test_exported.py
runs them). Prints the planned arena against the naive sum per model.
"""

import copy
import glob
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MODELS = ["mlp.onnx", "gpt2_tiny.onnx", "cnn_small.onnx"]
CONFIGS = [["--gpus", "1"], ["--gpus", "2"], ["--gpus", "2", "--strategy", "tp=2"]]
BATCH = 4
# The ops of each model whose reference kernel still allocates its result
# (copied into the arena, counted: docs/runtime.md#memory), under
# --reference-kernels at every config.
STILL_COPIED = {
    "cnn_small.onnx": {"Conv", "MaxPool", "AveragePool"},
    # gpt2_tiny's recognized Attention is a generated kernel (docs/kernels.md#attention),
    # which writes the arena directly: nothing of it is copied.
}
FREE = 6  # Instruction.FREE
KERNEL = 0
# Collectives that still read their input while in flight, until the first
# reader of their output (runtime/executor.cpp's wait rule): ALL_GATHER,
# REDUCE_SCATTER, ALL_TO_ALL. An ALL_REDUCE (1) works on a copy.
IN_FLIGHT = (2, 3, 9)
LAUNCH = 8  # a generated elementwise kernel (docs/kernels.md): may run in place like a KERNEL
ALIGN = 64


def round_up(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def memory_plan_problems(prog):
    """\\returns a list of what is wrong with one program's memory plan (empty if nothing)."""
    problems = []
    bufs = {b["id"]: b for b in prog["buffers"]}
    bound = set(prog["inputs"]) | set(prog["outputs"])
    arena = [b for b in prog["buffers"] if b["arena_offset"] >= 0]
    for b in prog["buffers"]:
        outside = b["weight"] >= 0 or b["id"] in bound
        if outside and b["arena_offset"] != -1:
            problems.append(f"buffer {b['id']} '{b['name']}' is a weight or model input/output "
                            f"but has arena offset {b['arena_offset']}")
    for b in arena:
        if b["arena_offset"] % ALIGN:
            problems.append(f"buffer {b['id']} offset {b['arena_offset']} is not {ALIGN}-byte aligned")
        if b["arena_offset"] + b["nbytes"] > prog["arena_bytes"]:
            problems.append(f"buffer {b['id']} [{b['arena_offset']}, {b['arena_offset'] + b['nbytes']})"
                            f" lies outside the {prog['arena_bytes']}-byte arena")
    naive = sum(round_up(b["nbytes"]) for b in arena)
    if naive != prog["naive_arena_bytes"]:
        problems.append(f"naive_arena_bytes {prog['naive_arena_bytes']} != sum of rounded sizes {naive}")
    if prog["arena_bytes"] > naive:
        problems.append(f"arena {prog['arena_bytes']} is larger than the naive sum {naive}")

    # Lifetimes, from the instruction list alone (FREE is not a use).
    first, last = {}, {}
    writer = {}
    for t, ins in enumerate(prog["instructions"]):
        if ins["kind"] == FREE:
            continue
        for i in ins["inputs"]:
            if i >= 0:
                last[i] = t
        for o in ins["outputs"]:
            if o not in first:
                first[o] = t
                writer[o] = ins
            last[o] = max(last.get(o, t), t)
    # A collective in flight reads its input until the instruction before its
    # output's first reader (FREEs are not uses): the input lives that long.
    instructions = prog["instructions"]
    for t, ins in enumerate(instructions):
        if ins["kind"] not in IN_FLIGHT or not ins["inputs"] or not ins["outputs"] or ins["inputs"][0] < 0:
            continue
        reader = next((r for r in range(t + 1, len(instructions)) if instructions[r]["kind"] != FREE
                       and ins["outputs"][0] in instructions[r]["inputs"]), len(instructions))
        last_use = reader - 1
        while last_use > t and instructions[last_use]["kind"] == FREE:
            last_use -= 1
        src = ins["inputs"][0]
        last[src] = max(last.get(src, t), last_use)
    live_arena = [b for b in arena if b["nbytes"] > 0 and b["id"] in first]
    for b in arena:
        if b["id"] not in first and b["id"] in last:
            problems.append(f"buffer {b['id']} is read but never written")

    def declared_in_place(later, earlier):
        """The plan says `later` overwrites `earlier`, and the structure allows it."""
        ins = writer.get(later["id"])
        return (later["in_place_of"] == earlier["id"] and ins is not None
                and ins["kind"] in (KERNEL, LAUNCH) and ins["inputs"][:1] == [earlier["id"]]
                and ins["outputs"][:1] == [later["id"]]
                and last.get(earlier["id"]) == first[later["id"]]
                and earlier["dtype"] == later["dtype"] and earlier["nbytes"] == later["nbytes"]
                and earlier["arena_offset"] == later["arena_offset"])

    seen = set()
    in_place = 0
    peak = 0  # the most bytes live at one instruction: no arena can be smaller
    for t in range(len(prog["instructions"])):
        live = [b for b in live_arena if first[b["id"]] <= t <= last[b["id"]]]
        covered, end = 0, 0
        for lo, hi in sorted((b["arena_offset"], b["arena_offset"] + round_up(b["nbytes"])) for b in live):
            covered += max(0, hi - max(lo, end))
            end = max(end, hi)
        peak = max(peak, covered)
        for i, a in enumerate(live):
            for b in live[i + 1:]:
                key = (min(a["id"], b["id"]), max(a["id"], b["id"]))
                if key in seen:
                    continue
                seen.add(key)
                a0, a1 = a["arena_offset"], a["arena_offset"] + a["nbytes"]
                b0, b1 = b["arena_offset"], b["arena_offset"] + b["nbytes"]
                if a1 <= b0 or b1 <= a0:
                    continue
                if declared_in_place(a, b) or declared_in_place(b, a):
                    in_place += 1
                    continue
                problems.append(f"buffers {a['id']} '{a['name']}' [{a0}, {a1}) and {b['id']} '{b['name']}'"
                                f" [{b0}, {b1}) are both live at instruction {t} and overlap")
    # A declaration the structure does not allow is a problem even without an overlap.
    for b in arena:
        src = b["in_place_of"]
        if src >= 0 and not (src in bufs and b["id"] in first and declared_in_place(b, bufs[src])):
            problems.append(f"buffer {b['id']} declares in_place_of {src} where that is not allowed")
    if peak > prog["arena_bytes"]:
        problems.append(f"{peak} bytes are live at once, more than the {prog['arena_bytes']}-byte arena")
    return problems, (in_place, peak)


def check_plan(suite, case, plan, report_json=True):
    """Checks every program of bundle `plan`. \\returns [(rank, arena, naive)]."""
    ranks, reference = e2e.read_programs(plan)
    sizes = []
    for prog in ranks + [reference]:
        name = f"rank {prog['rank']}" if prog is not reference else "reference"
        problems, (in_place, peak) = memory_plan_problems(prog)
        suite.check(f"{case}: {name}: no two live buffers overlap", not problems,
                    "\n".join("  " + p for p in problems[:20]))
        if prog is not reference:
            sizes.append((prog["rank"], prog["arena_bytes"], prog["naive_arena_bytes"], (in_place, peak)))
    if report_json:
        with open(os.path.join(plan, "report.json")) as f:
            report = json.load(f)
        got = sorted((r["rank"], r.get("arena_bytes"), r.get("naive_arena_bytes")) for r in report["ranks"])
        suite.check(f"{case}: report.json shows arena and naive sum per rank",
                    got == sorted((r, a, n) for r, a, n, _ in sizes), f"  report {got}, plan {sizes}")
    return sizes


def checker_catches_overlap(suite, plan):
    """The checker must be able to fail: move one live buffer onto another."""
    prog = copy.deepcopy(e2e.read_programs(plan)[0][0])
    bufs = [b for b in prog["buffers"] if b["arena_offset"] >= 0 and b["nbytes"] > 0]
    for ins in prog["instructions"]:
        ids = [i for i in ins["inputs"] + ins["outputs"] if i >= 0]
        pair = [b for b in bufs if b["id"] in ids]
        if ins["kind"] == KERNEL and len(pair) >= 2 and pair[1]["in_place_of"] != pair[0]["id"]:
            pair[1]["arena_offset"] = pair[0]["arena_offset"]
            problems, _ = memory_plan_problems(prog)
            suite.check("the checker reports two live buffers moved onto each other",
                        any("overlap" in p for p in problems), f"  problems: {problems}")
            return
    suite.check("the checker's negative control found two buffers to move", False)


def checker_keeps_in_flight_inputs(suite):
    """The checker must model in-flight collectives: a program where a kernel
    run while an all-to-all is in flight takes the all-to-all's input bytes is
    reported, and the same program with the reader right after it is not."""
    for kind, name in ((9, "all-to-all"), (2, "all-gather"), (3, "reduce-scatter")):
        for between in (True, False):
            def buf(i, off):
                return {"id": i, "name": f"b{i}", "dtype": 1, "shape": [64], "nbytes": 256, "weight": -1,
                        "arena_offset": off, "in_place_of": -1}
            # x (input) -> a; collective a -> g; [k = f(x)]; y = f(g); [k = f(x)]; z = f(k)
            ins = [{"kind": KERNEL, "op": "Softmax", "node": "a", "inputs": [0], "outputs": [1]},
                   {"kind": kind, "op": "", "node": "c", "inputs": [1], "outputs": [2]},
                   {"kind": FREE, "op": "", "node": "", "inputs": [1], "outputs": []}]
            k = {"kind": KERNEL, "op": "Softmax", "node": "k", "inputs": [0], "outputs": [3]}
            y = {"kind": KERNEL, "op": "Softmax", "node": "y", "inputs": [2], "outputs": [4]}
            ins += [k, y] if between else [y, k]
            ins.append({"kind": KERNEL, "op": "Neg", "node": "z", "inputs": [3], "outputs": [5]})
            # a and k share offset 0; g lies at 256.
            prog = {"rank": 0, "buffers": [buf(0, -1), buf(1, 0), buf(2, 256), buf(3, 0), buf(4, -1), buf(5, -1)],
                    "instructions": ins, "inputs": [0], "outputs": [4, 5], "arena_bytes": 512,
                    "naive_arena_bytes": 768}
            problems, _ = memory_plan_problems(prog)
            overlap = any("overlap" in p for p in problems)
            suite.check(f"the checker {'reports' if between else 'allows'} a kernel over the {name}'s input "
                        f"{'while it is in flight' if between else 'once its output is read'}",
                        overlap == between, f"  problems: {problems}")


def reshard_case(suite, tools, strategy, gpus):
    """test_reshard.py's model (its all-to-alls and reduce-scatters run while
    other kernels are scheduled): the plan's memory, and --poison-memory."""
    import test_reshard  # noqa: E402 (same folder)
    case = f"reshard model --strategy {strategy}"
    work = suite.tempdir("reshard")
    try:
        model = os.path.join(work, "model.onnx")
        test_reshard.make_model(model)
        plan = os.path.join(work, "plan.pcc")
        r = tools.run("pcc", [model, "--batch", test_reshard.BATCH, "--gpus", gpus, "--strategy", strategy,
                              "--gpu", "cpu", "-o", plan, "--quiet"])
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            return
        ranks, _ = e2e.read_programs(plan)
        suite.check(f"{case}: the plan has an all-to-all",
                    any(ins["kind"] == 9 for prog in ranks for ins in prog["instructions"]))
        check_plan(suite, case, plan)
        r = tools.run("pcc-run", [plan, "--check", "--poison-memory"])
        suite.check(f"{case}: pcc-run --check --poison-memory", r.returncode == 0, r.describe())
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def region_weight_case(suite, tools):
    """A weight only a Loop body reads (the Loop runs at run time: its trip
    count is an input) is checksummed like every other: a flipped byte of it
    in the weight file is refused with one line, not run."""
    h, np_ = e2e.onnx.helper, e2e.np
    F, I64 = e2e.onnx.TensorProto.FLOAT, e2e.onnx.TensorProto.INT64
    w = np_.random.default_rng(3).standard_normal(64).astype(np_.float32)
    body = h.make_graph(
        [h.make_node("Mul", ["v", "w"], ["vw"]), h.make_node("Tanh", ["vw"], ["v_next"]),
         h.make_node("Identity", ["c"], ["c_out"])],
        "body", [h.make_tensor_value_info("i", I64, []), h.make_tensor_value_info("c", e2e.onnx.TensorProto.BOOL, []),
                 h.make_tensor_value_info("v", F, [64])],
        [h.make_tensor_value_info("c_out", e2e.onnx.TensorProto.BOOL, []), h.make_tensor_value_info("v_next", F, [64])])
    g = h.make_graph([h.make_node("Loop", ["M", "", "v0"], ["v_final"], body=body)], "loop_weight",
                     [h.make_tensor_value_info("M", I64, []), h.make_tensor_value_info("v0", F, [64])],
                     [h.make_tensor_value_info("v_final", F, [64])], [e2e.numpy_helper.from_array(w, "w")])
    work = suite.tempdir("region-weight")
    try:
        model = os.path.join(work, "loop.onnx")
        e2e.onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), model)
        plan, data = os.path.join(work, "plan.pcc"), os.path.join(work, "data")
        os.makedirs(data)
        e2e.write_tensor(os.path.join(data, "input_0.pb"), np_.array(3, np_.int64), "M")
        e2e.write_tensor(os.path.join(data, "input_1.pb"), np_.linspace(-1, 1, 64, dtype=np_.float32), "v0")
        r = tools.run("pcc", [model, "--gpus", "1", "-o", plan, "--quiet"])
        if not suite.check("region weight: compile", r.returncode == 0, r.describe()):
            return
        r = tools.run("pcc-run", [plan, "--inputs", data, "--check"])
        if not suite.check("region weight: runs and passes --check", r.returncode == 0, r.describe()):
            return
        weights = os.path.join(plan, "rank0.bin")
        with open(weights, "rb") as f:
            raw = bytearray(f.read())
        at = raw.find(w.tobytes())
        if not suite.check("region weight: the body's weight is in rank0.bin", at >= 0):
            return
        raw[at + 4 * 17 + 3] ^= 0x7F  # w[17]'s exponent byte: a huge value or NaN
        with open(weights, "wb") as f:
            f.write(raw)
        r = tools.run("pcc-run", [plan, "--inputs", data, "--check"])
        lines = r.stderr.strip().splitlines()
        suite.check("region weight: a flipped byte is refused: exit 2, one line, checksum mismatch",
                    r.returncode == 2 and len(lines) == 1 and "checksum mismatch" in r.stderr, r.describe())
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def human(n):
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_memory_plan", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools):
        return suite.finish()
    table = []

    def model_case(model, config):
        case = f"{model} --batch {BATCH} {' '.join(config)}"
        work = suite.tempdir(model.split(".")[0])
        try:
            plan = os.path.join(work, "plan.pcc")
            r = tools.run("pcc", [e2e.model_path(model), "--batch", BATCH, *config, "-o", plan])
            if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
                return
            sizes = check_plan(suite, case, plan)
            if model == "gpt2_tiny.onnx" and config == CONFIGS[0]:
                checker_catches_overlap(suite, plan)
            table.append((case, sizes))
            rep = tools.run("pcc-report", [plan])
            suite.check(f"{case}: pcc-report shows the arena and the naive sum",
                        rep.returncode == 0 and "arena" in rep.stdout and "naive sum" in rep.stdout,
                        rep.describe())
            r = tools.run("pcc-run", [plan, "--check"])
            suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe())
            # Memory full of NaN before the run: a kernel that leaves an output
            # element unwritten fails the check. On the reference kernels too,
            # which write the arena directly except the ones still copied.
            for extra in ([], ["--reference-kernels"]):
                r = tools.run("pcc-run", [plan, "--check", "--poison-memory", "--profile", *extra])
                suite.check(f"{case}: pcc-run --check --poison-memory {' '.join(extra)}", r.returncode == 0,
                            r.describe())
                copied = set(re.findall(r"profile rank 0: (\w+) \(reference, copied\)", r.stdout + r.stderr))
                if extra:
                    want = STILL_COPIED.get(model, set())
                    suite.check(f"{case}: reference kernels that still copy into the arena: "
                                f"{', '.join(sorted(copied)) or 'none'}", copied == want,
                                f"expected {sorted(want)}, got {sorted(copied)}")
        finally:
            if not suite.keep:
                shutil.rmtree(work, ignore_errors=True)

    manifest = {}
    path = os.path.join(e2e.MODELS_DIR, "exported", "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            manifest = {f"{e['name']}.{e['exporter']}": e for e in json.load(f)["exports"]}

    def export_case(model):
        key = os.path.basename(model)[:-len(".onnx")]
        batch = manifest.get(key, {}).get("batch", 1)
        case = f"exported {key} --gpus 1"
        work = suite.tempdir(key)
        try:
            plan = os.path.join(work, "plan.pcc")
            args = [model, "--gpus", "1", "-o", plan, "--quiet"]
            loaded = e2e.onnx.load(model, load_external_data=False)
            if any(not d.HasField("dim_value") for vi in e2e.graph_inputs(loaded)
                   for d in vi.type.tensor_type.shape.dim):
                args[1:1] = ["--batch", batch]
            r = tools.run("pcc", args, timeout=900)
            if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
                return
            table.append((case, check_plan(suite, case, plan)))
            r = tools.run("pcc-run", [plan, "--check", "--poison-memory"], timeout=900)
            suite.check(f"{case}: pcc-run --check --poison-memory", r.returncode == 0, r.describe())
        finally:
            if not suite.keep:
                shutil.rmtree(work, ignore_errors=True)

    suite.run_case("checker: in-flight collectives", checker_keeps_in_flight_inputs, suite)
    suite.run_case("region weight", region_weight_case, suite, tools)
    for strategy, gpus in (("tp=2", "2"), ("tp=4", "4")):
        suite.run_case(f"reshard model --strategy {strategy}", reshard_case, suite, tools, strategy, gpus)
    for model in MODELS:
        for config in CONFIGS:
            suite.run_case(f"{model} {' '.join(config)}", model_case, model, config)
    for model in sorted(glob.glob(os.path.join(e2e.MODELS_DIR, "exported", "*.onnx"))):
        suite.run_case(f"exported {os.path.basename(model)}", export_case, model)

    print("planned arena vs naive sum of buffers, and the most bytes live at one instruction (per rank):")
    for case, sizes in table:
        for rank, arena, naive, (in_place, peak) in sizes:
            ratio = arena / naive if naive else 1.0
            print(f"  {case:48s} rank {rank}: {human(arena):>10s} of {human(naive):>10s}"
                  f" ({ratio:.0%}), live peak {human(peak):>10s}, {in_place} in place")
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
