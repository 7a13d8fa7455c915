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
  never a silent 0;
- huge but representable shapes (Tile, ConstantOfShape, Range, OneHot,
  Expand, an input declared huge or made huge by --shape / --batch, a tensor
  file declaring huge dims), folded and not, in `pcc`, `pcc-opt
  --fold-constants` and `pcc-run`: exit 2 and one line naming the node, the
  op and the limit of one tensor, before anything is allocated; an input
  within the limit but beyond the machine's memory: exit 4, "out of memory";
- an attribute of the wrong type (Softmax `axis` as a string), two graph
  inputs of one name: exit 2 naming them;
- node names that end the comment the generated kernel source prints them
  in (a line break, a CR, a backslash before a line break) and go on with a
  constructor that writes a file, or an #include: `pcc` and `pcc-run --check`
  succeed, and nothing of the names is compiled (no file written);
- a batched MatMul with an empty dimension: runs and checks (exit 0);
- one kernel that runs far past `pcc-run --timeout 2`: exit 4 within
  seconds, one line naming the node;
- `pcc-run --outputs` and `--profile-json`, `pcc-report -o` past the file
  size limit (RLIMIT_FSIZE, as on a full disk): exit 2, no truncated or empty
  file, an older file left whole;
- an arena larger than the address space (RLIMIT_AS): exit 4, out of memory.
"""

import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time

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
        e2e.expect_one_line_error(self.suite, self.tools, case, tool, args, patterns)

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

    def escapes(self, folder):
        """Makes `folder` with a symlink out of it; \\returns (label, location)
        for each way out of it, to a 16-byte secret file beside it."""
        secret = self.path("secret.bin")
        with open(secret, "wb") as f:
            f.write(np.arange(4, dtype=np.float32).tobytes())
        os.makedirs(folder, exist_ok=True)
        os.symlink(secret, os.path.join(folder, "link.bin"))
        return [("an absolute path", secret), ("'..'", "../secret.bin"), ("a symlink out of the folder", "link.bin")]

    @staticmethod
    def external_tensor(name, location):
        """A float[4] tensor whose 16 bytes are external data at `location`."""
        t = onnx.TensorProto()
        t.name, t.data_type = name, onnx.TensorProto.FLOAT
        t.dims.extend([4])
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", "0"), ("length", "16")):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    def external_model(self):
        folder = self.path("model")
        for label, location in self.escapes(folder):
            w = self.external_tensor("w", location)
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
        for label, location in self.escapes(folder):
            with open(os.path.join(folder, "input_0.pb"), "wb") as f:
                f.write(self.external_tensor("x", location).SerializeToString())
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
        # Outputs are written whole by renaming a new file into place, but not
        # over a device: /dev/full must still be the device afterwards.
        self.suite.check("/dev/full is still a character device after -o /dev/full",
                         stat.S_ISCHR(os.stat("/dev/full").st_mode), "  /dev/full was replaced by a file")
        if not stat.S_ISCHR(os.stat("/dev/full").st_mode) and os.geteuid() == 0:
            os.remove("/dev/full")
            os.mknod("/dev/full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))

    # --- huge shapes (docs/security.md: the limit of one tensor) ----------------

    def save(self, name, nodes, inputs, outputs, inits=(), opset=13):
        model = self.path(name)
        g = H.make_graph(nodes, name.split(".")[0], inputs, outputs, list(inits))
        onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", opset)], ir_version=8), model)
        return model

    def huge_models(self):
        """(label, model, node, op) of models whose one node has a huge output."""
        F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
        big = 1 << 40
        vi = H.make_tensor_value_info
        out = [vi("y", F, None)]
        i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
        cases = []
        # Tile: at run time (x is an input) and folded (x is a constant).
        cases.append(("Tile", self.save("tile.onnx", [H.make_node("Tile", ["x", "r"], ["y"], name="tile")],
                                        [vi("x", F, [2])], out, [i64("r", [big])]), "tile", "Tile"))
        cases.append(("Tile folded", self.save(
            "tile_fold.onnx", [H.make_node("Tile", ["c", "r"], ["t"], name="tile"),
                               H.make_node("Add", ["x", "t"], ["y"], name="add")],
            [vi("x", F, [1])], out, [i64("r", [big]), numpy_helper.from_array(np.ones(2, np.float32), "c")]),
            "tile", "Tile"))
        cases.append(("ConstantOfShape", self.save(
            "cos.onnx", [H.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
                         H.make_node("Add", ["x", "c"], ["y"], name="add")],
            [vi("x", F, [1])], out, [i64("s", [1 << 20, 1 << 20, 1 << 20])], opset=13), "cos", "ConstantOfShape"))
        cases.append(("Range", self.save(
            "range.onnx", [H.make_node("Range", ["a", "b", "d"], ["y"], name="range")],
            [vi("x", F, [1])], [vi("y", I64, None)],
            [i64("a", 0), i64("b", 1 << 62), i64("d", 1)], opset=13), "range", "Range"))
        cases.append(("OneHot with a huge depth", self.save(
            "onehot.onnx", [H.make_node("OneHot", ["i", "depth", "v"], ["y"], name="onehot")],
            [vi("i", I64, [2])], out, [i64("depth", [big]), numpy_helper.from_array(np.array([0, 1], np.float32), "v")],
            opset=11), "onehot", "OneHot"))
        cases.append(("Expand to a huge shape", self.save(
            "expand.onnx", [H.make_node("Expand", ["x", "s"], ["y"], name="expand")],
            [vi("x", F, [1])], out, [i64("s", [1 << 30, 1 << 30, 4])]), "expand", "Expand"))
        return cases

    def huge_shapes(self):
        for label, model, node, op in self.huge_models():
            self.expect_error(f"{label}: pcc", "pcc", [model, "--gpus", 1, "-o", self.path("huge.pcc")],
                              [re.escape(node), re.escape(op), r"1024 GiB, the limit of one tensor"])
            self.suite.check(f"{label}: no plan left behind", not os.path.exists(self.path("huge.pcc")))

    def huge_inputs(self):
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        relu = [H.make_node("Relu", ["x"], ["y"], name="relu")]
        out = [vi("y", F, None)]
        # 2^32 x 2^32 wraps a 64-bit element count to 0; 2^62 overflows the byte size.
        for dims in ([1 << 32, 1 << 32], [1 << 62], [3, 1 << 61, 5]):
            model = self.save("huge_in.onnx", relu, [vi("x", F, dims)], out)
            self.expect_error(f"an input declared {dims}", "pcc", [model, "--gpus", 1, "-o", self.path("hi.pcc")],
                              [r"graph input 'x'", r"1024 GiB"])
        model = self.save("sym_in.onnx", relu, [vi("x", F, ["batch", 1 << 31])], out)
        self.expect_error("--batch huge", "pcc", [model, "--gpus", 1, "--batch", 1 << 40, "-o", self.path("hi.pcc")],
                          [r"graph input 'x'", r"1024 GiB"])
        self.expect_error("--shape huge", "pcc", [model, "--gpus", 1, "--shape", f"x={1 << 33},{1 << 31}",
                                                  "-o", self.path("hi.pcc")], [r"graph input 'x'", r"1024 GiB"])
        # Within the limit but beyond this machine's memory: a clean exit 4.
        model = self.save("tib_in.onnx", relu, [vi("x", F, [1 << 38])], out)
        plan = self.path("tib.pcc")
        # No device pcc plans for holds 2 TiB of activations: the mesh search
        # refuses, and a forced mesh compiles anyway (with a note).
        self.expect_error("an input of 1 TiB does not fit an h100", "pcc", [model, "--gpus", 2, "-o", plan],
                          [r"no mesh of at most 2 h100 devices fits in memory", r"needs 1024 GiB",
                           r"--strategy"])
        r = self.tools.run("pcc", [model, "--gpus", 1, "--strategy", "dp=1", "-o", plan, "--quiet"])
        if self.suite.check("an input of exactly 1 TiB compiles with a forced mesh", r.returncode == 0, r.describe()):
            r = self.tools.run("pcc-run", [plan])
            # Under AddressSanitizer (`make sanitize`) its runtime adds a line of its own.
            lines = [ln for ln in r.stderr.splitlines()
                     if ln.strip() and not re.match(r"==\d+==WARNING: AddressSanitizer failed to allocate", ln)]
            self.suite.check("pcc-run of a 1 TiB input: exit 4, one line 'out of memory'",
                             r.returncode == 4 and len(lines) == 1 and "out of memory" in lines[0], r.describe())
        # A tensor file declaring huge dims, read by pcc-run --inputs.
        r = self.tools.run("pcc", [self.save("relu4.onnx", relu, [vi("x", F, [4])], out), "--gpus", 1,
                                   "-o", self.path("relu4.pcc"), "--quiet"])
        if self.suite.check("compile the tensor-file case", r.returncode == 0, r.describe()):
            folder = self.path("huge_inputs")
            os.makedirs(folder, exist_ok=True)
            t = onnx.TensorProto()
            t.name, t.data_type = "x", F
            t.dims.extend([1 << 32, 1 << 32])
            with open(os.path.join(folder, "input_0.pb"), "wb") as f:
                f.write(t.SerializeToString())
            self.expect_error("pcc-run --inputs with a tensor of dims [2^32,2^32]", "pcc-run",
                              [self.path("relu4.pcc"), "--inputs", folder], [r"'x'", r"1024 GiB"])

    def huge_ir(self):
        """pcc-opt --fold-constants on textual IR whose nodes would be huge."""
        big = 1 << 40
        cases = [
            ("Tile", "%t = Tile(%c, %r) : f32[2]",
             f"%c: f32[2] const dense<f32[2]: 1, 2>, %r: i64[1] const dense<i64[1]: {big}>"),
            ("ConstantOfShape", "%t = ConstantOfShape(%r) : f32[2]",
             f"%r: i64[2] const dense<i64[2]: {big}, {big}>"),
            ("Expand", "%t = Expand(%c, %r) : f32[2]",
             f"%c: f32[2] const dense<f32[2]: 1, 2>, %r: i64[2] const dense<i64[2]: {big}, 2>"),
        ]
        for op, line, consts in cases:
            ir = self.path(f"huge_{op}.ir")
            with open(ir, "w") as f:
                f.write(f"graph @g(%x: f32[2], {consts}) -> (%y: f32[2]) {{\n  {line}\n"
                        "  %y = Add(%x, %x) : f32[2]\n  return %y\n}\n")
            self.expect_error(f"pcc-opt --fold-constants, {op} to a huge shape", "pcc-opt",
                              [ir, "--fold-constants"], [re.escape(op), r"1024 GiB"])
        ir = self.path("huge_decl.ir")
        with open(ir, "w") as f:
            f.write(f"graph @g(%x: f32[{1 << 32},{1 << 32}]) -> (%y: f32[{1 << 32},{1 << 32}]) {{\n"
                    f"  %y = Relu(%x) : f32[{1 << 32},{1 << 32}]\n  return %y\n}}\n")
        self.expect_error("pcc-opt, an input declared [2^32,2^32]", "pcc-opt", [ir, "--fold-constants"],
                          [r"1024 GiB"])

    # --- model text in generated source (docs/security.md) -----------------------

    def codegen_names(self):
        F = onnx.TensorProto.FLOAT
        marker = self.path("constructor_ran")
        payload = ('extern "C" int system(const char*); __attribute__((constructor)) static void pcc_hostile()'
                   f' {{ system("touch {marker}"); }}')
        names = [("a line break", f"x\n{payload}\n//"), ("a CR", f"x\r{payload}\r//"),
                 ("a backslash line break", f"x\\\n\n{payload}\n//"),
                 ("a CR and an #include", 'x\r#include "/etc/passwd"\r//')]
        for label, name in names:
            case = label.replace(" ", "_").replace("#", "")
            nodes = [H.make_node("Add", ["x", "y"], ["a"], name=name + "1"),
                     H.make_node("Relu", ["a"], ["r"], name=name + "2"),
                     H.make_node("Mul", ["r", "y"], ["z"], name=name + "3")]
            g = H.make_graph(nodes, "chain", [H.make_tensor_value_info(n, F, [4, 8]) for n in ("x", "y")],
                             [H.make_tensor_value_info("z", F, [4, 8])])
            model, plan = self.path(f"names_{case}.onnx"), self.path(f"names_{case}.pcc")
            onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), model)
            r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"], timeout=120)
            if not self.suite.check(f"node names with {label}: pcc compiles the model", r.returncode == 0,
                                    r.describe()):
                continue
            source = os.path.join(plan, "kernels", "cpu.cc")
            if not self.suite.check(f"node names with {label}: a generated kernel holds them",
                                    os.path.isfile(source) and "pcc_k_" in open(source).read()):
                continue
            r = self.tools.run("pcc-run", [plan, "--check"], timeout=120)
            self.suite.check(f"node names with {label}: pcc-run --check passes", r.returncode == 0, r.describe())
            escaped = [ln for ln in open(source, newline="").read().splitlines()
                       if ln.lstrip().startswith(('extern "C" int system', '#include "/etc'))]
            self.suite.check(f"node names with {label}: no line of the source starts with what they hold",
                             not escaped, "\n".join(escaped)[:2000])
        self.suite.check("no constructor of a node name ran (no file written)", not os.path.exists(marker))

    # --- what the ONNX checker refuses -------------------------------------------

    def checker(self):
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        node = H.make_node("Softmax", ["x"], ["y"], name="soft")
        node.attribute.append(H.make_attribute("axis", "1"))
        model = self.save("softmax_str.onnx", [node], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])
        self.expect_error("Softmax axis given as a string", "pcc", [model, "--gpus", 1, "-o", self.path("c.pcc")],
                          [r"soft", r"Softmax", r"'axis'", r"STRING", r"expects INT"])
        model = self.save("dup_in.onnx", [H.make_node("Add", ["x", "x"], ["y"], name="add")],
                          [vi("x", F, [2]), vi("x", F, [3])], [vi("y", F, [2])])
        self.expect_error("two graph inputs named 'x'", "pcc", [model, "--gpus", 1, "-o", self.path("c.pcc")],
                          [r"graph input 'x' is declared twice"])
        model = self.save("dup_out.onnx", [H.make_node("Relu", ["x"], ["y"], name="a"),
                                           H.make_node("Neg", ["x"], ["y"], name="b")],
                          [vi("x", F, [2])], [vi("y", F, [2])])
        self.expect_error("two nodes writing 'y'", "pcc", [model, "--gpus", 1, "-o", self.path("c.pcc")],
                          [r"'y' is defined twice"])
        # The same inside a body: two nodes of If's then-branch write 't'.
        then = H.make_graph([H.make_node("Relu", ["x"], ["t"], name="t1"), H.make_node("Neg", ["x"], ["t"], name="t2")],
                            "then", [], [vi("t", F, [2])])
        other = H.make_graph([H.make_node("Identity", ["x"], ["e"], name="e1")], "else", [], [vi("e", F, [2])])
        model = self.save("dup_body.onnx", [H.make_node("If", ["c"], ["y"], name="if", then_branch=then,
                                                        else_branch=other)],
                          [vi("x", F, [2])], [vi("y", F, [2])], [numpy_helper.from_array(np.array(True), "c")])
        self.expect_error("two nodes of a body writing 't'", "pcc", [model, "--gpus", 1, "-o", self.path("c.pcc")],
                          [r"body 'then' value 't' is defined twice"])
        # An initializer of an input's name is its default value: accepted.
        model = self.save("default.onnx", [H.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [2])],
                          [vi("y", F, [2])], [numpy_helper.from_array(np.ones(2, np.float32), "x")])
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", self.path("default.pcc"), "--quiet"])
        self.suite.check("an input with an initializer as its default compiles", r.returncode == 0, r.describe())

    # --- empty tensors, long kernels, full disks, small memory (the runtime) ---

    def empty_matmul(self):
        """A batched MatMul with an empty dimension runs (no tensor of zero
        elements reaches oneDNN, whose primitive creation divides by it)."""
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        w = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
        cases = [("[0,3,4] x [4,5]", [vi("a", F, [0, 3, 4]), vi("b", F, [4, 5])], [], [0, 3, 5]),
                 ("[2,0,4] x [4,5]", [vi("a", F, [2, 0, 4]), vi("b", F, [4, 5])], [], [2, 0, 5]),
                 ("[0,3,4] x weight [4,5]", [vi("a", F, [0, 3, 4])], [w], [0, 3, 5])]
        for label, inputs, inits, out in cases:
            b = "b" if not inits else "w"
            model = self.save(f"mm_empty{len(os.listdir(self.work))}.onnx",
                              [H.make_node("MatMul", ["a", b], ["h"], name="mm"),
                               H.make_node("Relu", ["h"], ["y"], name="act")], inputs, [vi("y", F, out)], inits)
            plan = self.path(os.path.basename(model).replace(".onnx", ".pcc"))
            r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
            if not self.suite.check(f"MatMul {label}: compiles", r.returncode == 0, r.describe()):
                continue
            r = self.tools.run("pcc-run", [plan, "--check"], timeout=60)
            self.suite.check(f"MatMul {label}: pcc-run --check exits 0", r.returncode == 0, r.describe())

    def long_kernel(self):
        """One Conv of about 6e10 multiply-adds on the reference kernels (a
        minute or more here) under --timeout 2: exit 4 within seconds, one
        line naming the node."""
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        w = numpy_helper.from_array(np.full((1, 1, 128, 128), 1e-3, np.float32), "w")
        model = self.save("slow_conv.onnx", [H.make_node("Conv", ["x", "w"], ["y"], name="slow_conv")],
                          [vi("x", F, [1, 1, 2048, 2048])], [vi("y", F, [1, 1, 1921, 1921])], [w])
        plan = self.path("slow_conv.pcc")
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check("a slow Conv compiles", r.returncode == 0, r.describe()):
            return
        t0 = time.time()
        r = self.tools.run("pcc-run", [plan, "--reference-kernels", "--timeout", 2], timeout=30)
        took = time.time() - t0
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        self.suite.check(f"a kernel past --timeout 2 ends the run: exit 4 in {took:.1f} s (at most 10), one line",
                         r.returncode == 4 and took < 10 and len(lines) == 1
                         and re.search(r"node 'slow_conv' \(Conv\).*time limit of 2 s", lines[0]) is not None,
                         r.describe())

    def full_disk_outputs(self):
        """Output files written past the file-size limit (RLIMIT_FSIZE, as a full
        disk does) leave no truncated or empty file, and an older file whole."""
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        model = self.save("relu64.onnx", [H.make_node("Relu", ["x"], ["y"], name="act")],
                          [vi("x", F, [64, 64])], [vi("y", F, [64, 64])])
        plan = self.path("relu64.pcc")
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check("relu64 compiles", r.returncode == 0, r.describe()):
            return
        limit = 256

        def small_files():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        cases = [("pcc-run --outputs", "pcc-run", lambda d: [plan, "--outputs", d], "output_0.pb"),
                 ("pcc-run --profile-json", "pcc-run", lambda d: [plan, "--profile-json", os.path.join(d, "p.json")],
                  "p.json"),
                 ("pcc-report -o", "pcc-report", lambda d: [plan, "-o", os.path.join(d, "r.txt")], "r.txt")]
        for case, tool, args, name in cases:
            whole, full = self.path("whole_" + name), self.path("full_" + name)
            os.makedirs(whole)
            os.makedirs(full)
            r = self.tools.run(tool, args(whole))
            size = os.path.getsize(os.path.join(whole, name)) if os.path.exists(os.path.join(whole, name)) else 0
            if not self.suite.check(f"{case}: writes {name} of more than {limit} bytes", r.returncode == 0
                                    and size > limit, f"  {size} bytes\n{r.describe()}"):
                continue
            old = b"an older file, kept whole"
            with open(os.path.join(full, name), "wb") as f:
                f.write(old)
            p = subprocess.run([self.tools.path(tool)] + [str(a) for a in args(full)], capture_output=True,
                               text=True, timeout=60, preexec_fn=small_files)
            lines = [ln for ln in p.stderr.splitlines() if ln.strip() and "warning" not in ln]
            with open(os.path.join(full, name), "rb") as f:
                kept = f.read()
            self.suite.check(f"{case} past a {limit}-byte file limit: exit 2, one line, the older {name} whole, "
                             "no temporary left", p.returncode == 2 and len(lines) == 1 and name in lines[0]
                             and kept == old and os.listdir(full) == [name],
                             f"  exit {p.returncode}, {len(kept)} bytes, files {os.listdir(full)}\n"
                             f"  stderr: {p.stderr[-500:]}")

    def empty_reductions(self):
        """ReduceSum over every element of an empty tensor, and ReduceMax
        over an empty axis, behind a Relu (so a generated kernel would take
        them): the outputs are the identities 0 and -inf at 1 and 2 devices,
        with the arena poisoned (a kernel that loops over no rows writes
        nothing)."""
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        for op, kw, out_shape in (("ReduceSum", {"keepdims": 0}, []), ("ReduceMax", {"keepdims": 0, "axes": [1]}, [3])):
            model = self.save(f"empty_{op}.onnx", [H.make_node("Relu", ["x"], ["r"], name="relu"),
                                                   H.make_node(op, ["r"], ["y"], name="red", **kw)],
                              [vi("x", F, [3, 0])], [vi("y", F, out_shape)], [])
            for gpus in (1, 2):
                plan = self.path(f"empty_{op}_{gpus}.pcc")
                r = self.tools.run("pcc", [model, "--gpus", gpus, "-o", plan, "--quiet"])
                if self.suite.check(f"{op} over an empty tensor compiles at --gpus {gpus}", r.returncode == 0,
                                    r.describe()):
                    r = self.tools.run("pcc-run", [plan, "--check", "--poison-memory"])
                    self.suite.check(f"{op} over an empty tensor at --gpus {gpus}: the identity (--check)",
                                     r.returncode == 0, r.describe())

    def endless_loop_with_initializer(self):
        """A Loop with no trip count whose condition stays true, its body
        holding an initializer: unrolling stops at its cap in seconds (each
        unrolled copy of the initializer needs a fresh name: found one by
        one, that was quadratic, about ten minutes), and the run-time Loop
        ends at --timeout with exit 4."""
        F, B = onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL
        vi = H.make_tensor_value_info
        one = numpy_helper.from_array(np.ones([1], np.float32), "one")
        body = H.make_graph([H.make_node("Identity", ["c_in"], ["c_out"], name="keep"),
                             H.make_node("Add", ["v_in", "one"], ["v_out"], name="step")], "body",
                            [vi("i", onnx.TensorProto.INT64, []), vi("c_in", B, []), vi("v_in", F, [1])],
                            [vi("c_out", B, []), vi("v_out", F, [1])], [one])
        cond = numpy_helper.from_array(np.array(True), "cond")
        model = self.save("endless_init.onnx", [H.make_node("Loop", ["", "cond", "x"], ["y"], name="loop", body=body)],
                          [vi("x", F, [1])], [vi("y", F, [1])], [cond])
        plan = self.path("endless_init.pcc")
        start = time.monotonic()
        r = self.tools.run("pcc", [model, "-o", plan, "--quiet"], timeout=120)
        took = time.monotonic() - start
        if self.suite.check(f"an endless Loop with a body initializer compiles within 60 s (took {took:.1f} s)",
                            r.returncode == 0 and took < 60, r.describe()):
            r = self.tools.run("pcc-run", [plan, "--timeout", "2"])
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            self.suite.check("its run ends at --timeout: exit 4, one line naming the node",
                             r.returncode == 4 and len(lines) == 1 and "loop" in lines[0], r.describe())

    def small_memory(self):
        """A plan whose arena (4 GiB) exceeds the address space (2 GiB,
        RLIMIT_AS): exit 4 and one line saying out of memory."""
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        shape = numpy_helper.from_array(np.array([1024, 1024, 1024], np.int64), "s")
        model = self.save("big_arena.onnx", [H.make_node("Expand", ["x", "s"], ["e"], name="expand"),
                                             H.make_node("ReduceSum", ["e"], ["y"], name="sum", keepdims=0)],
                          [vi("x", F, [1024])], [vi("y", F, [])], [shape])
        plan = self.path("big_arena.pcc")
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check("a plan with a 4 GiB arena compiles", r.returncode == 0, r.describe()):
            return

        def small_memory():
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        env, limit = dict(os.environ), small_memory
        if "ASAN_OPTIONS" in env:
            # AddressSanitizer (`make sanitize`) reserves terabytes of shadow
            # memory and cannot start under RLIMIT_AS: its own allocation cap
            # stands in for the small machine.
            env["ASAN_OPTIONS"] += ":max_allocation_size_mb=2048:allocator_may_return_null=1"
            limit = None
        p = subprocess.run([self.tools.path("pcc-run"), plan], capture_output=True, text=True, timeout=120,
                           preexec_fn=limit, env=env)
        lines = [ln for ln in p.stderr.splitlines()
                 if ln.strip() and not re.match(r"==\d+==WARNING: AddressSanitizer failed to allocate", ln)]
        self.suite.check("pcc-run of a 4 GiB arena in 2 GiB of address space: exit 4, one line, out of memory",
                         p.returncode == 4 and len(lines) == 1 and "out of memory" in lines[0],
                         f"  exit {p.returncode}, stderr: {p.stderr[-500:]}")


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
            suite.run_case("huge shapes", h.huge_shapes)
            suite.run_case("huge inputs", h.huge_inputs)
            suite.run_case("huge IR", h.huge_ir)
            suite.run_case("checker", h.checker)
            suite.run_case("codegen names", h.codegen_names)
            suite.run_case("empty MatMul", h.empty_matmul)
            suite.run_case("long kernel", h.long_kernel)
            suite.run_case("full disk outputs", h.full_disk_outputs)
            suite.run_case("small memory", h.small_memory)
            suite.run_case("empty reductions", h.empty_reductions)
            suite.run_case("endless loop with an initializer", h.endless_loop_with_initializer)
        finally:
            if not suite.keep:
                shutil.rmtree(h.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
