#!/usr/bin/env python3
"""NumPy tensor files in pcc-run (docs/cli.md#tensor-files): --inputs takes one
.npz archive keyed by input name or a folder of NAME.npy files, --expect the
same for outputs, --outputs FILE.npz writes one. The MLP, compiled for two
ranks, is run from numpy's own files: its outputs equal onnxruntime's on the
same arrays, the .npz written reads back in numpy, and --expect passes on it
and fails on a changed copy. A wrong name, a missing input, a wrong dtype or
shape exits 2 with one line naming the file, the tensor and what was expected.
"""

import os
import shutil
import sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("e2e_numpy_files", args)
    tools = e2e.Tools(args.bin)
    e2e.require_tools(suite, tools)
    work = suite.tempdir("numpy")
    try:
        model = os.path.join(e2e.MODELS_DIR, "mlp.onnx")
        bundle = os.path.join(work, "mlp.pcc")
        r = tools.run("pcc", [model, "--gpus", "2", "--strategy", "tp=2", "--batch", "4", "-o", bundle])
        if not suite.check("compiles", r.returncode == 0, r.describe()):
            return suite.finish()
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        shape = [4 if not isinstance(d, int) else d for d in inp.shape]
        x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
        want = sess.run(None, {inp.name: x})[0]
        out_name = sess.get_outputs()[0].name

        npz = os.path.join(work, "inputs.npz")
        np.savez(npz, **{inp.name: x})
        folder = os.path.join(work, "inputs")
        os.makedirs(folder)
        np.save(os.path.join(folder, inp.name + ".npy"), x)

        out = os.path.join(work, "out.npz")
        r = tools.run("pcc-run", [bundle, "--inputs", npz, "--outputs", out])
        if suite.check("--inputs FILE.npz --outputs FILE.npz runs", r.returncode == 0, r.describe()):
            with np.load(out) as got:
                ok = list(got.keys()) == [out_name] and np.allclose(got[out_name], want, rtol=1e-4, atol=1e-5)
                suite.check("the .npz written holds the output by name, equal to onnxruntime's", ok,
                            f"  keys {list(got.keys())}")
        r = tools.run("pcc-run", [bundle, "--inputs", folder, "--expect", out])
        suite.check("--inputs DIR of NAME.npy, --expect FILE.npz passes", r.returncode == 0, r.describe())
        changed = os.path.join(work, "changed.npz")
        np.savez(changed, **{out_name: want + 1.0})
        r = tools.run("pcc-run", [bundle, "--inputs", npz, "--expect", changed])
        suite.check("--expect on a changed .npz fails (exit 1)", r.returncode == 1, r.describe())

        def refused(what, arrays, needle):
            path = os.path.join(work, what.replace(" ", "_") + ".npz")
            np.savez(path, **arrays)
            r = tools.run("pcc-run", [bundle, "--inputs", path])
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            suite.check(f"refused: {what}: exit 2, one line naming it", r.returncode == 2 and len(lines) == 1 and
                        needle in lines[0] and os.path.basename(path) in lines[0], r.describe())

        refused("an unknown name", {inp.name: x, "extra": x}, "extra")
        refused("a missing input", {"other": x}, inp.name)
        refused("a wrong dtype", {inp.name: x.astype(np.float64)}, inp.name)
        refused("a wrong shape", {inp.name: x[:2]}, inp.name)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
