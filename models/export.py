#!/usr/bin/env python3
"""Exports real PyTorch architectures to ONNX with both of torch's exporters.

    python models/export.py --small [--out models/exported] [--only NAME,...]
    python models/export.py --full  [--cache build/parity-cache] [--only NAME,...]

Every model is built from its configuration with seeded random weights
(torchvision models with weights=None, transformers models from a Config), so
nothing is downloaded and running the script twice gives the same weights and
the same test data. Each architecture is exported twice:

  ts      the classic TorchScript exporter: torch.onnx.export(dynamo=False), opset 17
  dynamo  the torch.export-based exporter: torch.onnx.export(dynamo=True), its default opset

--small writes reduced versions (fewer layers, narrower; a few MB each) to
OUT/<name>.<exporter>.onnx, with seeded inputs and torch's outputs on them in
OUT/<name>.<exporter>/input_K.pb and output_K.pb (the ONNX backend-test
layout). --full writes the full-size models (ResNet-50, MobileNetV2,
Inception-v3, BERT-base, GPT-2 small, ViT-B/16, a two-layer LLaMA-7B-width
decoder, T5-small's encoder) the same way into the cache folder, with the
weights in external-data files. The leading (batch) dimension of every input
is symbolic where the exporter accepts that; pcc binds it with --batch.

A manifest.json next to the models lists, for each export, its inputs, the
batch of the test data and whether the export worked (an exporter that fails
on a model is recorded with its error, not hidden).

Needs torch, torchvision, transformers and onnxscript (tests/parity/requirements.txt).
"""

import argparse
import functools
import inspect
import json
import os
import sys
import time
import traceback

import numpy as np

SEED = 20250601
BATCH = 4  # of the test data; pcc runs it on 1 and 4 devices
TS_OPSET = 17


# --- model definitions --------------------------------------------------------
#
# Each builder takes `full` and returns (module, inputs, input_names, output_names):
# `inputs` are the seeded example tensors, batch first.

def _images(shape, gen):
    import torch
    return torch.randn(*shape, generator=gen)


def _tokens(shape, vocab, gen):
    import torch
    return torch.randint(0, vocab, shape, generator=gen, dtype=torch.int64)


def _narrow_conv(scale, conv_cls):
    """\returns a conv-block factory that divides every channel count by `scale`
    (except the 3 image channels), so a torchvision block keeps its structure
    at a fraction of its width."""
    def make(in_channels, out_channels, **kwargs):
        c_in = in_channels if in_channels == 3 else in_channels // scale
        return conv_cls(c_in, out_channels // scale, **kwargs)
    return make


def build_resnet(full, gen):
    import torch
    from torchvision.models import resnet50
    from torchvision.models.resnet import Bottleneck, ResNet

    if full:
        return resnet50(weights=None), [_images((BATCH, 3, 224, 224), gen)], ["image"], ["logits"]

    class NarrowResNet(ResNet):
        """ResNet-50's depth (Bottleneck blocks 3-4-6-3) at 1/8 of its width."""

        def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
            return super()._make_layer(block, planes // 8, blocks, stride, dilate)

    model = NarrowResNet(Bottleneck, [3, 4, 6, 3], num_classes=10)
    model.fc = torch.nn.Linear(512 * Bottleneck.expansion // 8, 10)
    return model, [_images((BATCH, 3, 64, 64), gen)], ["image"], ["logits"]


def build_mobilenet_v2(full, gen):
    from torchvision.models import mobilenet_v2

    if full:
        return mobilenet_v2(weights=None), [_images((BATCH, 3, 224, 224), gen)], ["image"], ["logits"]
    model = mobilenet_v2(weights=None, width_mult=0.25, num_classes=10)
    return model, [_images((BATCH, 3, 64, 64), gen)], ["image"], ["logits"]


def build_inception_v3(full, gen):
    import torch
    from torchvision.models import inception
    from torchvision.models import inception_v3

    if full:
        model = inception_v3(weights=None, aux_logits=False, init_weights=True)
        return model, [_images((BATCH, 3, 299, 299), gen)], ["image"], ["logits"]
    # Every block of Inception-v3 (A, B, C, D, E) at 1/8 of its width, on the
    # smallest input the network accepts (75x75).
    conv = _narrow_conv(8, inception.BasicConv2d)
    blocks = [conv] + [functools.partial(b, conv_block=conv) for b in
                       (inception.InceptionA, inception.InceptionB, inception.InceptionC,
                        inception.InceptionD, inception.InceptionE, inception.InceptionAux)]
    model = inception.Inception3(num_classes=10, aux_logits=False, init_weights=True,
                                 inception_blocks=blocks)
    model.fc = torch.nn.Linear(2048 // 8, 10)
    return model, [_images((BATCH, 3, 75, 75), gen)], ["image"], ["logits"]


def _first_output(model, names):
    """\returns a module that calls the transformers `model` with keyword
    arguments `names` and returns its first output (logits or hidden states)."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            kwargs = dict(zip(names, args))
            return self.model(**kwargs, return_dict=False)[0]

    return Wrapper()


def _text_inputs(seq, vocab, gen):
    """\\returns ([input_ids, attention_mask], names): the last sequence of the
    batch is padded at its end, so the mask matters. Exports of text models take
    both inputs, as the usual export recipes for transformers models do."""
    import torch
    ids = _tokens((BATCH, seq), vocab, gen)
    mask = torch.ones(BATCH, seq, dtype=torch.int64)
    mask[-1, seq * 3 // 4:] = 0
    return [ids, mask], ["input_ids", "attention_mask"]


def build_bert(full, gen):
    from transformers import BertConfig, BertModel

    if full:
        config, seq = BertConfig(), 128
    else:
        config, seq = BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=128,
                                 max_position_embeddings=64), 16
    model = BertModel(config, add_pooling_layer=False)
    inputs, names = _text_inputs(seq, config.vocab_size, gen)
    return _first_output(model, names), inputs, names, ["last_hidden_state"]


def build_gpt2(full, gen):
    from transformers import GPT2Config, GPT2LMHeadModel

    if full:
        config, seq = GPT2Config(), 128
    else:
        config, seq = GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=4,
                                 n_positions=64), 16
    config.use_cache = False
    model = GPT2LMHeadModel(config)
    inputs, names = _text_inputs(seq, config.vocab_size, gen)
    return _first_output(model, names), inputs, names, ["logits"]


def build_vit(full, gen):
    from transformers import ViTConfig, ViTForImageClassification

    if full:
        config = ViTConfig(num_labels=1000)
    else:
        config = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, image_size=32, patch_size=16, num_labels=10)
    model = ViTForImageClassification(config)
    shape = (BATCH, 3, config.image_size, config.image_size)
    names = ["pixel_values"]
    return _first_output(model, names), [_images(shape, gen)], names, ["logits"]


def build_llama(full, gen):
    from transformers import LlamaConfig, LlamaModel

    if full:
        # Two decoder layers at LLaMA-7B's width (about 1.6 GB of fp32 layer
        # weights plus a 0.5 GB embedding: the model needs external data).
        config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=2,
                             num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)
        seq = 32
    else:
        config = LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=4, vocab_size=512,
                             max_position_embeddings=128)
        seq = 16
    config.use_cache = False
    model = LlamaModel(config)
    inputs, names = _text_inputs(seq, config.vocab_size, gen)
    return _first_output(model, names), inputs, names, ["last_hidden_state"]


def build_t5_encoder(full, gen):
    from transformers import T5Config, T5EncoderModel

    if full:
        config, seq = T5Config(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8,
                               vocab_size=32128), 128
    else:
        config, seq = T5Config(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_heads=4,
                               vocab_size=512), 16
    config.use_cache = False
    model = T5EncoderModel(config)
    inputs, names = _text_inputs(seq, config.vocab_size, gen)
    return _first_output(model, names), inputs, names, ["last_hidden_state"]


MODELS = {
    "resnet": build_resnet,
    "mobilenet_v2": build_mobilenet_v2,
    "inception_v3": build_inception_v3,
    "bert": build_bert,
    "gpt2": build_gpt2,
    "vit": build_vit,
    "llama": build_llama,
    "t5_encoder": build_t5_encoder,
}
EXPORTERS = ["ts", "dynamo"]


# --- export -------------------------------------------------------------------

def _export_ts(model, inputs, names, outputs, path, external):
    import torch
    dynamic = {n: {0: "batch"} for n in names + outputs}
    torch.onnx.export(model, tuple(inputs), path, input_names=names, output_names=outputs,
                      dynamic_axes=dynamic, opset_version=TS_OPSET, dynamo=False,
                      do_constant_folding=True)
    if external:
        _to_external_data(path)


def _export_dynamo(model, inputs, names, outputs, path, external):
    """Exports with a symbolic batch; falls back to a static shape when
    torch.export cannot keep the batch symbolic. \\returns "batch" or "static"."""
    import torch
    batch = torch.export.Dim("batch", min=1, max=1024)
    specs = tuple({0: batch} for _ in names)
    params = inspect.signature(model.forward).parameters.values()
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        dynamic = {"args": specs}  # forward(*args): one spec per positional input
    else:
        dynamic = specs
    try:
        program = torch.onnx.export(model, tuple(inputs), input_names=names,
                                    output_names=outputs, dynamo=True,
                                    dynamic_shapes=dynamic)
        form = "batch"
    except Exception as e:  # torch.export refused the symbolic batch
        print(f"  symbolic batch refused ({type(e).__name__}: {str(e)[:300]});"
              " exporting with static shapes", flush=True)
        program = torch.onnx.export(model, tuple(inputs), input_names=names,
                                    output_names=outputs, dynamo=True)
        form = "static"
    program.save(path, external_data=external)
    return form


def _to_external_data(path):
    """Moves every initializer of the model at `path` into `<file>.data`."""
    import onnx
    model = onnx.load(path)
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data", size_threshold=1024)


def _write_tensor(path, array, name):
    from onnx import numpy_helper
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def _calibrate_batchnorm(model, inputs, batches=4):
    """Sets the running statistics of every BatchNorm layer of `model` from
    `batches` random batches shaped like `inputs` (a cumulative average, in
    training mode, without touching any weight), as training would. With
    random weights and batch norm at its initial statistics (mean 0, var 1) the
    activations of a deep CNN grow layer after layer (full Inception-v3's
    logits reach 1e12); calibrated, they keep a trained network's scale."""
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return False
    gen = torch.Generator().manual_seed(SEED + 1)
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*[torch.randn(t.shape, generator=gen) for t in inputs])
    model.eval()
    return True


def export_one(name, exporter, full, out_dir):
    """Builds model `name`, exports it with `exporter` into `out_dir` and writes its
    test data; \\returns the manifest entry."""
    import onnx
    import torch

    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model, inputs, names, outputs = MODELS[name](full, gen)
    # Full-size CNNs get batch-norm statistics from random batches (the small
    # committed exports were made without, and pass as they are).
    calibrated = full and all(t.is_floating_point() for t in inputs) and _calibrate_batchnorm(model, inputs)
    model.eval()
    path = os.path.join(out_dir, f"{name}.{exporter}.onnx")
    data_dir = os.path.join(out_dir, f"{name}.{exporter}")
    for stale in (path, path + ".data"):
        if os.path.exists(stale):
            os.remove(stale)
    entry = {"name": name, "exporter": exporter, "file": os.path.basename(path),
             "data": os.path.basename(data_dir), "batch": BATCH,
             "inputs": names, "outputs": outputs, "batchnorm_calibrated": bool(calibrated)}
    start = time.time()
    with torch.no_grad():
        expected = model(*inputs)
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        if exporter == "ts":
            _export_ts(model, inputs, names, outputs, path, external=full)
            entry["batch_dim"] = "batch"
        else:
            entry["batch_dim"] = _export_dynamo(model, inputs, names, outputs, path, external=full)
    seconds = time.time() - start

    proto = onnx.load(path, load_external_data=False)
    entry["opset"] = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    entry["ops"] = sorted({n.op_type if not n.domain else f"{n.domain}.{n.op_type}"
                           for n in proto.graph.node})
    os.makedirs(data_dir, exist_ok=True)
    graph_inputs = [i.name for i in proto.graph.input
                    if i.name not in {t.name for t in proto.graph.initializer}]
    if len(graph_inputs) != len(inputs):
        # An exporter may drop an input the graph does not use; keep the ones it kept.
        by_name = dict(zip(names, inputs))
        inputs = [by_name[n] for n in graph_inputs]
    entry["inputs"] = graph_inputs
    for k, (n, t) in enumerate(zip(graph_inputs, inputs)):
        _write_tensor(os.path.join(data_dir, f"input_{k}.pb"), t.numpy(), n)
    graph_outputs = [o.name for o in proto.graph.output]
    for k, (n, t) in enumerate(zip(graph_outputs, expected)):
        _write_tensor(os.path.join(data_dir, f"output_{k}.pb"), t.numpy(), n)
    size = os.path.getsize(path) + (os.path.getsize(path + ".data")
                                    if os.path.exists(path + ".data") else 0)
    entry["bytes"] = size
    return entry, seconds


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--small", action="store_true", help="reduced models into --out")
    mode.add_argument("--full", action="store_true", help="full-size models into --cache")
    parser.add_argument("--out", default=os.path.join(here, "exported"))
    parser.add_argument("--cache", default=os.path.join(os.path.dirname(here), "build",
                                                        "parity-cache"))
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--skip-existing", action="store_true",
                        help="keep exports already in the manifest (for --full)")
    args = parser.parse_args()

    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out_dir = args.cache if args.full else args.out
    os.makedirs(out_dir, exist_ok=True)
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    exporters = [e for e in args.exporters.split(",") if e]

    manifest_path = os.path.join(out_dir, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = {f"{e['name']}.{e['exporter']}": e for e in json.load(f)["exports"]}
    failed = 0
    for name in names:
        for exporter in exporters:
            key = f"{name}.{exporter}"
            if args.skip_existing and manifest.get(key, {}).get("ok") and \
                    os.path.exists(os.path.join(out_dir, manifest[key]["file"])):
                print(f"{key}: kept", flush=True)
                continue
            print(f"{key}: exporting ({'full' if args.full else 'small'})", flush=True)
            try:
                entry, seconds = export_one(name, exporter, args.full, out_dir)
                entry["ok"] = True
                print(f"{key}: {entry['bytes'] / 1e6:.1f} MB, opset {entry['opset']}, "
                      f"{len(entry['ops'])} op types, {seconds:.1f} s", flush=True)
            except Exception as e:
                failed += 1
                lines = traceback.format_exception_only(type(e), e)
                entry = {"name": name, "exporter": exporter, "ok": False,
                         "error": lines[-1].strip()[:2000]}
                print(f"{key}: export FAILED: {entry['error']}", flush=True)
            manifest[key] = entry
            with open(manifest_path, "w") as f:
                json.dump({"torch": torch.__version__, "seed": SEED,
                           "exports": [manifest[k] for k in sorted(manifest)]}, f, indent=1)
    print(f"export: {sum(1 for e in manifest.values() if e.get('ok'))} exported, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
