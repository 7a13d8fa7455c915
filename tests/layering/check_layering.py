#!/usr/bin/env python3
"""Checks the layering of pcc's libraries (docs/adding-an-op.md#layering).

1. Configures the source tree into a scratch directory with
   `cmake --graphviz` (tests off) and reads the target graph it writes.
2. Every direct edge between two pcc_* libraries must be in ALLOWED: a new
   edge is a decision, made by adding it here.
3. No library may reach (directly or not) what FORBIDDEN lists for it: the
   runtime reaches nothing of compiler/passes/codegen, the importer neither
   gloo nor oneDNN, the IR no kernel provider, code generation not the
   partitioner.
4. The sources follow the same rules for #include lines (INCLUDE_RULES), since
   a header-only dependency shows in no link edge.

`--self-test` runs the checks on a made-up graph with forbidden edges and
fails unless they are caught. Exit status: 0 clean, 1 a forbidden edge.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Direct edges between pcc libraries, library -> the pcc libraries it may link.
ALLOWED = {
    "pcc_support": set(),
    "pcc_schema": {"pcc_support"},                    # op table + type inference
    "pcc_ops": {"pcc_schema", "pcc_support"},         # kernel registry + reference kernels
    "pcc_plan_proto": set(),
    "pcc_onnx_tensor": {"pcc_support"},
    "pcc_cpu": {"pcc_ops"},                           # oneDNN kernels
    "pcc_runtime": {"pcc_cpu", "pcc_ops", "pcc_onnx_tensor", "pcc_plan_proto"},
    # The IR types nodes through the op schemas (runtime/schema), which link
    # no kernel; the evaluator above it runs the reference kernels.
    "pcc_ir": {"pcc_schema"},
    "pcc_eval": {"pcc_ir", "pcc_ops"},
    "pcc_onnx": {"pcc_ir", "pcc_ops", "pcc_onnx_tensor"},
    "pcc_passes": {"pcc_ir", "pcc_eval"},
    # The partition report reads plans only (pcc-report links no compiler).
    "pcc_report": {"pcc_runtime"},
    # --target cuda compiles generated kernels through the NVRTC driver.
    "pcc_codegen": {"pcc_ir", "pcc_runtime", "pcc_report", "pcc_cuda_codegen"},
    "pcc_cuda_codegen": {"pcc_support"},
    # The CUDA backend (runtime/cuda): a Backend over the runtime, CUDA loaded with dlopen.
    "pcc_cuda_runtime": {"pcc_runtime"},
    "pcc_cli": {"pcc_support"},                        # the tools' option rules (header only)
    "pcc_driver": {"pcc_onnx", "pcc_passes", "pcc_codegen"},
    # The compile options as flags (tools/compile_flags.h): pcc and the Python package.
    "pcc_compile_flags": {"pcc_driver", "pcc_cli"},
}

COMPILER = {"pcc_ir", "pcc_eval", "pcc_onnx", "pcc_passes", "pcc_codegen", "pcc_driver"}
DEVICE = {"gloo", "DNNL::dnnl", "pcc_cpu", "pcc_runtime"}
# Targets a library must not reach through any path.
FORBIDDEN = {
    "pcc_support": COMPILER | DEVICE | {"pcc_ops", "pcc_schema"},
    "pcc_schema": COMPILER | DEVICE | {"pcc_ops"},
    "pcc_ops": COMPILER | DEVICE,
    "pcc_plan_proto": COMPILER,
    "pcc_onnx_tensor": COMPILER | DEVICE,
    "pcc_cpu": COMPILER | {"gloo", "pcc_runtime"},
    "pcc_runtime": COMPILER | {"onnx"},
    "pcc_ir": DEVICE | {"pcc_ops", "onnx", "pcc_plan_proto", "pcc_eval", "pcc_onnx", "pcc_passes", "pcc_codegen"},
    "pcc_eval": DEVICE | {"pcc_onnx", "pcc_passes", "pcc_codegen"},
    "pcc_onnx": DEVICE | {"pcc_plan_proto", "pcc_passes", "pcc_codegen"},
    "pcc_passes": {"gloo", "DNNL::dnnl", "pcc_onnx", "pcc_codegen", "pcc_driver"},
    "pcc_report": COMPILER,
    "pcc_codegen": {"pcc_passes", "pcc_onnx", "pcc_driver", "pcc_eval"},
    "pcc_cuda_codegen": COMPILER | DEVICE,
    "pcc_cuda_runtime": COMPILER | {"onnx"},
    "pcc_cli": COMPILER | DEVICE,
}

# (folder, file suffixes, include prefixes its files must not include, and
# exceptions to those prefixes).
INCLUDE_RULES = [
    ("runtime", (".h", ".cpp"), ("compiler/", "passes/", "codegen/", "tools/"), ()),
    # The op schemas link no kernel: they include nothing of the rest of the runtime.
    ("runtime/schema", (".h", ".cpp"), ("runtime/",), ("runtime/support/", "runtime/schema/")),
    # The IR sees the op schemas (type inference), not the kernel registry.
    ("compiler/ir", (".h", ".cpp"), ("runtime/", "passes/", "codegen/", "compiler/onnx/", "compiler/eval/"),
     ("runtime/support/", "runtime/schema/")),
    ("compiler/onnx", (".h", ".cpp"), ("runtime/cpu/", "runtime/comm", "runtime/executor", "runtime/launcher",
                                       "runtime/plan", "passes/", "codegen/"), ()),
    ("passes", (".h", ".cpp"), ("codegen/", "compiler/onnx/", "compiler/driver", "runtime/cpu/", "runtime/comm"), ()),
    # The plan emitter reads the partitioner's results, but its interface does not include it.
    ("codegen", (".h",), ("passes/", "compiler/onnx/", "compiler/driver"), ()),
    ("report", (".h", ".cpp"), ("compiler/", "passes/", "codegen/"), ()),
]

EDGE = re.compile(r'^\s*"(node\d+)"\s*->\s*"(node\d+)"')
NODE = re.compile(r'^\s*"(node\d+)"\s*\[\s*label\s*=\s*"([^"]+)"')


def read_dot(text):
    names, edges = {}, {}
    for line in text.splitlines():
        m = NODE.match(line)
        if m:
            names[m.group(1)] = m.group(2).split("\\n")[0]
    for line in text.splitlines():
        m = EDGE.match(line)
        if m:
            edges.setdefault(names[m.group(1)], set()).add(names[m.group(2)])
    return set(names.values()), edges


def reach(edges, start):
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def check_graph(targets, edges):
    errors = []
    libs = {t for t in targets if t.startswith("pcc_")}
    for lib in sorted(libs):
        if lib not in ALLOWED:
            errors.append(f"{lib}: a library the layering table does not know (add it to ALLOWED and FORBIDDEN)")
            continue
        for dep in sorted(edges.get(lib, set()) & libs):
            if dep not in ALLOWED[lib]:
                errors.append(f"{lib} -> {dep}: an edge the layering table does not allow")
        reached = reach(edges, lib)
        for bad in sorted(reached & FORBIDDEN.get(lib, set())):
            errors.append(f"{lib} reaches {bad}: forbidden")
    return errors


def check_includes(src):
    errors = []
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    for folder, suffixes, banned, allowed in INCLUDE_RULES:
        for root, _, files in os.walk(os.path.join(src, folder)):
            for f in sorted(files):
                if not f.endswith(suffixes):
                    continue
                path = os.path.join(root, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for no, line in enumerate(fh, 1):
                        m = inc.match(line)
                        if m and m.group(1).startswith(banned) and not m.group(1).startswith(allowed or ("\0",)):
                            errors.append(f"{os.path.relpath(path, src)}:{no}: includes {m.group(1)}")
    return errors


def configure(src, cmake, extra):
    with tempfile.TemporaryDirectory(prefix="pcc-layering-") as tmp:
        dot = os.path.join(tmp, "deps.dot")
        cmd = [cmake, "-S", src, "-B", os.path.join(tmp, "b"), f"--graphviz={dot}", "-DPCC_BUILD_TESTS=OFF"] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"check_layering: cmake failed:\n{r.stdout}\n{r.stderr}")
        with open(dot) as f:
            return f.read()


def self_test():
    bad = "\n".join([
        'digraph "pcc" {',
        '"node0" [ label = "pcc_onnx", shape = octagon ];',
        '"node1" [ label = "pcc_runtime", shape = octagon ];',
        '"node2" [ label = "gloo", shape = septagon ];',
        '"node3" [ label = "pcc_ir", shape = octagon ];',
        '"node4" [ label = "pcc_new", shape = octagon ];',
        '"node5" [ label = "pcc_ops", shape = octagon ];',
        '"node3" -> "node5" // pcc_ir -> pcc_ops',
        '"node0" -> "node1" // pcc_onnx -> pcc_runtime',
        '"node1" -> "node2" // pcc_runtime -> gloo',
        '"node1" -> "node3" // pcc_runtime -> pcc_ir',
        "}",
    ])
    errors = check_graph(*read_dot(bad))
    want = ["pcc_onnx -> pcc_runtime", "pcc_onnx reaches gloo", "pcc_runtime -> pcc_ir",
            "pcc_runtime reaches pcc_ir", "pcc_new: a library", "pcc_ir -> pcc_ops", "pcc_ir reaches pcc_ops"]
    # Include lines: a made-up tree whose IR includes the kernel registry and
    # whose runtime includes the IR.
    with tempfile.TemporaryDirectory(prefix="pcc-layering-self-") as tmp:
        files = {
            "compiler/ir/graph.cpp": '#include "runtime/schema/schema.h"\n#include "runtime/ops/registry.h"\n',
            "runtime/schema/math.cpp": '#include "runtime/schema/infer_util.h"\n#include "runtime/ops/op_util.h"\n',
            "runtime/executor.cpp": '#include "runtime/support/tensor.h"\n#include "compiler/ir/ir.h"\n',
            "codegen/plan_emitter.h": '#include "passes/partition/partitioner.h"\n',
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        errors += check_includes(tmp)
    want += ["compiler/ir/graph.cpp:2: includes runtime/ops/registry.h",
             "runtime/executor.cpp:2: includes compiler/ir/ir.h",
             "codegen/plan_emitter.h:1: includes passes/partition/partitioner.h",
             "runtime/schema/math.cpp:2: includes runtime/ops/op_util.h"]
    if len([e for e in errors if ": includes " in e]) != 4:
        print("self-test: include rules flagged", [e for e in errors if ": includes " in e])
        return 1
    missing = [w for w in want if not any(e.startswith(w) for e in errors)]
    if missing:
        print("self-test: these forbidden edges were not caught:", missing)
        return 1
    print(f"self-test: {len(errors)} forbidden edges caught as expected")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--dot", help="read this graphviz file instead of configuring")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("cmake_args", nargs="*", help="extra -D options for the scratch configure")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    src = os.path.abspath(a.source)
    text = open(a.dot).read() if a.dot else configure(src, a.cmake, a.cmake_args)
    targets, edges = read_dot(text)
    if "pcc_ir" not in targets:
        sys.exit("check_layering: the target graph has no pcc_ir: not pcc's graph?")
    errors = check_graph(targets, edges) + check_includes(src)
    for e in errors:
        print("layering:", e)
    libs = sorted(t for t in targets if t.startswith("pcc_"))
    print(f"layering: {len(libs)} libraries, {sum(len(edges.get(t, ())) for t in libs)} edges checked, "
          f"{len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
