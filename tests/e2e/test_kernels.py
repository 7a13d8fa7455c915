"""Generated kernels (docs/kernels.md) on every e2e model and committed export.

For each model: compile with generated kernels (--target cuda when this pcc
has the CUDA toolkit, else --target cpu) at --gpus 1 and under a tensor
parallel and a data parallel plan, then run each plan on CPU ranks with
`pcc-run --check --reference-kernels --rtol 1e-5`, where every op but
the generated kernels runs on the same reference kernels as the reference
program (in double), so the comparison at 1e-5 measures the generated
kernels alone (oneDNN's float convolutions differ from the reference by more
than 1e-5 on their own); the --gpus 1 plan also with `pcc-run --check` as
users run it (oneDNN kernels, pcc-run's tolerances). The plans must actually launch generated kernels (the
report counts them), and with --target cuda every PTX file of the --gpus 1
plans must pass `ptxas` for its arch. Reductions and norms (Softmax,
LayerNormalization, RMSNormalization, Reduce* over trailing axes,
GlobalAveragePool) are generated kernels too: no --gpus 1 plan may run one
on its own kernel (`pcc-report --format costs` lists every instruction), and
the plans must hold some reduction kernels. float16 and bfloat16 groups are
generated too: no fused group of any plan may be left out for a float16 or
bfloat16 value, and the float16 model's plans are compared at float16's
tolerance (RTOL_HALF: the generated kernels round once, the reference
kernels after every op). With --target cuda, some PTX of the --gpus 1 plans
must hold the 16-byte vector loads and stores of flat kernels. A recognized Attention is a generated kernel
(online softmax) unless the plan lists it among the fallbacks with a
reason, and the plans must launch some. NVRTC and the C++ compiler cache
under the build folder (PCC_E2E_KERNEL_CACHE: elsewhere).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from test_exported import exports, has_symbolic_dim  # noqa: E402

MODELS = ["mlp.onnx", "gpt2_tiny.onnx", "cnn_small.onnx", "mobilenet_v2_bn.onnx", "block_f16.onnx"]
CONFIGS = [["--gpus", "1"], ["--gpus", "2", "--strategy", "tp=2"], ["--gpus", "2", "--strategy", "dp=2,tp=1,pp=1"]]
RTOL = "1e-5"
# Models with float16 outputs, compared at 8 units of float16 roundoff (2^-11), as the unit tests.
RTOL_HALF = {"block_f16.onnx": "3.9e-3"}
HALF_REASON = re.compile(r"\b(b?f16)\b")
VECTOR_LOAD = re.compile(r"ld\.global(\.nc)?\.v4\.(u32|b32|f32)")
# The reductions docs/kernels.md says are generated; on the e2e models and exports all of them are.
GENERATED_REDUCTIONS = {"Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization", "GlobalAveragePool"}


def ptxas_path():
    for cand in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def cuda_available(tools, suite):
    """\returns whether pcc compiles --target cuda (probed on the smallest model)."""
    work = suite.tempdir("probe")
    try:
        r = tools.run("pcc", [e2e.model_path("mlp.onnx"), "--batch", "4", "--target", "cuda",
                              "-o", os.path.join(work, "p.pcc"), "--quiet"])
        if r.returncode == 0:
            return True
        suite.check("probe: --target cuda refused only for want of the toolkit",
                    "without the CUDA toolkit" in r.stderr, r.describe())
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_case(suite, tools, totals, name, model, batch, data_dir, config, target, ptxas):
    case = f"{name} {' '.join(config)}"
    work = suite.tempdir(name.replace(".", "-"))
    try:
        plan = os.path.join(work, "plan.pcc")
        args = [model, *config, "--target", target, "-o", plan, "--quiet"]
        if batch and has_symbolic_dim(e2e.onnx.load(model, load_external_data=False)):
            args += ["--batch", batch]
        r = tools.run("pcc", args, timeout=600)
        if not suite.check(f"{case}: compiles", r.returncode == 0, r.describe(2000)):
            return
        with open(os.path.join(plan, "report.json")) as f:
            kernels = json.load(f)["kernels"]
        totals["launches"] += kernels["launches"]
        totals["fallbacks"] += len(kernels["fallbacks"])
        half = [f"{f['node']}: {f['reason']}" for f in kernels["fallbacks"] if HALF_REASON.search(f["reason"])]
        totals["half fallbacks"] += len(half)
        suite.check(f"{case}: no fused group left out for float16 or bfloat16", not half, "  " + "\n  ".join(half[:8]))
        suite.check(f"{case}: report names the target", kernels["target"] == target, f"  {kernels}")
        if kernels["generated"]:
            suite.check(f"{case}: the CPU library is in the bundle",
                        os.path.isfile(os.path.join(plan, "kernels", "cpu.so")), "")
            with open(os.path.join(plan, "kernels", "cpu.cc")) as f:
                source = f.read()
            totals["reduction kernels"] += source.count("#pragma omp simd reduction(+")
            totals["float16 stores"] += source.count("= pk_to_f16(")
        if config == CONFIGS[0]:
            r = tools.run("pcc-report", ["--format", "costs", plan])
            if suite.check(f"{case}: pcc-report --format costs", r.returncode == 0, r.describe()):
                left = sorted({f"{i['op']} {i['node']}" for rank in json.loads(r.stdout)["ranks"]
                               for i in rank["instructions"] if i["kind"] == "kernel" and i["op"] in GENERATED_REDUCTIONS})
                suite.check(f"{case}: every reduction runs as a generated kernel", not left,
                            "  on their own kernels: " + ", ".join(left[:8]) + f"\n  fallbacks: {kernels['fallbacks'][:8]}")
                refused = {f["node"] for f in kernels["fallbacks"] if f["reason"]}
                instructions = [i for rank in json.loads(r.stdout)["ranks"] for i in rank["instructions"]]
                left = sorted({i["node"] for i in instructions
                               if i["kind"] == "kernel" and i["op"] == "Attention" and i["node"] not in refused})
                suite.check(f"{case}: every Attention is a generated kernel or refused with a reason", not left,
                            "  on the runtime's kernel without a reason: " + ", ".join(left[:8]))
                totals["attention kernels"] += sum(1 for i in instructions
                                                   if i["kind"] == "launch" and i["op"] == "Attention")
        inputs = ["--inputs", data_dir] if data_dir else []
        if config == CONFIGS[0]:  # as users run it (test_models and test_exported cover the other meshes)
            r = tools.run("pcc-run", [plan, "--check", *inputs], timeout=600)
            suite.check(f"{case}: pcc-run --check", r.returncode == 0, r.describe(2000))
        rtol = RTOL_HALF.get(name, RTOL)
        atol = RTOL_HALF.get(name, "1e-5")
        r = tools.run("pcc-run", [plan, "--check", "--reference-kernels", "--rtol", rtol, "--atol", atol, *inputs],
                      timeout=600)
        suite.check(f"{case}: pcc-run --check --reference-kernels --rtol {rtol}", r.returncode == 0, r.describe(2000))
        if target == "cuda" and config == CONFIGS[0]:
            ptx = sorted(glob.glob(os.path.join(plan, "kernels", "*.ptx")))
            suite.check(f"{case}: every kernel has PTX for sm_80 and sm_90", len(ptx) == 2 * kernels["generated"],
                        f"  {len(ptx)} PTX files for {kernels['generated']} kernels")
            if ptxas:
                bad = []
                for p in ptx:
                    arch = p.rsplit(".", 2)[-2]
                    q = subprocess.run([ptxas, f"-arch={arch}", p, "-o", os.devnull], capture_output=True, text=True)
                    if q.returncode != 0:
                        bad.append(f"  {os.path.basename(p)}: {q.stderr.strip()[:400]}")
                totals["ptxas"] += len(ptx) - len(bad)
            for p in ptx:
                with open(p) as f:
                    totals["vector PTX"] += bool(VECTOR_LOAD.search(f.read()))
                suite.check(f"{case}: ptxas accepts every PTX ({len(ptx)})", not bad, "\n".join(bad))
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def corrupt_library(suite, tools):
    """A flipped byte in kernels/cpu.so, or a missing library, is refused before anything runs."""
    work = suite.tempdir("corrupt")
    try:
        plan = os.path.join(work, "p.pcc")
        r = tools.run("pcc", [e2e.model_path("gpt2_tiny.onnx"), "--batch", "4", "-o", plan, "--quiet"])
        if not suite.check("corrupt library: compiles", r.returncode == 0, r.describe()):
            return
        lib = os.path.join(plan, "kernels", "cpu.so")
        if not suite.check("corrupt library: the plan has a CPU library", os.path.isfile(lib)):
            return
        data = bytearray(open(lib, "rb").read())
        data[len(data) // 2] ^= 0x01
        open(lib, "wb").write(data)
        r = tools.run("pcc-run", [plan, "--check"])
        suite.check("corrupt library: pcc-run refuses a flipped byte (exit 2, one line naming cpu.so)",
                    r.returncode == 2 and "cpu.so" in r.stderr and "checksum" in r.stderr
                    and len(r.stderr.strip().splitlines()) == 1, r.describe())
        os.remove(lib)
        r = tools.run("pcc-run", [plan, "--check"])
        suite.check("corrupt library: pcc-run refuses a missing library (exit 2)",
                    r.returncode == 2 and "cpu.so" in r.stderr, r.describe())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def garbage_compiler(suite, tools):
    """A compiler that exits 0 after writing something that is no shared
    object: pcc does not ship it (the plan runs without kernels and says why)."""
    work = suite.tempdir("badcxx")
    old = os.environ.get("PCC_CXX")
    cache = os.environ["PCC_CACHE_DIR"]
    try:
        script = os.path.join(work, "cxx.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && printf garbage > "$2"; shift; done\nexit 0\n')
        os.chmod(script, 0o755)
        os.environ["PCC_CXX"] = script
        os.environ["PCC_CACHE_DIR"] = cache + "-badcxx"
        plan = os.path.join(work, "p.pcc")
        r = tools.run("pcc", [e2e.model_path("gpt2_tiny.onnx"), "--batch", "4", "-o", plan])
        if not suite.check("garbage compiler: pcc still writes the plan", r.returncode == 0, r.describe()):
            return
        with open(os.path.join(plan, "report.json")) as f:
            doc = json.load(f)
        suite.check("garbage compiler: no kernel library is shipped, a note says why",
                    doc["kernels"]["generated"] == 0 and not os.path.exists(os.path.join(plan, "kernels", "cpu.so"))
                    and any("kernels not generated" in n and "shared object" in n for n in doc["notes"]),
                    f"  kernels {doc['kernels']}, notes {doc['notes']}")
        r = tools.run("pcc-run", [plan, "--check"])
        suite.check("garbage compiler: the plan runs", r.returncode == 0, r.describe())
    finally:
        os.environ["PCC_CACHE_DIR"] = cache
        if old is None:
            os.environ.pop("PCC_CXX", None)
        else:
            os.environ["PCC_CXX"] = old


def no_compiler(suite, tools):
    """Without a C++ compiler the plan is written without kernels, says why, and runs."""
    work = suite.tempdir("nocxx")
    old = os.environ.get("PCC_CXX")
    try:
        os.environ["PCC_CXX"] = os.path.join(work, "no-such-compiler")
        os.environ["PCC_CACHE_DIR"] += "-nocxx"
        plan = os.path.join(work, "p.pcc")
        r = tools.run("pcc", [e2e.model_path("gpt2_tiny.onnx"), "--batch", "4", "-o", plan])
        if not suite.check("no compiler: pcc still writes the plan", r.returncode == 0, r.describe()):
            return
        with open(os.path.join(plan, "report.json")) as f:
            doc = json.load(f)
        suite.check("no compiler: the plan has no kernels and a note says why",
                    doc["kernels"]["generated"] == 0 and doc["kernels"]["launches"] == 0
                    and any("kernels not generated" in n and "no-such-compiler" in n for n in doc["notes"]),
                    f"  kernels {doc['kernels']}, notes {doc['notes']}")
        r = tools.run("pcc-run", [plan, "--check"])
        suite.check("no compiler: the plan runs", r.returncode == 0, r.describe())
    finally:
        os.environ["PCC_CACHE_DIR"] = os.environ["PCC_CACHE_DIR"][:-len("-nocxx")]
        if old is None:
            os.environ.pop("PCC_CXX", None)
        else:
            os.environ["PCC_CXX"] = old
        shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("kernels", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools, ("pcc", "pcc-run", "pcc-report")):
        return suite.finish()
    # The kernel cache under the build folder, or PCC_E2E_KERNEL_CACHE: `make
    # sanitize` points it at the plain build's, whose `make test` compiled the
    # same kernels with the same compilers (NVRTC and the C++ compiler are not
    # what the sanitizers check; the cache's lookups still run).
    os.environ["PCC_CACHE_DIR"] = os.environ.get("PCC_E2E_KERNEL_CACHE") or os.path.join(tools.bin_dir,
                                                                                         "kernel-cache")
    target = "cuda" if cuda_available(tools, suite) else "cpu"
    ptxas = ptxas_path() if target == "cuda" else None
    print(f"target {target}; ptxas {ptxas or 'not found: PTX not checked by ptxas'}", flush=True)
    e2e.prerequisite(suite, "the CUDA toolkit (pcc --target cuda)", target == "cuda")
    if target == "cuda":
        e2e.prerequisite(suite, "ptxas", ptxas is not None, "  looked for ptxas on PATH and in /usr/local/cuda/bin")
    suite.run_case("corrupt library", corrupt_library, suite, tools)
    suite.run_case("no compiler", no_compiler, suite, tools)
    suite.run_case("garbage compiler", garbage_compiler, suite, tools)
    totals = {"launches": 0, "fallbacks": 0, "ptxas": 0, "reduction kernels": 0, "half fallbacks": 0,
              "float16 stores": 0, "vector PTX": 0, "attention kernels": 0}
    cases = [(m, e2e.model_path(m), "4", None) for m in MODELS]
    cases += [(key, path, str(batch) if batch else None, data) for key, path, data, batch in exports()]
    cases = e2e.exporter_subset(cases, lambda c: c[0])
    for name, model, batch, data in cases:
        for config in CONFIGS:
            suite.run_case(f"{name} {' '.join(config)}", run_case, suite, tools, totals, name, model, batch, data,
                           config, target, ptxas)
    print(f"generated-kernel launches in all plans: {totals['launches']}; fused groups not generated whole: "
          f"{totals['fallbacks']}; PTX files accepted by ptxas: {totals['ptxas']}; "
          f"compensated sums in the CPU libraries: {totals['reduction kernels']}; float16 stores: "
          f"{totals['float16 stores']}; groups left out for float16/bfloat16: {totals['half fallbacks']}; "
          f"PTX files with 16-byte vector loads: {totals['vector PTX']}; "
          f"Attention launches (--gpus 1): {totals['attention kernels']}", flush=True)
    if not args.filter:
        suite.check("the plans launch generated kernels", totals["launches"] > 0, f"  {totals}")
        suite.check("the plans hold generated reduction kernels", totals["reduction kernels"] > 0, f"  {totals}")
        suite.check("the plans launch generated Attention kernels", totals["attention kernels"] > 0, f"  {totals}")
        suite.check("the plans hold generated float16 kernels", totals["float16 stores"] > 0, f"  {totals}")
        if target == "cuda":
            suite.check("some PTX has the 16-byte vector loads", totals["vector PTX"] > 0, f"  {totals}")
        if target == "cuda" and ptxas:
            suite.check("ptxas checked some PTX", totals["ptxas"] > 0, f"  {totals}")
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
