"""Writes reference inputs and onnxruntime outputs for the committed models.

For each model in models/ (batch 2, fixed seed) this writes
tests/data/onnx/<model>/input_0.pb and output_0.pb, ONNX TensorProto files in
the backend-test layout. unit_onnx imports each model with --batch 2, runs it
on the reference kernels and compares with these outputs.

Run: build/venv/bin/python tests/data/onnx/make_reference.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BATCH = 2


def make_input(inp, rng):
    tt = inp.type.tensor_type
    shape = [BATCH if (d.dim_param or not d.HasField("dim_value")) else d.dim_value for d in tt.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, size=shape).astype(dtype)  # token ids below every vocabulary size used
    return rng.standard_normal(shape).astype(dtype)


def main():
    for name in ("mlp", "cnn_small", "gpt2_tiny"):
        path = os.path.join(ROOT, "models", name + ".onnx")
        model = onnx.load(path)
        rng = np.random.default_rng(1234)
        x = make_input(model.graph.input[0], rng)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        (y,) = sess.run(None, {model.graph.input[0].name: x})
        out = os.path.join(HERE, name)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, model.graph.input[0].name).SerializeToString())
        with open(os.path.join(out, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, model.graph.output[0].name).SerializeToString())
        print(name, x.shape, "->", y.shape)


if __name__ == "__main__":
    main()
