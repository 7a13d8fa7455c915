#!/usr/bin/env python3
"""--precision fp16 and bf16 (docs/precision.md) on every committed export.

Each export of models/exported/ (and each decoder of models/exported/decoders/,
as a generation plan) is compiled at fp16 and at bf16, at --gpus 1 and at
--strategy tp=2, and run on CPU ranks:
  - the compile measures the error against float32 itself; every output's
    cosine similarity must reach the bound of the model's family and
    precision (BOUNDS, justified in docs/precision.md#bounds), class scores
    and logits must keep their top-1 answer on 90% of the rows or more, and
    the weights must be about half their float32 bytes;
  - `pcc-run --check` (or `--generate --check` for a decoder) passes against
    the float32 reference at the precision's tolerance, and says which;
  - the report's figures agree with an independent computation: the test
    gives the compile the export's committed inputs as its calibration set,
    runs the plan on those inputs, and computes the cosine and max abs error
    of its outputs against torch's committed float32 outputs itself.
A model built to overflow float16 (a LayerNorm over values above 65504) stays
finite under the default rules, and without them (--no-precision-rules) it
does not, which --max-error catches with one line naming the output.
"""

import glob
import json
import os
import re
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcc_e2e as e2e  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

EXPORTED_DIR = os.path.join(e2e.MODELS_DIR, "exported")
DECODERS_DIR = os.path.join(EXPORTED_DIR, "decoders")

# The lowest cosine similarity to float32 an output may have, by family and
# precision (docs/precision.md#bounds says why these).
FAMILY = {"bert": "transformer", "gpt2": "transformer", "llama": "transformer", "t5_encoder": "transformer",
          "vit": "transformer", "qwen2": "transformer", "resnet": "cnn", "mobilenet_v2": "cnn",
          "inception_v3": "cnn"}
BOUNDS = {("transformer", "fp16"): 0.9999, ("transformer", "bf16"): 0.999,
          ("cnn", "fp16"): 0.9999, ("cnn", "bf16"): 0.999}
TOP1_BOUND = 0.9
STRATEGIES = [["--gpus", "1"], ["--strategy", "tp=2"]]


def sorted_pbs(folder, kind):
    return sorted(glob.glob(os.path.join(folder, f"{kind}_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))


def report_json(suite, tools, case, bundle):
    r = tools.run("pcc-report", [bundle, "--format", "json"])
    if not suite.check(f"{case}: pcc-report --format json", r.returncode == 0, r.describe(1500)):
        return None
    return json.loads(r.stdout)


def check_report(suite, case, precision, family, rep, top1=False):
    """Checks the compile's own error report against the family's bounds."""
    p = rep.get("precision")
    if not suite.check(f"{case}: report.json has a measured precision section",
                       p is not None and p["target"] == precision and p["measured"] == "measured",
                       f"  {json.dumps(p)[:800]}"):
        return None
    bound = BOUNDS[(family, precision)]
    low = [(o["name"], o["cosine"]) for o in p["outputs"] if o["cosine"] is None or o["cosine"] < bound]
    suite.check(f"{case}: every output's cosine >= {bound}", not low and p["outputs"], f"  below: {low}")
    suite.check(f"{case}: every output finite", all(o["finite"] for o in p["outputs"]), f"  {p['outputs']}")
    if top1:
        top = [(o["name"], o["top1"]) for o in p["outputs"] if "top1" in o and o["top1"] < TOP1_BOUND]
        suite.check(f"{case}: logits keep their top-1 on >= {TOP1_BOUND:.0%} of rows", not top, f"  {top}")
    ratio = p["weight_bytes_after"] / p["weight_bytes_before"]
    suite.check(f"{case}: weights smaller than in float32", ratio < 0.9,
                f"  {p['weight_bytes_before']} -> {p['weight_bytes_after']} bytes")
    print(f"  {case}: weights {ratio:.2f} of float32's, {len(p['kept'])} nodes kept in float32", flush=True)
    return p


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == 0 and nb == 0 else float(a @ b / (na * nb)) if na and nb else 0.0


def agree(reported, own, scale):
    """Whether two measurements of one error agree: within a factor of 4, or
    both below a millionth of the output's scale (the plan's kernels round at
    other points than the reference evaluator, so the figures are close, not
    equal)."""
    floor = 1e-6 * scale
    if reported <= floor and own <= floor:
        return True
    return own <= 4 * max(reported, floor) and reported <= 4 * max(own, floor)


def export_case(suite, tools, model, data, precision, strategy):
    key = os.path.basename(model)[:-len(".onnx")]
    case = f"{key} --precision {precision} {' '.join(strategy)}"
    family = FAMILY[key.split(".")[0]]
    work = suite.tempdir(key.replace(".", "-"))
    try:
        # The export's committed inputs are the calibration set, so the
        # report's error and the test's own are on the same inputs.
        m = e2e.onnx.load(model, load_external_data=False)
        names = [vi.name for vi in e2e.graph_inputs(m)]
        inputs = [e2e.read_tensor(p) for p in sorted_pbs(data, "input")]
        calib = os.path.join(work, "calibration")
        os.makedirs(calib)
        np.savez(os.path.join(calib, "set0.npz"), **dict(zip(names, inputs)))
        bundle = os.path.join(work, "plan.pcc")
        batch = ["--batch", str(inputs[0].shape[0])] if any(
            not d.HasField("dim_value") for vi in e2e.graph_inputs(m) for d in vi.type.tensor_type.shape.dim) else []
        r = tools.run("pcc", [model, "--precision", precision, "--calibration-inputs", calib, *strategy, *batch,
                              "-o", bundle])
        if not suite.check(f"{case}: compiles", r.returncode == 0, r.describe(2000)):
            return
        suite.check(f"{case}: one precision line on stderr",
                    re.search(rf"pcc: precision {precision}: .*cosine", r.stderr) is not None, r.describe(1500))
        rep = report_json(suite, tools, case, bundle)
        p = rep and check_report(suite, case, precision, family, rep)
        r = tools.run("pcc-run", [bundle, "--check"], timeout=600)
        suite.check(f"{case}: pcc-run --check passes at the precision's tolerance",
                    r.returncode == 0 and f"a {precision} plan" in r.stdout, r.describe(1500))
        if not p:
            return
        outs = os.path.join(work, "outputs")
        r = tools.run("pcc-run", [bundle, "--inputs", data, "--outputs", outs], timeout=600)
        if not suite.check(f"{case}: runs on the committed inputs", r.returncode == 0, r.describe(1500)):
            return
        for k, want_path in enumerate(sorted_pbs(data, "output")):
            want = e2e.read_tensor(want_path)
            got = e2e.read_tensor(os.path.join(outs, f"output_{k}.pb"))
            own_cos = cosine(got, want)
            own_abs = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            scale = float(np.max(np.abs(want)))
            rep_out = p["outputs"][k]
            ok = (abs(own_cos - rep_out["cosine"]) <= max(1e-4, 4 * (1 - rep_out["cosine"]))
                  and agree(rep_out["max_abs"], own_abs, scale))
            suite.check(f"{case}: output {k}'s reported error agrees with the test's own", ok,
                        f"  reported cosine {rep_out['cosine']:.7f}, max abs {rep_out['max_abs']:.3g}; "
                        f"the test's (the plan against torch's float32): cosine {own_cos:.7f}, max abs {own_abs:.3g}")
            if "top1" in rep_out:
                # Rows whose two best scores lie further apart than the error
                # must keep their answer; closer ones are ties the rounding may break.
                w2 = want.reshape(-1, want.shape[-1]).astype(np.float64)
                g2 = got.reshape(-1, got.shape[-1]).astype(np.float64)
                top2 = np.sort(w2, axis=1)[:, -2:]
                clear = (top2[:, 1] - top2[:, 0]) > 2 * own_abs
                same = np.argmax(w2, axis=1) == np.argmax(g2, axis=1)
                suite.check(f"{case}: output {k} keeps the top-1 of every row without a near tie",
                            bool(np.all(same[clear])),
                            f"  {int(np.sum(clear & ~same))} of {int(np.sum(clear))} clear rows changed")
                ties = int(np.sum(~clear))
                suite.check(f"{case}: output {k}'s reported top-1 agreement is the test's, near ties aside",
                            abs(rep_out["top1"] - float(np.mean(same))) * len(same) <= ties + 1e-9,
                            f"  reported {rep_out['top1']}, the test's {float(np.mean(same))}, {ties} near ties")
            print(f"  {case}: output {k}: reported cosine {rep_out['cosine']:.7f} max abs {rep_out['max_abs']:.3g}; "
                  f"own cosine {own_cos:.7f} max abs {own_abs:.3g}", flush=True)
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def generate_check(suite, tools, name, bundle, marker):
    """`pcc-run --generate 8 --check` on a fixed prompt passes, its output naming `marker`."""
    r = tools.run("pcc-run", [bundle, "--generate", "8", "--prompt-ids", "5,9,2,7", "--check"], timeout=600)
    suite.check(name, r.returncode == 0 and marker in r.stdout, r.describe(1500))


def decoder_case(suite, tools, model, precision, strategy):
    key = os.path.basename(model)[:-len(".onnx")]
    case = f"decoder {key} --precision {precision} {' '.join(strategy)}"
    family = FAMILY[key.split(".")[0]]
    work = suite.tempdir(key.replace(".", "-"))
    try:
        bundle = os.path.join(work, "plan.pcc")
        r = tools.run("pcc", [model, "--precision", precision, "--max-context", "64", *strategy, "-o", bundle])
        if not suite.check(f"{case}: compiles", r.returncode == 0, r.describe(2000)):
            return
        rep = report_json(suite, tools, case, bundle)
        p = rep and check_report(suite, case, precision, family, rep, top1=True)
        if p:
            suite.check(f"{case}: the KV cache is {precision}", p["kv_cache_dtype"] == precision and all(
                s["type"].startswith({"fp16": "f16", "bf16": "bf16"}[precision] + "[")
                for s in rep["generation"]["states"]), f"  {p['kv_cache_dtype']}, {rep['generation']['states'][:2]}")
        generate_check(suite, tools, f"{case}: pcc-run --generate --check passes at the precision's tolerance",
                       bundle, "of the largest |logit|")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def decoder_quant_case(suite, tools, model):
    """A decoder's generation plan with int8 weights, its prefill programs
    sharing them, at one device and at tp=2."""
    key = os.path.basename(model)[:-len(".onnx")]
    case = f"decoder {key} --quantize int8"
    work = suite.tempdir(key.replace(".", "-"))
    try:
        for strategy in (["--gpus", "1"], ["--strategy", "tp=2"]):
            bundle = os.path.join(work, f"{strategy[-1]}.pcc")
            r = tools.run("pcc", [model, "--quantize", "int8", "--max-context", "64", *strategy, "-o", bundle])
            if not suite.check(f"{case} {' '.join(strategy)}: compiles", r.returncode == 0, r.describe(2000)):
                continue
            rep = report_json(suite, tools, case, bundle)
            if rep:
                p = rep["precision"]
                suite.check(f"{case} {' '.join(strategy)}: logits within the int8 bound",
                            all(o["cosine"] is not None and o["cosine"] >= QUANT_BOUNDS["int8"] for o in p["outputs"]),
                            f"  {p['outputs']}")
                suite.check(f"{case} {' '.join(strategy)}: the prefill programs share the quantized weights",
                            rep["generation"]["prefill"]["extra_weight_bytes"] < p["weight_bytes_after"] / 10,
                            f"  extra {rep['generation']['prefill']['extra_weight_bytes']} B")
            generate_check(suite, tools, f"{case} {' '.join(strategy)}: pcc-run --generate --check passes", bundle,
                           "int8")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def overflow_model(path):
    """x[2,8] -> MatMul by +-30000 (values to 240000, beyond float16's 65504)
    -> LayerNormalization -> Relu -> MatMul -> Relu -> MatMul -> y[2,4]."""
    rng = np.random.default_rng(7)
    signs = np.where(rng.random((8, 16)) < 0.5, -1.0, 1.0).astype(np.float32)
    signs[:, 0] = 1  # one column sums to 8 * 30000 = 240000 on an all-ones row
    w1 = 30000 * signs
    inits = [numpy_helper.from_array(w1, "w1"),
             numpy_helper.from_array(np.ones(16, np.float32), "ln_scale"),
             numpy_helper.from_array(np.zeros(16, np.float32), "ln_bias"),
             numpy_helper.from_array(rng.uniform(-1, 1, (16, 16)).astype(np.float32), "w_mid"),
             numpy_helper.from_array(rng.uniform(-1, 1, (16, 4)).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="big"),
             helper.make_node("LayerNormalization", ["h", "ln_scale", "ln_bias"], ["n"], name="norm", axis=-1),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w_mid"], ["m"], name="mid"),
             helper.make_node("Relu", ["m"], ["r2"], name="relu2"),
             helper.make_node("MatMul", ["r2", "w2"], ["y"], name="head")]
    graph = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # onnxruntime's reference reads IR versions up to 11
    e2e.onnx.save(model, path)


def overflow_case(suite, tools):
    case = "float16 overflow"
    work = suite.tempdir("overflow")
    try:
        model = os.path.join(work, "overflow.onnx")
        overflow_model(model)
        calib = os.path.join(work, "calibration")
        os.makedirs(calib)
        x = np.ones((2, 8), np.float32)
        x[1] *= 0.75
        np.savez(os.path.join(calib, "set0.npz"), x=x)
        inputs = os.path.join(work, "inputs")
        os.makedirs(inputs)
        e2e.write_tensor(os.path.join(inputs, "input_0.pb"), x, "x")
        want = e2e.onnxruntime_outputs(model, [x])[0]
        bundle = os.path.join(work, "rules.pcc")
        r = tools.run("pcc", [model, "--precision", "fp16", "--calibration-inputs", calib, "--max-error", "0.999",
                              "-o", bundle])
        if suite.check(f"{case}: the default rules compile it within --max-error 0.999", r.returncode == 0,
                       r.describe(1500)):
            rep = report_json(suite, tools, case, bundle)
            p = rep and rep["precision"]
            kept = {k["node"]: k["reason"] for k in p["kept"]} if p else {}
            suite.check(f"{case}: the MatMul writing values beyond float16 is kept in float32 by its range",
                        kept.get("big", "").startswith("range:"), f"  kept: {kept}")
            suite.check(f"{case}: the LayerNormalization is kept in float32 by rule",
                        kept.get("norm") == "rule: LayerNormalization in float32", f"  kept: {kept}")
            suite.check(f"{case}: the rest is float16", p and p["nodes_converted"] >= 2 and p["overflowing_constants"] == [],
                        f"  {p}")
            out = os.path.join(work, "out")
            r = tools.run("pcc-run", [bundle, "--inputs", inputs, "--outputs", out, "--check"])
            if suite.check(f"{case}: the plan runs and passes --check", r.returncode == 0, r.describe(1500)):
                got = e2e.read_tensor(os.path.join(out, "output_0.pb"))
                suite.check(f"{case}: its output is finite and within the fp16 bound",
                            np.all(np.isfinite(got)) and cosine(got, want) >= BOUNDS[("cnn", "fp16")],
                            f"  got {got}, want {want}")
        e2e.expect_one_line_error(
            suite, tools, f"{case}: --no-precision-rules overflows and --max-error",
            "pcc", [model, "--precision", "fp16", "--no-precision-rules", "--calibration-inputs", calib,
                    "--max-error", "0.999", "-o", os.path.join(work, "norules.pcc")],
            [r"overflow\.onnx", r"output 'y'", r"cosine similarity", r"--max-error 0\.999", r"MatMul"])
        # Without --max-error it compiles, and the report says the output is not finite.
        bundle = os.path.join(work, "norules.pcc")
        r = tools.run("pcc", [model, "--precision", "fp16", "--no-precision-rules", "--calibration-inputs", calib,
                              "-o", bundle])
        if suite.check(f"{case}: without --max-error it compiles", r.returncode == 0, r.describe(1500)):
            rep = report_json(suite, tools, case, bundle)
            outs = rep["precision"]["outputs"] if rep else []
            # The infinities become NaN in the LayerNormalization, which the
            # Relu after it turns into zeros: the output is finite and wrong.
            suite.check(f"{case}: the report shows the output lost",
                        outs and (outs[0]["cosine"] is None or outs[0]["cosine"] < 0.5), f"  {outs}")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


# The lowest cosine similarity to float32 under weight-only quantization
# (docs/precision.md#bounds): int8's grid step is 1/127 of a column's largest
# weight, int4's 1/7 of a block's.
QUANT_BOUNDS = {"int8": 0.999, "int4": 0.98}


def run_outputs(suite, tools, case, bundle, data, out):
    r = tools.run("pcc-run", [bundle, "--inputs", data, "--outputs", out], timeout=600)
    if not suite.check(f"{case}: runs on the committed inputs", r.returncode == 0, r.describe(1500)):
        return None
    return [e2e.read_tensor(p) for p in sorted_pbs(out, "output")]


def quant_case(suite, tools, model, data, quant):
    """--quantize on an export: the error reported within its bound, --check
    at the tolerance the report implies, and tensor parallelism exact
    against the unsplit quantized plan."""
    key = os.path.basename(model)[:-len(".onnx")]
    case = f"{key} --quantize {quant}"
    work = suite.tempdir(key.replace(".", "-"))
    try:
        m = e2e.onnx.load(model, load_external_data=False)
        inputs = [e2e.read_tensor(p) for p in sorted_pbs(data, "input")]
        batch = ["--batch", str(inputs[0].shape[0])] if any(
            not d.HasField("dim_value") for vi in e2e.graph_inputs(m) for d in vi.type.tensor_type.shape.dim) else []
        outs = {}
        for strategy in (["--gpus", "1"], ["--strategy", "tp=2"]):
            bundle = os.path.join(work, f"{strategy[-1]}.pcc")
            r = tools.run("pcc", [model, "--quantize", quant, *strategy, *batch, "-o", bundle])
            if not suite.check(f"{case} {' '.join(strategy)}: compiles", r.returncode == 0, r.describe(2000)):
                return
            rep = report_json(suite, tools, case, bundle)
            p = rep and rep.get("precision")
            ok = p and p["quantize"].startswith(quant) and p["quantized_nodes"] >= 1 and p["measured"] == "measured"
            if suite.check(f"{case} {' '.join(strategy)}: the report names the quantization", ok, f"  {p}"):
                low = [(o["name"], o["cosine"]) for o in p["outputs"]
                       if o["cosine"] is None or o["cosine"] < QUANT_BOUNDS[quant]]
                suite.check(f"{case}: every output's cosine >= {QUANT_BOUNDS[quant]}", not low, f"  below: {low}")
                suite.check(f"{case}: the weights shrink", p["weight_bytes_after"] < p["weight_bytes_before"], f"  {p}")
                print(f"  {case}: {p['quantized_nodes']} nodes, weights {p['weight_bytes_before']} -> "
                      f"{p['weight_bytes_after']} B, worst cosine {min(o['cosine'] for o in p['outputs']):.6f}",
                      flush=True)
            r = tools.run("pcc-run", [bundle, "--check"], timeout=600)
            suite.check(f"{case} {' '.join(strategy)}: pcc-run --check passes at the report's tolerance",
                        r.returncode == 0 and f"{quant}," in r.stdout, r.describe(1500))
            outs[strategy[-1]] = run_outputs(suite, tools, case, bundle, data, os.path.join(work, strategy[-1]))
        if outs.get("1") is not None and outs.get("tp=2") is not None:
            for k, (a, b) in enumerate(zip(outs["tp=2"], outs["1"])):
                diff = e2e.compare(a, b, 1e-4, e2e.scaled_atol(b, 1e-5))
                suite.check(f"{case}: tp=2 output {k} equals the unsplit quantized plan's", not diff, f"  {diff}")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def matmulnbits_case(suite, tools, model, data, bits, symmetric):
    """An export quantized by onnxruntime's own MatMulNBitsQuantizer: pcc
    imports its MatMulNBits and computes what onnxruntime's kernel does."""
    from onnxruntime.quantization import matmul_nbits_quantizer as mq

    key = os.path.basename(model)[:-len(".onnx")]
    case = f"{key} MatMulNBits {bits} bits {'symmetric' if symmetric else 'with zero points'}"
    work = suite.tempdir(key.replace(".", "-"))
    try:
        q = mq.MatMulNBitsQuantizer(e2e.onnx.load(model),
                                    algo_config=mq.DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=symmetric,
                                                                                bits=bits))
        q.process()
        qm = q.model.model
        suite.check(f"{case}: onnxruntime wrote MatMulNBits",
                    any(n.op_type == "MatMulNBits" for n in qm.graph.node), "  no MatMulNBits node")
        path = os.path.join(work, "q.onnx")
        e2e.onnx.save(qm, path)
        inputs = [e2e.read_tensor(p) for p in sorted_pbs(data, "input")]
        want = e2e.onnxruntime_outputs(path, inputs)
        batch = ["--batch", str(inputs[0].shape[0])]
        for strategy in (["--gpus", "1"], ["--strategy", "tp=2"]):
            bundle = os.path.join(work, f"{strategy[-1]}.pcc")
            r = tools.run("pcc", [path, *strategy, *batch, "-o", bundle])
            if not suite.check(f"{case} {' '.join(strategy)}: compiles", r.returncode == 0, r.describe(2000)):
                continue
            got = run_outputs(suite, tools, case, bundle, data, os.path.join(work, strategy[-1]))
            for k, (g, w) in enumerate(zip(got or [], want)):
                diff = e2e.compare(g, w, 1e-3, e2e.scaled_atol(w, 1e-4))
                suite.check(f"{case} {' '.join(strategy)}: output {k} equals onnxruntime's", not diff, f"  {diff}")
    finally:
        if not suite.keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = e2e.parse_args(__doc__)
    suite = e2e.Suite("test_precision", args)
    tools = e2e.Tools(args.bin)
    if not e2e.require_tools(suite, tools):
        return suite.finish()
    exports = e2e.exporter_subset(sorted(glob.glob(os.path.join(EXPORTED_DIR, "*.onnx"))))
    decoders = e2e.exporter_subset(sorted(glob.glob(os.path.join(DECODERS_DIR, "*.onnx"))))
    suite.check("exports present", bool(exports) and bool(decoders), f"  in {EXPORTED_DIR}")
    for model in exports:
        for precision in ("fp16", "bf16"):
            for strategy in STRATEGIES:
                name = f"{os.path.basename(model)} {precision} {' '.join(strategy)}"
                suite.run_case(name, export_case, suite, tools, model, model[:-len(".onnx")], precision, strategy)
    for model in decoders:
        for precision in ("fp16", "bf16"):
            for strategy in STRATEGIES:
                name = f"decoder {os.path.basename(model)} {precision} {' '.join(strategy)}"
                suite.run_case(name, decoder_case, suite, tools, model, precision, strategy)
    suite.run_case("float16 overflow", overflow_case, suite, tools)
    ts = [m for m in exports if m.endswith(".ts.onnx")]
    for model in ts:
        for quant in ("int8", "int4"):
            suite.run_case(f"{os.path.basename(model)} {quant}", quant_case, suite, tools, model,
                           model[:-len(".onnx")], quant)
    llama = os.path.join(EXPORTED_DIR, "llama.ts.onnx")
    for bits, symmetric in ((4, True), (4, False), (8, True)):
        suite.run_case(f"llama.ts MatMulNBits {bits} {symmetric}", matmulnbits_case, suite, tools, llama,
                       llama[:-len(".onnx")], bits, symmetric)
    for model in [m for m in decoders if m.endswith(".ts.onnx")]:
        suite.run_case(f"decoder {os.path.basename(model)} int8", decoder_quant_case, suite, tools, model)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
