"""pcc-run's backend choice (docs/runtime.md#cuda-backend) on a machine without a usable GPU.

1. `--backend cuda` exits 2 with one line saying what is missing: the
   driver library (here libcuda.so.1 is not installed, or
   PCC_CUDA_DRIVER_LIB names one that is not there), cuInit's error, no
   device (a stand-in driver, build/tests/libpcc_fake_cuda.so, whose cuInit
   and device count the test sets), or a build without the CUDA backend.
2. `--backend auto` runs on CPU ranks, checked against the reference
   program (`--check`), and says so in one line, for each of those reasons;
   in a multi-process run (--rendezvous) every rank falls back the same way.
3. `--backend cpu` prints no such line.
This machine has no GPU: the cuda backend itself is not run here (tests/gpu/run.sh does).
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402


def has_cuda_backend(tools):
    """\returns whether pcc-run was built with the CUDA backend (its --help says cuda)."""
    r = tools.run("pcc-run", ["--help"])
    return "cuda" in r.stdout


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("cuda_backend", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools, ("pcc", "pcc-run")):
        return suite.finish()
    work = suite.tempdir("cuda-backend")
    fake = os.path.join(tools.bin_dir, "tests", "libpcc_fake_cuda.so")
    saved = {k: os.environ.get(k) for k in ("PCC_CUDA_DRIVER_LIB", "PCC_FAKE_CUDA_INIT", "PCC_FAKE_CUDA_DEVICES")}

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
        built = has_cuda_backend(tools)
        print(f"pcc-run has the CUDA backend: {built}", flush=True)
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
            import subprocess
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
