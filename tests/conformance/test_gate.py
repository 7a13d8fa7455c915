#!/usr/bin/env python3
"""The conformance gate catches what it is meant to: each check below feeds
run_conformance.gate() (and the status rules) a made-up run with one planted
problem, and expects exactly that problem reported; a clean run reports none."""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_conformance as rc  # noqa: E402

SUITE = rc.Suite("pip/node", Path("/nonexistent"), 0.9)
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"PASS {name}")
    else:
        failed += 1
        print(f"FAIL {name}\n  {detail}")


def result(name, status, reason="", split=False):
    return rc.Result("pip/node", name, "Op", status, reason, split=split)


def gate(results, expected, known=None, found=None, gpus=1, full=True):
    found = {r.id for r in results} if found is None else found
    return rc.gate([SUITE], found, results, known or {}, expected, gpus, full)


def main():
    base = [result("test_a", "passed"), result("test_b", "passed-frozen"), result("test_c", "unsupported")]
    expected = {r.id: rc.expected_entry(r, 1) for r in base}
    problems = gate(base, expected)
    check("a run equal to the expected list passes", not problems, problems)

    moved = [result("test_a", "unsupported", "unsupported op Foo")] + base[1:]
    problems = gate(moved, expected)
    check("passed -> unsupported is a regression",
          len(problems) == 1 and problems[0].startswith("regression: pip/node/test_a"), problems)

    folded = [base[0], result("test_b", "folded"), base[2]]
    problems = gate(folded, expected)
    check("passed-frozen -> folded is a regression",
          len(problems) == 1 and problems[0].startswith("regression: pip/node/test_b"), problems)

    better = base[:2] + [result("test_c", "passed")]
    problems = gate(better, expected)
    check("an improvement must be recorded",
          len(problems) == 1 and problems[0].startswith("changed: pip/node/test_c"), problems)

    split = [result("test_a", "passed", split=True)]
    problems = gate([result("test_a", "passed", split=False)], {split[0].id: rc.expected_entry(split[0], 2)}, gpus=2)
    check("split -> replicated is a regression", len(problems) == 1 and problems[0].startswith("regression"), problems)

    problems = gate(base[:2], expected, found={r.id for r in base[:2]})
    check("a listed case that no longer runs is stale",
          len(problems) == 1 and problems[0].startswith("stale entry: pip/node/test_c"), problems)

    extra = base + [result("test_d", "passed")]
    problems = gate(extra, expected)
    check("a case missing from the list is reported",
          len(problems) == 1 and problems[0].startswith("not in the expected list: pip/node/test_d"), problems)

    fail = [result("test_e", "failed", "MISMATCH: element 3: got 1, want 2")]
    exp_fail = {fail[0].id: "failed"}
    known = {fail[0].id: rc.KnownFailure("element 3: got 1, want 2", "the data is wrong")}
    check("a known failure with its key phrase passes", not gate(fail, exp_fail, known), gate(fail, exp_fail, known))
    other = [result("test_e", "failed", "pcc-run: error: segmentation fault")]
    problems = gate(other, exp_fail, known)
    check("a known failure failing for another reason is reported",
          len(problems) == 1 and problems[0].startswith("failed for another reason"), problems)
    problems = gate(fail, exp_fail, {})
    check("an unlisted failure is reported", len(problems) == 1 and problems[0].startswith("new failure"), problems)
    fixed = [result("test_e", "passed")]
    problems = gate(fixed, {fixed[0].id: "passed"}, known)
    check("a known failure that passes is stale",
          len(problems) == 1 and problems[0].startswith("stale known failure"), problems)

    problems = gate([], {}, found=set())
    check("a suite with no case fails", any(p.startswith("no cases: pip/node") for p in problems), problems)

    facts = rc.PlanFacts(runtime_ops=3, split=False)
    check("nothing frozen: passed", rc.passing_status("", facts) == "passed")
    check("some inputs frozen, work left: passed-frozen", rc.passing_status("some", facts) == "passed-frozen")
    check("every input frozen: folded", rc.passing_status("all", facts) == "folded")
    check("some frozen, nothing computed: folded", rc.passing_status("some", rc.PlanFacts(0, False)) == "folded")

    check("pcc's 'input N (NAME) must be a constant' names the input",
          rc.named_input("node 'Pad_0' (Pad, opset 24): input 1 ('pads') must be a constant [..]") == "pads")
    check("pcc's 'unless input NAME is known' names the input",
          rc.named_input("unsupported with pcc's static shapes unless input 'X' is known: it must be") == "X")

    with tempfile.TemporaryDirectory() as d:
        f = Path(d, "known.txt")
        f.write_text("pip/node/test_e: an old-style line without a key phrase\n")
        try:
            rc.read_known_failures(f)
            check("a known-failures line without a key phrase is refused", False, "no error")
        except ValueError:
            check("a known-failures line without a key phrase is refused", True)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
