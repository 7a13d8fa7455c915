#!/usr/bin/env python3
"""Compiles every model PyTorch exported into models/exported/ (models/export.py
--small) at 1 and 4 devices, runs each plan on CPU ranks and compares its
outputs with torch's outputs committed next to the model and with
onnxruntime's outputs on the same inputs, at rtol 1e-3 and an atol of 1e-4 or
a thousandth of the output's scale, whichever is smaller. Every comparison is
first shown to reject wrong answers (all zeros, negated, shuffled).

A case that fails is a failure. A case listed in EXPECTED_FAILURES (with its
one reason) is reported as XFAIL instead; if such a case passes, the list is
stale and that is a failure too.
"""

import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

# "<model>.<exporter> --gpus N" -> why it does not work yet (one reason per case).
EXPECTED_FAILURES = {}

GPUS = [1, 4]
RTOL, ATOL = 1e-3, 1e-4


def atol_for(expected):
    """ATOL, or a thousandth of the output's largest magnitude where that is
    smaller: the small CNN exports keep uncalibrated batch-norm statistics, and
    their logits are of order 1e-7, far below ATOL."""
    return e2e.scaled_atol(expected, ATOL)
EXPORTED_DIR = os.path.join(e2e.MODELS_DIR, "exported")


def exports():
    """\returns [(key, model path, data folder, batch)] for every committed export."""
    manifest = {}
    path = os.path.join(EXPORTED_DIR, "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            manifest = {f"{e['name']}.{e['exporter']}": e for e in json.load(f)["exports"]}
    found = []
    for model in sorted(glob.glob(os.path.join(EXPORTED_DIR, "*.onnx"))):
        key = os.path.basename(model)[:-len(".onnx")]
        batch = manifest.get(key, {}).get("batch")
        found.append((key, model, model[:-len(".onnx")], batch))
    return found


def has_symbolic_dim(model):
    return any(not d.HasField("dim_value")
               for vi in e2e.graph_inputs(model) for d in vi.type.tensor_type.shape.dim)


class Case:
    """One export at one device count; collects the first problem it meets."""

    def __init__(self, name):
        self.name = name
        self.problems = []

    def fail(self, what, detail=""):
        self.problems.append(f"{what}" + (f"\n{detail}" if detail else ""))


def run_case(suite, tools, key, model_path, data_dir, batch, gpus, reference):
    """Compiles, runs and compares one case; \returns a Case (no problems: it passed)."""
    case = Case(f"{key} --gpus {gpus}")
    work = suite.tempdir(key.replace(".", "-"))
    try:
        plan = os.path.join(work, "plan.pcc")
        outs = os.path.join(work, "outputs")
        model = e2e.onnx.load(model_path, load_external_data=False)
        args = [model_path, "--gpus", gpus, "-o", plan, "--quiet"]
        if has_symbolic_dim(model):
            args[1:1] = ["--batch", batch]
        r = tools.run("pcc", args)
        if r.returncode != 0:
            case.fail("compile", r.describe(1500))
            return case
        r = tools.run("pcc-run", [plan, "--inputs", data_dir, "--outputs", outs], timeout=600)
        if r.returncode != 0:
            case.fail("pcc-run", r.describe(1500))
            return case
        for k, (torch_out, ort_out) in enumerate(reference):
            path = os.path.join(outs, f"output_{k}.pb")
            if not os.path.exists(path):
                case.fail(f"output_{k}.pb not written", r.describe(1500))
                continue
            got = e2e.read_tensor(path)
            for source, want in (("torch", torch_out), ("onnxruntime", ort_out)):
                diff = e2e.compare(got, want, RTOL, atol_for(want))
                if diff:
                    case.fail(f"output_{k} differs from {source}", "  " + diff)
        return case
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def reference_outputs(suite, key, model_path, data_dir):
    """\returns [(torch output, onnxruntime output)] per model output, after
    checking that onnxruntime agrees with torch (else the export itself is off);
    None if the data cannot be read or run."""
    inputs = [e2e.read_tensor(p) for p in sorted(glob.glob(os.path.join(data_dir, "input_*.pb")),
                                                 key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
    torch_outs = [e2e.read_tensor(p) for p in
                  sorted(glob.glob(os.path.join(data_dir, "output_*.pb")),
                         key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
    if not suite.check(f"{key}: test data present", inputs and torch_outs,
                       f"  no input_K.pb / output_K.pb in {data_dir}"):
        return None
    ort_outs = e2e.onnxruntime_outputs(model_path, inputs)
    diffs = [e2e.compare(o, t, RTOL, atol_for(t)) for o, t in zip(ort_outs, torch_outs)]
    suite.check(f"{key}: onnxruntime matches torch", not any(diffs),
                "\n".join(f"  output_{k}: {d}" for k, d in enumerate(diffs) if d))
    # The comparison must be able to fail: wrong answers of the kinds a broken
    # kernel or partition produces are rejected at the tolerance used.
    for k, t in enumerate(torch_outs):
        accepted = [name for name, wrong in e2e.wrong_answers(t) if not e2e.compare(wrong, t, RTOL, atol_for(t))]
        suite.check(f"{key}: output_{k} comparison rejects wrong answers", not accepted,
                    f"  accepted at rtol {RTOL:g}, atol {atol_for(t):.3g}: {', '.join(accepted)}")
    return list(zip(torch_outs, ort_outs))


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_exported", args)
    tools = e2e.Tools(args.bin)
    found = exports()
    suite.check("exported models present", bool(found), f"  no *.onnx in {EXPORTED_DIR}")
    keys = {f"{key} --gpus {g}" for key, *_ in found for g in GPUS}
    unknown = sorted(set(EXPECTED_FAILURES) - keys)
    suite.check("EXPECTED_FAILURES names existing cases", not unknown,
                "  no such case: " + ", ".join(unknown))
    xfails = []
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        for key, model_path, data_dir, batch in found:
            if not any(suite.selected(f"{key} --gpus {g}") for g in GPUS):
                continue
            reference = reference_outputs(suite, key, model_path, data_dir)
            if reference is None:
                continue
            batch = batch or reference[0][0].shape[0]
            for gpus in GPUS:
                name = f"{key} --gpus {gpus}"
                if not suite.selected(name):
                    continue
                try:
                    case = run_case(suite, tools, key, model_path, data_dir, batch, gpus, reference)
                except Exception as e:  # a bug in the test must not hide the other cases
                    case = Case(name)
                    case.fail("test error", f"  {type(e).__name__}: {e}")
                reason = EXPECTED_FAILURES.get(name)
                detail = "\n".join(case.problems)
                if reason is None:
                    suite.check(name, not case.problems, detail)
                elif case.problems:
                    xfails.append(name)
                    print(f"XFAIL {name}: {reason}\n{e2e.indent(detail[:1500])}", flush=True)
                else:
                    suite.check(f"{name}: listed as an expected failure ({reason}) but passes;"
                                " remove it from EXPECTED_FAILURES", False)
    if xfails:
        print(f"\n{len(xfails)} expected failures:\n" +
              "\n".join(f"  {n}: {EXPECTED_FAILURES[n]}" for n in xfails))
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
