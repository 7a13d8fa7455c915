#!/usr/bin/env python3
"""Bad input must end every tool with exit code 2 and one line on stderr that
names the problem: broken or unsupported models, unbound symbolic dimensions,
wrong run-time tensors, damaged plan bundles, bad flags."""

import os
import re
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MLP = e2e.model_path("mlp.onnx")


class BadInputTests:
    def __init__(self, suite, tools):
        self.suite = suite
        self.tools = tools
        self.work = suite.tempdir("bad")
        self._plan = None

    def expect_error(self, case, tool, args, patterns, code=2):
        """Runs the tool; checks the exit code, that stderr is exactly one line,
        and that the line matches every regex in `patterns` (case-insensitive)."""
        r = self.tools.run(tool, args)
        if not self.suite.check(f"{case}: exit {code}", r.returncode == code, r.describe()):
            return
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        if not self.suite.check(f"{case}: one line on stderr", len(lines) == 1, r.describe()):
            return
        missing = [p for p in patterns if not re.search(p, lines[0], re.IGNORECASE)]
        self.suite.check(f"{case}: message names the problem", not missing,
                         f"  message lacks {missing}\n{r.describe()}")

    def path(self, name):
        return os.path.join(self.work, name)

    def plan(self):
        """A fresh copy of a valid two-rank plan of mlp.onnx (compiled once)."""
        if self._plan is None:
            self._plan = self.path("mlp.pcc")
            r = self.tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "-o", self._plan])
            if not self.suite.check("compile the plan used by the run-time cases",
                                    r.returncode == 0, r.describe()):
                raise RuntimeError("cannot compile mlp.onnx; run-time cases not run")
        copy = self.path(f"plan{len(os.listdir(self.work))}.pcc")
        shutil.copytree(self._plan, copy)
        return copy

    # --- models ----------------------------------------------------------

    def not_onnx(self):
        f = self.path("random.onnx")
        with open(f, "wb") as out:
            out.write(np.random.default_rng(1).bytes(4096))
        self.expect_error("random bytes", "pcc", [f, "--batch", 4], [r"random\.onnx"])

    def truncated(self, fraction):
        data = open(MLP, "rb").read()
        name = f"mlp_cut{int(fraction * 100)}.onnx"
        with open(self.path(name), "wb") as out:
            out.write(data[:int(len(data) * fraction)])
        self.expect_error(f"model cut at {int(fraction * 100)}%", "pcc",
                          [self.path(name), "--batch", 4], [re.escape(name)])

    def missing_model(self):
        self.expect_error("model file does not exist", "pcc",
                          [self.path("nothere.onnx"), "--batch", 4], [r"nothere\.onnx"])

    def unsupported_ops(self):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
        boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 6, 4])
        scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 6])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
        sel = helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])
        nodes = [
            helper.make_node("Relu", ["x"], ["r"], name="relu_node"),
            helper.make_node("FooOp", ["r"], ["y"], name="foo_node"),
            helper.make_node("BarOp", ["boxes", "scores"], ["selected"],
                             name="bar_node"),
        ]
        graph = helper.make_graph(nodes, "unsupported", [x, boxes, scores], [y, sel])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        f = self.path("unsupported.onnx")
        with open(f, "wb") as out:
            out.write(model.SerializeToString())
        self.expect_error("unsupported operators", "pcc", [f],
                          [r"unsupported\.onnx", r"FooOp", r"BarOp",
                           r"foo_node", r"bar_node"])

    def symbolic_dim(self):
        # The batch is chosen by pcc; a sequence length nothing gives is an error.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "seq", [x], [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        f = self.path("seq.onnx")
        with open(f, "wb") as out:
            out.write(model.SerializeToString())
        self.expect_error("symbolic dim without a value", "pcc", [f],
                          [r"seq\.onnx", r"input 'x' dim 1 \('seq'\)", r"--shape x=BATCHxSEQ"])

    # --- run-time inputs ------------------------------------------------------

    def run_with_input(self, case, array, patterns, raw=None):
        plan = self.plan()
        d = self.path(case.replace(" ", "_"))
        os.makedirs(d)
        if raw is not None:
            with open(os.path.join(d, "input_0.pb"), "wb") as out:
                out.write(raw)
        elif array is not None:
            e2e.write_tensor(os.path.join(d, "input_0.pb"), array, "x")
        self.expect_error(case, "pcc-run", [plan, "--inputs", d], patterns)

    def input_wrong_shape(self):
        a = np.zeros([4, 32], np.float32)
        self.run_with_input("input of wrong shape", a,
                            [r"\bx\b|input_0", r"4\s*[,x]\s*32", r"4\s*[,x]\s*64"])

    def input_wrong_dtype(self):
        a = np.zeros([4, 64], np.float64)
        self.run_with_input("input of wrong dtype", a,
                            [r"\bx\b|input_0", r"f64|float64|double", r"f32|float32|float\b"])

    def input_missing(self):
        self.run_with_input("input file missing", None, [r"input_0\.pb|\bx\b"])

    def input_garbage(self):
        self.run_with_input("input file not a tensor", None, [r"input_0\.pb"],
                            raw=np.random.default_rng(2).bytes(1000))

    # --- plan bundles -------------------------------------------------------

    def flipped_weight_byte(self):
        plan = self.plan()
        info = e2e.PlanInfo(plan)
        rank = max(info.ranks, key=lambda r: sum(w["nbytes"] for w in r["weights"]))
        w = max(rank["weights"], key=lambda w: w["nbytes"])
        f = os.path.join(plan, rank["weight_file"])
        with open(f, "r+b") as fh:
            pos = w["offset"] + w["nbytes"] // 2
            fh.seek(pos)
            b = fh.read(1)
            fh.seek(pos)
            fh.write(bytes([b[0] ^ 0x10]))
        self.expect_error(f"flipped byte in {rank['weight_file']} ({w['name']})", "pcc-run",
                          [plan, "--check"], [r"checksum|crc", re.escape(rank["weight_file"])
                                              + "|" + re.escape(w["name"])])

    def unknown_schema_version(self):
        plan = self.plan()
        f = os.path.join(plan, "plan.pb")
        data = bytearray(open(f, "rb").read())
        if not self.suite.check("plan.pb starts with schema_version (0x08 <v>)",
                                data[0] == 0x08 and data[1] < 0x80, f"  starts {data[:4].hex()}"):
            return
        data[1] = 0x63
        open(f, "wb").write(data)
        self.expect_error("unknown schema version", "pcc-run", [plan, "--check"],
                          [r"version", r"\b99\b"])
        self.expect_error("unknown schema version (report)", "pcc-report", [plan],
                          [r"version", r"\b99\b"])

    def old_schema_version(self):
        plan = self.plan()
        f = os.path.join(plan, "plan.pb")
        data = bytearray(open(f, "rb").read())
        if not self.suite.check("plan.pb starts with schema_version (0x08 <v>)",
                                data[0] == 0x08 and data[1] < 0x80, f"  starts {data[:4].hex()}"):
            return
        data[1] = 0x01  # a plan written before the memory plan
        open(f, "wb").write(data)
        self.expect_error("old schema version", "pcc-run", [plan, "--check"],
                          [r"version 1\b", r"recompile"])

    def missing_plan(self):
        self.expect_error("plan does not exist", "pcc-run", [self.path("none.pcc")],
                          [r"none\.pcc"])

    # --- command line ---------------------------------------------------------

    def flags(self):
        plan = self.plan()
        for tool, args in (("pcc", [MLP, "--batch", 4]), ("pcc-run", [plan]),
                           ("pcc-report", [plan])):
            self.expect_error(f"{tool} unknown flag", tool, args + ["--frobnicate"],
                              [r"--frobnicate"])
            r = self.tools.run(tool, ["--help"])
            self.suite.check(f"{tool} --help exits 0 with usage",
                             r.returncode == 0 and tool in (r.stdout + r.stderr), r.describe())
        self.expect_error("pcc bad --gpus", "pcc", [MLP, "--batch", 4, "--gpus", "zero"],
                          [r"--gpus"])
        self.expect_error("pcc bad --strategy", "pcc",
                          [MLP, "--batch", 4, "--gpus", 2, "--strategy", "tp=3"],
                          [r"strategy|tp=3"])
        for bad in ("0", "two", "100000"):
            self.expect_error(f"pcc-run bad --threads {bad}", "pcc-run", [plan, "--threads", bad],
                              [r"--threads"])


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_bad_input", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools):
        t = BadInputTests(suite, tools)
        cases = [
            ("not onnx", t.not_onnx),
            ("truncated 50", lambda: t.truncated(0.5)),
            ("truncated 90", lambda: t.truncated(0.9)),
            ("missing model", t.missing_model),
            ("unsupported ops", t.unsupported_ops),
            ("symbolic dim", t.symbolic_dim),
            ("input wrong shape", t.input_wrong_shape),
            ("input wrong dtype", t.input_wrong_dtype),
            ("input missing", t.input_missing),
            ("input garbage", t.input_garbage),
            ("flipped weight byte", t.flipped_weight_byte),
            ("schema version", t.unknown_schema_version),
            ("old schema version", t.old_schema_version),
            ("missing plan", t.missing_plan),
            ("flags", t.flags),
        ]
        for name, fn in cases:
            suite.run_case(name, fn)
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
