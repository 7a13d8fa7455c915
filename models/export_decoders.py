#!/usr/bin/env python3
"""Exports tiny decoder LLMs with a KV cache to ONNX, and records the tokens
transformers generates with them.

    python models/export_decoders.py [--out models/exported/decoders] [--only NAME,...]
                                     [--exporters ts,dynamo] [--no-genai]

Three families (LLaMA, GPT-2, Qwen2), each built from a configuration with
seeded random weights (nothing is downloaded): hidden 64, 2 layers, vocab 256,
128 positions, float32. Each is exported twice:

  NAME.ts.onnx      torch.onnx.export(dynamo=False), opset 17
  NAME.dynamo.onnx  torch.onnx.export(dynamo=True), its default opset

Every export has the same interface:

  inputs   input_ids       int64   [batch, sequence_length]
           attention_mask  int64   [batch, total_sequence_length]   (past + current)
           position_ids    int64   [batch, sequence_length]
           past_key_values.N.key / .value  float32
                                   [batch, num_kv_heads, past_sequence_length, head_dim]
  outputs  logits          float32 [batch, sequence_length, vocab]
           present.N.key / .value  float32
                                   [batch, num_kv_heads, total_sequence_length, head_dim]

manifest.json records, per model, its configuration, the greedy tokens
transformers' generate() produces for two fixed prompts, and per export its
interface, op types and whether onnxruntime, stepping the export with its KV
cache, produces the same tokens (each prompt alone, and both prompts as one
right-padded batch of two). It also writes the llama model with
onnxruntime-genai's model builder (llama.genai/: model.onnx, its weights and
genai_config.json) and records the tokens onnxruntime-genai generates with it.

Needs torch, transformers, onnxscript and onnxruntime (the parity environment).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

SEED = 20250601
TS_OPSET = 17
NEW_TOKENS = 32
# Two fixed prompts of different lengths (token ids of the 256-token vocabulary).
PROMPTS = [
    [1, 72, 101, 108, 111],
    [1, 84, 104, 101, 32, 113, 117, 105, 99],
]
# Example shapes for the export: a past of 3 and 2 new tokens, so that no
# dimension specializes to 0 or 1.
EXAMPLE_BATCH, EXAMPLE_PAST, EXAMPLE_SEQ = 2, 3, 2

VOCAB = 256
EOS, BOS, PAD = VOCAB - 1, 1, 0

# Weights are drawn wider than transformers' default (0.02): with it the logits
# of these tiny models are nearly flat and GPT-2 repeats one token, which tests
# little. With these, the greedy tokens vary and the top two logits stay well
# apart (min_greedy_logit_gap in the manifest).
INIT_RANGE = {"llama": 0.2, "gpt2": 0.3, "qwen2": 0.2}

DIMS = ("batch", "sequence_length", "past_sequence_length", "total_sequence_length")


# --- models -------------------------------------------------------------------

def config_llama():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, max_position_embeddings=128, tie_word_embeddings=False,
                       initializer_range=INIT_RANGE["llama"], eos_token_id=EOS, bos_token_id=BOS, pad_token_id=PAD)


def config_gpt2():
    from transformers import GPT2Config
    return GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                      initializer_range=INIT_RANGE["gpt2"], eos_token_id=EOS, bos_token_id=BOS, pad_token_id=PAD)


def config_qwen2():
    from transformers import Qwen2Config
    return Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=128, tie_word_embeddings=False,
                       use_sliding_window=False, initializer_range=INIT_RANGE["qwen2"],
                       eos_token_id=EOS, bos_token_id=BOS, pad_token_id=PAD)


MODELS = {
    "llama": ("LlamaForCausalLM", config_llama),
    "gpt2": ("GPT2LMHeadModel", config_gpt2),
    "qwen2": ("Qwen2ForCausalLM", config_qwen2),
}
EXPORTERS = ["ts", "dynamo"]


def shape_of(config):
    """\\returns the numbers of `config` that the manifest records."""
    if config.model_type == "gpt2":
        layers, heads, hidden = config.n_layer, config.n_head, config.n_embd
        kv_heads, positions = heads, config.n_positions
    else:
        layers, heads, hidden = (config.num_hidden_layers, config.num_attention_heads,
                                 config.hidden_size)
        kv_heads, positions = config.num_key_value_heads, config.max_position_embeddings
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    return {"model_type": config.model_type, "num_layers": layers, "num_heads": heads,
            "num_kv_heads": kv_heads, "head_dim": head_dim, "hidden_size": hidden,
            "vocab_size": config.vocab_size, "max_position_embeddings": positions,
            "eos_token_id": config.eos_token_id, "bos_token_id": config.bos_token_id,
            "pad_token_id": config.pad_token_id, "dtype": "float32",
            "initializer_range": config.initializer_range,
            "attn_implementation": config._attn_implementation}


def build(name):
    """\\returns the seeded transformers model `name` in eval mode."""
    import torch
    import transformers
    cls_name, make_config = MODELS[name]
    config = make_config()
    # Plain attention (MatMul, Softmax), the same in the exports and in generate().
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = getattr(transformers, cls_name)(config)
    model.eval()
    return model


def flat_model(model):
    """\\returns a module whose forward takes the flat tensors of the export's
    interface and returns (logits, present.0.key, present.0.value, ...)."""
    import torch
    from transformers import DynamicCache

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(
                ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)],
                config=self.model.config)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, cache=cache,
                             use_cache=True, return_dict=True)
            present = []
            for layer in cache.layers:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return Flat().eval()  # a new module starts in training mode (dropout on)


def io_names(layers):
    inputs = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits"]
    for i in range(layers):
        inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outputs += [f"present.{i}.key", f"present.{i}.value"]
    return inputs, outputs


def example_inputs(shape):
    """\\returns the example tensors of the export: batch 2, past 3, 2 new
    tokens; the mask holds a 0 (a padded past slot) so that no exporter can
    take the mask for all ones."""
    import torch
    gen = torch.Generator().manual_seed(SEED + 7)
    b, p, s = EXAMPLE_BATCH, EXAMPLE_PAST, EXAMPLE_SEQ
    ids = torch.randint(0, shape["vocab_size"], (b, s), generator=gen, dtype=torch.int64)
    mask = torch.ones(b, p + s, dtype=torch.int64)
    mask[1, p - 1] = 0
    positions = torch.arange(p, p + s, dtype=torch.int64).unsqueeze(0).repeat(b, 1)
    positions[1] -= 1
    past = []
    for _ in range(shape["num_layers"]):
        for _ in range(2):
            past.append(torch.randn(b, shape["num_kv_heads"], p, shape["head_dim"],
                                    generator=gen))
    return [ids, mask, positions, *past]


# --- export -------------------------------------------------------------------

def _dim_spec(input_names, output_names):
    """\\returns {name: {axis: dim name}} of the interface."""
    spec = {}
    for n in input_names:
        if n == "attention_mask":
            spec[n] = {0: "batch", 1: "total_sequence_length"}
        elif n.startswith("past_key_values."):
            spec[n] = {0: "batch", 2: "past_sequence_length"}
        else:
            spec[n] = {0: "batch", 1: "sequence_length"}
    for n in output_names:
        spec[n] = ({0: "batch", 1: "sequence_length"} if n == "logits"
                   else {0: "batch", 2: "total_sequence_length"})
    return spec


def export_ts(model, inputs, names, outputs, path):
    import torch
    torch.onnx.export(model, tuple(inputs), path, input_names=names, output_names=outputs,
                      dynamic_axes=_dim_spec(names, outputs), opset_version=TS_OPSET,
                      dynamo=False, do_constant_folding=True)


def export_dynamo(model, inputs, names, outputs, path):
    import torch
    Dim = torch.export.Dim
    dims = {"batch": Dim("batch", min=1, max=64),
            "sequence_length": Dim("sequence_length", min=1, max=128),
            "past_sequence_length": Dim("past_sequence_length", min=0, max=127)}
    # The mask's length is its own dimension: torch.export finds that it
    # equals past + current and names the present tensors' length so.
    dims["total_sequence_length"] = Dim("total_sequence_length", min=1, max=128)
    spec = _dim_spec(names, [])
    shapes = [{axis: dims[d] for axis, d in spec[n].items()} for n in names]
    dynamic = {"input_ids": shapes[0], "attention_mask": shapes[1], "position_ids": shapes[2],
               "past": tuple(shapes[3:])}
    program = torch.onnx.export(model, tuple(inputs), input_names=names, output_names=outputs,
                                dynamo=True, dynamic_shapes=dynamic)
    program.save(path)


def onnx_facts(path):
    """\\returns the interface, opset and op types of the ONNX file at `path`."""
    import onnx
    proto = onnx.load(path, load_external_data=False)
    inits = {t.name for t in proto.graph.initializer}

    def dims(value):
        return [d.dim_param if d.HasField("dim_param") else
                (d.dim_value if d.HasField("dim_value") else None)
                for d in value.type.tensor_type.shape.dim]

    def elem(value):
        return onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type).name

    return {
        "opset": next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0),
        "opset_imports": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
        "inputs": [{"name": i.name, "dtype": elem(i), "dims": dims(i)}
                   for i in proto.graph.input if i.name not in inits],
        "outputs": [{"name": o.name, "dtype": elem(o), "dims": dims(o)}
                    for o in proto.graph.output],
        "ops": sorted({n.op_type if not n.domain else f"{n.domain}.{n.op_type}"
                       for n in proto.graph.node}),
        "nodes": len(proto.graph.node),
        # Ops of the default domain that ONNX itself does not define (onnxruntime
        # registers some of its own there).
        "default_domain_ops_not_in_onnx": sorted({
            n.op_type for n in proto.graph.node
            if n.domain in ("", "ai.onnx") and not onnx.defs.has(n.op_type)}),
    }


# --- ground truth ---------------------------------------------------------------

def _until_eos(tokens, eos):
    """\\returns `tokens` up to and including the first `eos` (as generate() stops)."""
    tokens = [int(t) for t in tokens]
    return tokens[:tokens.index(eos) + 1] if eos in tokens else tokens


def transformers_generate(model, prompt):
    """\\returns (new tokens of greedy generate(), smallest top-1 minus top-2
    logit gap over the steps: how far the greedy choices are from a tie)."""
    import torch
    ids = torch.tensor([prompt], dtype=torch.int64)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                             do_sample=False, pad_token_id=PAD, eos_token_id=EOS,
                             output_scores=True, return_dict_in_generate=True)
    new = out.sequences[0, len(prompt):].tolist()
    gaps = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
    return new, min(gaps)


def torch_prefill_logits(model, prompt):
    import torch
    ids = torch.tensor([prompt], dtype=torch.int64)
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.numpy()


class Stepper:
    """Runs an export with onnxruntime, one call per step, feeding the
    present tensors back as the past."""

    def __init__(self, path, shape):
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.shape = shape
        self.layers = shape["num_layers"]
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]

    def empty_past(self, batch):
        s = self.shape
        z = np.zeros((batch, s["num_kv_heads"], 0, s["head_dim"]), np.float32)
        return [z] * (2 * self.layers)

    def run(self, ids, mask, positions, past):
        feed = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64),
                "position_ids": positions.astype(np.int64)}
        for i in range(self.layers):
            feed[f"past_key_values.{i}.key"] = past[2 * i]
            feed[f"past_key_values.{i}.value"] = past[2 * i + 1]
        feed = {k: v for k, v in feed.items() if k in self.input_names}
        out = dict(zip(self.output_names, self.session.run(None, feed)))
        present = []
        for i in range(self.layers):
            present += [out[f"present.{i}.key"], out[f"present.{i}.value"]]
        return out["logits"], present

    def greedy(self, prompt):
        """\\returns (new tokens, prefill logits) for `prompt` alone."""
        n = len(prompt)
        logits, past = self.run(np.array([prompt]), np.ones((1, n)),
                                np.arange(n)[None], self.empty_past(1))
        first = logits
        tokens = [int(logits[0, -1].argmax())]
        while len(tokens) < NEW_TOKENS and tokens[-1] != EOS:
            length = n + len(tokens)  # tokens in the sequence, the new one included
            logits, past = self.run(np.array([[tokens[-1]]]), np.ones((1, length)),
                                    np.array([[length - 1]]), past)
            tokens.append(int(logits[0, -1].argmax()))
        return tokens, first

    def greedy_batch(self, prompts):
        """Greedy decoding of all `prompts` as one batch: the prefill pads the
        shorter prompts on the right (mask 0 there), then every step feeds one
        token per sequence at that sequence's own position, with the padded
        slots of the cache masked out. \\returns the new tokens per prompt."""
        b, width = len(prompts), max(len(p) for p in prompts)
        ids = np.full((b, width), PAD)
        mask = np.zeros((b, width))
        for k, p in enumerate(prompts):
            ids[k, :len(p)] = p
            mask[k, :len(p)] = 1
        positions = np.tile(np.arange(width), (b, 1))
        logits, past = self.run(ids, mask, positions, self.empty_past(b))
        tokens = [[int(logits[k, len(p) - 1].argmax())] for k, p in enumerate(prompts)]
        for _ in range(NEW_TOKENS - 1):
            mask = np.concatenate([mask, np.ones((b, 1))], axis=1)
            step_ids = np.array([[t[-1]] for t in tokens])
            step_pos = np.array([[len(p) + len(t) - 1] for p, t in zip(prompts, tokens)])
            logits, past = self.run(step_ids, mask, step_pos, past)
            for k in range(b):
                tokens[k].append(int(logits[k, -1].argmax()))
        return [_until_eos(t, EOS) for t in tokens]


def export_one(name, exporter, model, shape, reference, out_dir):
    """Exports `model` with `exporter` and checks it against `reference`
    (the transformers tokens per prompt); \\returns the manifest entry."""
    import torch
    path = os.path.join(out_dir, f"{name}.{exporter}.onnx")
    for stale in (path, path + ".data"):
        if os.path.exists(stale):
            os.remove(stale)
    names, outputs = io_names(shape["num_layers"])
    inputs = example_inputs(shape)
    entry = {"file": os.path.basename(path), "exporter": exporter}
    # The configuration beside the model, as pcc reads it (MODEL.config.json:
    # max_position_embeddings for the cache's context, eos_token_id).
    with open(os.path.join(out_dir, f"{name}.{exporter}.config.json"), "w") as f:
        json.dump(shape, f, indent=1, sort_keys=True)
        f.write("\n")
    start = time.time()
    torch.manual_seed(SEED)
    with torch.no_grad():
        if exporter == "ts":
            export_ts(flat_model(model), inputs, names, outputs, path)
            entry["exporter_call"] = f"torch.onnx.export(dynamo=False, opset_version={TS_OPSET})"
        else:
            export_dynamo(flat_model(model), inputs, names, outputs, path)
            entry["exporter_call"] = "torch.onnx.export(dynamo=True)"
    print(f"{name}.{exporter}: exported in {time.time() - start:.1f} s", flush=True)
    entry.update(onnx_facts(path))
    entry["input_dims"] = {i["name"]: i["dims"] for i in entry["inputs"]}
    entry["bytes"] = os.path.getsize(path)

    stepper = Stepper(path, shape)
    entry["alone"] = []
    for k, prompt in enumerate(PROMPTS):
        tokens, first = stepper.greedy(prompt)
        expected = torch_prefill_logits(model, prompt)
        entry["alone"].append({
            "prompt": k, "tokens": tokens, "equal_to_transformers": tokens == reference[k],
            "prefill_logits_max_abs_diff": float(np.abs(first - expected).max())})
    batched = stepper.greedy_batch(PROMPTS)
    entry["batch_right_padded"] = {
        "tokens": batched,
        "equal_to_alone": all(t == a["tokens"] for t, a in zip(batched, entry["alone"])),
        "equal_to_transformers": batched == reference}
    entry["tokens_equal_to_transformers"] = all(a["equal_to_transformers"]
                                                for a in entry["alone"])
    return entry


def check_model(name, exporters, out_dir):
    """\\returns the manifest entry of model `name` with its exports."""
    model = build(name)
    shape = shape_of(model.config)
    entry = {"class": MODELS[name][0], "config": shape, "prompts": PROMPTS,
             "max_new_tokens": NEW_TOKENS, "generated": [], "min_greedy_logit_gap": []}
    for prompt in PROMPTS:
        tokens, gap = transformers_generate(model, prompt)
        entry["generated"].append(tokens)
        entry["min_greedy_logit_gap"].append(gap)
    entry["exports"] = {}
    for exporter in exporters:
        key = f"{name}.{exporter}"
        print(f"{key}: exporting", flush=True)
        try:
            e = export_one(name, exporter, model, shape, entry["generated"], out_dir)
            e["ok"] = True
            print(f"{key}: {e['bytes'] / 1e6:.2f} MB, opset {e['opset']}, {len(e['ops'])} op"
                  f" types; tokens equal: alone {e['tokens_equal_to_transformers']}, batch"
                  f" {e['batch_right_padded']['equal_to_alone']}; prefill logits diff "
                  f"{max(a['prefill_logits_max_abs_diff'] for a in e['alone']):.2e}", flush=True)
        except Exception as ex:
            lines = traceback.format_exception_only(type(ex), ex)
            e = {"file": f"{key}.onnx", "exporter": exporter, "ok": False,
                 "error": lines[-1].strip()[:2000]}
            print(f"{key}: FAILED: {e['error']}", flush=True)
        entry["exports"][exporter] = e
    return entry


# --- onnxruntime-genai's model builder ----------------------------------------------

GENAI_KEEP = ("model.onnx", "model.onnx.data", "genai_config.json")


def _word_tokenizer(folder):
    """Saves into `folder` a tokenizer whose vocabulary is the model's 256 ids
    (one word per id): the model builder needs one to read the model, and no
    check here goes through text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    special = {PAD: "<pad>", BOS: "<s>", EOS: "</s>"}
    vocab = {special.get(i, f"w{i}"): i for i in range(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>", unk_token="<pad>").save_pretrained(folder)


def genai_greedy(folder, prompt):
    """\returns the new tokens of onnxruntime-genai's own greedy search."""
    import onnxruntime_genai as og
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + NEW_TOKENS, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens([prompt])
    while not generator.is_done():
        generator.generate_next_token()
    return [int(t) for t in generator.get_sequence(0)][len(prompt):]


def export_genai(out_dir, llama):
    """Writes the llama model (the same seeded weights as llama.*.onnx) with
    onnxruntime-genai's model builder (fp32, CPU) into OUT/llama.genai/, keeping
    only the files onnxruntime-genai needs to load it, and runs its greedy
    search on the prompts. \returns the manifest entry."""
    import onnxruntime_genai as og
    folder = os.path.join(out_dir, "llama.genai")
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    entry = {"folder": os.path.basename(folder), "onnxruntime_genai": og.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        source, built, cache = (os.path.join(tmp, d) for d in ("hf", "built", "cache"))
        model = build("llama")
        model.save_pretrained(source)
        _word_tokenizer(source)
        command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", source,
                   "-o", built, "-p", "fp32", "-e", "cpu", "-c", cache,
                   "--extra_options", "hf_token=false"]
        entry["builder_command"] = "python -m onnxruntime_genai.models.builder -i HF_FOLDER " \
            "-o OUT -p fp32 -e cpu -c CACHE --extra_options hf_token=false"
        print("llama.genai: running the model builder", flush=True)
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            entry.update(ok=False, error=(run.stderr or run.stdout)[-2000:])
            print(f"llama.genai: FAILED: {entry['error']}", flush=True)
            return entry
        os.makedirs(folder)
        for f in GENAI_KEEP:
            if os.path.exists(os.path.join(built, f)):
                shutil.copy(os.path.join(built, f), folder)
        entry["dropped_files"] = sorted(set(os.listdir(built)) - set(GENAI_KEEP))
    entry["files"] = sorted(os.listdir(folder))
    entry["bytes"] = sum(os.path.getsize(os.path.join(folder, f)) for f in entry["files"])
    entry.update(onnx_facts(os.path.join(folder, "model.onnx")))
    with open(os.path.join(folder, "genai_config.json")) as f:
        entry["genai_config"] = json.load(f)
    reference = llama["generated"] if llama else \
        [transformers_generate(build("llama"), p)[0] for p in PROMPTS]
    entry["generated"] = [genai_greedy(folder, p) for p in PROMPTS]
    entry["equal_to_transformers"] = entry["generated"] == reference
    entry["ok"] = True
    print(f"llama.genai: {entry['bytes'] / 1e6:.2f} MB, {len(entry['ops'])} op types; tokens"
          f" equal to transformers: {entry['equal_to_transformers']}", flush=True)
    return entry


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(here, "exported", "decoders"))
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--no-genai", action="store_true",
                        help="skip llama.genai/ (onnxruntime-genai's model builder)")
    args = parser.parse_args()

    import onnxruntime
    import torch
    import transformers
    torch.set_num_threads(1)  # tiny models; one thread keeps every sum in one order
    os.makedirs(args.out, exist_ok=True)
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    exporters = [e for e in args.exporters.split(",") if e]

    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = {"models": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    manifest.update({"torch": torch.__version__, "transformers": transformers.__version__,
                     "onnxruntime": onnxruntime.__version__, "seed": SEED,
                     "prompts": PROMPTS, "max_new_tokens": NEW_TOKENS,
                     "dim_names": list(DIMS)})
    failed = 0

    def save():
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")

    for name in names:
        entry = check_model(name, exporters, args.out)
        old = manifest["models"].get(name, {}).get("exports", {})
        entry["exports"] = {**{k: v for k, v in old.items() if k not in entry["exports"]},
                            **entry["exports"]}
        manifest["models"][name] = entry
        for e in entry["exports"].values():
            if not e.get("ok") or not e["tokens_equal_to_transformers"] or \
                    not e["batch_right_padded"]["equal_to_alone"]:
                failed += 1
        save()
    if not args.no_genai:
        manifest["genai"] = export_genai(args.out, manifest["models"].get("llama"))
        failed += 0 if manifest["genai"].get("equal_to_transformers") else 1
        save()
    print(f"export_decoders: {failed} export(s) failed or differ from transformers")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
