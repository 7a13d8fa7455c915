#!/usr/bin/env python3
"""The search's decode-step figures for LLaMA-sized decoders with a KV cache.

    python tools/bench_decode_estimates.py [--bin build] [--work build/bench-decode]
                                           [--cases llama65b_decode:8,llama13b_decode:2,llama13b_decode:8]
                                           [--batch 1] [--context 2048] [--gpu h100]

Each structure is tools/bench_compile_scale.py's LLaMA (fp16, weights in a
sparse file: nothing is stored or read) written as its decode step, with
`past_key_values.N.key/value` in and `present.N.key/value` out. For each case
`pcc MODEL --gpus G --gpu GPU --batch B --max-context C --emit json` plans a
generation plan; the table gives the mesh the search chose, its estimated time
per decode step and tokens/s, the memory-bound floor (the busiest rank's
weight and cache bytes over the device's memory bandwidth, stages summed), the
collectives' share of the step, the cache and weights per device, and the
prefill program's estimated time for one run of --max-prompt tokens per
sequence (default 256: the time to first token of a 256-token prompt).
These are the cost model's estimates for the named GPU, not measurements.

Needs only onnx and numpy (the test venv).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_compile_scale as scale  # noqa: E402

GIB = 1 << 30


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(root, "build"))
    ap.add_argument("--work", default=os.path.join(root, "build", "bench-decode"))
    ap.add_argument("--cases", default="llama65b_decode:8,llama13b_decode:2,llama13b_decode:8")
    ap.add_argument("--batch", type=int, default=1, help="sequences per decode step")
    ap.add_argument("--context", type=int, default=2048, help="--max-context")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    models, rows = {}, []
    for case in [c for c in a.cases.split(",") if c]:
        name, gpus = case.split(":")
        if name not in models:
            models[name] = scale.write_structure(os.path.join(a.work, name), name)
        path, weight_bytes = models[name][0], models[name][1]
        cmd = [os.path.join(a.bin, "pcc"), path, "--gpus", gpus, "--gpus-per-node", "8", "--gpu", a.gpu,
               "--batch", str(a.batch), "--max-context", str(a.context), "--emit", "json", "--quiet"]
        start = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.monotonic() - start
        if r.returncode != 0:
            print(f"{case}: exit {r.returncode}: {r.stderr.strip()[-400:]}", flush=True)
            rows.append((case, None, seconds, weight_bytes))
            continue
        rows.append((case, json.loads(r.stdout), seconds, weight_bytes))
        print(f"{case}: planned in {seconds:.1f} s", flush=True)
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    print(f"\nbatch {a.batch}, context {a.context}, {a.gpu}, fp16\n")
    print("| structure | GPUs | mesh | ms per step | tokens/s | floor ms | collectives ms | cache / device "
          "| weights / device | first token ms (prefill) | planning |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case, doc, seconds, weight_bytes in rows:
        name, gpus = case.split(":")
        if doc is None:
            print(f"| {name} | {gpus} | does not plan | | | | | | {weight_bytes / GIB:.1f} GiB in all | | {seconds:.1f} s |")
            continue
        e = doc["generation"]["estimate"]
        m = doc["mesh"]
        cache = max(rk["state_bytes"] for rk in doc["ranks"])
        weights = max(rk["weight_bytes"] for rk in doc["ranks"])
        pre = doc["generation"].get("prefill")
        first = f"{pre['estimate_ms']:.1f} ({pre['max_prompt']} tokens)" if pre else "no prefill"
        print(f"| {name} | {gpus} | pp={m['pp']} dp={m['dp']} tp={m['tp']} | {e['step_ms']:.2f} | "
              f"{e['tokens_per_second']:.0f} | {e['roofline_ms']:.2f} | {e['comm_ms']:.2f} | {cache / GIB:.2f} GiB | "
              f"{weights / GIB:.2f} GiB | {first} | {seconds:.1f} s |")
    return 0 if all(doc is not None for _, doc, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
