"""One process of a distributed pcc.Session (tests/python/test_launch.py):
    rank_worker.py PLAN FEEDS.npz OUT [RENDEZVOUS]
runs the plan three times on the arrays in FEEDS.npz with every rank its own
process (the launcher's variables name this one), checks that the three runs
agree, and writes what this rank got: rank 0 the whole outputs to OUT.npz,
every other rank its own part of each to OUT.rankR.npz with where each part
lies (Session.own_slices) in OUT.rankR.json."""

import json
import sys

import numpy as np

import pcc

plan, feeds_path, out = sys.argv[1:4]
rendezvous = sys.argv[4] if len(sys.argv) > 4 else None
with np.load(feeds_path) as f:
    feeds = dict(f)
with pcc.Session(plan, distributed=True, threads=1, timeout=60, rendezvous=rendezvous) as sess:
    runs = [sess.run_dict(feeds) for _ in range(3)]
    for r in runs[1:]:
        assert r.keys() == runs[0].keys()
        for k in r:
            assert np.array_equal(r[k], runs[0][k]), f"run outputs differ: {k}"
    if sess.rank == 0:
        np.savez(out + ".npz", **runs[0])
    else:
        np.savez(f"{out}.rank{sess.rank}.npz", **runs[0])
        with open(f"{out}.rank{sess.rank}.json", "w") as f:
            json.dump(sess.own_slices(), f)
    print(f"rank {sess.rank} of {sess.world_size}: ok", flush=True)
