#!/usr/bin/env python3
"""Inputs a hostile user would try, each once a crash or a silent escape:

- integer division and modulo of the most negative value by -1 (a machine
  trap), folded at compile time and computed at run time: exit 0 with the
  wrapped quotient and a zero remainder;
- external data whose location is absolute, climbs out with '..', or is a
  symlink leading outside the model's folder, in a model (`pcc`) and in an
  input tensor file (`pcc-run --inputs`): exit 2, one line naming the tensor
  and the location, nothing read;
- a FIFO given as the model, /dev/zero as textual IR: exit 2 at once, not
  a wait for a writer or an endless read;
- `pcc-run --inputs` folders with two files for one input, a name that is
  none of the plan's inputs, an input no file gives, or extra files: exit 2;
- printing to a full disk (`> /dev/full`): exit 2 naming the failed write,
  never a silent 0.
"""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

H = onnx.helper


class Hostile:
    def __init__(self, suite, tools):
        self.suite, self.tools = suite, tools
        self.work = suite.tempdir("hostile")

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def expect_error(self, case, tool, args, patterns):
        """Exit 2, exactly one line on stderr, matching every regex in `patterns`."""
        r = self.tools.run(tool, args)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        ok = r.returncode == 2 and len(lines) == 1
        missing = [p for p in patterns if not lines or not re.search(p, lines[0])]
        self.suite.check(f"{case}: exit 2 with one line naming it", ok and not missing,
                         f"  lacks {missing}\n{r.describe()}")

    # --- integer division ---------------------------------------------------

    def int_min_div(self):
        for dtype, np_t in ((onnx.TensorProto.INT32, np.int32), (onnx.TensorProto.INT64, np.int64)):
            lo = np.iinfo(np_t).min
            name = np.dtype(np_t).name
            # Folded: both operands are constants.
            model = self.path(f"div_fold_{name}.onnx")
            nodes = [H.make_node("Div", ["a", "m"], ["q"]), H.make_node("Mod", ["a", "m"], ["r"]),
                     H.make_node("Add", ["q", "x"], ["qy"]), H.make_node("Add", ["r", "x"], ["ry"])]
            inits = [numpy_helper.from_array(np.array([lo, 7], np_t), "a"),
                     numpy_helper.from_array(np.array([-1, -1], np_t), "m")]
            g = H.make_graph(nodes, "div", [H.make_tensor_value_info("x", dtype, [2])],
                             [H.make_tensor_value_info("qy", dtype, [2]), H.make_tensor_value_info("ry", dtype, [2])],
                             inits)
            onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), model)
            self.run_div(f"{name} folded", model, lo, np_t)
            # At run time: the operands are inputs.
            model = self.path(f"div_run_{name}.onnx")
            nodes = [H.make_node("Div", ["a", "m"], ["qy"]), H.make_node("Mod", ["a", "m"], ["ry"])]
            g = H.make_graph(nodes, "div", [H.make_tensor_value_info("a", dtype, [2]),
                                            H.make_tensor_value_info("m", dtype, [2])],
                             [H.make_tensor_value_info("qy", dtype, [2]), H.make_tensor_value_info("ry", dtype, [2])])
            onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), model)
            self.run_div(f"{name} at run time", model, lo, np_t,
                         inputs=[np.array([lo, 7], np_t), np.array([-1, -1], np_t)])

    def run_div(self, case, model, lo, np_t, inputs=None):
        plan, data, outs = self.path(case.replace(" ", "_") + ".pcc"), self.path("d_" + case.replace(" ", "_")), \
            self.path("o_" + case.replace(" ", "_"))
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check(f"INT_MIN / -1, {case}: compiles", r.returncode == 0, r.describe()):
            return
        os.makedirs(data, exist_ok=True)
        x = inputs or [np.zeros(2, np_t)]
        names = ["a", "m"] if inputs else ["x"]
        for k, (n, a) in enumerate(zip(names, x)):
            e2e.write_tensor(os.path.join(data, f"input_{k}.pb"), a, n)
        r = self.tools.run("pcc-run", [plan, "--inputs", data, "--outputs", outs, "--check"])
        if not self.suite.check(f"INT_MIN / -1, {case}: runs", r.returncode == 0, r.describe()):
            return
        q = e2e.read_tensor(os.path.join(outs, "output_0.pb"))
        rem = e2e.read_tensor(os.path.join(outs, "output_1.pb"))
        self.suite.check(f"INT_MIN / -1, {case}: quotient wraps to INT_MIN, 7 / -1 = -7",
                         q.tolist() == [lo, -7], f"  got {q.tolist()}")
        self.suite.check(f"INT_MIN % -1, {case}: remainder 0", rem.tolist() == [0, 0], f"  got {rem.tolist()}")

    # --- external data ---------------------------------------------------------

    def escapes(self):
        """(label, location) for each way out of the folder `folder`."""
        secret = self.path("secret.bin")
        with open(secret, "wb") as f:
            f.write(np.arange(4, dtype=np.float32).tobytes())
        return secret, [("an absolute path", secret), ("'..'", "../secret.bin")]

    def external_model(self):
        secret, escapes = self.escapes()
        folder = self.path("model")
        os.makedirs(folder, exist_ok=True)
        os.symlink(secret, os.path.join(folder, "link.bin"))
        for label, location in escapes + [("a symlink out of the folder", "link.bin")]:
            w = onnx.TensorProto()
            w.name, w.data_type = "w", onnx.TensorProto.FLOAT
            w.dims.extend([4])
            w.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", location), ("offset", "0"), ("length", "16")):
                e = w.external_data.add()
                e.key, e.value = k, v
            g = H.make_graph([H.make_node("Add", ["x", "w"], ["y"])], "ext",
                             [H.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                             [H.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])], [w])
            model = os.path.join(folder, "m.onnx")
            with open(model, "wb") as f:
                f.write(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8).SerializeToString())
            self.expect_error(f"model external data through {label}", "pcc",
                              [model, "--gpus", 1, "-o", self.path("ext.pcc")],
                              [r"'w'", re.escape(os.path.basename(location)), r"absolute|'\.\.'|outside"])

    def external_input(self):
        secret, escapes = self.escapes()
        plan = self.path("add.pcc")
        g = H.make_graph([H.make_node("Relu", ["x"], ["y"])], "relu",
                         [H.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                         [H.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])])
        model = self.path("relu.onnx")
        onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), model)
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check("compile the run-time case", r.returncode == 0, r.describe()):
            return
        folder = self.path("inputs")
        os.makedirs(folder, exist_ok=True)
        os.symlink(secret, os.path.join(folder, "link.bin"))
        for label, location in escapes + [("a symlink out of the folder", "link.bin")]:
            t = onnx.TensorProto()
            t.name, t.data_type = "x", onnx.TensorProto.FLOAT
            t.dims.extend([4])
            t.data_location = onnx.TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = "location", location
            with open(os.path.join(folder, "input_0.pb"), "wb") as f:
                f.write(t.SerializeToString())
            self.expect_error(f"input tensor external data through {label}", "pcc-run",
                              [plan, "--inputs", folder],
                              [r"'x'", re.escape(os.path.basename(location)), r"absolute|'\.\.'|outside"])

    # --- special files ---------------------------------------------------------

    def fifo_model(self):
        fifo = self.path("model.fifo")
        os.mkfifo(fifo)
        r = self.tools.run("pcc", [fifo, "--gpus", 1, "-o", self.path("fifo.pcc")], timeout=30)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        self.suite.check("a FIFO as the model: exit 2 at once, 'not a regular file'",
                         r.returncode == 2 and len(lines) == 1 and "not a regular file" in lines[0], r.describe())

    def endless_ir(self):
        r = self.tools.run("pcc-opt", ["/dev/zero"], timeout=30)
        self.suite.check("pcc-opt /dev/zero: exit 2, 'not a regular file'",
                         r.returncode == 2 and "not a regular file" in r.stderr, r.describe())

    # --- run-time inputs that match no input -------------------------------------

    def input_matching(self):
        """A two-input plan (a + b); --inputs folders that must be refused."""
        g = H.make_graph([H.make_node("Add", ["a", "b"], ["y"])], "add",
                         [H.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in ("a", "b")],
                         [H.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
        model, plan = self.path("add2.onnx"), self.path("add2.pcc")
        onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), model)
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check("compile the two-input plan", r.returncode == 0, r.describe()):
            return
        x = np.ones(2, np.float32)
        cases = [("two files for input 'a'", ["a", "a"], [r"input_0\.pb and .*input_1\.pb both hold input 'a'"]),
                 ("a name that is no input beside one that is", ["a", "c"], [r"input_1\.pb", r"'c' is none of"]),
                 ("an input no file gives", ["b"], [r"no input_K\.pb holds input 'a'"]),
                 ("more files than inputs, by position", ["", "", ""], [r"input_2\.pb", r"only 2 inputs"])]
        for label, names, patterns in cases:
            folder = self.path("in_" + label.replace(" ", "_").replace("'", ""))
            os.makedirs(folder)
            for k, n in enumerate(names):
                e2e.write_tensor(os.path.join(folder, f"input_{k}.pb"), x, n)
            self.expect_error(f"--inputs with {label}", "pcc-run", [plan, "--inputs", folder], patterns)
        folder = self.path("in_ok")
        os.makedirs(folder)
        for k, n in enumerate(["b", "a"]):
            e2e.write_tensor(os.path.join(folder, f"input_{k}.pb"), x * (k + 1), n)
        r = self.tools.run("pcc-run", [plan, "--inputs", folder, "--outputs", self.path("out_ok")])
        self.suite.check("--inputs named in another order: matched by name", r.returncode == 0, r.describe())

    # --- output that cannot be written ------------------------------------------

    def full_disk(self):
        if not os.path.exists("/dev/full"):
            return
        cases = [("pcc --emit ir > /dev/full", "pcc", [e2e.model_path("mlp.onnx"), "--batch", 4, "--emit", "ir"]),
                 ("pcc-opt > /dev/full", "pcc-opt", [os.path.join(e2e.SOURCE_DIR, "tests", "lit", "passes", "dce.ir"),
                                                      "--split-input-file"])]
        for case, tool, args in cases:
            with open("/dev/full", "w") as full:
                p = e2e.subprocess.run([self.tools.path(tool)] + [str(a) for a in args], stdout=full,
                                       stderr=e2e.subprocess.PIPE, text=True, timeout=60)
            self.suite.check(f"{case}: exit 2 naming the failed write",
                             p.returncode == 2 and "writing to standard output failed" in p.stderr,
                             f"  exit {p.returncode}, stderr: {p.stderr[-500:]}")
        r = self.tools.run("pcc-opt", [os.path.join(e2e.SOURCE_DIR, "tests", "lit", "passes", "dce.ir"),
                                       "--split-input-file", "-o", "/dev/full"])
        self.suite.check("pcc-opt -o /dev/full: exit 2", r.returncode == 2, r.describe())


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_hostile", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        h = Hostile(suite, tools)
        try:
            suite.run_case("INT_MIN / -1", h.int_min_div)
            suite.run_case("model external data", h.external_model)
            suite.run_case("input external data", h.external_input)
            suite.run_case("FIFO", h.fifo_model)
            suite.run_case("endless IR", h.endless_ir)
            suite.run_case("full disk", h.full_disk)
            suite.run_case("input matching", h.input_matching)
        finally:
            if not suite.keep:
                shutil.rmtree(h.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
