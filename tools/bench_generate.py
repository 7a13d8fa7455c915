#!/usr/bin/env python3
"""Decode speed on CPU ranks: pcc's generation plan against onnxruntime
running the same export step by step, its cache passed in and out.

    build/venv/bin/python tools/bench_generate.py [--bin build] [--threads 1]
        [--tokens 64] [--batch 1] [--context 128] [--prompt-len 8] [--repeat 3]
        [--gpus 1] [MODEL.onnx ...]

With --genai FOLDER (an onnxruntime-genai builder model, such as
models/exported/decoders/llama.genai), one more row: pcc compiling that
model against onnxruntime-genai's own loop on it (og.Generator, greedy,
intra_op_num_threads = T written into a copy of its genai_config.json);
both run each prompt in one prefill step (pcc's prefill program), so both
the decode rates and the times to first token compare like for like. onnxruntime-genai is
not in the test venv: `pip install onnxruntime-genai==0.18.0` into another.

For each decoder export (default: the TorchScript exports in
models/exported/decoders/): `pcc MODEL --batch B --max-context C --gpus G`
compiles the generation plan and `pcc-run PLAN --generate N --ignore-eos
--threads T --warmup 1` generates N tokens from B prompts of --prompt-len tokens
(after one untimed generation: onnxruntime-genai's rows are warm too),
written by the plan's prefill program in one run; its printed
decode rate (tokens/s after the prompts) and time to first token are taken.
onnxruntime (CPU provider, intra_op_num_threads = T, one session) runs the
export's decode step the way its exporter meant it: one token per sequence a
step, `past_key_values.*` fed from the last step's `present.*` (growing by one
position a step), the attention mask over the positions so far; the same
prompts, the same number of steps, greedy. Each side runs --repeat times and
keeps its best rate; one row per model with both rates and pcc / onnxruntime.
Both sides compute every step's logits for every sequence; onnxruntime
feeds the prompt one token a step (the export's interface), pcc in one
prefill run, so their times to first token differ by design.

At --gpus G pcc uses G ranks of T threads each: compare at --gpus 1 for the
same thread count. This is a measurement, never a pass/fail test: the machine
is shared and noisy.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def pcc_rate(a, model, prompts, work):
    plan = os.path.join(work, os.path.basename(model) + ".pcc")
    cmd = [os.path.join(a.bin, "pcc"), model, "--batch", str(a.batch), "--max-context", str(a.context),
           "--gpus", str(a.gpus), "-o", plan, "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-300:]}")
    run = [os.path.join(a.bin, "pcc-run"), plan, "--generate", str(a.tokens), "--ignore-eos",
           "--threads", str(a.threads), "--warmup", "1"]
    for p in prompts:
        run += ["--prompt-ids", ",".join(map(str, p))]
    best, first = 0.0, None
    for _ in range(a.repeat):
        r = subprocess.run(run, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(run)}: {r.stderr.strip()[-300:]}")
        m = re.search(r"decode: ([0-9.]+) tokens/s", r.stdout)
        f = re.search(r"time to first token: ([0-9.]+) ms", r.stdout)
        if m and float(m.group(1)) > best:
            best, first = float(m.group(1)), float(f.group(1)) if f else None
    return best, first


def ort_rate(a, model, prompts):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in sess.get_inputs()}
    outputs = [o.name for o in sess.get_outputs()]
    pasts = [n for n in inputs if n.startswith("past_key_values")]
    batch = len(prompts)
    prompt_len = len(prompts[0])
    best, first_ms = 0.0, None
    for _ in range(a.repeat):
        cache = {}
        for n in pasts:
            shape = inputs[n].shape
            cache[n] = np.zeros((batch, shape[1], 0, shape[3]), np.float32)
        tokens = [list(p) for p in prompts]
        start = time.perf_counter()
        decode_start, steps_after = None, 0
        for pos in range(prompt_len + a.tokens - 1):
            feed = dict(cache)
            feed["input_ids"] = np.array([[t[pos]] for t in tokens], np.int64)
            feed["attention_mask"] = np.ones((batch, pos + 1), np.int64)
            if "position_ids" in inputs:
                feed["position_ids"] = np.full((batch, 1), pos, np.int64)
            res = dict(zip(outputs, sess.run(outputs, feed)))
            for n in pasts:
                cache[n] = res["present" + n[len("past_key_values"):]]
            if pos >= prompt_len - 1:
                nxt = np.argmax(res["logits"][:, -1, :], axis=-1)
                for t, x in zip(tokens, nxt):
                    t.append(int(x))
                if pos == prompt_len - 1:
                    first = (time.perf_counter() - start) * 1e3
                    decode_start = time.perf_counter()
                else:
                    steps_after += 1
        rate = steps_after * batch / (time.perf_counter() - decode_start) if steps_after else 0
        if rate > best:
            best, first_ms = rate, first
    return best, first_ms


def genai_rate(a, folder, prompts):
    """onnxruntime-genai's own generation loop on its builder model (greedy,
    intra_op_num_threads = --threads): \returns (decode tokens/s, first
    token ms, the tokens). It runs each prompt in one prefill step."""
    import json
    import onnxruntime_genai as og
    work = tempfile.mkdtemp(prefix="pcc-bench-genai-")
    try:
        for f in os.listdir(folder):
            shutil.copy(os.path.join(folder, f), work)
        cfg_path = os.path.join(work, "genai_config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        so = cfg["model"]["decoder"].setdefault("session_options", {})
        so["intra_op_num_threads"] = a.threads
        so["inter_op_num_threads"] = 1
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        model = og.Model(work)
        best, first_ms, tokens = 0.0, None, None
        for _ in range(a.repeat):
            params = og.GeneratorParams(model)
            params.set_search_options(max_length=len(prompts[0]) + a.tokens, do_sample=False, batch_size=len(prompts))
            gen = og.Generator(model, params)
            start = time.perf_counter()
            gen.append_tokens(np.array(prompts, dtype=np.int32))
            gen.generate_next_token()
            first = (time.perf_counter() - start) * 1e3
            decode_start, steps = time.perf_counter(), 0
            while not gen.is_done():
                gen.generate_next_token()
                steps += 1
            rate = steps * len(prompts) / (time.perf_counter() - decode_start) if steps else 0
            if rate > best:
                best, first_ms = rate, first
                tokens = [list(gen.get_sequence(b))[len(prompts[b]):] for b in range(len(prompts))]
        return best, first_ms, tokens
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*")
    ap.add_argument("--bin", default=os.path.join(root, "build"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--genai", metavar="FOLDER", help="also compare with onnxruntime-genai on this builder model "
                    "folder (needs the onnxruntime_genai package in this Python)")
    a = ap.parse_args()
    models = a.models or sorted(glob.glob(os.path.join(root, "models", "exported", "decoders", "*.ts.onnx")))
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(1, 200, a.prompt_len)) for _ in range(a.batch)]
    work = tempfile.mkdtemp(prefix="pcc-bench-generate-")
    rows = []
    try:
        for m in models:
            name = os.path.basename(m)[:-len(".onnx")]
            p, pf = pcc_rate(a, m, prompts, work)
            o, of = ort_rate(a, m, prompts)
            rows.append((name, p, pf, o, of))
            print(f"{name}: pcc {p:.1f} tokens/s, onnxruntime {o:.1f} tokens/s", flush=True)
        if a.genai:
            m = os.path.join(a.genai, "model.onnx")
            p, pf = pcc_rate(a, m, prompts, work)
            o, of, toks = genai_rate(a, a.genai, prompts)
            rows.append((os.path.basename(a.genai.rstrip("/")) + " (onnxruntime-genai)", p, pf, o, of))
            print(f"{a.genai}: pcc {p:.1f} tokens/s, onnxruntime-genai {o:.1f} tokens/s; its tokens {toks}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{a.batch} sequence(s), {a.prompt_len}-token prompts, {a.tokens} new tokens, context {a.context}, "
          f"{a.threads} thread(s), pcc --gpus {a.gpus}; best of {a.repeat}\n")
    print("| model | pcc tokens/s | onnxruntime tokens/s | pcc / onnxruntime | pcc first token ms | "
          "onnxruntime first token ms |")
    print("|---|---|---|---|---|---|")
    for name, p, pf, o, of in rows:
        print(f"| {name} | {p:.1f} | {o:.1f} | {p / o:.2f} | {pf:.3f} | {of:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
