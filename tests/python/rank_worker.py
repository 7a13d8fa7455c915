"""One process of a distributed pcc.Session (tests/python/test_launch.py):
    rank_worker.py PLAN FEEDS.npz OUT.npz [RENDEZVOUS]
runs the plan three times on the arrays in FEEDS.npz with every rank its own
process (the launcher's variables name this one) and, on rank 0, writes the
outputs to OUT.npz after checking that the three runs agree."""

import sys

import numpy as np

import pcc

plan, feeds_path, out_path = sys.argv[1:4]
rendezvous = sys.argv[4] if len(sys.argv) > 4 else None
with np.load(feeds_path) as f:
    feeds = dict(f)
with pcc.Session(plan, distributed=True, threads=1, timeout=60, rendezvous=rendezvous) as sess:
    runs = [sess.run_dict(feeds) for _ in range(3)]
    if sess.rank == 0:
        for r in runs[1:]:
            assert r.keys() == runs[0].keys()
            for k in r:
                assert np.array_equal(r[k], runs[0][k]), f"run outputs differ: {k}"
        np.savez(out_path, **runs[0])
    else:
        assert runs == [{}, {}, {}], "a rank other than 0 got outputs"
    print(f"rank {sess.rank} of {sess.world_size}: ok", flush=True)
