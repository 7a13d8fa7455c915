#!/usr/bin/env python3
"""Runs the ONNX backend test data through the path a user takes.

For every case of every suite, and every test_data_set_N of the case:

    pcc MODEL --gpus G -o PLAN --quiet [--strategy S] [--shape NAME=AxB ...] [--freeze NAME=FILE.pb ...]
    pcc-run PLAN --inputs DATASET --expect DATASET --rtol R --atol A

Each case ends as one of:
  passed         every data set matched, with every input given at run time;
  passed-frozen  every data set matched after the inputs pcc needs as
                 constants (shape-like: Reshape's shape, Pad's pads, ...) were
                 frozen to the data set's values with --freeze; the rest was
                 computed at run time;
  folded         every data set matched, but only with every input frozen, or
                 with inputs frozen and nothing left for the plan to compute:
                 the constant folder produced the answer at compile time. Never
                 counted as passing in the rates;
  failed         pcc or pcc-run failed, or an output differs (the reason is the
                 first line of the tool's stderr, or the mismatch line);
  unsupported    pcc refused the model with exit 2 and an 'unsupported' message
                 (unknown op, op of another domain, dtype, opset beyond range);
  out-of-scope   the model needs what pcc does not aim at: sequence, optional
                 or map types (also inside If/Loop/Scan bodies), string tensors,
                 the training domain, graph-valued attributes of ops other than
                 If/Loop/Scan (SequenceMap), or weights to download.

Symbolic input dims are bound with --shape from each data set's inputs. When
pcc says an input must be a constant (a shape-like run-time input of Reshape,
Expand, Slice, ...), the case is retried with that input frozen to the data
set's value, input by input (the integer inputs, then all, when pcc names a
value computed from the inputs), compiled once per data set. On several
devices, a passing case is also recorded as split (its ranks divide the work or
communicate) or replicated (every rank computes the whole graph).

Writes conformance.md, conformance.tsv (per suite and operator) and cases.tsv
(per case) under --out, prints the counts per suite and overall, and exits 1
when the gate fails:
  - any case's status (and split/replicated) differs from the committed
    expected list, tests/conformance/expected/CONFIG.tsv: a regression
    (passed -> anything else, split -> replicated, ...) or a change to record
    with --update-expected; a case missing from the list, or a listed case that
    no longer exists;
  - a case fails and is not listed in tests/conformance/known_failures.txt
    (`suite/case_name | key phrase | why`), or fails with a reason that lacks
    its entry's key phrase; a listed case that does not fail (a stale entry);
  - a selected suite has no test data or no case, or the run selects no case.
Exit 2 on bad usage or a malformed known-failures or expected file.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
KNOWN_FAILURES = HERE / "known_failures.txt"
PIP_DATA = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data"
DEBIAN_DATA = Path("/usr/share/libonnx-testdata/data")

# The ONNX backend runner's defaults; a case's data.json may override them.
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7

TRAINING_DOMAIN = "ai.onnx.preview.training"
STRING_DTYPE = onnx.TensorProto.STRING
SEQUENCE_OPS = {
    "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceAt", "SequenceErase",
    "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap",
    "Optional", "OptionalHasElement", "OptionalGetElement",
}
STRING_OPS = {"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch"}
# pcc's message for a shape-like input given at run time.
NEEDS_CONSTANT = re.compile(r"must be a constant|computed at run time")
UNSUPPORTED = re.compile(r"\bunsupported\b|\bnot supported\b", re.IGNORECASE)


@dataclass
class Suite:
    name: str           # "debian/node"
    path: Path
    goal: float | None  # least pass rate of in-scope cases; None: reported only
    kind: str = "data"  # data | light (inputs generated) | download (out of scope)


def all_suites() -> list[Suite]:
    goals = {"node": 0.90, "simple": 1.0, "pytorch-converted": 1.0, "pytorch-operator": 1.0}
    suites = []
    for origin, root in (("debian", DEBIAN_DATA), ("pip", PIP_DATA)):
        for kind, goal in goals.items():
            suites.append(Suite(f"{origin}/{kind}", root / kind, goal))
    # 'light' ships its models (weights replaced by ConstantOfShape) and the
    # expected outputs; the inputs are the backend runner's deterministic ones.
    suites.append(Suite("pip/light", PIP_DATA / "light", None, "light"))
    # Debian's 'real' cases only name a URL to download.
    suites.append(Suite("debian/real", DEBIAN_DATA / "real", None, "download"))
    return suites


@dataclass
class Case:
    suite: str
    name: str
    model: str
    datasets: list[str]
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    download: str = ""  # URL when the model must be downloaded
    timeout_scale: float = 1.0  # whole networks get a multiple of --timeout

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.name}"


@dataclass
class Result:
    suite: str
    name: str
    op: str
    status: str  # one of STATUSES
    reason: str = ""
    froze: str = ""  # "", "some" (the inputs pcc needs as constants frozen) or "all" (every input frozen)
    seconds: float = 0.0
    ops: list[str] = field(default_factory=list)
    runtime_ops: int = 0  # ops the plan runs (all ranks, collectives excluded), least over data sets
    split: bool = False   # the plan divides the work between ranks (see plan_split)

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.name}"


# ---------------------------------------------------------------------------
# Case discovery


def tolerances(case_dir: Path) -> tuple[float, float]:
    f = case_dir / "data.json"
    if not f.exists():
        return DEFAULT_RTOL, DEFAULT_ATOL
    data = json.loads(f.read_text())
    return float(data.get("rtol", DEFAULT_RTOL)), float(data.get("atol", DEFAULT_ATOL))


def light_inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The backend runner's inputs for 'light' models: arange / n, float32,
    symbolic dims set to 1."""
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for x in model.graph.input:
        if x.name in inits:
            continue
        if x.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"input '{x.name}' is not float32")
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[x.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def discover(suite: Suite, out: Path) -> list[Case]:
    cases = []
    if suite.kind == "light":
        data_root = out / "data" / suite.name
        for model in sorted(suite.path.glob("light_*.onnx")):
            name = "test_" + model.stem[len("light_"):]
            ds = data_root / name / "test_data_set_0"
            expected = sorted(model.parent.glob(model.stem + "_output_*.pb"))
            if not ds.exists():
                ds.mkdir(parents=True)
                m = onnx.load(str(model))
                for k, (iname, value) in enumerate(light_inputs(m).items()):
                    (ds / f"input_{k}.pb").write_bytes(numpy_helper.from_array(value, iname).SerializeToString())
                for f in expected:
                    shutil.copy(f, ds / f.name[len(model.stem) + 1:])
            rtol, atol = tolerances(PIP_DATA / "real" / name)
            cases.append(Case(suite.name, name, str(model), [str(ds)], rtol, atol, timeout_scale=4.0))
        return cases
    for d in sorted(p for p in suite.path.iterdir() if p.is_dir()):
        rtol, atol = tolerances(d)
        if not (d / "model.onnx").exists():
            url = json.loads((d / "data.json").read_text()).get("url", "?") if (d / "data.json").exists() else "?"
            cases.append(Case(suite.name, d.name, "", [], rtol, atol, download=url))
            continue
        datasets = sorted((str(p) for p in d.glob("test_data_set_*") if p.is_dir()),
                          key=lambda s: int(s.rsplit("_", 1)[1]))
        cases.append(Case(suite.name, d.name, str(d / "model.onnx"), datasets, rtol, atol))
    return cases


# ---------------------------------------------------------------------------
# Scope and operator of a case


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


_OP_FORMS: list[tuple[str, str]] | None = None


def op_forms() -> list[tuple[str, str]]:
    """(form, op) for every ONNX op: 'layer_normalization' and
    'layernormalization' for LayerNormalization; longest first."""
    global _OP_FORMS
    if _OP_FORMS is None:
        forms = set()
        for s in onnx.defs.get_all_schemas_with_history():
            forms.add((_snake(s.name), s.name))
            forms.add((s.name.lower(), s.name))
        _OP_FORMS = sorted(forms, key=lambda f: -len(f[0]))
    return _OP_FORMS


def case_op(suite: str, name: str, model: onnx.ModelProto | None) -> str:
    """The operator a case is reported under: for node suites the op the case
    name starts with; otherwise the model's op types."""
    ops = []
    if model is not None:
        for n in model.graph.node:
            t = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
            if t not in ops:
                ops.append(t)
    if suite.endswith("/node"):
        rest = name[len("test_"):] if name.startswith("test_") else name
        for form, op in op_forms():
            if rest == form or rest.startswith(form + "_"):
                return op
        real = [o for o in ops if o not in ("Constant", "Identity")]
        if len(real) == 1:
            return real[0]
    return "+".join(ops) if ops else name


def _value_types(model: onnx.ModelProto):
    g = model.graph
    for v in list(g.input) + list(g.output) + list(g.value_info):
        yield v.name, v.type


def _nodes(graph: onnx.GraphProto):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.HasField("g"):
                yield from _nodes(a.g)
            for sub in a.graphs:
                yield from _nodes(sub)


def out_of_scope(model: onnx.ModelProto) -> str:
    """\\returns why the model is out of scope, or ''."""
    if any(o.domain == TRAINING_DOMAIN for o in model.opset_import) or any(
            n.domain == TRAINING_DOMAIN for n in _nodes(model.graph)):
        return "training domain"
    # If, Loop and Scan are in scope; their bodies may not hold sequences or
    # optionals either. Other ops with graph attributes (SequenceMap) are not.
    def body_out_of_scope(g: onnx.GraphProto, is_body: bool) -> str:
        for v in (list(g.input) + list(g.output) + list(g.value_info)) if is_body else []:
            kind = v.type.WhichOneof("value")
            if kind in ("sequence_type", "map_type", "optional_type"):
                return f"{kind.split('_')[0]} type in a body ('{v.name}')"
        for n in g.node:
            if is_body and n.op_type in SEQUENCE_OPS:
                return f"sequence/optional op in a body ({n.op_type})"
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    if n.op_type not in ("If", "Loop", "Scan"):
                        return f"graph-valued attribute ({n.op_type})"
                    why = body_out_of_scope(sub, True)
                    if why:
                        return why
        return ""

    why = body_out_of_scope(model.graph, False)
    if why:
        return why
    for name, t in _value_types(model):
        kind = t.WhichOneof("value")
        if kind in ("sequence_type", "map_type", "optional_type"):
            return f"{kind.split('_')[0]} type ('{name}')"
    for n in model.graph.node:
        if n.op_type in SEQUENCE_OPS:
            return f"sequence/optional op ({n.op_type})"
    for name, t in _value_types(model):
        if t.WhichOneof("value") == "tensor_type" and t.tensor_type.elem_type == STRING_DTYPE:
            return f"string tensor ('{name}')"
    if any(t.data_type == STRING_DTYPE for t in model.graph.initializer):
        return "string tensor (initializer)"
    for n in model.graph.node:
        if n.op_type in STRING_OPS:
            return f"string op ({n.op_type})"
        for a in n.attribute:
            if a.HasField("t") and a.t.data_type == STRING_DTYPE:
                return f"string tensor ({n.op_type} attribute)"
            if n.op_type in ("Cast", "CastLike") and a.name == "to" and a.i == STRING_DTYPE:
                return "string tensor (cast to string)"
    return ""


# ---------------------------------------------------------------------------
# Running one case


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds
        self.seconds = seconds

    def left(self) -> float:
        return max(0.1, self.end - time.monotonic())


class Failure(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def run_tool(cmd: list[str], deadline: Deadline, what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=deadline.left())
    except subprocess.TimeoutExpired:
        raise Failure("failed", f"{what}: timed out (case limit {deadline.seconds:g} s)")


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def shorten(msg: str, model: str) -> str:
    """Drops the model's directory from a message; keeps it one line and short."""
    msg = msg.replace(str(Path(model).parent) + os.sep, "")
    return msg if len(msg) <= 400 else msg[:397] + "..."


def read_dataset(ds: str, model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """\\returns the data set's input tensors by graph input name (by the
    tensor's own name, else by position in graph.input as the backend runner
    does)."""
    names = [i.name for i in model.graph.input]
    out = {}
    k = 0
    while os.path.exists(os.path.join(ds, f"input_{k}.pb")):
        t = onnx.TensorProto()
        t.ParseFromString(Path(ds, f"input_{k}.pb").read_bytes())
        name = t.name if t.name in names else (names[k] if k < len(names) else f"#{k}")
        out[name] = t
        k += 1
    return out


def shape_args(model: onnx.ModelProto, inputs: dict[str, onnx.TensorProto], frozen: set[str]) -> list[str]:
    """--shape NAME=AxB for each input whose declared shape is not fully static."""
    inits = {i.name for i in model.graph.initializer}
    args = []
    for i in model.graph.input:
        if i.name in inits or i.name in frozen or i.name not in inputs:
            continue
        tt = i.type.tensor_type
        static = tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
        if static:
            continue
        dims = list(inputs[i.name].dims)
        if not dims:
            continue  # a scalar: nothing to bind
        args += ["--shape", f"{i.name}=" + "x".join(str(d) for d in dims)]
    return args


INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}


def compile_plan(args, case: Case, plan: str, extra: list[str], deadline: Deadline) -> tuple[int, str]:
    cmd = [os.path.join(args.bin, "pcc"), case.model, "--gpus", str(args.gpus), "-o", plan, "--quiet"] + extra
    if args.strategy:
        cmd += ["--strategy", args.strategy]
    p = run_tool(cmd, deadline, "pcc")
    return p.returncode, first_line(p.stderr)


def write_unfrozen_inputs(ds_inputs: dict[str, onnx.TensorProto], model: onnx.ModelProto,
                          frozen: set[str], where: str) -> str:
    """Writes the inputs that stay run-time inputs, named, in graph order."""
    os.makedirs(where, exist_ok=True)
    k = 0
    for i in model.graph.input:
        if i.name in ds_inputs and i.name not in frozen:
            t = onnx.TensorProto()
            t.CopyFrom(ds_inputs[i.name])
            t.name = i.name
            Path(where, f"input_{k}.pb").write_bytes(t.SerializeToString())
            k += 1
    return where


def run_dataset_plan(args, case: Case, plan: str, inputs_dir: str, expect_dir: str, deadline: Deadline) -> None:
    cmd = [os.path.join(args.bin, "pcc-run"), plan, "--inputs", inputs_dir, "--expect", expect_dir,
           "--rtol", repr(case.rtol), "--atol", repr(case.atol)]
    p = run_tool(cmd, deadline, "pcc-run")
    if p.returncode == 0:
        return
    mismatch = [ln for ln in p.stdout.splitlines() if "MISMATCH" in ln]
    reason = mismatch[0].strip() if mismatch else first_line(p.stderr) or f"pcc-run exited {p.returncode}"
    raise Failure("failed", shorten(reason, case.model))


def declared_types(values) -> dict[str, int]:
    return {v.name: v.type.tensor_type.elem_type for v in values if v.type.WhichOneof("value") == "tensor_type"}


def normalize_dataset(ds: str, model: onnx.ModelProto, where: str) -> str:
    """Older test data stores bfloat16 tensors as uint16 (numpy has no
    bfloat16); relabels them as the model declares. \\returns `ds`, or a fixed
    copy under `where`."""
    ins = [i.type.tensor_type.elem_type for i in model.graph.input]
    outs = [o.type.tensor_type.elem_type for o in model.graph.output]
    in_by_name, out_by_name = declared_types(model.graph.input), declared_types(model.graph.output)
    fixed = {}
    for f in sorted(os.listdir(ds)):
        m = re.fullmatch(r"(input|output)_(\d+)\.pb", f)
        if not m:
            continue
        t = onnx.TensorProto()
        try:
            t.ParseFromString(Path(ds, f).read_bytes())
        except Exception:
            continue
        k = int(m.group(2))
        by_name, by_pos = (in_by_name, ins) if m.group(1) == "input" else (out_by_name, outs)
        want = by_name.get(t.name, by_pos[k] if k < len(by_pos) else 0)
        if t.data_type == onnx.TensorProto.UINT16 and want == onnx.TensorProto.BFLOAT16:
            t.data_type = onnx.TensorProto.BFLOAT16
            fixed[f] = t
    if not fixed:
        return ds
    os.makedirs(where, exist_ok=True)
    for f in os.listdir(ds):
        if f in fixed:
            Path(where, f).write_bytes(fixed[f].SerializeToString())
        elif os.path.isfile(os.path.join(ds, f)):
            shutil.copy(os.path.join(ds, f), where)
    return where


@dataclass
class PlanFacts:
    runtime_ops: int  # ops the ranks run, collectives excluded, summed over ranks
    split: bool       # more than one rank, and the work is divided or communicated


def plan_facts(plan: str, whole: dict | None = None) -> PlanFacts:
    """Reads what a compiled plan does from its report.json: how many ops run
    at run time and whether the ranks divide the work. A plan on several
    ranks divides it when every rank does less than 90% of the FLOPs of the
    whole graph (of its peak of live activations, for a graph that computes
    no FLOPs: Concat, Slice, Pad), or when the ranks communicate; otherwise
    each rank computes the whole graph (replicated). The whole graph's work
    is `whole` (the same model compiled for one device, see one_device_work)
    when given, else the unpartitioned reference program's, which the
    optimization passes also shrink: without `whole` an optimized replicated
    plan can pass for a divided one."""
    try:
        report = json.loads(Path(plan, "report.json").read_text())
        ranks = report["ranks"]
        ops = sum(n for r in ranks for n in r.get("ops", {}).values())
        base = whole or report.get("reference", {})
        key = "flops" if base.get("flops", 0) > 0 else "peak_activation_bytes"
        ref_work = base.get(key, 0)
        # Ranks' programs differ a little from the whole graph after folding;
        # a tenth less work per rank is taken as a real division.
        divided = ref_work > 0 and max(r.get(key, 0) for r in ranks) < 0.9 * ref_work
        talks = any(n for r in ranks for n in r.get("comm_count", {}).values())
        return PlanFacts(ops, len(ranks) > 1 and (divided or talks))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Failure("failed", f"pcc wrote no readable report.json in the plan: {e}")


def one_device_work(args, case: Case, extra: list[str], deadline: Deadline) -> dict:
    """\returns the work of the model compiled for one device (optimized like
    every plan, not partitioned), what each rank of a replicated plan does:
    {"flops": F, "peak_activation_bytes": B}; {} when that compile fails (the
    reference program's figures are used then)."""
    cmd = [os.path.join(args.bin, "pcc"), case.model, "--gpus", "1", "--emit", "json", "--quiet"] + extra
    p = run_tool(cmd, deadline, "pcc")
    if p.returncode != 0:
        return {}
    try:
        rank = json.loads(p.stdout)["ranks"][0]
        return {"flops": int(rank["flops"]), "peak_activation_bytes": int(rank["peak_activation_bytes"])}
    except (ValueError, KeyError, IndexError, TypeError):
        return {}


# pcc names the input it needs as a constant: "input 1 ('pads') must be a
# constant", or "unless input 'X' is known".
NAMED_INPUT = re.compile(r"input (?:\d+ )?\('([^']+)'\) must be a constant|input '([^']+)' is known")


def named_input(msg: str) -> str:
    m = NAMED_INPUT.search(msg)
    return (m.group(1) or m.group(2)) if m else ""


def run_case(args, case: Case, model: onnx.ModelProto, work: str) -> tuple[str, PlanFacts]:
    """Runs every data set of the case; raises Failure. \\returns how much of
    the input had to be frozen ("", "some" or "all", the most over the data
    sets) and the facts of the plans (the fewest run-time ops over the data
    sets; split if every plan is split).

    Freezing: when pcc says a graph input must be a constant, that input alone
    is frozen to the data set's value and the case compiled again, input by
    input; when pcc names no graph input (a value computed from them), the
    integer inputs are frozen, then all inputs."""
    deadline = Deadline(args.timeout * case.timeout_scale)
    if not case.datasets:
        raise Failure("failed", "no test_data_set_N in the case")
    froze_level = ""
    facts: PlanFacts | None = None
    plans: dict[tuple, str] = {}
    frozen: set[str] = set()  # carried to the next data set: it needs the same
    for n, ds in enumerate(case.datasets):
        ds = normalize_dataset(ds, model, os.path.join(work, f"data_{n}"))
        inputs = read_dataset(ds, model)
        frozen &= set(inputs)
        ints = {k for k, t in inputs.items() if t.data_type in INT_TYPES}
        for _ in range(len(inputs) + 3):
            extra = shape_args(model, inputs, frozen)
            key = tuple(extra)
            if frozen:
                fdir = os.path.join(work, f"frozen_{n}")
                os.makedirs(fdir, exist_ok=True)
                for name in sorted(frozen):
                    f = os.path.join(fdir, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".pb")
                    Path(f).write_bytes(inputs[name].SerializeToString())
                    extra += ["--freeze", f"{name}={f}"]
                key = (n, tuple(sorted(frozen)))
            if key not in plans:
                plan = os.path.join(work, f"plan_{len(plans)}.pcc")
                rc, msg = compile_plan(args, case, plan, extra, deadline)
                if rc != 0:
                    if NEEDS_CONSTANT.search(msg) and frozen != set(inputs):
                        name = named_input(msg)
                        if name in inputs and name not in frozen:
                            frozen.add(name)
                        elif not ints <= frozen:
                            frozen |= ints
                        else:
                            frozen = set(inputs)
                        continue
                    status = "unsupported" if rc == 2 and UNSUPPORTED.search(msg) else "failed"
                    raise Failure(status, shorten(msg or f"pcc exited {rc}", case.model))
                plans[key] = plan
                f = plan_facts(plan, one_device_work(args, case, extra, deadline) if args.gpus > 1 else None)
                facts = f if facts is None else PlanFacts(min(facts.runtime_ops, f.runtime_ops),
                                                          facts.split and f.split)
            if frozen:
                froze_level = "all" if frozen == set(inputs) or froze_level == "all" else "some"
            inputs_dir = write_unfrozen_inputs(inputs, model, frozen, os.path.join(work, f"in_{n}")) if frozen else ds
            run_dataset_plan(args, case, plans[key], inputs_dir, ds, deadline)
            break
        else:
            raise Failure("failed", "pcc kept asking for constant inputs after all were frozen")
    assert facts is not None
    return froze_level, facts


def passing_status(froze: str, facts: PlanFacts) -> str:
    """passed: nothing frozen. passed-frozen: the (shape-like) inputs pcc
    needs as constants frozen, the rest computed at run time. folded: every input frozen, or some
    frozen and nothing left to compute at run time: the answer came from the
    constant folder, and the case says nothing of what a user gets with run-time
    inputs."""
    if not froze:
        return "passed"
    if froze == "all" or facts.runtime_ops == 0:
        return "folded"
    return "passed-frozen"


def model_ops(path: str) -> set[str]:
    """The op types of a model's graph (an unreadable model: none)."""
    try:
        return {n.op_type for n in onnx.load(path, load_external_data=False).graph.node}
    except Exception:
        return set()


def evaluate(job) -> Result:
    args, case = job
    start = time.monotonic()
    if case.download:
        return Result(case.suite, case.name, case.name, "out-of-scope", f"needs a download ({case.download})")
    try:
        model = onnx.load(case.model, load_external_data=False)
    except Exception as e:  # a model the onnx package cannot read is pcc's to reject too
        why = f"onnx cannot load the model: {first_line(str(e))}"
        return Result(case.suite, case.name, case.name, "failed", why, seconds=time.monotonic() - start)
    op = case_op(case.suite, case.name, model)
    ops = sorted({n.op_type for n in model.graph.node})
    scope = out_of_scope(model)
    if scope:
        return Result(case.suite, case.name, op, "out-of-scope", scope, ops=ops)
    work = tempfile.mkdtemp(prefix="pcc-conf-", dir=args.tmp)
    try:
        froze, facts = run_case(args, case, model, work)
        r = Result(case.suite, case.name, op, passing_status(froze, facts), "", froze,
                   runtime_ops=facts.runtime_ops, split=facts.split)
    except Failure as f:
        r = Result(case.suite, case.name, op, f.status, f.reason)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.seconds = time.monotonic() - start
    r.ops = ops
    return r


# ---------------------------------------------------------------------------
# Known failures, expected statuses, report, gate

STATUSES = ("passed", "passed-frozen", "folded", "failed", "unsupported", "out-of-scope")
PASSING = ("passed", "passed-frozen", "folded")
# How much of a case works at run time; a change to a lower rank is a regression.
STATUS_RANK = {"passed": 3, "passed-frozen": 2, "folded": 1, "failed": 0, "unsupported": 0, "out-of-scope": -1}
EXPECTED_DIR = HERE / "expected"


@dataclass
class KnownFailure:
    phrase: str  # must occur in the failure's reason
    why: str


def read_known_failures(path: Path) -> dict[str, KnownFailure]:
    """Lines `suite/case_name | key phrase | why`: the case fails, its reason
    contains the key phrase, and `why` says why pcc is right or what is left."""
    known = {}
    if not path.exists():
        return known
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 3 or not all(parts) or "/" not in parts[0]:
            raise ValueError(f"{path}:{lineno}: expected 'suite/case_name | key phrase | why', got '{line}'")
        if parts[0] in known:
            raise ValueError(f"{path}:{lineno}: '{parts[0]}' is listed twice")
        known[parts[0]] = KnownFailure(parts[1], parts[2])
    return known


def config_name(args) -> str:
    """The name of a run's configuration, which picks its expected-status file."""
    name = f"gpus{args.gpus}"
    if args.strategy:
        name += "-" + re.sub(r"[^A-Za-z0-9]+", "", args.strategy)
    if args.ops:
        name += "-" + re.sub(r"[^A-Za-z0-9]+", "", args.ops.lower())
    return name


def expected_entry(r: Result, gpus: int) -> str:
    """The expected-status value recorded for a result: the status, and on
    several devices whether a passing plan splits the work."""
    if gpus > 1 and r.status in PASSING:
        return f"{r.status}\t{'split' if r.split else 'replicated'}"
    return r.status


def read_expected(path: Path) -> dict[str, str]:
    """Lines `suite/case<TAB>status[<TAB>split|replicated]`."""
    expected = {}
    if not path.exists():
        return expected
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        case, sep, value = line.partition("\t")
        status = value.split("\t")[0]
        if not sep or "/" not in case or status not in STATUSES:
            raise ValueError(f"{path}:{lineno}: expected 'suite/case<TAB>status', got '{line}'")
        if case in expected:
            raise ValueError(f"{path}:{lineno}: '{case}' is listed twice")
        expected[case] = value
    return expected


def write_expected(path: Path, results: list[Result], gpus: int, keep: dict[str, str], ran_suites: set[str],
                   header: str) -> None:
    """Writes the expected statuses of this run; entries of suites that did not
    run are kept."""
    entries = {k: v for k, v in keep.items() if k.rsplit("/", 1)[0] not in ran_suites}
    entries.update({r.id: expected_entry(r, gpus) for r in results})
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(header)
        for case in sorted(entries):
            f.write(f"{case}\t{entries[case]}\n")


def counts(results: list[Result]) -> dict[str, int]:
    c = {s: 0 for s in STATUSES}
    for r in results:
        c[r.status] += 1
    return c


def in_scope(c: dict[str, int]) -> int:
    return sum(c[s] for s in STATUSES if s != "out-of-scope")


def runtime_rate(c: dict[str, int]) -> str:
    """Cases that compute their answer at run time (passed or passed-frozen),
    as a share of the cases in scope; folded cases never count."""
    t = in_scope(c)
    return f"{100 * (c['passed'] + c['passed-frozen']) / t:.1f}%" if t else "-"


def summary_line(c: dict[str, int]) -> str:
    return (f"conformance: {c['passed']} passed, {c['passed-frozen']} passed-frozen, {c['folded']} folded, "
            f"{c['failed']} failed, {c['unsupported']} unsupported of {in_scope(c)}")


def folded_only_ops(results: list[Result]) -> list[str]:
    """Ops whose passing cases were all folded, in every suite: the ops that
    work only when their inputs are compile-time constants (not at run time)."""
    by_op: dict[str, list[Result]] = {}
    for r in results:
        if r.suite.endswith("/node") and r.status in PASSING:
            by_op.setdefault(r.op, []).append(r)
    return sorted(op for op, rs in by_op.items() if all(r.status == "folded" for r in rs))


def write_reports(out: Path, suites: list[Suite], results: list[Result], args) -> None:
    out.mkdir(parents=True, exist_ok=True)
    by_suite: dict[str, list[Result]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)

    with open(out / "cases.tsv", "w") as f:
        f.write("suite\tcase\top\tstatus\tfroze\truntime_ops\tsplit\tseconds\treason\n")
        for r in sorted(results, key=lambda r: (r.suite, r.name)):
            f.write(f"{r.suite}\t{r.name}\t{r.op}\t{r.status}\t{r.froze or '-'}\t{r.runtime_ops}\t{int(r.split)}\t"
                    f"{r.seconds:.2f}\t{r.reason}\n")

    rows = []
    for s in suites:
        per_op: dict[str, list[Result]] = {}
        for r in by_suite.get(s.name, []):
            per_op.setdefault(r.op, []).append(r)
        for op in sorted(per_op):
            rs = per_op[op]
            reasons = "; ".join(f"{r.name}: {r.reason}" for r in sorted(rs, key=lambda r: r.name) if r.reason)
            rows.append((s.name, op, counts(rs), reasons))
    cols = [s for s in STATUSES]
    with open(out / "conformance.tsv", "w") as f:
        f.write("suite\top\t" + "\t".join(c.replace("-", "_") for c in cols) + "\treasons\n")
        for suite, op, c, reasons in rows:
            f.write(f"{suite}\t{op}\t" + "\t".join(str(c[k]) for k in cols) + f"\t{reasons}\n")

    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    with open(out / "conformance.md", "w") as f:
        f.write(f"# ONNX backend conformance (--gpus {args.gpus}"
                f"{' --strategy ' + args.strategy if args.strategy else ''})\n\n")
        f.write("| suite | passed | passed-frozen | folded | failed | unsupported | in scope | run-time pass rate "
                "| out of scope |\n|---|---|---|---|---|---|---|---|---|\n")
        for s in suites:
            c = counts(by_suite.get(s.name, []))
            f.write(f"| {s.name} | {c['passed']} | {c['passed-frozen']} | {c['folded']} | {c['failed']} | "
                    f"{c['unsupported']} | {in_scope(c)} | {runtime_rate(c)} | {c['out-of-scope']} |\n")
        folded = folded_only_ops(results)
        f.write("\nNot supported at run time (every passing case folded): "
                + (", ".join(folded) if folded else "none") + "\n")
        if args.gpus > 1:
            passing = [r for r in results if r.status in PASSING]
            f.write(f"\nSplit across ranks: {sum(r.split for r in passing)} of {len(passing)} passing cases; "
                    "the rest computed replicated.\n")
        f.write("\n## Per operator\n\n| suite | op | " + " | ".join(cols) + " | reasons |\n|"
                + "---|" * (len(cols) + 3) + "\n")
        for suite, op, c, reasons in rows:
            f.write(f"| {suite} | {cell(op)} | " + " | ".join(str(c[k]) for k in cols) + f" | {cell(reasons)} |\n")


def gate(suites: list[Suite], found: set[str], results: list[Result], known: dict[str, KnownFailure],
         expected: dict[str, str], gpus: int, full: bool) -> list[str]:
    """\\returns the gate's complaints (empty: the gate passes). `found`: the
    ids of every case of the selected suites, before --filter and --ops.
    `full`: no --filter, so every case the expected list names should have run,
    and a known failure that names no case is stale."""
    problems = []
    ran = {r.id: r for r in results}
    for s in suites:
        if not any(case.startswith(s.name + "/") for case in found):
            problems.append(f"no cases: {s.name} found no case in {s.path}")
    if not results:
        problems.append("no cases: the run selected no case")
    for r in sorted(results, key=lambda r: r.id):
        k = known.get(r.id)
        if r.status == "failed":
            if k is None:
                problems.append(f"new failure: {r.id}: {r.reason}")
            elif k.phrase not in r.reason:
                problems.append(f"failed for another reason: {r.id}: '{r.reason}' does not contain the known "
                                f"failure's key phrase '{k.phrase}'")
        elif k is not None:
            problems.append(f"stale known failure: {r.id} is {r.status} now; remove it from {KNOWN_FAILURES.name}")
        want = expected.get(r.id)
        got = expected_entry(r, gpus)
        if want is None:
            problems.append(f"not in the expected list: {r.id} ({got.replace(chr(9), ', ')}); "
                            "record it with --update-expected")
        elif want != got:
            before, now = want.split("\t")[0], r.status
            kind = "regression" if STATUS_RANK[now] < STATUS_RANK[before] or (
                now == before and want.endswith("split")) else "changed"
            problems.append(f"{kind}: {r.id}: expected {want.replace(chr(9), ', ')}, got {got.replace(chr(9), ', ')}"
                            + (f": {r.reason}" if r.reason else "")
                            + ("" if kind == "regression" else "; record it with --update-expected"))
    if full:
        selected = {s.name for s in suites}
        for case in sorted(expected):
            if case.rsplit("/", 1)[0] in selected and case not in ran:
                problems.append(f"stale entry: {case} is in the expected list but did not run")
        for case in sorted(known):
            if case.rsplit("/", 1)[0] in selected and case not in found:
                problems.append(f"stale known failure: {case} names no case")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="build directory holding pcc and pcc-run")
    ap.add_argument("--gpus", type=int, default=1, help="devices to compile for (default 1)")
    ap.add_argument("--strategy", default="", help="pcc --strategy for every case (e.g. tp=2)")
    ap.add_argument("--ops", default="",
                    help="run only cases whose model holds one of these ops (comma-separated, e.g. MatMul,Gemm)")
    ap.add_argument("--filter", default="", help="run only cases whose suite/name contains this (no stale-entry check)")
    ap.add_argument("--suites", default="", help="comma-separated substrings of suite names to run (default all)")
    ap.add_argument("--jobs", type=int, default=2, help="cases run in parallel (default 2)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per case (default 60)")
    ap.add_argument("--out", help="report directory (default BIN/conformance)")
    ap.add_argument("--known-failures", default=str(KNOWN_FAILURES), help="known failures file")
    ap.add_argument("--expected", help="expected statuses file (default tests/conformance/expected/CONFIG.tsv)")
    ap.add_argument("--update-expected", action="store_true",
                    help="write this run's statuses to the expected file instead of gating on it")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every case that does not pass, as it ends")
    args = ap.parse_args()

    args.bin = os.path.abspath(args.bin)
    for tool in ("pcc", "pcc-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            print(f"run_conformance: error: {args.bin}/{tool} not found (build it first)", file=sys.stderr)
            return 2
    if args.jobs < 1 or args.gpus < 1:
        print("run_conformance: error: --jobs and --gpus must be positive", file=sys.stderr)
        return 2
    if args.update_expected and args.filter:
        print("run_conformance: error: --update-expected needs a run without --filter", file=sys.stderr)
        return 2
    expected_path = Path(args.expected or EXPECTED_DIR / f"{config_name(args)}.tsv")
    try:
        known = read_known_failures(Path(args.known_failures))
        expected = read_expected(expected_path)
    except ValueError as e:
        print(f"run_conformance: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out or os.path.join(args.bin, "conformance")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.tmp = tempfile.mkdtemp(prefix="work-", dir=out)

    suites = all_suites()
    if args.suites:
        wanted = [w for w in args.suites.split(",") if w]
        suites = [s for s in suites if any(w in s.name for w in wanted)]
    if not suites:
        print(f"run_conformance: error: no suite matches --suites {args.suites}", file=sys.stderr)
        return 2
    missing = [s for s in suites if not s.path.is_dir()]
    for s in missing:
        print(f"run_conformance: error: suite {s.name}: no test data at {s.path}", file=sys.stderr)
    present = [s for s in suites if s.path.is_dir()]
    cases = [c for s in present for c in discover(s, out)]
    found = {c.id for c in cases}
    cases = [c for c in cases if args.filter in c.id]
    wanted_ops = {o for o in args.ops.split(",") if o}
    if wanted_ops:
        cases = [c for c in cases if c.model and wanted_ops & model_ops(c.model)]
    start = time.monotonic()
    results = []
    with multiprocessing.Pool(args.jobs) as pool:
        for r in pool.imap_unordered(evaluate, [(args, c) for c in cases], chunksize=4):
            results.append(r)
            if len(results) % 250 == 0:
                print(f"... {len(results)}/{len(cases)} cases ({time.monotonic() - start:.0f} s)", file=sys.stderr,
                      flush=True)
            if args.verbose and r.status not in ("passed", "passed-frozen"):
                print(f"{r.status}: {r.id}: {r.reason}", flush=True)
    shutil.rmtree(args.tmp, ignore_errors=True)
    elapsed = time.monotonic() - start

    write_reports(out, present, results, args)
    main_results = []
    for s in present:
        rs = [r for r in results if r.suite == s.name]
        c = counts(rs)
        extra = "" if s.goal is not None else " (extra suite)"
        goal = f"; goal {100 * s.goal:g}%" if s.goal is not None and in_scope(c) else ""
        print(f"{s.name}: {summary_line(c)}; run-time pass rate {runtime_rate(c)}{goal}; "
              f"{c['out-of-scope']} out of scope{extra}")
        if s.goal is not None:
            main_results += rs
    c = counts(main_results)
    print(summary_line(c) + f"; run-time pass rate {runtime_rate(c)}")
    scope: dict[str, int] = {}
    for r in main_results:
        if r.status == "out-of-scope":
            kind = r.reason.split(" (")[0]
            scope[kind] = scope.get(kind, 0) + 1
    print(f"out of scope: {c['out-of-scope']}" +
          (" (" + ", ".join(f"{k}: {v}" for k, v in sorted(scope.items())) + ")" if scope else ""))
    folded = folded_only_ops(results)
    if folded:
        print(f"not supported at run time (every passing case folded): {', '.join(folded)}")
    if args.gpus > 1:
        passing = [r for r in results if r.status in PASSING]
        print(f"split across ranks: {sum(r.split for r in passing)} of {len(passing)} passing cases "
              f"(the rest computed replicated)")
    frozen = sum(bool(r.froze) for r in results)
    print(f"{len(results)} cases in {elapsed:.0f} s with {args.jobs} jobs ({frozen} needed --freeze); "
          f"reports in {out}")

    if args.update_expected:
        header = (f"# Expected conformance statuses, `run_conformance.py --gpus {args.gpus}"
                  f"{' --strategy ' + args.strategy if args.strategy else ''}"
                  f"{' --ops ' + args.ops if args.ops else ''}`; written by --update-expected.\n"
                  "# suite/case<TAB>status[<TAB>split|replicated on several devices]. The run fails on any change.\n")
        write_expected(expected_path, results, args.gpus, expected, {s.name for s in present}, header)
        print(f"wrote {expected_path}")
        return 0 if not missing else 1

    problems = [f"no data: {s.name}: {s.path} does not exist" for s in missing]
    problems += gate(present, found, results, known, expected, args.gpus, full=not args.filter)
    for p in problems:
        print(p)
    if problems:
        print(f"conformance gate: FAILED ({len(problems)} problems)")
        return 1
    print("conformance gate: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
