#!/usr/bin/env python3
"""The tools' command lines: `--flag=value` and `--flag value` alike, a repeated
option keeps its last value, `--help` exits 0 and lists every option (and
docs/cli.md lists the same ones), unknown options and bad values exit 2 with
one line on stderr naming the flag; report.json is the JSON pcc-report prints."""

import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MLP = e2e.model_path("mlp.onnx")
TOOLS = ("pcc", "pcc-run", "pcc-report", "pcc-opt", "pcc-calibrate")
# What each tool prefixes its one-line errors with.
ERROR_PREFIX = {"pcc": "pcc: error: ", "pcc-run": "pcc-run: error: ",
                "pcc-report": "pcc-report: error: ", "pcc-opt": "pcc-opt: ",
                "pcc-calibrate": "pcc-calibrate: error: "}
IR = """graph @main(%x: f32[4]) -> (%y: f32[4]) {
  %y = Relu(%x) : f32[4]
  return %y
}
"""


def help_options(text):
    """\returns the option names (every alias) of a CLI11 help's option sections,
    leaving out the pass flags of pcc-opt."""
    names, section = set(), None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            section = line.rstrip(":")
            continue
        m = re.match(r"\s+((?:-[\w-]+,)*-[\w-]+)", line)
        if m and section == "Options":
            names.update(m.group(1).split(","))
    return names


def doc_section(doc, tool):
    """\returns the text of docs/cli.md's section on `tool`."""
    m = re.search(rf"^## `{re.escape(tool)}`\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    return m.group(1) if m else ""


def doc_options(section):
    """\returns the options the section's table rows and synopsis name."""
    names = set()
    for line in section.splitlines():
        if line.startswith("| `-"):
            names.update(re.findall(r"`(--?[a-z][a-z0-9-]*)", line.split("|")[1]))
    return names


class CliTests:
    def __init__(self, suite, tools):
        self.suite = suite
        self.tools = tools
        self.work = suite.tempdir("cli")
        self._plan = None

    def path(self, name):
        return os.path.join(self.work, name)

    def plan(self):
        """A two-rank plan of mlp.onnx, compiled once."""
        if self._plan is None:
            self._plan = self.path("mlp.pcc")
            r = self.tools.run("pcc", [MLP, "--batch", 4, "--gpus", 2, "-o", self._plan, "--quiet"])
            if not self.suite.check("compile the plan the cases use", r.returncode == 0, r.describe()):
                raise RuntimeError("cannot compile mlp.onnx")
        return self._plan

    def ir_file(self):
        f = self.path("relu.ir")
        with open(f, "w") as out:
            out.write(IR)
        return f

    def providers(self):
        """--profile names the provider of each op's kernel: oneDNN's MatMul or
        Gemm by default, the reference kernels with --reference-kernels."""
        plan = self.plan()
        fast = self.tools.run("pcc-run", [plan, "--profile"])
        ref = self.tools.run("pcc-run", [plan, "--profile", "--reference-kernels"])
        if not self.suite.check("providers: both runs succeed", fast.returncode == 0 and ref.returncode == 0,
                                fast.describe() + ref.describe()):
            return
        heavy = r"^profile rank 0: (MatMul|Gemm) \((\w+)\)"
        fast_p = {m.group(2) for m in re.finditer(heavy, fast.stdout, re.M)}
        ref_p = {m.group(2) for m in re.finditer(heavy, ref.stdout, re.M)}
        self.suite.check("providers: oneDNN runs the matmuls by default", fast_p == {"onednn"},
                         f"  providers {fast_p}\n{fast.describe()}")
        self.suite.check("providers: --reference-kernels runs them on the reference kernels", ref_p == {"reference"},
                         f"  providers {ref_p}\n{ref.describe()}")
        self.suite.check("providers: no oneDNN kernel with --reference-kernels", "(onednn)" not in ref.stdout,
                         ref.describe())

    def memory(self):
        """--profile prints each rank's peak memory; --profile-json gives it as
        peak_memory_bytes, at least the rank's weights and arena from
        report.json, and within the range the compiler's estimate allows."""
        plan = self.plan()
        prof = self.path("memory.profile.json")
        r = self.tools.run("pcc-run", [plan, "--profile-json", prof, "--warmup", 1])
        if not self.suite.check("memory: pcc-run --profile-json", r.returncode == 0, r.describe()):
            return
        lines = re.findall(r"^memory rank (\d+): peak ([0-9.]+) MiB \(weights", r.stdout, re.M)
        self.suite.check("memory: one line per rank", [int(k) for k, _ in lines] == [0, 1], r.describe())
        with open(prof) as f:
            got = json.load(f)["ranks"]
        with open(os.path.join(plan, "report.json")) as f:
            want = json.load(f)["ranks"]
        for g, w in zip(got, want):
            k = g["rank"]
            self.suite.check(f"memory rank {k}: holds at least its weights and arena",
                             g["peak_memory_bytes"] >= w["weight_bytes"] + w["arena_bytes"] > 0
                             and g["weight_bytes"] == w["weight_bytes"], f"  profile {g}\n  report {w}")
            est = w["peak_memory_bytes"]
            self.suite.check(f"memory rank {k}: measured within 15% of the estimate",
                             abs(g["peak_memory_bytes"] / est - 1) <= 0.15,
                             f"  measured {g['peak_memory_bytes']}, estimated {est}: {w.get('memory_estimate')}")
            self.suite.check(f"memory rank {k}: no per-rank RSS when ranks share a process",
                             "process_peak_rss_bytes" not in g, f"  {g}")

    def usage_error(self, case, tool, args, patterns):
        """Checks that `tool args` exits 2 with one stderr line, the tool's
        prefix, matching every regex of `patterns`."""
        r = self.tools.run(tool, args)
        if not self.suite.check(f"{case}: exit 2", r.returncode == 2, r.describe()):
            return
        lines = r.stderr.splitlines()
        if not self.suite.check(f"{case}: one line on stderr", len(lines) == 1, r.describe()):
            return
        self.suite.check(f"{case}: prefix '{ERROR_PREFIX[tool]}'", lines[0].startswith(ERROR_PREFIX[tool]),
                         r.describe())
        missing = [p for p in patterns if not re.search(p, lines[0])]
        self.suite.check(f"{case}: message names the problem", not missing,
                         f"  message lacks {missing}\n{r.describe()}")

    # --- help and documentation -------------------------------------------

    def help(self):
        with open(os.path.join(e2e.SOURCE_DIR, "docs", "cli.md")) as f:
            doc = f.read()
        for tool in TOOLS:
            r = self.tools.run(tool, ["--help"])
            if not self.suite.check(f"{tool} --help: exit 0, usage on stdout, nothing on stderr",
                                    r.returncode == 0 and f"Usage: {tool}" in r.stdout and not r.stderr,
                                    r.describe()):
                continue
            listed = help_options(r.stdout)
            self.suite.check(f"{tool} --help lists options", {"--help"} < listed, r.describe())
            section = doc_section(doc, tool)
            if not self.suite.check(f"docs/cli.md has a section on {tool}", section != ""):
                continue
            documented = doc_options(section)
            self.suite.check(f"docs/cli.md's {tool} table documents options", "--help" in documented,
                             f"  found {sorted(documented)}")
            undocumented = sorted(n for n in listed - {"-h", "--help"} if f"`{n}" not in section)
            self.suite.check(f"docs/cli.md documents every option of {tool} --help", not undocumented,
                             f"  not in docs/cli.md: {undocumented}")
            unknown = sorted(documented - listed)
            self.suite.check(f"{tool} --help lists every option docs/cli.md documents", not unknown,
                             f"  in docs/cli.md but not in --help: {unknown}\n{r.describe()}")
        r = self.tools.run("pcc-opt", ["--help"])
        self.suite.check("pcc-opt --help lists the passes", "--cse" in r.stdout and "--fold-constants" in r.stdout,
                         r.describe())
        r = self.tools.run("pcc", ["--version"])
        self.suite.check("pcc --version", r.returncode == 0 and r.stdout.startswith("pcc "), r.describe())
        r = self.tools.run("pcc", ["--gpus", "abc", "--frobnicate", "--help"])
        self.suite.check("--help beside bad options still shows the help",
                         r.returncode == 0 and "Usage: pcc" in r.stdout, r.describe())

    # --- values ----------------------------------------------------------

    def emit_json(self, args):
        r = self.tools.run("pcc", [MLP] + args + ["--emit", "json"])
        if not self.suite.check(f"pcc {' '.join(map(str, args))} --emit json", r.returncode == 0, r.describe()):
            return None
        return json.loads(r.stdout)

    def equals_form(self):
        spaced = self.emit_json(["--batch", 4, "--gpus", 2, "--strategy", "tp=2"])
        joined = self.emit_json(["--batch=4", "--gpus=2", "--strategy=tp=2"])
        if spaced is None or joined is None:
            return
        # The search's own run time (and its phases') differs from one compile to the next.
        for doc in (spaced, joined):
            doc.pop("search_time_ms", None)
            doc.pop("search_phases_ms", None)
        self.suite.check("pcc: --flag=value compiles what --flag value does", spaced == joined,
                         f"  {spaced}\n  {joined}")
        self.suite.check("pcc --gpus=2 --strategy=tp=2: a tp=2 mesh",
                         joined["world_size"] == 2 and joined["mesh"]["tp"] == 2, f"  {joined}")
        last = self.emit_json(["--batch", 4, "--gpus", 4, "--gpus=2"])
        if last is not None:
            self.suite.check("pcc: a repeated --gpus keeps the last value", last["world_size"] == 2, f"  {last}")
        split = self.emit_json(["--gpus=2", "--shape=x=4x64"])
        whole = self.emit_json(["--gpus=2", "--shape", "x=4x64", "--shape=x=1x64"])
        if split is not None and whole is not None:
            self.suite.check("pcc: --shape=NAME=AxB binds the shape (a batch of 4 over 2 ranks, of 1 on one)",
                             split["world_size"] == 2 and whole["world_size"] == 1, f"  {split}\n  {whole}")

        plan = self.plan()
        a = self.tools.run("pcc-report", [plan, "--format=json"])
        b = self.tools.run("pcc-report", [plan, "--format", "json"])
        if self.suite.check("pcc-report --format=json and --format json", a.returncode == 0 and b.returncode == 0
                            and a.stdout == b.stdout, a.describe() + "\n" + b.describe()):
            with open(os.path.join(plan, "report.json")) as f:
                written = json.load(f)
            self.suite.check("report.json is the JSON pcc-report prints", written == json.loads(a.stdout),
                             f"  report.json: {written}\n{a.describe()}")
        out = self.path("report.txt")
        r = self.tools.run("pcc-report", [plan, "--output=" + out])
        self.suite.check("pcc-report --output=FILE writes the text report",
                         r.returncode == 0 and os.path.exists(out) and "rank 1" in open(out).read(), r.describe())
        r = self.tools.run("pcc-run", [plan, "--check", "--seed=3", "--iters=2", "--warmup=1", "--rtol=1e-3",
                                       "--atol", "1e-4", "--threads=1", "--backend=cpu"])
        self.suite.check("pcc-run with --flag=value options", r.returncode == 0 and "ok" in r.stdout, r.describe())
        r = self.tools.run("pcc-opt", [self.ir_file(), "--partition=gpus=2", "--rank=1"])
        self.suite.check("pcc-opt --partition=SPEC --rank=K", r.returncode == 0 and "rank 1" in r.stdout,
                         r.describe())
        r = self.tools.run("pcc-opt", [self.ir_file(), "--partition", "gpus=2", "--rank", "1"])
        self.suite.check("pcc-opt --partition SPEC --rank K", r.returncode == 0 and "rank 1" in r.stdout,
                         r.describe())

    # --- usage errors ----------------------------------------------------

    def bad_values(self):
        plan = self.plan()
        ir = self.ir_file()
        m = [MLP, "--batch", 4]
        cases = [
            ("pcc --gpus abc", "pcc", m + ["--gpus", "abc"], [r"--gpus", r"'abc'"]),
            ("pcc --gpus 0", "pcc", m + ["--gpus", "0"], [r"--gpus", r"'0'"]),
            ("pcc --gpus=0x10", "pcc", m + ["--gpus=0x10"], [r"--gpus", r"0x10"]),
            ("pcc --gpus without a value", "pcc", m + ["--gpus"], [r"--gpus"]),
            ("pcc --batch -1", "pcc", [MLP, "--batch", "-1"], [r"--batch"]),
            ("pcc --batch abc", "pcc", [MLP, "--batch", "abc"], [r"--batch expects auto or an integer", r"'abc'"]),
            ("pcc --gpus disagreeing with --strategy", "pcc", m + ["--gpus", 4, "--strategy", "dp=2,tp=4"],
             [r"--strategy dp=2,tp=4 uses 8 devices but --gpus is 4"]),
            ("pcc --gpus not a multiple of --strategy tp", "pcc", m + ["--gpus", 6, "--strategy", "tp=4"],
             [r"--strategy tp=4 needs a multiple of 4 devices but --gpus is 6"]),
            ("pcc --emit bogus", "pcc", m + ["--emit=bogus"], [r"--emit", r"ir, report or json"]),
            ("pcc --strategy tp=x", "pcc", m + ["--strategy", "tp=x"], [r"--strategy", r"tp=x"]),
            ("pcc --strategy tp=2,tp=2", "pcc", m + ["--gpus", 2, "--strategy", "tp=2,tp=2"],
             [r"--strategy", r"tp is given twice"]),
            ("pcc --strategy with a huge factor", "pcc", m + ["--strategy", "tp=999999999999"],
             [r"--strategy", r"exceeds the 65536 devices"]),
            ("pcc --strategy ending in a comma", "pcc", m + ["--strategy", "tp=2,"], [r"--strategy"]),
            ("pcc --shape without =", "pcc", [MLP, "--shape", "x"], [r"--shape", r"NAME=AxB"]),
            ("pcc --shape bad dims", "pcc", [MLP, "--shape", "x=4xq"], [r"--shape", r"4xq"]),
            ("pcc unknown --flag=value", "pcc", m + ["--frobnicate=3"], [r"unknown option '--frobnicate'"]),
            ("pcc unknown short option", "pcc", m + ["-z"], [r"unknown option '-z'"]),
            ("pcc two models", "pcc", m + [MLP], [r"more than one model"]),
            ("pcc no model", "pcc", ["--batch", 4], [r"no model"]),
            ("pcc --precision of no such type", "pcc", m + ["--precision=fp8"],
             [r"--precision", r"fp32, fp16 or bf16", r"'fp8'"]),
            ("pcc --keep-fp32 of no such op", "pcc", m + ["--precision", "fp16", "--keep-fp32", "Frob"],
             [r"--keep-fp32", r"no op named 'Frob'"]),
            ("pcc --keep-fp32 without --precision", "pcc", m + ["--keep-fp32", "Add"],
             [r"--keep-fp32", r"give --precision"]),
            ("pcc --max-error out of range", "pcc", m + ["--precision", "bf16", "--max-error", "-1"],
             [r"--max-error", r"'-1'"]),
            ("pcc --microbatches not dividing the batch", "pcc", m + ["--gpus", 2, "--strategy", "pp=2",
                                                                     "--microbatches", 3],
             [r"--microbatches 3", r"batch 4 does not divide"]),
            ("pcc-run --rtol abc", "pcc-run", [plan, "--rtol", "abc"], [r"--rtol", r"'abc'"]),
            ("pcc-run --atol -1", "pcc-run", [plan, "--atol=-1"], [r"--atol", r"'-1'"]),
            ("pcc-run --iters 0", "pcc-run", [plan, "--iters", "0"], [r"--iters"]),
            ("pcc-run --seed x", "pcc-run", [plan, "--seed=x"], [r"--seed"]),
            ("pcc-run unknown", "pcc-run", [plan, "--frobnicate"], [r"unknown option '--frobnicate'"]),
            ("pcc-run two plans", "pcc-run", [plan, plan], [r"more than one plan"]),
            ("pcc-run --backend unknown", "pcc-run", [plan, "--backend", "tpu"],
             [r"--backend", r"unknown backend 'tpu'", r"registered: cpu"]),
            ("pcc-report --format pdf", "pcc-report", [plan, "--format", "pdf"],
             [r"--format", r"text, json, dot, html or costs", r"pdf"]),
            ("pcc-report unknown", "pcc-report", [plan, "-x"], [r"unknown option '-x'"]),
            ("pcc-report no plan", "pcc-report", [], [r"no plan"]),
            ("pcc-opt --rank abc", "pcc-opt", [ir, "--partition=gpus=2", "--rank", "abc"], [r"--rank", r"'abc'"]),
            ("pcc-opt --print-after nosuch", "pcc-opt", [ir, "--print-after=nosuch"],
             [r"--print-after", r"nosuch"]),
            ("pcc-opt --partition gpus=x", "pcc-opt", [ir, "--partition", "gpus=x"], [r"gpus=x"]),
            ("pcc-opt unknown pass", "pcc-opt", [ir, "--no-such-pass"],
             [r"unknown option or pass '--no-such-pass'"]),
            ("pcc-opt two inputs", "pcc-opt", [ir, ir], [r"more than one input file"]),
        ]
        for case, tool, args, patterns in cases:
            self.usage_error(case, tool, args, patterns)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_cli", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools, needed=TOOLS):
        t = CliTests(suite, tools)
        suite.run_case("help", t.help)
        suite.run_case("flag=value", t.equals_form)
        suite.run_case("bad values", t.bad_values)
        suite.run_case("kernel providers", t.providers)
        suite.run_case("peak memory", t.memory)
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
