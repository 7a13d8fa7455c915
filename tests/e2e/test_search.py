#!/usr/bin/env python3
"""The mesh search end to end: `pcc` without --strategy costs every dp x tp
split of the devices on the device it plans for, records every alternative in
report.json, keeps the best for the objective, and the plan it writes runs on
CPU ranks and matches the reference evaluator. Device flags (--gpu, --cluster,
--gpus-per-node, --objective) reach the report; bad ones are refused with one
line.
"""

import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402

MLP = e2e.model_path("mlp.onnx")
GPT2 = e2e.model_path("gpt2_tiny.onnx")


class SearchTests:
    def __init__(self, suite, tools):
        self.suite = suite
        self.tools = tools
        self.work = suite.tempdir("search")

    def emit_json(self, model, args):
        r = self.tools.run("pcc", [model, "--emit", "json", "--quiet"] + args)
        if not self.suite.check(f"pcc {' '.join(map(str, args))} --emit json", r.returncode == 0, r.describe()):
            return None
        return json.loads(r.stdout)

    def alternatives(self):
        for gpus, model, batch in ((4, MLP, 8), (8, GPT2, 8), (6, MLP, 12)):
            doc = self.emit_json(model, ["--batch", batch, "--gpus", gpus])
            if doc is None:
                continue
            alts = doc.get("alternatives", [])
            meshes = [(a["mesh"]["pp"], a["mesh"]["dp"], a["mesh"]["tp"]) for a in alts]
            # Every dp x tp of gpus and of each divisor of it, once each (a
            # batch smaller than dp would fold two onto one mesh; none here);
            # every pipeline pp x dp x tp costed once, or bounded out.
            want = sorted((1, d // tp, tp) for d in range(1, gpus + 1) if gpus % d == 0
                          for tp in range(1, d + 1) if d % tp == 0)
            pipelines = sorted((pp, d // pp // tp, tp) for d in range(1, gpus + 1) if gpus % d == 0
                               for pp in range(2, d + 1) if d % pp == 0
                               for tp in range(1, d // pp + 1) if (d // pp) % tp == 0)
            costed = sorted(m for m in meshes if m[0] > 1)
            self.suite.check(f"gpus {gpus}: every pipeline is costed once or bounded out",
                             len(set(costed)) == len(costed) and set(costed) <= set(pipelines)
                             and len(costed) + doc.get("pruned_pipelines", -1) == len(pipelines),
                             f"  costed {costed}, pruned {doc.get('pruned_pipelines')}, of {len(pipelines)}")
            meshes = [m for m in meshes if m[0] == 1]
            self.suite.check(f"gpus {gpus}: every dp x tp split is costed once", sorted(meshes) == want,
                             f"  got {sorted(meshes)}\n  want {want}")
            chosen = doc["mesh"]
            self.suite.check(f"gpus {gpus}: the plan's mesh is the first alternative",
                             alts and alts[0]["mesh"] == chosen, f"  mesh {chosen}, first {alts[:1]}")
            times = [a["estimated_time_ms"] for a in alts if "infeasible" not in a and "error" not in a]
            self.suite.check(f"gpus {gpus}: latency objective ranks by estimated time",
                             times == sorted(times) and all(t > 0 for t in times), f"  {times}")
            self.suite.check(f"gpus {gpus}: report carries the search",
                             doc.get("objective") == "latency" and doc["device"]["name"] == "h100"
                             and doc["estimated_time_ms"] == alts[0]["estimated_time_ms"]
                             and doc["search_time_ms"] >= 0, f"  {json.dumps({k: doc.get(k) for k in ('objective', 'device', 'estimated_time_ms')})}")
            ranks = doc["ranks"]
            self.suite.check(f"gpus {gpus}: every rank has its estimate",
                             len(ranks) == doc["world_size"]
                             and all(r["estimated_time_ms"] > 0 and r["estimated_memory_bytes"] > 0 for r in ranks)
                             and max(r["estimated_time_ms"] for r in ranks) == doc["estimated_time_ms"],
                             f"  {[(r.get('estimated_time_ms'), r.get('estimated_memory_bytes')) for r in ranks]}")

    def chosen_plan_runs(self):
        for model, batch, gpus in ((GPT2, 8, 8), (GPT2, 1, 4), (MLP, 6, 4)):
            out = os.path.join(self.work, f"{os.path.basename(model)}-{batch}-{gpus}.pcc")
            r = self.tools.run("pcc", [model, "--batch", batch, "--gpus", gpus, "-o", out])
            if not self.suite.check(f"auto plan {os.path.basename(model)} batch {batch} gpus {gpus} compiles",
                                    r.returncode == 0 and "pcc: plan: " in r.stderr, r.describe()):
                continue
            r = self.tools.run("pcc-run", [out, "--check", "--rtol", "1e-4", "--atol", "1e-5"])
            self.suite.check(f"auto plan {os.path.basename(model)} batch {batch} gpus {gpus} matches the reference",
                             r.returncode == 0, r.describe())
            r = self.tools.run("pcc-report", [out])
            self.suite.check("pcc-report prints the device and the search",
                             r.returncode == 0 and "device:  h100" in r.stdout and "search:  latency objective"
                             in r.stdout, r.describe())
            with open(os.path.join(out, "report.json")) as f:
                alternatives = json.load(f)["alternatives"]
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("  alternative ")]
            self.suite.check("pcc-report prints each alternative on a line of its own",
                             len(lines) == len(alternatives) - 1
                             and all(re.fullmatch(r"  alternative dp=\d+ tp=\d+ pp=\d+: .*", ln) for ln in lines)
                             and not any("alternative" in ln for ln in r.stdout.splitlines() if ln not in lines
                                         and not ln.startswith("search:")),
                             r.describe())

    def device_flags(self):
        doc = self.emit_json(MLP, ["--batch", 8, "--gpus", 4, "--gpu", "cpu", "--objective", "throughput"])
        if doc is not None:
            self.suite.check("--gpu cpu --objective throughput reach the report",
                             doc["device"]["name"] == "cpu" and doc["objective"] == "throughput",
                             f"  {doc.get('device')} {doc.get('objective')}")
            sps = [a["samples_per_second"] for a in doc["alternatives"] if "infeasible" not in a]
            self.suite.check("throughput objective ranks by samples per second", sps == sorted(sps, reverse=True),
                             f"  {sps}")
        with open(os.path.join(e2e.SOURCE_DIR, "passes", "partition", "devices", "h100.json")) as f:
            spec = json.load(f)
        spec["name"] = "my-cluster"
        spec["gpus_per_node"] = 2
        path = os.path.join(self.work, "cluster.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        doc = self.emit_json(MLP, ["--batch", 8, "--gpus", 4, "--cluster", path])
        if doc is not None:
            self.suite.check("--cluster FILE.json is read", doc["device"]["name"] == "my-cluster"
                             and doc["device"]["gpus_per_node"] == 2, f"  {doc.get('device')}")
        doc = self.emit_json(MLP, ["--batch", 8, "--gpus", 4, "--gpus-per-node", 1])
        if doc is not None:
            self.suite.check("--gpus-per-node overrides the spec's", doc["device"]["gpus_per_node"] == 1,
                             f"  {doc.get('device')}")
        doc = self.emit_json(MLP, ["--batch", 8, "--gpus", 4, "--strategy", "dp=2,tp=2"])
        if doc is not None:
            self.suite.check("a forced mesh is the only alternative", len(doc["alternatives"]) == 1
                             and doc["mesh"] == {"pp": 1, "dp": 2, "tp": 2}, f"  {doc.get('alternatives')}")

    def bad_flags(self):
        m = [MLP, "--batch", 4, "--gpus", 2]
        bad = os.path.join(self.work, "bad.json")
        with open(bad, "w") as f:
            f.write('{"name": "x", "description": "y", "devices": {}}')
        cases = [
            ("pcc --gpu h900", m + ["--gpu", "h900"], [r"--gpu", r"h900", r"h100"]),
            ("pcc --objective fast", m + ["--objective=fast"], [r"--objective", r"latency or throughput"]),
            ("pcc --gpus-per-node 0", m + ["--gpus-per-node", "0"], [r"--gpus-per-node"]),
            ("pcc --cluster missing file", m + ["--cluster", os.path.join(self.work, "nope.json")],
             [r"--cluster", r"nope.json"]),
            ("pcc --cluster with an unknown key", m + ["--cluster", bad], [r"--cluster", r"bad.json", r"devices: unknown key"]),
        ]
        for case, args, patterns in cases:
            e2e.expect_one_line_error(self.suite, self.tools, case, "pcc", args, patterns)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_search", args)
    tools = e2e.Tools(args.bin)
    if e2e.require_tools(suite, tools):
        t = SearchTests(suite, tools)
        suite.run_case("alternatives", t.alternatives)
        suite.run_case("chosen plan runs", t.chosen_plan_runs)
        suite.run_case("device flags", t.device_flags)
        suite.run_case("bad flags", t.bad_flags)
        if not args.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
