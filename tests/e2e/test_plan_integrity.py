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
  new plan is whole.
"""

import os
import re
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from pcc_e2e import onnx  # noqa: E402

H = onnx.helper
MLP = e2e.model_path("mlp.onnx")
CNN = e2e.model_path("cnn_small.onnx")


def resign(data):
    """\returns plan.pb bytes `data` (without its 5-byte checksum) with a correct one."""
    crc = zlib.crc32(bytes(data)) & 0xFFFFFFFF
    return bytes(data) + bytes([0x65]) + crc.to_bytes(4, "little")


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
        finally:
            if not suite.keep:
                shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
