#!/usr/bin/env python3
"""The plan bundle's integrity, end to end (docs/plan-format.md, docs/security.md):

- a flipped byte in plan.pb (a Relu made a Selu) is refused by its checksum;
- an edited mesh or group, re-signed with a correct checksum, is refused by
  the plan reader's validation;
- a model whose node name is not valid UTF-8: pcc exits 2 naming it (it
  writes no plan that could not be read back) and libprotobuf prints nothing;
- `-o ''`, `-o /`, `-o` onto a directory that is not a plan bundle or onto a
  file: exit 2, one line, nothing touched;
- recompiling onto a plan while `pcc-run` runs it: the run finishes well
  (the old files are moved aside, never rewritten under its mapping), and the
  new plan is whole;
- the generated-kernel table and library, re-signed: a kernel named `abort`
  or `system` (a C library function dlsym would find), a kernels/cpu.so cut
  short with its size and crc32 re-made in plan.pb, a FIFO as kernels/cpu.so:
  exit 2 and one line, at once;
- edited and re-signed instructions the kernels would index with: a MatMul,
  Gemm or Conv operand of -1 (folded with its epilogue or not), Conv pads
  that are negative or do not give the output's shape: exit 2 and one line
  naming the node and the op; a kernel table whose epilogue has 5,000 steps
  is run unfolded (exit 0, the check passes);
- a few hundred mutants of a re-signed plan.pb (bytes flipped, fields of the
  program set to other values), each run with `pcc-run --check --timeout 10`
  under a 4 GiB address-space limit: every one ends with exit 0, 1, 2 or 4,
  never a signal or an internal error.
"""

import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import np, numpy_helper, onnx  # noqa: E402

H = onnx.helper
MLP = e2e.model_path("mlp.onnx")
CNN = e2e.model_path("cnn_small.onnx")


def resign(data):
    """\returns plan.pb bytes `data` (without its 5-byte checksum) with a correct one."""
    crc = zlib.crc32(bytes(data)) & 0xFFFFFFFF
    return bytes(data) + bytes([0x65]) + crc.to_bytes(4, "little")


def message_fields(buf):
    """\returns one protobuf message's top level as [(field, wire type, int | bytes)], in order."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = e2e._varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = e2e._varint(buf, pos)
        elif wire == 2:
            n, pos = e2e._varint(buf, pos)
            value, pos = bytes(buf[pos:pos + n]), pos + n
        else:
            size = {1: 8, 5: 4}[wire]
            value, pos = bytes(buf[pos:pos + size]), pos + size
        out.append((number, wire, value))
    return out


def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def encode_message(fields):
    """The inverse of message_fields."""
    out = bytearray()
    for number, wire, value in fields:
        out += varint(number << 3 | wire)
        if wire == 0:
            out += varint(value)
        elif wire == 2:
            out += varint(len(value)) + value
        else:
            out += value
    return bytes(out)


def replace_field(message, number, fn):
    """\returns `message` with each value of field `number` replaced by fn(value)."""
    return encode_message([(n, w, fn(v) if n == number else v) for n, w, v in message_fields(message)])


def plan_proto_module(work):
    """\returns runtime/plan.proto's Python module, generated with protoc into
    `work`, or None when protoc is missing or fails."""
    protoc = shutil.which("protoc")
    if not protoc:
        return None
    out = os.path.join(work, "plan_proto")
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([protoc, f"--python_out={out}", "-I", os.path.join(e2e.SOURCE_DIR, "runtime"),
                        os.path.join(e2e.SOURCE_DIR, "runtime", "plan.proto")], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    sys.path.insert(0, out)
    import plan_pb2  # noqa: E402
    return plan_pb2


class Integrity:
    def __init__(self, suite, tools):
        self.suite, self.tools = suite, tools
        self.work = suite.tempdir("integrity")
        self._plan = None

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def expect_error(self, case, tool, args, patterns):
        e2e.expect_one_line_error(self.suite, self.tools, case, tool, args, patterns)

    def plan(self):
        """A fresh copy of a two-rank data-parallel plan of mlp.onnx."""
        if self._plan is None:
            self._plan = self.path("mlp.pcc")
            r = self.tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "-o", self._plan, "--quiet"])
            if not self.suite.check("compile mlp.onnx at --gpus 2", r.returncode == 0, r.describe()):
                raise RuntimeError("cannot compile mlp.onnx")
        copy = self.path(f"copy{len(os.listdir(self.work))}.pcc")
        shutil.copytree(self._plan, copy)
        return copy

    def checksum(self):
        plan = self.plan()
        f = os.path.join(plan, "plan.pb")
        data = bytearray(open(f, "rb").read())
        self.suite.check("plan.pb ends in its crc32 (tag 0x65)",
                         data[-5] == 0x65 and int.from_bytes(data[-4:], "little") == zlib.crc32(bytes(data[:-5])),
                         f"  ends {data[-5:].hex()}")
        at = data.find(b"Relu")
        if not self.suite.check("the mlp plan has a Relu", at >= 0):
            return
        data[at] = ord("S")  # Selu: a plan that still parses and would run
        open(f, "wb").write(data)
        self.expect_error("Relu flipped to Selu in plan.pb", "pcc-run", [plan, "--check"],
                          [re.escape(f), r"checksum mismatch"])
        self.expect_error("Relu flipped to Selu in plan.pb (report)", "pcc-report", [plan], [r"checksum mismatch"])

    def kernel_plan(self):
        """A fresh one-rank plan of a fused Add, Relu, Mul chain: one generated kernel."""
        F = onnx.TensorProto.FLOAT
        model = self.path("chain.onnx")
        if not os.path.exists(model):
            nodes = [H.make_node("Add", ["x", "y"], ["a"], name="add"), H.make_node("Relu", ["a"], ["r"], name="relu"),
                     H.make_node("Mul", ["r", "y"], ["z"], name="mul")]
            g = H.make_graph(nodes, "chain", [H.make_tensor_value_info(n, F, [4, 8]) for n in ("x", "y")],
                             [H.make_tensor_value_info("z", F, [4, 8])])
            onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), model)
        plan = self.path(f"chain{len(os.listdir(self.work))}.pcc")
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", plan, "--quiet"])
        if not self.suite.check("compile the kernel chain", r.returncode == 0, r.describe()):
            return None
        if not self.suite.check("the chain has a generated kernel",
                                os.path.isfile(os.path.join(plan, "kernels", "cpu.so"))):
            return None
        return plan

    def edit_plan(self, plan, kernel_name=None, library=None):
        """Re-signs plan.pb with kernel 0 named `kernel_name`, or with
        kernels/cpu.so replaced by the bytes `library` (its size and crc32 re-made)."""
        f = os.path.join(plan, "plan.pb")
        data = open(f, "rb").read()[:-5]
        if kernel_name is not None:
            first = [True]

            def rename(kernel):
                if not first[0]:
                    return kernel
                first[0] = False
                return replace_field(kernel, 1, lambda _: kernel_name.encode())
            data = replace_field(data, 15, rename)
        if library is not None:
            with open(os.path.join(plan, "kernels", "cpu.so"), "wb") as out:
                out.write(library)
            crc = zlib.crc32(library) & 0xFFFFFFFF
            data = replace_field(data, 16, lambda lib: replace_field(replace_field(
                lib, 2, lambda _: len(library)), 3, lambda _: crc))
        with open(f, "wb") as out:
            out.write(resign(data))

    def kernel_names(self):
        for name in ("abort", "system", "sleep", "fork"):
            plan = self.kernel_plan()
            if not plan:
                return
            self.edit_plan(plan, kernel_name=name)
            # A short limit: `sleep` called as a kernel would sleep for years.
            r = self.tools.run("pcc-run", [plan, "--check"], timeout=60)
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            self.suite.check(f"kernel named '{name}', plan re-signed: exit 2, one line naming it",
                             r.returncode == 2 and len(lines) == 1 and f"kernel 0 '{name}'" in lines[0]
                             and "not a generated kernel's symbol" in lines[0], r.describe())

    def library_file(self):
        plan = self.kernel_plan()
        if not plan:
            return
        lib = os.path.join(plan, "kernels", "cpu.so")
        whole = open(lib, "rb").read()
        for label, keep in (("half", len(whole) // 2), ("all but its last 64 bytes", len(whole) - 64)):
            self.edit_plan(plan, library=whole[:keep])
            self.expect_error(f"kernels/cpu.so cut to {label}, size and crc32 re-signed", "pcc-run",
                              [plan, "--check"], [re.escape(lib), r"not a whole shared object"])
        self.edit_plan(plan, library=whole)
        r = self.tools.run("pcc-run", [plan, "--check"])
        self.suite.check("the whole library re-signed runs again", r.returncode == 0, r.describe())
        os.remove(lib)
        os.mkfifo(lib)
        for tool, args in (("pcc-run", [plan, "--check"]), ("pcc-report", [plan])):
            r = self.tools.run(tool, args, timeout=30)
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            self.suite.check(f"kernels/cpu.so a FIFO: {tool} exits 2 at once, 'not a regular file'",
                             r.returncode == 2 and len(lines) == 1 and "not a regular file" in lines[0]
                             and "cpu.so" in lines[0], r.describe())

    def edited_mesh(self):
        plan = self.plan()
        f = os.path.join(plan, "plan.pb")
        data = open(f, "rb").read()
        fields = e2e.decode_fields(data)
        mesh = fields.get(6, [b""])[0]
        m = e2e.decode_fields(mesh)
        dims = [m.get(k, [0])[0] for k in (1, 2, 3)]
        if not self.suite.check("the mlp plan's mesh has two ranks", dims[0] * dims[1] * dims[2] == 2, f"  {dims}"):
            return
        # The same two ranks along the other axis: the groups no longer fit.
        pp, dp, tp = dims
        swapped = bytes([0x08, pp, 0x10, tp, 0x18, dp])
        old = bytes([0x32, len(mesh)]) + mesh
        if not self.suite.check("the mesh is encoded once", data.count(old) == 1 and len(mesh) == 6, f"  {mesh.hex()}"):
            return
        open(f, "wb").write(resign(data[:-5].replace(old, bytes([0x32, 6]) + swapped)))
        self.expect_error("mesh dp and tp swapped, checksum re-signed", "pcc-run", [plan, "--check"],
                          [r"mesh_coord is not \(0, 0, 1\)|group \d+ \((dp|tp)\): ranks \[0,1\] are not a (dp|tp) group"])
        # Four ranks claimed for a two-rank plan.
        open(f, "wb").write(resign(data[:-5].replace(old, bytes([0x32, 6, 0x08, 1, 0x10, 2, 0x18, 2]))))
        self.expect_error("mesh of four ranks, checksum re-signed", "pcc-run", [plan],
                          [r"mesh pp=1 dp=2 tp=2 has 4 ranks, the plan has 2 rank programs"])

    def bad_utf8_name(self):
        g = H.make_graph([H.make_node("Relu", ["x"], ["y"], name="act_AB")], "relu",
                         [H.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                         [H.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])])
        raw = H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8).SerializeToString()
        model = self.path("bad_utf8.onnx")
        with open(model, "wb") as out:
            out.write(raw.replace(b"act_AB", b"act_\xff\xfe"))
        out = self.path("bad_utf8.pcc")
        self.expect_error("node name with invalid UTF-8", "pcc", [model, "-o", out],
                          [r"not valid UTF-8", r"act_\\xff\\xfe"])
        self.suite.check("no plan left behind", not os.path.exists(out)
                         and not any(n.startswith(".bad_utf8.pcc") for n in os.listdir(self.work)),
                         f"  {os.listdir(self.work)}")

    def bad_outputs(self):
        self.expect_error("-o ''", "pcc", [MLP, "--batch", 4, "-o", ""], [r"-o", r"empty"])
        self.expect_error("-o /", "pcc", [MLP, "--batch", 4, "-o", "/"], [r"^pcc: error: /: "])
        folder = self.path("notes")
        os.makedirs(folder)
        with open(os.path.join(folder, "todo.txt"), "w") as f:
            f.write("keep")
        self.expect_error("-o onto a directory that is not a plan bundle", "pcc", [MLP, "--batch", 4, "-o", folder],
                          [re.escape(folder), r"not a plan bundle", r"todo\.txt"])
        self.suite.check("the directory is untouched", sorted(os.listdir(folder)) == ["todo.txt"]
                         and open(os.path.join(folder, "todo.txt")).read() == "keep", f"  {os.listdir(folder)}")
        afile = os.path.join(folder, "todo.txt")
        self.expect_error("-o onto a file", "pcc", [MLP, "--batch", 4, "-o", afile], [r"not a plan bundle directory"])
        if os.path.exists("/dev/full"):
            self.expect_error("-o /dev/full", "pcc", [MLP, "--batch", 4, "-o", "/dev/full"],
                              [r"/dev/full", r"not a plan bundle"])

    def recompile_while_running(self):
        """pcc-run maps cnn_small's plan; mlp's plan replaces it mid-run."""
        plan = self.path("running.pcc")
        r = self.tools.run("pcc", [CNN, "--batch", 2, "--gpus", 2, "-o", plan, "--quiet"])
        if not self.suite.check("compile cnn_small.onnx", r.returncode == 0, r.describe()):
            return
        # Iterations for a run of about 8 s on this machine, measured.
        def seconds(iters):
            t0 = time.time()
            r = self.tools.run("pcc-run", [plan, "--iters", iters])
            return time.time() - t0 if r.returncode == 0 else None
        short, longer = seconds(5), seconds(105)
        if not self.suite.check("pcc-run runs the plan", short is not None and longer is not None):
            return
        per_iter = max((longer - short) / 100, 1e-5)
        iters = int(min(max(8.0 / per_iter, 200), 2_000_000))
        weights = os.path.realpath(os.path.join(plan, "rank0.bin"))
        run = subprocess.Popen([self.tools.path("pcc-run"), plan, "--check", "--iters", str(iters)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            mapped = False
            deadline = time.time() + 120
            while time.time() < deadline and run.poll() is None and not mapped:
                try:
                    with open(f"/proc/{run.pid}/maps") as m:
                        mapped = weights in m.read()
                except OSError:
                    pass
                time.sleep(0.02)
            if not self.suite.check("pcc-run maps the plan's weights", mapped and run.poll() is None,
                                    f"  exit {run.poll()}"):
                return
            r = self.tools.run("pcc", [MLP, "--batch", 4, "--gpus", 1, "-o", plan, "--quiet"])
            self.suite.check("recompiling onto the running plan succeeds", r.returncode == 0, r.describe())
            self.suite.check(f"pcc-run ({iters} iterations) was still running when the plan was replaced",
                             run.poll() is None, f"  exit {run.poll()}")
            out, err = run.communicate(timeout=600)
            self.suite.check("pcc-run finishes the old plan well (exit 0, --check passes, no SIGBUS)",
                             run.returncode == 0, f"  exit {run.returncode}\n{err[-2000:]}")
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        r = self.tools.run("pcc-run", [plan, "--check"])
        self.suite.check("the new plan is whole and runs", r.returncode == 0, r.describe())
        left = [n for n in os.listdir(self.work) if n.startswith(".running.pcc")]
        self.suite.check("no temporary or old bundle left next to it", not left, f"  {left}")

    # --- edited instructions, re-signed --------------------------------------

    def proto(self):
        module = plan_proto_module(self.work)
        self.suite.check("protoc generates runtime/plan.proto's Python module", module is not None)
        return module

    def model(self, name, nodes, inputs, outputs, inits=()):
        path = self.path(name + ".onnx")
        g = H.make_graph(nodes, name, inputs, outputs, list(inits))
        onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 13)], ir_version=8), path)
        return path

    def compiled(self, model, name):
        out = self.path(name + ".pcc")
        r = self.tools.run("pcc", [model, "--gpus", 1, "-o", out, "--quiet"])
        return out if self.suite.check(f"compile {name}", r.returncode == 0, r.describe()) else None

    def edited(self, pb, bundle, edit):
        """\returns a copy of `bundle` whose plan.pb is its plan changed by
        `edit(plan)`, re-signed."""
        copy = self.path(f"edit{len(os.listdir(self.work))}.pcc")
        shutil.copytree(bundle, copy)
        f = os.path.join(copy, "plan.pb")
        plan = pb.Plan()
        plan.ParseFromString(open(f, "rb").read())
        edit(plan)
        plan.ClearField("plan_crc32")
        open(f, "wb").write(resign(plan.SerializeToString()))
        return copy

    @staticmethod
    def instruction(program, op):
        return next(i for i in program.instructions if i.op == op)

    def edited_operands(self):
        pb = self.proto()
        if pb is None:
            return
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        rng = np.random.default_rng(0)

        def w(name, *shape):
            return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
        cases = [
            ("MatMul", self.model("mm_relu", [H.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
                                              H.make_node("Relu", ["h"], ["y"], name="act")],
                                  [vi("x", F, [4, 16])], [vi("y", F, [4, 8])], [w("w", 16, 8)])),
            ("Gemm", self.model("gemm_relu", [H.make_node("Gemm", ["x", "w", "b"], ["h"], name="gemm"),
                                              H.make_node("Relu", ["h"], ["y"], name="act")],
                                [vi("x", F, [4, 16])], [vi("y", F, [4, 8])], [w("w", 16, 8), w("b", 8)])),
            ("Conv", self.model("conv_relu", [H.make_node("Conv", ["x", "w"], ["h"], name="conv", pads=[1, 1, 1, 1]),
                                              H.make_node("Relu", ["h"], ["y"], name="act")],
                                [vi("x", F, [1, 3, 8, 8])], [vi("y", F, [1, 4, 8, 8])], [w("w", 4, 3, 3, 3)])),
        ]
        for op, model in cases:
            bundle = self.compiled(model, op.lower())
            if not bundle:
                continue
            for fold in ([], ["--no-fold"]):
                for k in (0, 1):
                    def absent(plan, k=k, op=op):
                        for prog in list(plan.ranks) + [plan.reference]:
                            self.instruction(prog, op).inputs[k] = -1
                    self.expect_error(f"{op} input {k} edited to -1 {' '.join(fold)}", "pcc-run",
                                      [self.edited(pb, bundle, absent), "--check"] + fold,
                                      [rf"node '{op.lower()}\b", re.escape(op), rf"input {k} is required but absent"])
            if op != "Conv":
                continue
            # Pads that do not give the planned [1,4,8,8]: negative, too small, too large.
            for pads, why in (([-1, -1, -1, -1], r"must be non-negative"), ([0, 0, 0, 0], r"f32\[1,4,6,6\]"),
                              ([3, 3, 3, 3], r"f32\[1,4,12,12\]")):
                def set_pads(plan, pads=pads):
                    for prog in list(plan.ranks) + [plan.reference]:
                        a = next(a for a in self.instruction(prog, "Conv").attrs if a.name == "pads")
                        del a.ints.v[:]
                        a.ints.v.extend(pads)
                edited = self.edited(pb, bundle, set_pads)
                for fold in ([], ["--no-fold"]):
                    self.expect_error(f"Conv pads edited to {pads} {' '.join(fold)}", "pcc-run",
                                      [edited, "--check"] + fold, [r"node 'conv\b", r"Conv", why])

    def long_epilogue(self):
        """5,000 steps in the kernel table's epilogue of a fused Add+Relu: no fold."""
        pb = self.proto()
        if pb is None:
            return
        F = onnx.TensorProto.FLOAT
        vi = H.make_tensor_value_info
        rng = np.random.default_rng(1)
        model = self.model("mm_chain", [H.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                                        H.make_node("Add", ["h", "b"], ["hb"], name="add"),
                                        H.make_node("Relu", ["hb"], ["y"], name="act")],
                           [vi("x", F, [4, 16])], [vi("y", F, [4, 8])],
                           [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w"),
                            numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")])
        bundle = self.compiled(model, "mm_chain")
        if not bundle:
            return
        plan = pb.Plan()
        plan.ParseFromString(open(os.path.join(bundle, "plan.pb"), "rb").read())
        if not self.suite.check("the fused Add+Relu has a relu step in the kernel table's epilogue",
                                len(plan.kernels) == 1 and any(s.op == "relu" for s in plan.kernels[0].epilogue)):
            return

        def lengthen(p):
            relu = next(s for s in p.kernels[0].epilogue if s.op == "relu")
            for _ in range(5000):
                p.kernels[0].epilogue.add().CopyFrom(relu)
        r = self.tools.run("pcc-run", [self.edited(pb, bundle, lengthen), "--check", "--profile"])
        self.suite.check("5,000 epilogue steps: run unfolded, the check passes (exit 0)",
                         r.returncode == 0 and "epilogue" not in r.stdout, r.describe())

    # --- mutants of plan.pb ---------------------------------------------------

    def mutants(self):
        """Mutated, re-signed plans reach the reader's validation and the
        kernels: none may end in a signal or an internal error."""
        pb = self.proto()
        if pb is None:
            return
        bundle = self.path("mlp1.pcc")
        r = self.tools.run("pcc", [MLP, "--batch", 4, "--gpus", 1, "-o", bundle, "--quiet"])
        if not self.suite.check("compile mlp.onnx at --gpus 1", r.returncode == 0, r.describe()):
            return
        raw = open(os.path.join(bundle, "plan.pb"), "rb").read()[:-5]
        rng = random.Random(20261206)
        interesting = [-2, -1, 0, 1, 2, 3, 7, 64, 255, 4096, 1 << 20, 1 << 31, (1 << 31) - 1, 1 << 40]

        def structured():
            """One field of the program set to another value."""
            plan = pb.Plan()
            plan.ParseFromString(raw)
            prog = plan.ranks[0] if rng.random() < 0.7 else plan.reference
            kernels = [i for i in prog.instructions if i.kind == 0 and i.op]

            def pick():  # mostly a kernel: what the kernels index with
                return rng.choice(kernels) if kernels and rng.random() < 0.8 else rng.choice(prog.instructions)
            what = rng.randrange(5)
            if what == 0 and prog.instructions:
                ins = pick()
                ops = [x for x in (ins.inputs, ins.inputs, ins.inputs, ins.outputs) if len(x)]
                if ops:
                    seq = rng.choice(ops)
                    seq[rng.randrange(len(seq))] = rng.choice([-1, -1, -1, -2, 0, 1, 5, 99, rng.randrange(64)])
            elif what == 1 and prog.instructions:
                ins = pick()
                ints = [a for a in ins.attrs if a.HasField("i") or a.HasField("ints")]
                if ints and rng.random() < 0.7:
                    a = rng.choice(ints)
                    if a.HasField("i"):
                        a.i = rng.choice(interesting)
                    elif len(a.ints.v):
                        a.ints.v[rng.randrange(len(a.ints.v))] = rng.choice(interesting)
                else:
                    ins.op = rng.choice(["MatMul", "Gemm", "Conv", "Pad", "Softmax", "Gather", "Reshape", "Relu"])
            elif what == 2 and prog.buffers:
                b = rng.choice(prog.buffers)
                if len(b.desc.shape) and rng.random() < 0.6:
                    b.desc.shape[rng.randrange(len(b.desc.shape))] = rng.choice(interesting)
                else:
                    b.desc.dtype = rng.choice([0, 1, 6, 7, 10, 11, 99])
            elif what == 3 and prog.buffers:
                b = rng.choice(prog.buffers)
                setattr(b, rng.choice(["arena_offset", "weight", "in_place_of", "id"]),
                        rng.choice([v for v in interesting if -(1 << 31) <= v < (1 << 31)]))
            elif prog.instructions:
                pick().kind = rng.choice([0, 1, 4, 5, 6, 7, 8, 9])
            return plan.SerializeToString()

        def flipped():
            """One to four bytes flipped or set to a varint's edge values."""
            data = bytearray(raw)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(data))
                data[at] = rng.choice([data[at] ^ (1 << rng.randrange(8)), 0x00, 0x7F, 0x80, 0xFF])
            return bytes(data)

        def limits():
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        env, limit, budget, least = dict(os.environ), limits, 50, 200
        if "ASAN_OPTIONS" in env:
            # AddressSanitizer (`make sanitize`) cannot start under RLIMIT_AS
            # (its shadow memory): its allocation cap stands in, and its runs
            # are slower.
            env["ASAN_OPTIONS"] += ":max_allocation_size_mb=4096:allocator_may_return_null=1"
            limit, budget, least = None, 120, 100
        target = self.path("mutant.pcc")
        shutil.copytree(bundle, target)
        t0, count, codes, bad = time.time(), 0, {}, []
        while count < 300 and time.time() - t0 < budget:
            data = structured() if count % 3 else flipped()
            open(os.path.join(target, "plan.pb"), "wb").write(resign(data))
            cmd = [self.tools.path("pcc-run"), target, "--check", "--timeout", "10"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=60,
                                   preexec_fn=limit, env=env)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc, p = "hung", None
            codes[rc] = codes.get(rc, 0) + 1
            if rc not in (0, 1, 2, 4) and len(bad) < 3:
                kept = self.path(f"bad_mutant{count}.pb")
                open(kept, "wb").write(resign(data))
                bad.append(f"  mutant {count} ({kept}): exit {rc}: {p.stderr.strip()[-300:] if p else ''}")
            count += 1
        self.suite.check(f"{count} mutants of plan.pb: each exits 0, 1, 2 or 4 (exits: {codes})",
                         count >= least and all(k in (0, 1, 2, 4) for k in codes), "\n".join(bad))


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_plan_integrity", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, ("pcc", "pcc-run", "pcc-report")):
        t = Integrity(suite, tools)
        try:
            suite.run_case("plan.pb checksum", t.checksum)
            suite.run_case("edited mesh", t.edited_mesh)
            suite.run_case("invalid UTF-8 name", t.bad_utf8_name)
            suite.run_case("bad -o", t.bad_outputs)
            suite.run_case("recompile while running", t.recompile_while_running)
            suite.run_case("kernel names", t.kernel_names)
            suite.run_case("kernel library file", t.library_file)
            suite.run_case("edited operands and pads", t.edited_operands)
            suite.run_case("long epilogue", t.long_epilogue)
            suite.run_case("plan.pb mutants", t.mutants)
        finally:
            if not suite.keep:
                shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
