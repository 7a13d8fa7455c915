#!/usr/bin/env python3
"""`pcc MODEL --gpus 8` on every committed model and export as it comes.

Every one of them leaves its batch symbolic. With no --batch pcc chooses it:
1 under the default latency objective, which the plan records; each plan then
runs on CPU ranks against the reference evaluator (`pcc-run --check`). The
throughput objective's choice is checked apart, without running its plan
(its batch is up to 1024): the curve is 1, 2, 4, ... with every point
costed, the chosen batch is the one of the most samples/s among those that
fit (a larger one only when more than 1% faster), and the sweep stopped for
one of its three stated reasons. A model whose sequence length and image size
have no size anywhere exits 2 with one line naming every one of them and the
--shape flags; the same model carrying the sizes (value_info, metadata_props)
compiles and runs. `--strategy` without `--gpus` takes its mesh's devices.
"""

import glob
import json
import os
import re
import shutil
import sys
import time

from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

GPUS = 8


def committed_models():
    """\returns every committed model: the small ones, then the exports."""
    small = sorted(glob.glob(os.path.join(e2e.MODELS_DIR, "*.onnx")))
    exported = sorted(glob.glob(os.path.join(e2e.MODELS_DIR, "exported", "*.onnx")))
    return small + exported


def name_of(path):
    return os.path.basename(path)[:-len(".onnx")]


class AnyExportTests:
    def __init__(self, suite, tools):
        self.suite = suite
        self.tools = tools
        self.work = suite.tempdir("anyexport")
        self.times = []

    def path(self, name):
        return os.path.join(self.work, name)

    def as_it_comes(self, model):
        """`pcc MODEL --gpus 8`: batch 1 chosen and said, the plan runs and checks."""
        key = name_of(model)
        plan = self.path(key + ".pcc")
        r = self.tools.run("pcc", [model, "--gpus", GPUS, "-o", plan])
        if not self.suite.check(f"{key}: pcc MODEL --gpus {GPUS} compiles", r.returncode == 0, r.describe()):
            return
        said = [ln for ln in r.stderr.splitlines() if ln.startswith("pcc: batch ")]
        self.suite.check(f"{key}: one line says the batch pcc chose and how to change it",
                         len(said) == 1 and re.match(r"pcc: batch 1 for the symbolic leading dim 'batch' of ", said[0])
                         and "--batch N fixes it" in said[0], r.describe())
        with open(os.path.join(plan, "report.json")) as f:
            report = json.load(f)
        b = report.get("batch", {})
        self.suite.check(f"{key}: report.json records batch 1, chosen by pcc",
                         b.get("batch") == 1 and b.get("automatic") is True and len(b.get("curve", [])) == 1
                         and b["curve"][0]["batch"] == 1 and b["curve"][0]["feasible"], f"  {b}")
        r = self.tools.run("pcc-run", [plan, "--check"], timeout=600)
        self.suite.check(f"{key}: the plan matches the reference evaluator on CPU ranks",
                         r.returncode == 0 and "ok" in r.stdout, r.describe())
        if not self.suite.keep:
            shutil.rmtree(plan, ignore_errors=True)

    def throughput_choice(self, model, with_report):
        """`--objective throughput`: the curve and the choice, checked against their rules."""
        key = name_of(model)
        start = time.monotonic()
        r = self.tools.run("pcc", [model, "--gpus", GPUS, "--objective", "throughput", "--emit", "json"])
        seconds = time.monotonic() - start
        if not self.suite.check(f"{key}: --objective throughput compiles", r.returncode == 0, r.describe()):
            return
        doc = json.loads(r.stdout)
        b = doc.get("batch", {})
        curve = b.get("curve", [])
        self.times.append((key, seconds, len(curve), b.get("batch")))
        batches = [p["batch"] for p in curve]
        if not self.suite.check(f"{key}: the curve is 1, 2, 4, ... and the choice is pcc's",
                                b.get("automatic") is True and batches == [2 ** i for i in range(len(batches))]
                                and batches, f"  {b}"):
            return
        fits = [p for p in curve if p["feasible"]]
        best = None
        for p in fits:  # a larger batch must be more than 1% faster
            if best is None or p["samples_per_second"] > best["samples_per_second"] * 1.01:
                best = p
        self.suite.check(f"{key}: the chosen batch has the most estimated samples/s that fits",
                         best is not None and b["batch"] == best["batch"], f"  chosen {b['batch']}, curve {curve}")
        last = curve[-1]
        top = max((p["samples_per_second"] for p in curve[:-1] if p["feasible"]), default=0)
        stopped = (not last["feasible"] or last["batch"] == b["max_batch"]
                   or (len(curve) > 1 and last["samples_per_second"] < top * (1 + b["min_gain"])))
        self.suite.check(f"{key}: the sweep stopped for a stated reason (memory, the cap, or < 5% gain)",
                         stopped, f"  {b}")
        chosen = next(p for p in curve if p["batch"] == b["batch"])
        self.suite.check(f"{key}: the plan is the mesh search's at the chosen batch",
                         doc["alternatives"][0]["mesh"] == chosen["mesh"]
                         and abs(doc["estimated_time_ms"] - chosen["estimated_time_ms"])
                         <= 1e-9 * chosen["estimated_time_ms"], f"  {chosen}\n  {doc['alternatives'][0]}")
        if key == "mlp":  # a plan at the chosen batch (1024) runs too; cheap for the MLP only
            plan = self.path("mlp-throughput.pcc")
            r = self.tools.run("pcc", [model, "--gpus", GPUS, "--objective", "throughput", "-o", plan, "--quiet"])
            run = self.tools.run("pcc-run", [plan, "--check"]) if r.returncode == 0 else r
            self.suite.check(f"{key}: the plan at the chosen batch {b['batch']} runs and checks",
                             run.returncode == 0 and "ok" in run.stdout, r.describe() + "\n" + run.describe())
        if not with_report:
            return
        text = self.tools.run("pcc", [model, "--gpus", GPUS, "--objective", "throughput", "--emit", "report"])
        rows = [ln for ln in text.stdout.splitlines() if re.match(r"\s+\d+\s+dp=", ln)]
        self.suite.check(f"{key}: --emit report prints the curve, one row a batch",
                         text.returncode == 0 and len(rows) == len(curve)
                         and sum("chosen" in ln for ln in rows) == 1, text.describe())

    def write(self, name, graph, metadata=None):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        for k, v in (metadata or {}).items():
            entry = model.metadata_props.add()
            entry.key, entry.value = k, v
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return path

    def seq_image_graph(self, value_info=()):
        """y = relu(cast(ids)), z = relu(image): ids [batch, seq] i64, image [batch, 3, height, width]."""
        ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
        image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height", "width"])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
        z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3, "height", "width"])
        nodes = [helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT, name="cast"),
                 helper.make_node("Relu", ["f"], ["y"], name="relu_ids"),
                 helper.make_node("Relu", ["image"], ["z"], name="relu_image")]
        return helper.make_graph(nodes, "seq_image", [ids, image], [y, z], value_info=list(value_info))

    def unbound_dims(self):
        model = self.write("unbound.onnx", self.seq_image_graph())
        r = self.tools.run("pcc", [model, "--gpus", GPUS, "-o", self.path("unbound.pcc")])
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        want = (f"pcc: error: {model}: 3 symbolic dims have no size (from --batch, --shape or the model): "
                "input 'ids' dim 1 ('seq'), input 'image' dim 2 ('height'), input 'image' dim 3 ('width'); "
                "pass --shape ids=BATCHxSEQ --shape image=BATCHx3xHEIGHTxWIDTH with sizes in place of "
                "BATCH, SEQ, HEIGHT, WIDTH")
        self.suite.check("a model with no size for seq, height and width: exit 2, one line naming all three",
                         r.returncode == 2 and lines == [want], f"  want: {want}\n{r.describe()}")
        # The flags it gives, with sizes in place of the placeholders, compile it.
        r = self.tools.run("pcc", [model, "--gpus", GPUS, "--shape", "ids=4x6", "--shape", "image=4x3x5x7",
                                   "-o", self.path("given.pcc"), "--quiet"])
        self.suite.check("the --shape flags the message gives compile the model", r.returncode == 0, r.describe())

    def sizes_in_the_model(self):
        # seq from a value_info entry redeclaring ids; height and width from metadata_props.
        vi = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 6])
        model = self.write("sized.onnx", self.seq_image_graph([vi]), {"height": "5", "width": "7"})
        plan = self.path("sized.pcc")
        r = self.tools.run("pcc", [model, "--gpus", GPUS, "-o", plan])
        if not self.suite.check("a model carrying its sizes compiles with just --gpus", r.returncode == 0,
                                r.describe()):
            return
        said = [ln for ln in r.stderr.splitlines() if ln.startswith("pcc: symbolic dims sized by the model")]
        self.suite.check("pcc says which sizes came from the model",
                         len(said) == 1 and "'seq' = 6 (value_info 'ids' dim 1)" in said[0]
                         and "'height' = 5 (metadata_props 'height')" in said[0]
                         and "'width' = 7 (metadata_props 'width')" in said[0], r.describe())
        with open(os.path.join(plan, "report.json")) as f:
            report = json.load(f)
        self.suite.check("the sizes reach the plan", report["reference"]["ops"] and report["batch"]["batch"] == 1,
                         f"  {report['batch']}")
        r = self.tools.run("pcc-run", [plan, "--check"])
        self.suite.check("its plan matches the reference evaluator", r.returncode == 0 and "ok" in r.stdout,
                         r.describe())

    def strategy_implies_gpus(self):
        mlp = e2e.model_path("mlp.onnx")
        for strategy, world in (("tp=2", 2), ("dp=2,tp=2", 4)):
            r = self.tools.run("pcc", [mlp, "--batch", 4, "--strategy", strategy, "--emit", "json"])
            ok = r.returncode == 0
            doc = json.loads(r.stdout) if ok else {}
            self.suite.check(f"--strategy {strategy} without --gpus plans {world} devices",
                             ok and doc["world_size"] == world, r.describe())


def blind_tolerance_refused(suite, tools, work):
    """pcc-run's own comparison cannot be blind: the MobileNetV2 export's
    outputs reach only about 1e-7 (uncalibrated batch norm), far below the
    default atol of 1e-5, so an all-zero answer would pass at it. pcc-run
    scales the atol to the output, says so, passes the right answer and
    rejects an all-zero expected output (exit 1), for --expect and --check."""
    model = os.path.join(e2e.MODELS_DIR, "exported", "mobilenet_v2.ts.onnx")
    plan, data, zeros = (os.path.join(work, d) for d in ("blind.pcc", "blind-data", "blind-zeros"))
    r = tools.run("pcc", [model, "--gpus", "1", "--batch", "1", "-o", plan, "--quiet"])
    if not suite.check("blind tolerance: compile the MobileNetV2 export", r.returncode == 0, r.describe()):
        return
    _, expected = e2e.write_case(data, model, 1, seed=4)
    biggest = max(float(abs(e).max()) for e in expected)
    if not suite.check(f"blind tolerance: the outputs are small (max |y| {biggest:.3g} < atol 1e-5)",
                       0 < biggest < 1e-5):
        return
    shutil.copytree(data, zeros)
    for k, e in enumerate(expected):
        e2e.write_tensor(os.path.join(zeros, f"output_{k}.pb"), e2e.np.zeros_like(e))
    r = tools.run("pcc-run", [plan, "--inputs", data, "--expect", data])
    suite.check("blind tolerance: the right answer passes --expect at the scaled atol, which is printed",
                r.returncode == 0 and "scaled from 1e-05" in r.stdout, r.describe())
    r = tools.run("pcc-run", [plan, "--inputs", data, "--expect", zeros])
    suite.check("blind tolerance: an all-zero expected output fails --expect (exit 1)",
                r.returncode == 1 and "MISMATCH" in r.stdout and "scaled from 1e-05" in r.stdout, r.describe())
    r = tools.run("pcc-run", [plan, "--inputs", zeros, "--expect", zeros, "--atol", "1"])
    suite.check("blind tolerance: even --atol 1 is scaled: the all-zero output still fails",
                r.returncode == 1 and "scaled from 1" in r.stdout, r.describe())
    r = tools.run("pcc-run", [plan, "--check"])
    suite.check("blind tolerance: --check compares at the scaled atol too",
                r.returncode == 0 and "vs reference at rtol 0.0001, atol " in r.stdout
                and "scaled from 1e-05" in r.stdout, r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_any_export", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools):
        t = AnyExportTests(suite, tools)
        models = e2e.exporter_subset(committed_models())
        for model in models:
            suite.run_case(f"{name_of(model)} as it comes", t.as_it_comes, model)
        swept = models
        if e2e.sanitizer_subset():  # the same sweep code on every model: the small ones are enough there
            swept = [m for m in models if os.path.dirname(m) == e2e.MODELS_DIR]
            print(f"{e2e.SUBSET_VARIABLE}=sanitize: --objective throughput on the {len(swept)} small models only "
                  f"({len(models) - len(swept)} exports left out; `make test` sweeps them)", flush=True)
        for k, model in enumerate(swept):  # the text report of a few is enough
            suite.run_case(f"{name_of(model)} throughput batch", t.throughput_choice, model, k < 3)
        suite.run_case("unbound dims", t.unbound_dims)
        suite.run_case("sizes in the model", t.sizes_in_the_model)
        suite.run_case("strategy implies gpus", t.strategy_implies_gpus)
        suite.run_case("blind tolerance", blind_tolerance_refused, suite, tools, t.work)
        for key, seconds, points, batch in t.times:
            print(f"  {key}: --objective throughput chose batch {batch} of {points} costed in {seconds:.1f} s")
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
