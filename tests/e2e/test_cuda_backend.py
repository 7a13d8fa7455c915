"""pcc-run's backend choice (docs/runtime.md#cuda-backend) on a machine without a usable GPU.

1. `--backend cuda` exits 2 with one line saying what is missing: the
   driver library (here libcuda.so.1 is not installed, or
   PCC_CUDA_DRIVER_LIB names one that is not there), cuInit's error, no
   device (a stand-in driver, build/tests/libpcc_fake_cuda.so, whose cuInit
   and device count the test sets), or a build without the CUDA backend.
2. `--backend auto` runs on CPU ranks, checked against the reference
   program (`--check`), and says so in one line, for each of those reasons;
   in a multi-process run (--rendezvous) every rank falls back the same way.
3. On a host stand-in for the driver, cuBLASLt and cuDNN
   (tests/unit/fake_cuda_host.cpp): `--backend auto` picks cuda and the
   bundled models and the ResNet export pass `--check` with MatMul/Gemm
   through the backend's cuBLASLt calls, Conv through its cuDNN calls (the
   stand-in convolves directly from the descriptors it was given: 1-D, 2-D
   and 3-D, groups, strides, dilations, auto_pad), the other ops on its CPU
   fallback; a Conv cuDNN cannot take (asymmetric pads) falls back with the
   reason in `--profile`; without libcudnn.so.9 Conv falls back, said in one
   stderr line, and the run still passes; MatMul/Gemm followed by a bias Add
   and Relu or tanh-form Gelu (plans compiled with --no-kernels) run as one
   cublasLtMatmul with the RELU_BIAS / GELU_BIAS epilogue (the erf Gelu does
   not fold), still passing `--check`; a module that cannot load fails
   naming rank, node, op and call. This exercises the backend's code, not a GPU.
   With the NCCL stand-in too (tests/unit/fake_nccl_host.cpp), tp, dp x tp and
   pipeline plans of mlp and gpt2_tiny pass `--check` with their collectives
   and transfers through the backend's NCCL calls, started on the
   communication stream; a rank that never arrives fails in one line naming
   the rank, node, collective, group and timeout.
4. `--backend cpu` prints no such line.
5. pcc-run links no CUDA library (ldd): it starts where there is none.
This machine has no GPU: the cuda backend itself is not run here (tests/gpu/run.sh does).
"""
import os
import shutil
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402


def has_cuda_backend(tools, plan):
    """\returns whether pcc-run was built with the CUDA backend (else --backend cuda says it was not)."""
    r = tools.run("pcc-run", [plan, "--backend", "cuda"])
    return "built without the CUDA toolkit" not in r.stderr


def conv_variants_model(work):
    """\returns the path of a model of Conv forms the bundled models lack: 1-D (pads, stride,
    dilation, bias), SAME_UPPER, 3-D, and asymmetric pads (which cuDNN cannot take)."""
    rng = np.random.default_rng(7)

    def weight(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, rng.standard_normal(shape).astype(np.float32).ravel())

    inits = [weight("w1", [4, 3, 3]), weight("b1", [4]), weight("w2", [6, 2, 3, 3]), weight("b2", [6]),
             weight("w3", [3, 2, 3, 2, 3]), weight("w4", [4, 4, 3, 3])]
    nodes = [
        helper.make_node("Conv", ["x1", "w1", "b1"], ["y1"], pads=[2, 2], strides=[2], dilations=[2]),
        helper.make_node("Conv", ["x2", "w2", "b2"], ["y2"], auto_pad="SAME_UPPER", group=2),
        helper.make_node("Conv", ["x3", "w3"], ["y3"], pads=[1, 0, 1, 1, 0, 1]),
        helper.make_node("Conv", ["x2", "w4"], ["y4"], pads=[0, 0, 1, 1]),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "conv_variants",
        [helper.make_tensor_value_info("x1", f, ["batch", 3, 17]),
         helper.make_tensor_value_info("x2", f, ["batch", 4, 9, 8]),
         helper.make_tensor_value_info("x3", f, ["batch", 2, 4, 5, 6])],
        [helper.make_tensor_value_info(n, f, None) for n in ("y1", "y2", "y3", "y4")], inits)
    path = os.path.join(work, "conv_variants.onnx")
    with open(path, "wb") as fh:
        fh.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def half_model(work):
    """\returns the path of y = Conv(x), yb = Conv(x) + b and z = u W on float16 (cuDNN's HALF data
    with float compute, cuBLASLt's 16F operands with 32F compute; the Conv with bias stays on the
    CPU fallback, as cuDNN would round it twice)."""
    rng = np.random.default_rng(5)

    def weight(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT16, shape,
                                  (0.5 * rng.standard_normal(shape)).astype(np.float16).ravel().view(np.uint16),
                                  raw=False)

    h = TensorProto.FLOAT16
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=2),
         helper.make_node("Conv", ["x", "w", "b"], ["yb"], pads=[1, 1, 1, 1], group=2),
         helper.make_node("MatMul", ["u", "v"], ["z"])], "half",
        [helper.make_tensor_value_info("x", h, ["batch", 4, 8, 8]),
         helper.make_tensor_value_info("u", h, ["batch", 16])],
        [helper.make_tensor_value_info("y", h, None), helper.make_tensor_value_info("yb", h, None),
         helper.make_tensor_value_info("z", h, None)],
        [weight("w", [6, 2, 3, 3]), weight("b", [6]), weight("v", [16, 8])])
    path = os.path.join(work, "half.onnx")
    with open(path, "wb") as fh:
        fh.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def gelu_mlp_model(work):
    """\returns the path of y = gelu_tanh(x W1 + b1) W3 and z = gelu_erf(b2 + x W2) (opset 20 Gelu).
    Both GEMMs read the model input, whose memory no result of the chain can reuse (a chain whose
    output would overwrite its input in the arena is not folded)."""
    rng = np.random.default_rng(11)

    def weight(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape,
                                  (0.3 * rng.standard_normal(shape)).astype(np.float32).ravel())

    inits = [weight("w1", [16, 32]), weight("b1", [32]), weight("w2", [16, 24]), weight("b2", [24]),
             weight("w3", [32, 8])]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Gelu", ["a1"], ["g1"], approximate="tanh"),
        helper.make_node("MatMul", ["g1", "w3"], ["y"]),
        helper.make_node("MatMul", ["x", "w2"], ["m2"]),
        helper.make_node("Add", ["b2", "m2"], ["a2"]),  # the bias first: either order folds
        helper.make_node("Gelu", ["a2"], ["z"]),         # the exact (erf) form: not cuBLASLt's
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "gelu_mlp", [helper.make_tensor_value_info("x", f, ["batch", 16])],
                              [helper.make_tensor_value_info("y", f, None),
                               helper.make_tensor_value_info("z", f, None)], inits)
    path = os.path.join(work, "gelu_mlp.onnx")
    with open(path, "wb") as fh:
        fh.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]).SerializeToString())
    return path


def stand_in_epilogues(suite, tools, work):
    """MatMul/Gemm + bias Add + Relu/Gelu folded into one cublasLtMatmul with its epilogue (plans
    compiled with --no-kernels, so the fused groups' bodies are instructions of their own)."""
    cases = [
        ("mlp.onnx", e2e.model_path("mlp.onnx"),
         ["Gemm (cublaslt, epilogue RELU_BIAS)", "MatMul (cublaslt, epilogue BIAS)", "Tanh (cpu fallback)"]),
        ("gelu_mlp", gelu_mlp_model(work),
         ["MatMul (cublaslt, epilogue GELU_BIAS)", "MatMul (cublaslt, epilogue BIAS)", "Gelu (cpu fallback)"]),
    ]
    for name, path, want in cases:
        plan = os.path.join(work, name + ".nokernels.pcc")
        r = tools.run("pcc", [path, "--batch", "4", "--gpus", "1", "--no-kernels", "-o", plan, "--quiet"])
        if not suite.check(f"stand-in epilogues {name}: compiles with --no-kernels", r.returncode == 0, r.describe()):
            continue
        r = tools.run("pcc-run", [plan, "--backend", "cuda", "--check", "--profile", "--poison-memory"])
        missing = [w for w in want if w not in r.stdout]
        suite.check(f"stand-in epilogues {name}: folded into cuBLASLt epilogues, --check passes",
                    r.returncode == 0 and not missing and "Add (" not in r.stdout and "Relu (" not in r.stdout,
                    f"  missing: {missing}\n" + r.describe())
        # With generated kernels (the default), a LAUNCH the plan describes as an epilogue chain
        # (Kernel.epilogue) folds whole: bias + tanh Gelu, and the Gemm's Relu.
        plan = os.path.join(work, name + ".kernels.pcc")
        r = tools.run("pcc", [path, "--batch", "4", "--gpus", "1", "-o", plan, "--quiet"])
        if not suite.check(f"stand-in epilogues {name}: compiles with generated kernels", r.returncode == 0,
                           r.describe()):
            continue
        want = want[:1]
        r = tools.run("pcc-run", [plan, "--backend", "cuda", "--check", "--profile", "--poison-memory"])
        missing = [w for w in want if w not in r.stdout]
        suite.check(f"stand-in epilogues {name}: a generated kernel folds into the cuBLASLt epilogue, --check passes",
                    r.returncode == 0 and not missing, f"  missing: {missing}\n" + r.describe())
        r = tools.run("pcc-run", [plan, "--backend", "cuda", "--check", "--profile", "--no-fold"])
        suite.check(f"stand-in epilogues {name}: --no-fold folds nothing, --check passes",
                    r.returncode == 0 and "epilogue" not in r.stdout, r.describe())


def stand_in(suite, tools, work):
    """The cuda backend's own code end to end on the host stand-in driver, cuBLASLt and cuDNN
    (tests/unit/fake_cuda_host.cpp: device memory is tracked host memory, copies are
    memcpy, cublasLtMatmul a column-major GEMM and cudnnConvolutionForward a direct
    convolution, each reading the backend's descriptors)."""
    lib = os.path.join(tools.bin_dir, "tests", "libpcc_fake_cuda_host.so")
    os.environ.update(PCC_CUDA_DRIVER_LIB=lib, PCC_CUBLASLT_LIB=lib, PCC_CUDNN_LIB=lib)
    models = [("mlp.onnx", e2e.model_path("mlp.onnx")), ("gpt2_tiny.onnx", e2e.model_path("gpt2_tiny.onnx")),
              ("cnn_small.onnx", e2e.model_path("cnn_small.onnx")),
              ("mobilenet_v2_bn.onnx", e2e.model_path("mobilenet_v2_bn.onnx")),
              ("resnet.ts", os.path.join(e2e.MODELS_DIR, "exported", "resnet.ts.onnx")),
              ("conv_variants", conv_variants_model(work)), ("half", half_model(work))]
    for model, path in models:
        plan = os.path.join(work, model + ".cpu.pcc")
        batch = "2" if model in ("resnet.ts", "mobilenet_v2_bn.onnx") else "4"
        r = tools.run("pcc", [path, "--batch", batch, "--gpus", "1", "--target", "cpu", "-o", plan, "--quiet"])
        if not suite.check(f"stand-in {model}: compiles", r.returncode == 0, r.describe()):
            continue
        r = tools.run("pcc-run", [plan, "--backend", "auto", "--check", "--profile", "--poison-memory"], timeout=600)
        suite.check(f"stand-in {model}: --backend auto picks cuda, --check passes (poisoned memory)",
                    r.returncode == 0 and "no usable GPU" not in r.stderr and "(cpu fallback" in r.stdout,
                    r.describe())
        if model in ("mlp.onnx", "gpt2_tiny.onnx"):
            suite.check(f"stand-in {model}: MatMul/Gemm ran on cuBLASLt", "(cublaslt)" in r.stdout, r.describe())
        if model in ("cnn_small.onnx", "mobilenet_v2_bn.onnx", "resnet.ts"):
            suite.check(f"stand-in {model}: every Conv ran on cuDNN",
                        "Conv (cudnn)" in r.stdout and "Conv (cpu fallback" not in r.stdout, r.describe())
        if model == "conv_variants":
            suite.check("stand-in conv_variants: 1-D, SAME_UPPER and 3-D Conv on cuDNN, asymmetric pads on the "
                        "CPU fallback with the reason in --profile",
                        "Conv (cudnn)" in r.stdout
                        and "Conv (cpu fallback: cuDNN pads symmetrically; Conv pads 0 and 1" in r.stdout,
                        r.describe())
        if model == "half":
            suite.check("stand-in half: float16 Conv on cuDNN (with a bias on the CPU fallback) and MatMul on "
                        "cuBLASLt", "Conv (cudnn)" in r.stdout and "MatMul (cublaslt)" in r.stdout
                        and "Conv (cpu fallback: a float16 Conv with bias would round twice" in r.stdout,
                        r.describe())
        if model == "cnn_small.onnx":
            # Without cuDNN, Conv runs on the CPU fallback: one stderr line, not an error.
            os.environ["PCC_CUDNN_LIB"] = "libpcc-no-such-cudnn.so.9"
            try:
                r = tools.run("pcc-run", [plan, "--backend", "cuda", "--check", "--profile"])
            finally:
                os.environ["PCC_CUDNN_LIB"] = lib
            said = [ln for ln in r.stderr.splitlines() if "cuDNN" in ln or "cudnn" in ln]
            suite.check("stand-in without libcudnn.so.9: Conv on the CPU fallback, one stderr line, --check passes",
                        r.returncode == 0 and len(said) == 1 and "cannot load libpcc-no-such-cudnn.so.9" in said[0]
                        and "Conv runs on the CPU fallback" in said[0]
                        and "Conv (cpu fallback: cuDNN is not available)" in r.stdout
                        and "Conv (cudnn)" not in r.stdout, r.describe())
    stand_in_epilogues(suite, tools, work)
    # A plan with CUDA images: the stand-in cannot load modules, and the error
    # names the rank, the node, the op and the call.
    plan = os.path.join(work, "mlp.cuda.pcc")
    r = tools.run("pcc", [e2e.model_path("gpt2_tiny.onnx"), "--batch", "4", "--gpus", "1", "--target", "cuda", "-o",
                          plan, "--quiet"])
    if r.returncode == 0:
        r = tools.run("pcc-run", [plan, "--backend", "cuda"])
        suite.check("stand-in: a module that does not load is one line naming rank, node, op and call",
                    r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
                    and "rank 0" in r.stderr and "(Fused)" in r.stderr and "cuModuleLoadData" in r.stderr,
                    r.describe())
    else:
        suite.check("stand-in: --target cuda refused only for want of the toolkit",
                    "without the CUDA toolkit" in r.stderr, r.describe())
        e2e.prerequisite(suite, "the CUDA toolkit (pcc --target cuda)", False, r.describe())
    for k in ("PCC_CUDA_DRIVER_LIB", "PCC_CUBLASLT_LIB", "PCC_CUDNN_LIB"):
        os.environ.pop(k, None)


def stand_in_nccl(suite, tools, work):
    """Multi-rank plans on the cuda backend with the NCCL stand-in too
    (tests/unit/fake_nccl_host.cpp: rank threads meet by unique id; every call
    is queued on the rank's communication stream and completes there): tp, dp x
    tp and pipeline plans pass --check on poisoned memory, the collectives
    started in the background; a rank that never arrives fails the run in one
    line naming the rank, the node, the collective and the group."""
    lib = os.path.join(tools.bin_dir, "tests", "libpcc_fake_cuda_host.so")
    nccl = os.path.join(tools.bin_dir, "tests", "libpcc_fake_nccl_host.so")
    env = dict(PCC_CUDA_DRIVER_LIB=lib, PCC_CUBLASLT_LIB=lib, PCC_CUDNN_LIB=lib, PCC_NCCL_LIB=nccl,
               PCC_FAKE_CUDA_DEVICES="4")
    os.environ.update(env)
    try:
        for model, strategy in (("mlp.onnx", "tp=2"), ("gpt2_tiny.onnx", "tp=2"), ("mlp.onnx", "dp=2,tp=2,pp=1"),
                                ("gpt2_tiny.onnx", "dp=1,tp=2,pp=2")):
            plan = os.path.join(work, f"{model}.{strategy}.pcc")
            r = tools.run("pcc", [e2e.model_path(model), "--batch", "4", "--strategy", strategy, "--microbatches",
                                  "2", "--target", "cpu", "-o", plan, "--quiet"])
            if not suite.check(f"NCCL stand-in {model} {strategy}: compiles", r.returncode == 0, r.describe()):
                continue
            r = tools.run("pcc-run", [plan, "--backend", "cuda", "--check", "--poison-memory", "--profile"],
                          timeout=600)
            suite.check(f"NCCL stand-in {model} {strategy}: --backend cuda, --check passes",
                        r.returncode == 0 and "vs reference" in r.stdout
                        and ("collectives per run" in r.stdout or "receives per run" in r.stdout), r.describe())
            if model == "gpt2_tiny.onnx" and strategy == "tp=2":
                os.environ["PCC_FAKE_NCCL_ABSENT"] = "1"
                try:
                    r = tools.run("pcc-run", [plan, "--backend", "cuda", "--timeout", "1"])
                finally:
                    os.environ.pop("PCC_FAKE_NCCL_ABSENT", None)
                lines = r.stderr.strip().splitlines()
                suite.check("NCCL stand-in, a rank that never arrives: one line naming rank, node, collective, "
                            "group and the timeout",
                            r.returncode != 0 and len(lines) == 1 and "NCCL" in lines[0] and "over group 0 (tp)"
                            in lines[0] and "node '" in lines[0] and "did not finish within the timeout (1 s)"
                            in lines[0], r.describe())
    finally:
        for k in list(env) + ["PCC_FAKE_NCCL_ABSENT"]:
            os.environ.pop(k, None)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("cuda_backend", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        return suite.finish()
    work = suite.tempdir("cuda-backend")
    fake = os.path.join(tools.bin_dir, "tests", "libpcc_fake_cuda.so")
    saved = {k: os.environ.get(k) for k in ("PCC_CUDA_DRIVER_LIB", "PCC_CUBLASLT_LIB", "PCC_CUDNN_LIB",
                                            "PCC_FAKE_CUDA_INIT", "PCC_FAKE_CUDA_DEVICES")}

    def setenv(**kv):
        for k in saved:
            os.environ.pop(k, None)
        for k, v in kv.items():
            os.environ[k] = v

    try:
        plan = os.path.join(work, "mlp.pcc")
        plan2 = os.path.join(work, "mlp2.pcc")
        r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", "4", "-o", plan, "--quiet"])
        if not suite.check("compiles mlp", r.returncode == 0, r.describe()):
            return suite.finish()
        r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", "4", "--gpus", "2", "-o", plan2, "--quiet"])
        if not suite.check("compiles mlp --gpus 2", r.returncode == 0, r.describe()):
            return suite.finish()
        built = has_cuda_backend(tools, plan)
        print(f"pcc-run has the CUDA backend: {built}", flush=True)
        e2e.prerequisite(suite, "the CUDA backend in pcc-run (built with the CUDA toolkit)", built)
        if built:
            reasons = [
                ("no driver library", {"PCC_CUDA_DRIVER_LIB": "libpcc-no-such-driver.so.1"},
                 "cannot load libpcc-no-such-driver.so.1"),
                ("cuInit error", {"PCC_CUDA_DRIVER_LIB": fake, "PCC_FAKE_CUDA_INIT": "100"},
                 "cuInit failed: CUDA_ERROR_NO_DEVICE 100"),
                ("no device", {"PCC_CUDA_DRIVER_LIB": fake, "PCC_FAKE_CUDA_INIT": "0", "PCC_FAKE_CUDA_DEVICES": "0"},
                 "no CUDA device"),
            ]
            # This machine's own driver, if any (none here: no libcuda.so.1).
            reasons.append(("this machine", {}, ""))
            for name, env, text in reasons:
                setenv(**env)
                r = tools.run("pcc-run", [plan, "--backend", "cuda", "--check"])
                if name == "this machine" and r.returncode == 0:
                    print("this machine has a usable GPU: --backend cuda ran", flush=True)
                    continue
                lines = r.stderr.strip().splitlines()
                suite.check(f"--backend cuda, {name}: exit 2, one line naming it",
                            r.returncode == 2 and len(lines) == 1 and "--backend cuda:" in r.stderr
                            and text in r.stderr, r.describe())
                r = tools.run("pcc-run", [plan, "--backend", "auto", "--check"])
                suite.check(f"--backend auto, {name}: runs on CPU ranks and --check passes, saying so",
                            r.returncode == 0 and "--backend auto: no usable GPU" in r.stderr
                            and "running on CPU ranks" in r.stderr and text in r.stderr, r.describe())
            setenv(PCC_CUDA_DRIVER_LIB="libpcc-no-such-driver.so.1")
            r = tools.run("pcc-run", [plan2, "--backend", "auto", "--check"])
            suite.check("--backend auto, 2 ranks: runs on CPU ranks and --check passes",
                        r.returncode == 0 and "running on CPU ranks" in r.stderr, r.describe())
            rdv = os.path.join(work, "rdv")
            os.makedirs(rdv)
            procs = []
            for rank in range(2):
                env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", PCC_RUN_ID="cuda-auto")
                procs.append(subprocess.Popen([tools.path("pcc-run"), plan2, "--backend", "auto", "--check",
                                               "--rendezvous", rdv], env=env, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True))
            outs = [p.communicate(timeout=300) for p in procs]
            suite.check("--backend auto, 2 rank processes: both fall back and rank 0's --check passes",
                        all(p.returncode == 0 for p in procs)
                        and all("running on CPU ranks" in err for _, err in outs),
                        "\n".join(f"  rank {i}: exit {p.returncode}\n{e2e.indent(outs[i][1][-1500:])}"
                                  for i, p in enumerate(procs)))
        else:
            setenv()
            r = tools.run("pcc-run", [plan, "--backend", "cuda"])
            suite.check("--backend cuda without the CUDA backend: exit 2, one line",
                        r.returncode == 2 and "built without the CUDA toolkit" in r.stderr
                        and len(r.stderr.strip().splitlines()) == 1, r.describe())
            r = tools.run("pcc-run", [plan, "--backend", "auto", "--check"])
            suite.check("--backend auto without the CUDA backend: runs on CPU ranks, saying so",
                        r.returncode == 0 and "running on CPU ranks" in r.stderr, r.describe())
        if built:
            suite.run_case("host stand-in", stand_in, suite, tools, work)
            suite.run_case("NCCL stand-in", stand_in_nccl, suite, tools, work)
        ldd = subprocess.run(["ldd", tools.path("pcc-run")], capture_output=True, text=True)
        cuda_libs = [line.strip() for line in ldd.stdout.splitlines()
                     if any(n in line for n in ("libcuda.", "libcudart", "libcublas", "libnccl", "libcudnn"))]
        suite.check("pcc-run links no CUDA library (they are loaded at run time)",
                    ldd.returncode == 0 and not cuda_libs, "\n".join(cuda_libs) or ldd.stderr)
        setenv()
        r = tools.run("pcc-run", [plan, "--backend", "cpu", "--check"])
        suite.check("--backend cpu: no fallback line", r.returncode == 0 and "no usable GPU" not in r.stderr,
                    r.describe())
    finally:
        setenv()
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
