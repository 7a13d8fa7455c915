"""Writes the model of tests/gpu/run.sh's bandwidth check: y = Relu(x * 2 + 1)
on a float32 x of ROWS x 2^20 elements (default 128 rows: 512 MiB in, 512 MiB
out), which pcc fuses into one generated kernel.

usage: make_elementwise.py OUT.onnx [ROWS]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    cols = 1 << 20
    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["t0"], name="mul"),
        helper.make_node("Add", ["t0", "one"], ["t1"], name="add"),
        helper.make_node("Relu", ["t1"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "elementwise",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])],
                              initializer=[two, one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
