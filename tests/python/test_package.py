"""The Python package (docs/python.md): pcc.compile, pcc.load, pcc.Plan and
pcc.Session against the command-line tools and onnxruntime.

For every model in models/ and every committed export, at one device and
split over four: pcc.compile + Session.run equal pcc-run's outputs on the
same plan and arrays bit for bit (one kernel thread per rank in both), and
onnxruntime's within tolerance; Plan.report equals the bundle's report.json.
Bad feeds, options and models raise the pcc.Error subclass with the tools'
message, and the interpreter lives on. A generation plan generates the tokens
transformers' own generate recorded."""

import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest

from conftest import SOURCE_DIR, tool

import pcc

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e"))
import pcc_e2e as e2e  # noqa: E402

MODELS_DIR = os.path.join(SOURCE_DIR, "models")
EXPORTED_DIR = os.path.join(MODELS_DIR, "exported")
RTOL, ATOL = 1e-3, 1e-4


def _manifest_batches():
    with open(os.path.join(EXPORTED_DIR, "manifest.json")) as f:
        return {f"{e['name']}.{e['exporter']}": e.get("batch") for e in json.load(f)["exports"]}


def _cases():
    """(id, model path, feeds) for models/*.onnx (seeded arrays at batch 4)
    and every export (its committed input_K.pb)."""
    cases = []
    for path in sorted(glob.glob(os.path.join(MODELS_DIR, "*.onnx"))):
        cases.append((os.path.basename(path)[:-5], path, None))
    for path in sorted(glob.glob(os.path.join(EXPORTED_DIR, "*.onnx"))):
        cases.append((os.path.basename(path)[:-5], path, path[:-5]))
    return cases


def _feeds(path, data_dir):
    """\\returns (feeds by name, batch) for a case."""
    model = onnx.load(path, load_external_data=False)
    inputs = e2e.graph_inputs(model)
    if data_dir is None:
        arrays = e2e.make_inputs(model, 4, seed=3)
    else:
        files = sorted(glob.glob(os.path.join(data_dir, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
        arrays = [e2e.read_tensor(p) for p in files]
    batch = arrays[0].shape[0] if arrays and arrays[0].ndim else 1
    return {vi.name: a for vi, a in zip(inputs, arrays)}, batch


def _symbolic(path):
    model = onnx.load(path, load_external_data=False)
    return any(not d.HasField("dim_value") for vi in e2e.graph_inputs(model) for d in vi.type.tensor_type.shape.dim)


# Models that compute in float16 inside: CPU ranks compute them in float32,
# so they differ from onnxruntime's float16 arithmetic by its rounding (rtol
# and atol: about 4 and 2 units in the last place near 1).
HALF = {"block_f16": (3.9e-3, 2e-3)}


def _tolerance(name, expected):
    return HALF.get(name, (RTOL, e2e.scaled_atol(expected, ATOL)))


# One device, and two with the weights split (tensor parallelism forced: the
# search alone keeps some of these small models on one device).
@pytest.mark.parametrize("gpus", [1, 2])
@pytest.mark.parametrize("name,path,data_dir", _cases(), ids=[c[0] for c in _cases()])
def test_compile_and_run_match_pcc_run_and_onnxruntime(tmp_path, name, path, data_dir, gpus):
    feeds, batch = _feeds(path, data_dir)
    kwargs = {"batch": batch} if _symbolic(path) else {}
    if gpus > 1:
        kwargs["strategy"] = f"tp={gpus}"
    plan = pcc.compile(path, gpus=gpus, quiet=True, **kwargs)
    assert plan.ranks == gpus
    assert [i.name for i in plan.inputs] == list(feeds)
    with pcc.Session(plan, threads=1) as sess:
        got = sess.run(None, feeds)
        again = sess.run_dict(feeds)  # the ranks stay ready: a second run gives the same
    assert len(got) == len(plan.outputs)
    for info, a in zip(plan.outputs, got):
        assert list(a.shape) == info.shape and a.dtype == np.dtype(info.type)
        np.testing.assert_array_equal(again[info.name], a)

    # pcc-run on the same plan and arrays (an .npz keyed by input name).
    np.savez(tmp_path / "feeds.npz", **feeds)
    r = subprocess.run([tool("pcc-run"), plan.path, "--inputs", str(tmp_path / "feeds.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--threads", "1"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as ran:
        for info, a in zip(plan.outputs, got):
            np.testing.assert_array_equal(a, ran[info.name], err_msg=f"{name}: {info.name} differs from pcc-run's")

    # onnxruntime on the same arrays.
    expected = e2e.onnxruntime_outputs(path, list(feeds.values()))
    for info, a, want in zip(plan.outputs, got, expected):
        rtol, atol = _tolerance(name, want)
        diff = e2e.compare(a, want, rtol, atol)
        assert not diff, f"{name} --gpus {gpus}: {info.name} differs from onnxruntime's: {diff}"

    # The report is report.json's content.
    with open(os.path.join(plan.path, "report.json")) as f:
        assert plan.report == json.load(f)
    assert plan.mesh == {"pp": 1, "dp": 1, "tp": gpus}


@pytest.fixture(scope="module")
def mlp_plan():
    return pcc.compile(os.path.join(MODELS_DIR, "mlp.onnx"), gpus=2, strategy={"tp": 2}, batch=4, quiet=True)


def _mlp_feeds(plan):
    (info,) = plan.inputs
    return {info.name: np.random.default_rng(0).standard_normal(info.shape).astype(np.float32)}


def test_plan_properties_save_load_and_html(tmp_path, mlp_plan):
    assert mlp_plan.mesh == {"pp": 1, "dp": 1, "tp": 2}
    assert mlp_plan.alternatives == mlp_plan.report["alternatives"]
    assert mlp_plan.generation is None
    assert "rank 1" in mlp_plan.report_text().lower()
    saved = tmp_path / "mlp.pcc"
    mlp_plan.save(saved)
    with pytest.raises(pcc.BadInputError, match="already exists"):
        mlp_plan.save(saved)
    loaded = pcc.load(saved)
    assert loaded.report == mlp_plan.report
    assert loaded.inputs == mlp_plan.inputs and loaded.outputs == mlp_plan.outputs
    feeds = _mlp_feeds(loaded)
    a = pcc.Session(loaded, threads=1).run(None, feeds)
    b = pcc.Session(str(saved), threads=1).run(None, feeds)  # a path is a plan too
    np.testing.assert_array_equal(a[0], b[0])
    ref = loaded.run_reference(feeds)
    np.testing.assert_allclose(a[0], ref[loaded.outputs[0].name], rtol=1e-4, atol=1e-5)
    loaded.to_html(tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "tp" in page


def test_output_names_pick_and_order(mlp_plan):
    feeds = _mlp_feeds(mlp_plan)
    sess = pcc.Session(mlp_plan)
    name = mlp_plan.outputs[0].name
    assert len(sess.get_inputs()) == 1 and sess.get_outputs()[0].name == name
    (y,) = sess.run([name], feeds)
    np.testing.assert_array_equal(y, sess.run(None, feeds)[0])
    with pytest.raises(pcc.BadInputError, match="'nope' is not an output"):
        sess.run(["nope"], feeds)


def test_inputs_are_not_copied_and_strided_ones_work(mlp_plan):
    feeds = _mlp_feeds(mlp_plan)
    (info,) = mlp_plan.inputs
    x = feeds[info.name]
    sess = pcc.Session(mlp_plan, threads=1)
    want = sess.run(None, feeds)[0]
    # A transposed view (not C-contiguous) is copied into order first.
    xt = np.ascontiguousarray(x.T).T
    assert not xt.flags.c_contiguous
    np.testing.assert_array_equal(sess.run(None, {info.name: xt})[0], want)
    # Outputs are the caller's: writing into one changes no later run.
    out = sess.run(None, feeds)[0]
    out[...] = 0
    np.testing.assert_array_equal(sess.run(None, feeds)[0], want)


class _DLPackOnly:
    """An array reachable only through the DLPack protocol (as a torch CPU tensor is)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_feeds(mlp_plan):
    feeds = _mlp_feeds(mlp_plan)
    sess = pcc.Session(mlp_plan, threads=1)
    want = sess.run(None, feeds)[0]
    (name,) = feeds
    np.testing.assert_array_equal(sess.run(None, {name: _DLPackOnly(feeds[name])})[0], want)


def test_bad_feeds_raise_bad_input_naming_the_input(mlp_plan):
    sess = pcc.Session(mlp_plan)
    (info,) = mlp_plan.inputs
    good = _mlp_feeds(mlp_plan)[info.name]
    shape = re.escape("[" + ",".join(map(str, info.shape)) + "]")
    with pytest.raises(pcc.BadInputError, match=rf"input '{info.name}': expected float32{shape}, got int64{shape}"):
        sess.run(None, {info.name: good.astype(np.int64)})
    with pytest.raises(pcc.BadInputError, match=rf"input '{info.name}': expected float32{shape}, got float32\[1,"):
        sess.run(None, {info.name: good[:1]})
    with pytest.raises(pcc.BadInputError, match=rf"input '{info.name}' is missing \(expected float32{shape}\)"):
        sess.run(None, {})
    with pytest.raises(pcc.BadInputError, match=r"'extra' is not an input of the plan"):
        sess.run(None, {info.name: good, "extra": good})
    with pytest.raises(ValueError):  # BadInputError is a ValueError too
        sess.run(None, {info.name: good.astype(np.float64)})
    # The session still runs after refusing them.
    assert sess.run(None, {info.name: good})[0].shape[0] == info.shape[0]


def _cli_error(args):
    r = subprocess.run([tool("pcc")] + args, capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("pcc: error: ")
    return lines[0][len("pcc: error: "):]


def test_bad_model_raises_the_tools_message_and_the_interpreter_lives(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07this is not a model")
    with pytest.raises(pcc.BadInputError) as e:
        pcc.compile(str(bad), quiet=True)
    assert str(e.value) == _cli_error([str(bad), "--quiet", "-o", str(tmp_path / "x.pcc")])
    assert e.value.exit_code == 2
    with pytest.raises(pcc.BadInputError):
        pcc.load(tmp_path)  # a folder with no plan.pb
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_option'"):
        pcc.compile(os.path.join(MODELS_DIR, "mlp.onnx"), no_such_option=3)
    # A bad option value: the message of the tool's flag.
    with pytest.raises(pcc.BadInputError) as e:
        pcc.compile(os.path.join(MODELS_DIR, "mlp.onnx"), max_context=1)
    assert "--max-context expects an integer from 2" in str(e.value)
    mlp = os.path.join(MODELS_DIR, "mlp.onnx")
    with pytest.raises(pcc.BadInputError) as e:
        pcc.compile(mlp, gpus=3, strategy="tp=2", batch=4, quiet=True)
    assert str(e.value) == _cli_error([mlp, "--gpus", "3", "--strategy", "tp=2", "--batch", "4", "-o",
                                       str(tmp_path / "y.pcc")])
    # Still alive: a good compile right after.
    assert pcc.compile(mlp, batch=2, quiet=True).ranks == 1


def test_model_proto_progress_and_every_option_a_keyword(tmp_path):
    model = onnx.load(os.path.join(MODELS_DIR, "mlp.onnx"))
    lines = []
    plan = pcc.compile(model, gpus=2, batch=4, no_fuse=True, progress=lines.append)
    assert plan.ranks == 2 and lines and all("\n" not in l for l in lines)
    # Every flag of `pcc --help` that shapes the plan is a keyword and in help(pcc.compile).
    r = subprocess.run([tool("pcc"), "--help"], capture_output=True, text=True)
    flags = {re.match(r"--[a-z0-9-]+", w).group(0) for w in r.stdout.split() if re.match(r"--[a-z]", w)}
    tool_only = {"--help", "--version", "--output", "--emit", "--progress"}
    keywords = set(pcc.options())
    for flag in sorted(flags - tool_only):
        key = flag[2:].replace("-", "_")
        assert key in keywords, f"{flag} has no keyword"
        assert f"    {key} (" in pcc.compile.__doc__ or key in ("gpus", "strategy", "batch", "shape", "freeze",
                                                                  "objective", "gpu", "cluster", "target")
    # A keyword really reaches its flag: --strategy as a dict, --shape as a tuple.
    plan = pcc.compile(os.path.join(MODELS_DIR, "mlp.onnx"), strategy={"dp": 2}, shapes={"x": (6, 64)},
                       output=str(tmp_path / "out.pcc"), quiet=True)
    assert plan.mesh == {"pp": 1, "dp": 2, "tp": 1} and plan.inputs[0].shape == [6, 64]
    assert plan.path == str(tmp_path / "out.pcc")


def test_precision_keywords_report_and_a_session_within_its_tolerance():
    # --precision and its options as keywords; the conversion's report in
    # Plan.report; a bf16 session within the precision's tolerance of float32.
    path = os.path.join(EXPORTED_DIR, "bert.ts.onnx")
    feeds, batch = _feeds(path, path[:-5])
    plan = pcc.compile(path, batch=batch, precision="bf16", keep_fp32="Add", max_error=0.999, quiet=True)
    p = plan.report["precision"]
    assert p["target"] == "bf16" and p["measured"] == "measured"
    assert any(k["reason"] == "--keep-fp32 Add" for k in p["kept"])
    assert all(o["cosine"] >= 0.999 for o in p["outputs"])
    (got,) = pcc.Session(plan).run(None, feeds)
    want = e2e.onnxruntime_outputs(path, list(feeds.values()))[0]
    assert got.dtype == np.float32  # the model's output type
    tol = 16 * 2.0 ** -8
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * float(np.abs(want).max()))
    with pytest.raises(pcc.BadInputError, match=r"--keep-fp32: no op named 'Frob'"):
        pcc.compile(path, batch=batch, precision="fp16", keep_fp32="Frob", quiet=True)


def test_profile_times_every_instruction(mlp_plan):
    rows = pcc.Session(mlp_plan).profile(_mlp_feeds(mlp_plan), iters=2)
    ranks = {r["rank"] for r in rows}
    assert ranks == {0, 1}
    ran = [r for r in rows if r["calls"]]
    assert ran and all(r["seconds"] >= 0 and r["calls"] == 2 for r in ran)
    assert any(r["op"] == "MatMul" for r in rows)


def _decoder_case(name, exporter):
    with open(os.path.join(EXPORTED_DIR, "decoders", "manifest.json")) as f:
        m = json.load(f)
    want = {r["prompt"]: r["tokens"] for r in m["models"][name]["exports"][exporter]["alone"]}
    return m["prompts"], m["max_new_tokens"], want


DECODERS = sorted(os.path.basename(p)[:-len(".onnx")]
                  for p in glob.glob(os.path.join(EXPORTED_DIR, "decoders", "*.onnx")))


@pytest.mark.parametrize("export", DECODERS)
def test_generate_equals_transformers(export):
    """Every committed decoder export as a generation plan split over two
    ranks: greedy tokens equal transformers' generate (recorded at export),
    every step's logits checked against the export's own decode step."""
    name, exporter = export.split(".")
    prompts, new_tokens, want = _decoder_case(name, exporter)
    plan = pcc.compile(os.path.join(EXPORTED_DIR, "decoders", export + ".onnx"), gpus=2, strategy="tp=2",
                       batch=2, quiet=True)
    g = plan.generation
    assert g and g["batch"] == 2 and g["max_context"] > new_tokens
    # prefill programs for the longest prompt length and for halves of it (at least 8 tokens)
    lengths = g["prefill_lengths"]
    assert lengths[-1] == g["prefill"] and lengths == sorted(lengths) and min(lengths) >= 8
    sess = pcc.Session(plan)
    res = sess.generate(prompts, new_tokens, stop_at_eos=False, check=True)
    assert res["tokens"] == [want[0], want[1]]
    assert res["checked_steps"] > 0 and res["decode_tokens"] > 0
    longest = max(len(p) for p in prompts)
    assert res["prefill_length"] == next(n for n in lengths if n >= longest)  # the shortest that holds them
    one = sess.generate(prompts[1], new_tokens, stop_at_eos=False)  # one prompt: a list of ids
    assert one["tokens"] == [want[1]]
    with pytest.raises(pcc.BadInputError):
        sess.generate([10 ** 9], 2)  # a token outside the vocabulary


CTRL_C = r"""
import os, signal, sys, threading, time
import numpy as np, pcc
plan = pcc.compile(sys.argv[1], gpus=2, strategy="tp=2", batch=2048, quiet=True)
rng = np.random.default_rng(0)
feeds = {i.name: rng.integers(0, 64, size=i.shape).astype(i.type) for i in plan.inputs}
sess = pcc.Session(plan, threads=1)
took = []
for _ in range(2):
    t0 = time.perf_counter()
    sess.run(None, feeds)
    took.append(time.perf_counter() - t0)
T = min(took)
threading.Timer(T / 4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.perf_counter()
try:
    sess.run(None, feeds)
    print("not interrupted")
except KeyboardInterrupt:
    print(f"interrupted after {time.perf_counter() - t0:.3f} s of a {T:.3f} s run")
try:
    sess.run(None, feeds)
    print("ran after the interrupt")
except pcc.Error as e:
    print(f"then: {type(e).__name__}: {e}")
print("alive")
"""


def test_ctrl_c_stops_a_run_and_the_interpreter_lives(tmp_path, bin_dir):
    """SIGINT a quarter into a run: KeyboardInterrupt well before the run
    would end (the ranks stop at their next instruction), the session is
    then closed with a message, and the interpreter goes on."""
    env = dict(os.environ, PYTHONPATH=os.path.join(bin_dir, "python"))
    r = subprocess.run([sys.executable, "-c", CTRL_C, os.path.join(MODELS_DIR, "gpt2_tiny.onnx")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = re.search(r"interrupted after ([0-9.]+) s of a ([0-9.]+) s run", r.stdout)
    assert m, r.stdout + r.stderr
    stopped, whole = float(m.group(1)), float(m.group(2))
    assert whole > 0.2, f"a run of {whole} s is too short to interrupt in the middle"
    assert stopped < 0.9 * whole, r.stdout
    # Later runs raise the kind of error that stopped it.
    assert "then: PeerError: the session stopped at an earlier error: rank" in r.stdout and "interrupted" in r.stdout
    assert r.stdout.rstrip().endswith("alive")


def test_importing_pcc_chooses_the_openmp_wait_policy_unless_the_environment_did():
    """import pcc sets GOMP_SPINCOUNT (a quiet machine) or OMP_WAIT_POLICY=passive
    (a busy one) before the OpenMP runtime loads, and leaves either alone when
    the environment set it (docs/runtime.md, Threads)."""
    script = "import os, pcc; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() in (["None", "30000"], ["passive", "None"]), out.stdout
    for name, value in (("OMP_WAIT_POLICY", "active"), ("GOMP_SPINCOUNT", "5")):
        out = subprocess.run([sys.executable, "-c", script], env=dict(env, **{name: value}), capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        want = ["active", "None"] if name == "OMP_WAIT_POLICY" else ["None", "5"]
        assert out.stdout.split() == want, out.stdout
