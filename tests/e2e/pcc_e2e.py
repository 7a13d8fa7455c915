"""Shared helpers for the end-to-end tests.

Each test script is run as `python tests/e2e/test_X.py --bin BUILD_DIR` (ctest
sets PCC_SOURCE_DIR). It records checks in a Suite, prints every failure with
the command and output that caused it, closes with `N passed, N failed`, and
exits 1 if anything failed.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import onnx
from onnx import numpy_helper

SOURCE_DIR = os.environ.get(
    "PCC_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS_DIR = os.path.join(SOURCE_DIR, "models")


def parse_args(description):
    """\returns the parsed command line shared by every e2e script."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bin", required=True, help="build folder holding pcc, pcc-run, pcc-report")
    parser.add_argument("-k", dest="filter", default="",
                        help="run only cases whose name contains this string")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    return parser.parse_args()


def model_path(name):
    return os.path.join(MODELS_DIR, name)


class Result:
    """What a tool run produced."""

    def __init__(self, cmd, returncode, stdout, stderr, timed_out=False):
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out

    def describe(self, limit=4000):
        """\returns the command, exit code and (the end of) its output, for failure messages."""
        def tail(s):
            return s if len(s) <= limit else "...\n" + s[-limit:]
        status = "timed out" if self.timed_out else f"exit {self.returncode}"
        return (f"  $ {shlex.join(self.cmd)}\n  -> {status}\n"
                f"  stdout:\n{indent(tail(self.stdout))}\n  stderr:\n{indent(tail(self.stderr))}")


def indent(text, prefix="    "):
    return "\n".join(prefix + line for line in text.splitlines()) if text else prefix + "(empty)"


class Tools:
    """Runs pcc, pcc-run and pcc-report from one build folder."""

    def __init__(self, bin_dir):
        self.bin_dir = os.path.abspath(bin_dir)

    def path(self, tool):
        return os.path.join(self.bin_dir, tool)

    def missing(self, needed=("pcc", "pcc-run", "pcc-report")):
        """\returns the tools of `needed` that are not built."""
        return [t for t in needed if not os.access(self.path(t), os.X_OK)]

    def run(self, tool, args, timeout=300, env=None):
        """Runs `tool args...` (`env`: variables added to this environment);
        \returns a Result (a timeout is a Result, not an exception)."""
        cmd = [self.path(tool)] + [str(a) for a in args]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               errors="replace", env=dict(os.environ, **env) if env else None)
            return Result(cmd, p.returncode, p.stdout, p.stderr)
        except subprocess.TimeoutExpired as e:
            def text(b):
                return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
            return Result(cmd, None, text(e.stdout), text(e.stderr), timed_out=True)
        except OSError as e:
            return Result(cmd, None, "", f"could not start: {e}")


class Suite:
    """Counts passed and failed checks and prints the failures."""

    def __init__(self, name, args):
        self.name = name
        self.filter = args.filter
        self.keep = args.keep
        self.passed = 0
        self.failed = 0
        self.failures = []

    def selected(self, case):
        return self.filter in case

    def check(self, case, ok, detail=""):
        """Records one check; \returns ok so callers can stop a case early."""
        if ok:
            self.passed += 1
            print(f"PASS {case}", flush=True)
        else:
            self.failed += 1
            self.failures.append(case)
            print(f"FAIL {case}" + (f"\n{detail}" if detail else ""), flush=True)
        return ok

    def run_case(self, case, fn, *args):
        """Runs fn(*args); an exception in the test code counts as one failure."""
        if not self.selected(case):
            return
        try:
            fn(*args)
        except Exception:  # a bug in a case must not hide the other cases
            self.check(case, False, indent(traceback.format_exc()))

    def tempdir(self, prefix):
        d = tempfile.mkdtemp(prefix=f"pcc-e2e-{prefix}-")
        return d

    def finish(self):
        """Prints the summary; \returns the process exit code."""
        if self.failures:
            print("\nfailed:\n" + "\n".join(f"  {f}" for f in self.failures))
        print(f"{self.name}: {self.passed} passed, {self.failed} failed")
        return 0 if self.failed == 0 and self.passed > 0 else 1


SUBSET_VARIABLE = "PCC_E2E_SUBSET"


def sanitizer_subset():
    """\returns whether `make sanitize` asked for the smaller set (PCC_E2E_SUBSET=sanitize)."""
    return os.environ.get(SUBSET_VARIABLE) == "sanitize"


def exporter_subset(items, name_of=lambda x: x):
    """`make sanitize` sets PCC_E2E_SUBSET=sanitize: the tests that repeat one
    check over all 16 committed exports then take the TorchScript exporter's
    8 (one per architecture; the code they reach is the same, and every one
    runs under `make test`). \returns the items to run, saying what was left
    out; all of them when the variable is not set."""
    if not sanitizer_subset():
        return list(items)
    items = list(items)
    kept = [x for x in items if ".dynamo" not in os.path.basename(name_of(x))]
    if len(kept) < len(items):
        print(f"{SUBSET_VARIABLE}=sanitize: {len(items) - len(kept)} of {len(items)} cases left out "
              "(the dynamo exporter's copies of architectures the TorchScript exports cover; `make test` runs them)",
              flush=True)
    return kept


def prerequisites_required():
    """\returns whether a missing optional prerequisite (the CUDA toolkit,
    ptxas, the CUDA backend) fails rather than skips: where the environment
    variable CI is set, as CI services set it (docs/testing.md, "Where a test
    may skip")."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def prerequisite(suite, what, present, detail=""):
    """Records whether optional prerequisite `what` is here. Absent, the
    checks that need it are skipped with a printed SKIP line, or, where CI is
    set, the absence is a failure. \returns present."""
    if present:
        return True
    if prerequisites_required():
        suite.check(f"{what} is present (required: CI is set)", False, detail)
    else:
        print(f"SKIP the checks that need {what}: not here (allowed where CI is not set; docs/testing.md)",
              flush=True)
    return False


def require_tools(suite, tools, needed=("pcc", "pcc-run", "pcc-report")):
    """Fails the suite (not skips it) when a needed tool is not built; \returns True if all exist."""
    missing = tools.missing(needed)
    return suite.check("tools built", not missing,
                       f"  missing in {tools.bin_dir}: {', '.join(missing)}")


def expect_one_line_error(suite, tools, case, tool, args, patterns, code=2):
    """Runs `tool args`; checks the exit code, that stderr is exactly one line,
    and that the line matches every regex in `patterns`."""
    r = tools.run(tool, args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    ok = r.returncode == code and len(lines) == 1
    missing = [p for p in patterns if not lines or not re.search(p, lines[0])]
    return suite.check(f"{case}: exit {code} with one line naming it", ok and not missing,
                       f"  lacks {missing}\n{r.describe()}")


# --- tensors and reference outputs ------------------------------------------

def graph_inputs(model):
    """\returns the model's run-time inputs (not initializers), in order."""
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def make_inputs(model, batch, seed, int_high=128):
    """\returns seeded arrays for every run-time input, symbolic dims bound to `batch`.
    Integer inputs (token ids) are drawn from [0, int_high)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for vi in graph_inputs(model):
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else batch for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(0, int_high, size=shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def onnxruntime_outputs(path, arrays):
    """\returns onnxruntime's outputs of the model at `path` for the given inputs."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no warnings on stderr
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))


def write_tensor(path, array, name=""):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t).copy()


def write_case(directory, model_file, batch, seed, int_high=128):
    """Writes input_K.pb and onnxruntime's output_K.pb (the ONNX backend test
    layout) into `directory`; \returns (inputs, expected outputs)."""
    model = onnx.load(model_file, load_external_data=False)
    os.makedirs(directory, exist_ok=True)
    inputs = make_inputs(model, batch, seed, int_high)
    outputs = onnxruntime_outputs(model_file, inputs)
    for k, (vi, a) in enumerate(zip(graph_inputs(model), inputs)):
        write_tensor(os.path.join(directory, f"input_{k}.pb"), a, vi.name)
    for k, (vi, a) in enumerate(zip(model.graph.output, outputs)):
        write_tensor(os.path.join(directory, f"output_{k}.pb"), a, vi.name)
    return inputs, outputs


def blind_tolerance(expected, rtol, atol):
    """\returns why (rtol, atol) cannot tell a wrong answer from `expected`,
    or "". A tolerance that accepts an all-zero answer for an output that is not
    all zero (expected values far below atol) would pass almost anything, so
    the comparison itself is reported as broken."""
    e = expected.astype(np.float64)
    finite = e[np.isfinite(e)]
    if finite.size == 0 or not np.any(finite):
        return ""  # nothing but zeros (or non-finite values) to tell apart
    if np.allclose(np.zeros_like(finite), finite, rtol=rtol, atol=atol):
        return (f"tolerance cannot detect a wrong answer: expected values reach only "
                f"{np.max(np.abs(finite)):.3g} but atol is {atol:g} (an all-zero output "
                f"would pass); scale the tolerance to the output")
    return ""


def wrong_answers(expected, seed=0):
    """\returns [(name, array)]: plausible wrong answers a comparison must
    reject (all zeros, negated, elements shuffled); empty for outputs where
    they are not wrong (constant outputs)."""
    e = np.asarray(expected)
    if not np.issubdtype(e.dtype, np.inexact) or e.size < 2 or np.all(e == e.flat[0]):
        return []
    shuffled = e.flatten()
    np.random.default_rng(seed).shuffle(shuffled)
    return [("all zeros", np.zeros_like(e)), ("negated", -e), ("shuffled", shuffled.reshape(e.shape))]


def scaled_atol(expected, atol, fraction=1e-3):
    """\returns atol, lowered to `fraction` of the largest |expected| where the
    outputs are small, so that the tolerance stays below the output's scale."""
    if not np.issubdtype(expected.dtype, np.inexact) or expected.size == 0:
        return atol
    finite = np.abs(expected[np.isfinite(expected)]).astype(np.float64)
    if finite.size == 0 or finite.max() == 0:
        return atol
    return min(atol, fraction * float(finite.max()))


def compare(actual, expected, rtol, atol):
    """\returns "" if close (numpy allclose semantics), else what differs."""
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)} != expected {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != expected {expected.dtype}"
    if np.issubdtype(expected.dtype, np.inexact) and expected.size:
        why = blind_tolerance(expected, rtol, atol)
        if why:
            return why
    if np.allclose(actual, expected, rtol=rtol, atol=atol):
        return ""
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    worst = np.unravel_index(np.argmax(diff), diff.shape)
    bad = int(np.sum(diff > atol + rtol * np.abs(expected)))
    return (f"{bad} of {diff.size} elements differ; max |diff| {diff[worst]:.3g} at {list(worst)}"
            f" (got {actual[worst]}, expected {expected[worst]})")


# --- plan bundle (read without generated code) -------------------------------

def _varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def decode_fields(buf):
    """Decodes one protobuf message's top level; \returns {field: [int | bytes]}.
    Enough to read plan.pb's counts and offsets without generated code."""
    fields, pos = {}, 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = bytes(buf[pos:pos + n]), pos + n
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _signed(v):
    """\returns a varint read as int64 (negative int32/int64 values use ten bytes)."""
    return v - (1 << 64) if v >= (1 << 63) else v


def _ints(values):
    """\returns the elements of a repeated integer field, packed or not."""
    out = []
    for v in values:
        if isinstance(v, bytes):
            pos = 0
            while pos < len(v):
                x, pos = _varint(v, pos)
                out.append(_signed(x))
        else:
            out.append(_signed(v))
    return out


# Bytes per element of each dtype code (as runtime/support/dtype.cpp stores them).
DTYPE_SIZES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
               16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1, 23: 1, 24: 1}


def read_program(raw):
    """\returns one RankProgram of plan.pb as a dict: buffers (id, name, nbytes,
    dtype, shape, weight, arena_offset, in_place_of), instructions (kind, op,
    node, inputs, outputs), state bindings (state, buffer, out_buffer,
    offsets), input and output buffer ids, arena_bytes and
    naive_arena_bytes. Field numbers are those of runtime/plan.proto."""
    r = decode_fields(raw)
    buffers = []
    for b in r.get(6, []):
        f = decode_fields(b)
        desc = decode_fields(f.get(3, [b""])[0])
        dtype = _signed(desc.get(1, [0])[0])
        shape = _ints(desc.get(2, []))
        n = 1
        for d in shape:
            n *= d
        buffers.append({"id": _signed(f.get(1, [0])[0]), "name": f.get(2, [b""])[0].decode(),
                        "dtype": dtype, "shape": shape, "nbytes": n * DTYPE_SIZES.get(dtype, 0),
                        "weight": _signed(f.get(4, [0])[0]),
                        "arena_offset": _signed(f.get(5, [0])[0]),
                        "in_place_of": _signed(f.get(6, [0])[0])})
    instructions = []
    for i in r.get(7, []):
        f = decode_fields(i)
        instructions.append({"kind": f.get(1, [0])[0], "op": f.get(2, [b""])[0].decode(),
                             "node": f.get(9, [b""])[0].decode(),
                             "inputs": _ints(f.get(3, [])), "outputs": _ints(f.get(4, []))})
    binding = lambda raw_b: _signed(decode_fields(raw_b).get(1, [0])[0])  # noqa: E731
    states = []
    for sb in r.get(13, []):
        f = decode_fields(sb)
        states.append({"state": _signed(f.get(1, [0])[0]), "buffer": _signed(f.get(2, [0])[0]),
                       "out_buffer": _signed(f.get(3, [0])[0]), "offsets": _ints(f.get(4, []))})
    return {"rank": r.get(1, [0])[0], "buffers": buffers, "instructions": instructions, "states": states,
            "inputs": [binding(b) for b in r.get(8, [])],
            "outputs": [binding(b) for b in r.get(9, [])],
            "arena_bytes": r.get(10, [0])[0], "naive_arena_bytes": r.get(11, [0])[0]}


def read_programs(bundle):
    """\returns (rank programs, reference program) of a bundle, as read_program gives them."""
    with open(os.path.join(bundle, "plan.pb"), "rb") as f:
        top = decode_fields(f.read())
    return [read_program(r) for r in top.get(8, [])], read_program(top.get(9, [b""])[0])


class PlanInfo:
    """The few facts of a plan bundle the tests check (fields of runtime/plan.proto)."""

    def __init__(self, bundle):
        with open(os.path.join(bundle, "plan.pb"), "rb") as f:
            top = decode_fields(f.read())
        self.schema_version = top.get(1, [0])[0]
        mesh = decode_fields(top[6][0]) if 6 in top else {}
        self.mesh = {axis: mesh.get(n, [0])[0] for axis, n in (("pp", 1), ("dp", 2), ("tp", 3))}
        self.ranks = []
        for raw in top.get(8, []):
            r = decode_fields(raw)
            weights = []
            for w in r.get(5, []):
                wf = decode_fields(w)
                weights.append({"name": wf.get(1, [b""])[0].decode(),
                                "offset": wf.get(3, [0])[0], "nbytes": wf.get(4, [0])[0]})
            self.ranks.append({"rank": r.get(1, [0])[0],
                               "weight_file": r.get(4, [b""])[0].decode(),
                               "weights": weights})


def finish_processes(procs, limit):
    """Waits for every process at most `limit` s; \returns {rank: (rc, stdout, stderr, seconds)}
    (rc None: still running at the limit, then killed here)."""
    t0, ended = time.monotonic(), {}
    while len(ended) < len(procs) and time.monotonic() - t0 < limit:
        for r, p in procs.items():
            if r not in ended and p.poll() is not None:
                ended[r] = time.monotonic() - t0
        time.sleep(0.05)
    out = {}
    for r, p in procs.items():
        if r not in ended:
            p.kill()
        o, e = p.communicate()
        out[r] = (p.returncode if r in ended else None, o, e, ended.get(r, time.monotonic() - t0))
    return out


def run_ranks(tools, plan, world, rendezvous, run_id, extra):
    """Starts `world` pcc-run processes; \returns their (returncode, stdout, stderr)."""
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), PCC_RUN_ID=run_id)
        cmd = [tools.path("pcc-run"), plan, "--rendezvous", rendezvous, "--timeout", "60"] + extra
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out.append((p.returncode, o, e))
    return out
