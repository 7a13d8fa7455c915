#!/usr/bin/env python3
"""Bad input must end every tool with exit code 2 and one line on stderr that
names the problem: broken or unsupported models, unbound symbolic dimensions,
wrong run-time tensors, damaged plan bundles, bad flags, cluster specs with
figures outside their ranges, names carrying newlines and terminal escapes
(printed escaped, on one line, by all four tools), shapes that would wrap
around int64. Hostile input that is valid compiles in bounded time: empty
tensors through Reshape and Slice at any --gpus, and --gpus 65536 on a tiny
model."""

import json
import os
import re
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

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


class HostileInputTests(BadInputTests):
    """Hostile input: each case once a crash, a hang, a silent
    acceptance or a message spanning lines."""

    def save(self, name, nodes, inputs, outputs, inits=(), opset=17):
        graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
        f = self.path(name + ".onnx")
        with open(f, "wb") as out:
            out.write(model.SerializeToString())
        return f

    def one_line_no_escape(self, case, tool, args, patterns):
        """Exit 2, stderr exactly one line (a newline in a name does not split
        it) without an ESC byte, matching every pattern."""
        r = self.tools.run(tool, args)
        lines = r.stderr.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        ok = r.returncode == 2 and len(lines) == 1 and "\x1b" not in r.stderr
        missing = [p for p in patterns if not lines or not re.search(p, lines[0])]
        self.suite.check(f"{case}: exit 2, one line, no ESC byte, naming it", ok and not missing,
                         f"  lacks {missing}\n{r.describe()}")

    def escaped_names(self):
        name = "bad\nname\x1b[31m"
        vi = helper.make_tensor_value_info
        node = helper.make_node("Softmax", ["x"], ["y"], name=name)
        node.attribute.append(helper.make_attribute("axis", "1"))  # a string: refused naming the node
        model = self.save("escape", [node], [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
        self.one_line_no_escape("pcc: node name with a newline and an escape sequence", "pcc",
                                [model, "--gpus", 1, "-o", self.path("escape.pcc")],
                                [r"bad\\nname\\x1b\[31m", r"Softmax", r"'axis'"])
        # The other tools print their errors through the same function.
        missing = self.path("no\nsuch\x1b[2J\x9b")
        self.one_line_no_escape("pcc-run: a flag's value with a newline and escapes", "pcc-run",
                                [self.plan(), "--threads", "1\n\x1b[31m\x9b"], [r"--threads", r"\\x1b\[31m\\u009b"])
        self.one_line_no_escape("pcc-report: plan path with a newline and escapes", "pcc-report", [missing + ".pcc"],
                                [r"no\\nsuch\\x1b\[2J"])
        self.one_line_no_escape("pcc-opt: input path with a newline and escapes", "pcc-opt", [missing + ".ir"],
                                [r"no\\nsuch\\x1b\[2J"])
        # Valid UTF-8 is kept as it is.
        node = helper.make_node("Softmax", ["x"], ["y"], name="größe→")
        node.attribute.append(helper.make_attribute("axis", "1"))
        model = self.save("utf8", [node], [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
        self.one_line_no_escape("pcc: a UTF-8 node name is printed as it is", "pcc",
                                [model, "--gpus", 1, "-o", self.path("utf8.pcc")], [r"'größe→'"])

    def empty_tensors(self):
        """A Reshape to a zero dimension (allowzero) and an empty Slice: the
        partitioner once divided by the zero dim (SIGFPE), even at --gpus 1."""
        vi = helper.make_tensor_value_info
        F = TensorProto.FLOAT
        i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
        # [4, 0] -> [0, 4]: the 4 met the 0 of the output first (4 % 0).
        reshape = self.save("reshape0", [helper.make_node("Reshape", ["x", "s"], ["r"], allowzero=1),
                                         helper.make_node("Relu", ["r"], ["y"])],
                            [vi("x", F, [4, 0])], [vi("y", F, [0, 4])], [i64("s", [0, 4])])
        # The same [4, 0] from an empty Slice of [4, 6] along axis 1.
        sliced = self.save("slice0", [helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"]),
                                      helper.make_node("Reshape", ["s", "shape"], ["r"], allowzero=1),
                                      helper.make_node("Relu", ["r"], ["y"]), helper.make_node("Neg", ["s"], ["z"])],
                           [vi("x", F, [4, 6])], [vi("y", F, [0, 4]), vi("z", F, [4, 0])],
                           [i64("st", [2]), i64("en", [2]), i64("ax", [1]), i64("shape", [0, 4])])
        for model in (reshape, sliced):
            for gpus in (1, 2, 4):
                case = f"{os.path.basename(model)} at --gpus {gpus}"
                plan = self.path(f"{os.path.basename(model)}_{gpus}.pcc")
                r = self.tools.run("pcc", [model, "--gpus", gpus, "-o", plan, "--quiet"])
                if not self.suite.check(f"{case}: compiles", r.returncode == 0, r.describe()):
                    continue
                r = self.tools.run("pcc-run", [plan, "--check"])
                self.suite.check(f"{case}: pcc-run --check passes", r.returncode == 0, r.describe())

    def many_gpus(self):
        """--gpus 65536 on the MLP (largest dim 256, batch 1) once took 157 s and
        3.7 GB: the search now lists only the meshes the model can use."""
        r = self.tools.run("pcc", [MLP, "--gpus", 65536, "--emit", "json", "--quiet"], timeout=60)
        if not self.suite.check("--gpus 65536 on mlp.onnx: exit 0 within 60 s", r.returncode == 0, r.describe()):
            return
        doc = json.loads(r.stdout)
        meshes = [(a["mesh"]["pp"], a["mesh"]["dp"], a["mesh"]["tp"]) for a in doc["alternatives"]]
        costed = len(meshes) + doc.get("pruned_pipelines", 0)
        # tp 1, 2, ..., 256 (9) times pp 1, 2, 4 (6 nodes): at most 27.
        self.suite.check("--gpus 65536 on mlp.onnx: at most 27 meshes costed or bounded out, each once, tp <= 256",
                         costed <= 27 and len(set(meshes)) == len(meshes) and all(m[2] <= 256 for m in meshes),
                         f"  {costed} meshes: {meshes}")

    def cluster_ranges(self):
        with open(os.path.join(e2e.SOURCE_DIR, "passes/partition/devices/h100.json")) as f:
            spec = json.load(f)
        bad = [("device", "memory_bandwidth", 1e-300, r"from 1 to 1e\+18"),
               ("device", "memory_bandwidth", 0, r"from 1 to 1e\+18"),
               ("device", "launch_overhead_s", -1, r"from 1e-12 to 3600"),
               ("intra_node", "latency_s", 1e300, r"from 1e-12 to 3600"),
               ("inter_node", "efficiency", 1e-300, r"from 0\.001 to 1"),
               ("device", "memory_bytes", 2 ** 62, r"from 1 to 1125899906842624")]
        for section, key, value, rng in bad:
            doc = json.loads(json.dumps(spec))
            doc[section][key] = value
            f = self.path(f"cluster_{section}_{key}.json")
            with open(f, "w") as out:
                json.dump(doc, out)
            self.expect_error(f"--cluster with {section}.{key} = {value}", "pcc",
                              [MLP, "--batch", 4, "--gpus", 2, "--cluster", f, "-o", self.path("c.pcc")],
                              [re.escape(os.path.basename(f)), re.escape(f"{section}.{key}"), rng])
        with open(self.path("cluster_rates.json"), "w") as out:
            doc = json.loads(json.dumps(spec))
            doc["device"]["matrix_flops"]["f32"] = 1e-300
            json.dump(doc, out)
        self.expect_error("--cluster with a rate of 1e-300", "pcc",
                          [MLP, "--batch", 4, "--gpus", 2, "--cluster", self.path("cluster_rates.json")],
                          [r"device\.matrix_flops\.f32", r"from 1 to 1e\+21"])

    def wrapping_pad(self):
        vi = helper.make_tensor_value_info
        big = 2 ** 63 - 1
        model = self.save("pad_wrap", [helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
                          [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array([big, big], np.int64), "p")])
        self.expect_error("Pad whose begin + end wrap around int64", "pcc", [model, "--gpus", 1],
                          [r"pad_wrap\.onnx", r"node 'pad' \(Pad", r"overflow int64"])


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
        h = HostileInputTests(suite, tools)
        cases += [
            ("escaped names", h.escaped_names),
            ("empty tensors", h.empty_tensors),
            ("many gpus", h.many_gpus),
            ("cluster ranges", h.cluster_ranges),
            ("wrapping pad", h.wrapping_pad),
        ]
        for name, fn in cases:
            suite.run_case(name, fn)
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
            shutil.rmtree(h.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
