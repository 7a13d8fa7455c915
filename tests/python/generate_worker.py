"""One process of a distributed pcc.Session generating (tests/python/test_launch.py):
    generate_worker.py PLAN PROMPTS.json NEW_TOKENS OUT RENDEZVOUS
generates twice from the prompts in PROMPTS.json with every rank its own
process (greedy, every step checked against the export's own decode step on
rank 0), and writes the tokens each generation gave this rank to OUT.rankR.json."""

import json
import sys

import pcc

plan, prompts_path, new_tokens, out, rendezvous = sys.argv[1:6]
with open(prompts_path) as f:
    prompts = json.load(f)
with pcc.Session(plan, distributed=True, threads=1, timeout=60, rendezvous=rendezvous) as sess:
    # The second generation starts over on the cache the first one wrote.
    runs = [sess.generate(prompts, int(new_tokens), stop_at_eos=False, check=True) for _ in range(2)]
    with open(f"{out}.rank{sess.rank}.json", "w") as f:
        json.dump({"tokens": [r["tokens"] for r in runs], "checked_steps": [r["checked_steps"] for r in runs]}, f)
    print(f"rank {sess.rank} of {sess.world_size}: ok", flush=True)
