#!/usr/bin/env python3
"""Plants bugs one at a time and reports which tests catch each.

Each bug is a patch file (a unified diff against the source, applied with
`git apply`; tests/audit/*.patch) whose header, the lines before the diff,
names what it breaks and how to see it:

    Planted bug: one or more lines saying what the patch breaks
    Build: unit_partition pcc pcc-run        (the targets its tests need)
    Test: {build}/tests/unit_partition --gtest_filter=Pipeline.*
    Test: {python} tests/e2e/test_memory_plan.py --bin {build} -k reshard

In a Test line {build} is the build folder, {python} the tests' Python
(BUILD/venv/bin/python when there is one) and {source} the checkout; each
runs in the checkout with PCC_SOURCE_DIR set to it. For every patch, in
turn: apply, build its targets, run its tests, revert (always, even when the
build or a test fails). A bug is *caught* when its build succeeds and at
least one of its tests fails. Before planting, each patch's tests run once
on the unpatched tree: a test that fails there proves nothing, and the
patch is reported as such.

The audit needs a checkout and a build folder of its own, so that nobody
else builds the planted code: by default it makes a git worktree of HEAD
(the committed tree) in WORK/src and configures WORK/build there (a full
build: about 20 minutes on two cores). `--checkout DIR --build-dir DIR` use
existing ones instead; with the shared checkout, pass `--lock FILE` (the
build lock) so that each plant/build/test/revert cycle holds it.

    tools/plant_bugs.py                          # every tests/audit/*.patch
    tools/plant_bugs.py tests/audit/cost_*.patch --work /tmp/audit
    tools/plant_bugs.py --dry-run                # check that each applies; print the commands

Not part of `make test` (docs/testing.md, "Planting bugs"). Exit status: 0
when every patch was caught, 1 when one was missed or could not be checked,
2 on bad usage.
"""

import argparse
import fcntl
import glob
import os
import re
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_patch(path):
    """\\returns (description, build targets, test commands) from the patch's header."""
    description, targets, tests = [], [], []
    with open(path) as f:
        for line in f:
            if line.startswith(("diff --git ", "--- ", "Index: ")):
                break
            if line.startswith("Build:"):
                targets += line[len("Build:"):].split()
            elif line.startswith("Test:"):
                tests.append(line[len("Test:"):].strip())
            elif line.startswith("Planted bug:"):
                description.append(line[len("Planted bug:"):].strip())
            elif description and line.strip() and not targets and not tests:
                description.append(line.strip())
    return " ".join(description), targets, tests


def run(cmd, cwd, timeout, env=None, log=None):
    """Runs a shell command; \\returns (exit status, seconds). 124: timed out."""
    start = time.time()
    try:
        r = subprocess.run(cmd, shell=True, cwd=cwd, env=env, timeout=timeout,
                           stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT)
        return r.returncode, time.time() - start
    except subprocess.TimeoutExpired:
        return 124, time.time() - start


@contextmanager
def held(lock_path):
    """Holds an exclusive flock on `lock_path` (nothing when None)."""
    if not lock_path:
        yield
        return
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prepare(args):
    """\\returns (checkout, build folder), making a worktree and a configured build where asked."""
    if args.checkout:
        checkout = os.path.abspath(args.checkout)
    else:
        checkout = os.path.join(args.work, "src")
        if not os.path.isdir(checkout):
            os.makedirs(args.work, exist_ok=True)
            subprocess.run(["git", "-C", SOURCE, "worktree", "add", "--detach", checkout, "HEAD"], check=True)
    build = os.path.abspath(args.build_dir) if args.build_dir else os.path.join(args.work, "build")
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        # The Python running this audit builds the package module (it has nanobind).
        subprocess.run(["cmake", "-S", checkout, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                        f"-DPython_EXECUTABLE={sys.executable}"], check=True)
    if checkout == SOURCE and os.path.realpath(build) == os.path.realpath(os.path.join(SOURCE, "build")) \
            and not args.lock:
        sys.exit("plant_bugs.py: the shared checkout and build need --lock (the build lock), "
                 "or nobody else may build meanwhile")
    return checkout, build


def substitute(cmd, build, python, checkout):
    return cmd.replace("{build}", shlex.quote(build)).replace("{python}", shlex.quote(python)) \
              .replace("{source}", shlex.quote(checkout))


def audit_one(patch, args, checkout, build, python, log):
    """Plants `patch`; \\returns (verdict, [(test, outcome)])."""
    _, targets, tests = parse_patch(patch)
    if not tests:
        return "no Test line", []
    env = dict(os.environ, PCC_SOURCE_DIR=checkout)
    cmds = [substitute(t, build, python, checkout) for t in tests]
    build_cmd = f"cmake --build {shlex.quote(build)} -j{args.jobs}" + \
                (" --target " + " ".join(targets) if targets else "")
    outcomes = []
    with held(args.lock):
        if not args.no_baseline:
            rc, _ = run(build_cmd, checkout, args.build_timeout, env, log)
            if rc != 0:
                return "baseline build failed", []
            failing = [t for t, c in zip(tests, cmds) if run(c, checkout, args.timeout, env, log)[0] != 0]
            if failing:
                return "test fails without the bug", [(t, "fails unplanted") for t in failing]
        if subprocess.run(["git", "apply", os.path.abspath(patch)], cwd=checkout).returncode != 0:
            return "does not apply", []
        try:
            rc, _ = run(build_cmd, checkout, args.build_timeout, env, log)
            if rc != 0:
                return "planted build failed", []
            for t, c in zip(tests, cmds):
                rc, seconds = run(c, checkout, args.timeout, env, log)
                outcomes.append((t, ("caught" if rc != 0 else "passed") + f" (exit {rc}, {seconds:.0f} s)"))
        finally:
            if subprocess.run(["git", "apply", "-R", os.path.abspath(patch)], cwd=checkout).returncode != 0:
                sys.exit(f"plant_bugs.py: could not revert {patch} in {checkout}: revert it by hand")
            if not args.no_restore_build:
                run(build_cmd, checkout, args.build_timeout, env, log)
    caught = any(o.startswith("caught") for _, o in outcomes)
    return ("caught" if caught else "MISSED"), outcomes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("patches", nargs="*", help="patch files (default: tests/audit/*.patch)")
    p.add_argument("--work", default="/tmp/pcc-audit", help="folder of the worktree and build it makes")
    p.add_argument("--checkout", help="an existing checkout to plant in (default: a worktree of HEAD)")
    p.add_argument("--build-dir", help="an existing configured build folder of that checkout")
    p.add_argument("--lock", help="flock this file for each plant/build/test/revert cycle")
    p.add_argument("--jobs", type=int, default=2, help="build jobs (default 2)")
    p.add_argument("--timeout", type=int, default=900, help="seconds a test may take (default 900)")
    p.add_argument("--build-timeout", type=int, default=3600, help="seconds a build may take (default 3600)")
    p.add_argument("--no-baseline", action="store_true", help="skip running the tests unplanted first")
    p.add_argument("--no-restore-build", action="store_true", help="leave the build of the last plant")
    p.add_argument("--log", help="append build and test output here (default: discarded)")
    p.add_argument("--dry-run", action="store_true",
                   help="check that every patch applies and names its tests; print the commands")
    args = p.parse_args()
    patches = args.patches or sorted(glob.glob(os.path.join(SOURCE, "tests", "audit", "*.patch")))
    if not patches:
        p.error("no patch files")
    for patch in patches:
        if not os.path.isfile(patch):
            p.error(f"{patch}: no such file")

    if args.dry_run:
        checkout = os.path.abspath(args.checkout) if args.checkout else SOURCE
        build = os.path.abspath(args.build_dir) if args.build_dir else os.path.join(checkout, "build")
        python = os.path.join(build, "venv", "bin", "python")
        bad = 0
        for patch in patches:
            description, targets, tests = parse_patch(patch)
            ok = subprocess.run(["git", "apply", "--check", os.path.abspath(patch)], cwd=checkout,
                                capture_output=True).returncode == 0
            bad += not ok or not tests
            print(f"{os.path.basename(patch)}: {'applies' if ok else 'DOES NOT APPLY'}; {description}")
            print(f"  build: {' '.join(targets) or '(everything)'}")
            for t in tests:
                print(f"  test:  {substitute(t, build, python, checkout)}")
            if not tests:
                print("  NO Test line")
        return 1 if bad else 0

    checkout, build = prepare(args)
    python = os.path.join(build, "venv", "bin", "python")
    if not os.path.exists(python):
        python = sys.executable
    log = open(args.log, "a") if args.log else None
    rows = []
    for patch in patches:
        name = os.path.basename(patch)
        print(f"{name}: planting ...", flush=True)
        verdict, outcomes = audit_one(patch, args, checkout, build, python, log)
        rows.append((name, verdict, outcomes))
        print(f"{name}: {verdict}", flush=True)
    width = max(len(n) for n, _, _ in rows)
    print("\npatch".ljust(width + 1) + "  verdict    tests")
    for name, verdict, outcomes in rows:
        first = True
        for test, outcome in outcomes or [("", "")]:
            test = re.sub(r"\s+", " ", test)
            print(f"{name if first else '':{width}s}  {verdict if first else '':10s} {outcome:24s} {test}")
            first = False
    caught = sum(v == "caught" for _, v, _ in rows)
    print(f"\n{caught} of {len(rows)} planted bugs caught")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
