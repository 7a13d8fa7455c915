#!/usr/bin/env python3
"""Fusion end to end (passes/fuse.cpp on each rank program).

1. Kernel counts: the BERT and GPT-2 exports (both exporters) and
   gpt2_tiny.onnx are compiled with and without --no-fuse; the report's
   `fusion` counts are printed, fusion must lower the kernel count (for the
   exports to at most 40% of the ops before), --no-fuse
   must fuse nothing, and in rank 0's program (--emit ir) no elementwise op
   may still read the single-use result of another elementwise op outside a
   fused node (the pass always fuses such a chain).
2. Collectives: tensor-parallel plans of the GPT-style models split nodes over
   tp (every rank combines pieces) and communicate exactly as without fusion.
3. Numbers: every e2e model and every committed export, fused, matches the
   reference evaluator (`pcc-run --check`) at --gpus 1, 2 and 4, tp=2 and
   dp=2,tp=2.
"""

import glob
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

EXPORTED_DIR = os.path.join(e2e.MODELS_DIR, "exported")
COUNTED = ["bert.dynamo", "bert.ts", "gpt2.dynamo", "gpt2.ts"]
# GPT-style models under tp=2, and whether they hold matmuls the tp search must split.
GPT_STYLE = [("gpt2_tiny.onnx", True), ("exported/gpt2.dynamo.onnx", True), ("exported/gpt2.ts.onnx", True)]
MODELS = ["mlp.onnx", "gpt2_tiny.onnx", "cnn_small.onnx"]
CONFIGS = [
    ["--gpus", "1"],
    ["--gpus", "2"],
    ["--gpus", "4"],
    ["--gpus", "2", "--strategy", "tp=2"],
    ["--gpus", "4", "--strategy", "dp=2,tp=2"],
]
BATCH = 4
RTOL, ATOL = 1e-4, 1e-5
VIEWS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}


def elementwise_ops():
    """\returns the op names the op table marks Elementwise."""
    path = os.path.join(e2e.SOURCE_DIR, "runtime", "schema", "Ops.def")
    with open(path) as f:
        return {m.group(1) for m in re.finditer(r"^PCC_OP\((\w+), [^,]+, [^,]+, [^,]+, Elementwise,", f.read(), re.M)}


NAME = r'%("(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+)'


def top_level_nodes(program):
    """\returns [(results, op, operands)] of the nodes of one printed program,
    not those of bodies (two-space indent only), and the returned names."""
    nodes, returned = [], []
    for line in program.splitlines():
        m = re.match(r"^  (%.*?) = (\w+)\((.*?)\)", line)
        if m:
            nodes.append((re.findall(NAME, m.group(1)), m.group(2), re.findall(NAME, m.group(3))))
        m = re.match(r"^  return (.*)$", line)
        if m:
            returned += re.findall(NAME, m.group(1))
    return nodes, returned


def unfused_chains(program, elementwise):
    """\returns the pairs 'producer -> reader' of elementwise ops outside fused
    nodes where the reader is the producer's only reader."""
    nodes, returned = top_level_nodes(program)
    uses = {}
    for _, _, operands in nodes:
        for v in operands:
            uses[v] = uses.get(v, 0) + 1
    for v in returned:
        uses[v] = uses.get(v, 0) + 1
    producer = {r[0]: op for r, op, _ in nodes if len(r) == 1}
    bad = []
    for results, op, operands in nodes:
        if op not in elementwise:
            continue
        for v in set(operands):
            if producer.get(v) in elementwise and uses.get(v) == 1:
                bad.append(f"{producer[v]} %{v} -> {op} %{results[0]}")
    return bad


def rank_program(ir, k):
    m = re.search(rf"^// rank {k} program\n(.*?)(?=^// rank |\Z)", ir, re.M | re.S)
    return m.group(1) if m else ""


def compile_json(tools, model, extra):
    r = tools.run("pcc", [model, "--batch", BATCH, *extra, "--emit", "json", "--quiet"])
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


def count_case(suite, tools, key, elementwise):
    model = e2e.model_path(key) if key.endswith(".onnx") else os.path.join(EXPORTED_DIR, key + ".onnx")
    r, fused = compile_json(tools, model, ["--gpus", "1"])
    if not suite.check(f"{key}: compile", fused is not None, r.describe()):
        return
    r, plain = compile_json(tools, model, ["--gpus", "1", "--no-fuse"])
    if not suite.check(f"{key}: compile --no-fuse", plain is not None, r.describe()):
        return
    f, p = fused["fusion"], plain["fusion"]
    pat = f["patterns"]
    print(f"  {key}: ops before {f['ops_before']}, kernels after fuse {f['kernels_after']} "
          f"({100.0 * f['kernels_after'] / f['ops_before']:.0f}%), after --no-fuse {p['kernels_after']}; "
          f"fused_epilogue {pat['fused_epilogue']}, fused_elementwise {pat['fused_elementwise']}")
    suite.check(f"{key}: every pattern key is reported",
                set(pat) >= {"LayerNormalization", "RMSNormalization", "Gelu", "Swish", "Attention",
                             "fused_epilogue", "fused_elementwise", "batchnorm_folded"}, f"  {pat}")
    suite.check(f"{key}: --no-fuse fuses nothing",
                p["patterns"]["fused_epilogue"] == 0 and p["patterns"]["fused_elementwise"] == 0, f"  {p}")
    suite.check(f"{key}: fusion lowers the kernel count",
                0 < f["kernels_after"] < p["kernels_after"] <= f["ops_before"], f"  fused {f}, unfused {p}")
    if key in COUNTED:
        # The exports of BERT and GPT-2 (attention recognized, epilogues and
        # elementwise groups fused; view-only reshapes are no kernels).
        suite.check(f"{key}: kernels after fusion at most 40% of the ops before",
                    f["kernels_after"] <= 0.4 * f["ops_before"], f"  {f}")
    suite.check(f"{key}: at least one epilogue and one elementwise group",
                pat["fused_epilogue"] > 0 and pat["fused_elementwise"] > 0, f"  {pat}")
    r = tools.run("pcc", [model, "--batch", BATCH, "--gpus", "1", "--emit", "ir", "--quiet"])
    if suite.check(f"{key}: --emit ir", r.returncode == 0, r.describe()):
        program = rank_program(r.stdout, 0)
        suite.check(f"{key}: rank 0 program printed with Fused bodies", "Fused(" in program and "graph @fused(" in program,
                    program[:2000])
        bad = unfused_chains(program, elementwise)
        suite.check(f"{key}: no single-use elementwise chain is left unfused", not bad, "  " + "\n  ".join(bad[:20]))
        # The check itself must be able to fail: the unfused program has such chains.
        r = tools.run("pcc", [model, "--batch", BATCH, "--gpus", "1", "--emit", "ir", "--quiet", "--no-fuse"])
        suite.check(f"{key}: the chain check finds chains in the unfused program",
                    r.returncode == 0 and unfused_chains(rank_program(r.stdout, 0), elementwise), r.describe())


def all_reduce_case(suite, tools, model, paired):
    """Fusion runs on the rank programs after partitioning: it must not change
    what the ranks communicate. The graph the partitioner received (printed
    with --print-after=dce) is partitioned again by pcc-opt, unfused, and each
    rank's collectives must equal those of the fused plan. Under a forced tp
    the plan splits nodes (`paired`: the model has matmuls) and every rank
    combines pieces."""
    path = e2e.model_path(model) if "/" not in model else os.path.join(e2e.MODELS_DIR, model)
    work = suite.tempdir("collectives")
    try:
        r = tools.run("pcc", [path, "--batch", BATCH, "--gpus", "2", "--strategy", "tp=2", "--emit", "json",
                              "--print-after=dce"])
        if not suite.check(f"{model} tp=2: compile", r.returncode == 0, r.describe()):
            return
        rep = json.loads(r.stdout)
        ir = r.stderr[r.stderr.index("graph @"):] if "graph @" in r.stderr else ""
        ir = "\n".join(ln for ln in ir.splitlines() if not ln.startswith("pcc: "))
        graph = os.path.join(work, "partitioned-input.ir")
        with open(graph, "w") as f:
            f.write(ir)
        split = len(rep["tensor_parallel"])
        fused = [rk.get("comm_count", {}) for rk in rep["ranks"]]
        unfused = []
        for k in range(len(rep["ranks"])):
            o = tools.run("pcc-opt", [graph, "--partition=gpus=2,tp=2", f"--rank={k}"])
            if not suite.check(f"{model} tp=2: pcc-opt partitions the printed graph, rank {k}", o.returncode == 0,
                               o.describe()):
                return
            counts = {}
            for kind, name in (("AllReduce", "all_reduce"), ("AllGather", "all_gather"),
                               ("ReduceScatter", "reduce_scatter")):
                n = len(re.findall(rf"= {kind}\(", o.stdout))
                if n:
                    counts[name] = n
            unfused.append(counts)
        print(f"  {model} tp=2: {split} nodes split over tp, collectives per rank {fused} (unfused {unfused})")
        suite.check(f"{model} tp=2: nodes split over tp, and their pieces combined on every rank",
                    not paired or (split > 0 and all(sum(c.values()) > 0 for c in fused)),
                    f"  {split} split nodes, collectives per rank {fused}")
        suite.check(f"{model} tp=2: the same collectives with and without fusion", fused == unfused,
                    f"  fused {fused}, unfused {unfused}")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def numbers_case(suite, tools, case, model, data_dir, config):
    work = suite.tempdir("fusion")
    try:
        plan = os.path.join(work, "plan.pcc")
        onnx_model = e2e.onnx.load(model, load_external_data=False)
        symbolic = any(not d.HasField("dim_value")
                       for vi in e2e.graph_inputs(onnx_model) for d in vi.type.tensor_type.shape.dim)
        args = [model, *config, "-o", plan, "--quiet"] + (["--batch", BATCH] if symbolic else [])
        r = tools.run("pcc", args)
        if not suite.check(f"{case}: compile", r.returncode == 0, r.describe()):
            return
        with open(os.path.join(plan, "report.json")) as f:
            rep = json.load(f)
        if "--no-fuse" not in config:
            suite.check(f"{case}: fused", rep["fusion"]["patterns"]["fused_epilogue"]
                        + rep["fusion"]["patterns"]["fused_elementwise"] > 0, f"  {rep['fusion']}")
        if config == ["--gpus", "1"]:
            # pcc-report reads the counts back from plan.pb alone.
            f = rep["fusion"]
            r = tools.run("pcc-report", [plan])
            want = f"fusion:  {f['ops_before']} kernels before, {f['kernels_after']} after;"
            suite.check(f"{case}: pcc-report prints the fusion counts",
                        r.returncode == 0 and want in r.stdout
                        and f"fused_epilogue {f['patterns']['fused_epilogue']}" in r.stdout,
                        f"  expected '{want}'\n" + r.describe())
        if data_dir is None:
            data_dir = os.path.join(work, "data")
            e2e.write_case(data_dir, model, BATCH, seed=7)
        r = tools.run("pcc-run", [plan, "--inputs", data_dir, "--outputs", os.path.join(work, "out"), "--check",
                                  "--rtol", RTOL, "--atol", ATOL], timeout=600)
        suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe())
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_fusion", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run", "pcc-report")):
        elementwise = elementwise_ops()
        suite.check("Ops.def lists elementwise ops", {"Add", "Relu", "Mul"} <= elementwise, str(elementwise))
        for key in COUNTED + ["gpt2_tiny.onnx"]:
            suite.run_case(f"kernel counts {key}", count_case, suite, tools, key, elementwise)
        for model, paired in GPT_STYLE:
            suite.run_case(f"all-reduces {model}", all_reduce_case, suite, tools, model, paired)
        for model in MODELS:
            for config in CONFIGS:
                case = f"{model} {' '.join(config)}"
                suite.run_case(case, numbers_case, suite, tools, case, e2e.model_path(model), None, config)
        for model in e2e.exporter_subset(sorted(glob.glob(os.path.join(EXPORTED_DIR, "*.onnx")))):
            key = os.path.basename(model)[:-len(".onnx")]
            for config in CONFIGS:
                case = f"{key} {' '.join(config)}"
                suite.run_case(case, numbers_case, suite, tools, case, model, model[:-len(".onnx")], config)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
