"""pcc: compile an ONNX model into a plan for N GPUs, inspect it, run it.

    import numpy as np, pcc
    plan = pcc.compile("mlp.onnx", gpus=4)          # the cost model picks dp x tp x pp
    print(plan.mesh, plan.report["estimated_time_ms"])
    sess = pcc.Session(plan)                          # every rank a thread of this process
    y, = sess.run(None, {"x": np.ones((4, 16), np.float32)})

`compile` takes every option of the `pcc` command line as a keyword
(max_context=4096 is --max-context=4096); `Session` is shaped like
onnxruntime.InferenceSession. Failures raise pcc.Error subclasses with the
tools' one-line messages. See docs/python.md.
"""

import json
import logging
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import (BadInputError, CheckError, Error, InternalError, OutOfMemoryError, PeerError,
                      UnsupportedError)


def _choose_openmp_wait_policy():
    """How OpenMP's idle threads wait in this process, chosen as pcc-run
    chooses it (runtime/cpu/fast_kernels.h, chooseOpenMpWaitPolicy): unless
    OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, they spin 30,000 times before
    sleeping when the tasks running beside this process are at most a quarter
    of its cores, and sleep at once otherwise. It must be set before the
    extension loads the OpenMP runtime, which reads it once; an OpenMP
    runtime another module loaded first keeps its own setting."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    try:
        cores = len(os.sched_getaffinity(0))
        least = None
        for sample in range(5):
            if sample:
                time.sleep(0.002)
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
            others = max(0, running - 1)  # this process is running
            least = others if least is None else min(least, others)
    except (OSError, ValueError, IndexError):
        return
    if least * 4 <= cores:
        os.environ["GOMP_SPINCOUNT"] = "30000"
    else:
        os.environ["OMP_WAIT_POLICY"] = "passive"


_choose_openmp_wait_policy()

from . import _pcc  # noqa: E402  (after the wait policy is chosen)

__all__ = [
    "compile", "load", "Plan", "Session", "TensorInfo", "options",
    "Error", "BadInputError", "UnsupportedError", "CheckError", "PeerError", "OutOfMemoryError", "InternalError",
]
__version__ = "0.1.0"

_log = logging.getLogger("pcc")


class TensorInfo(NamedTuple):
    """A plan input or output: its name, shape and numpy dtype name."""

    name: str
    shape: List[int]
    type: str


class _Option(NamedTuple):
    flag: str          # "--max-context"
    takes_value: bool  # False: a switch (--no-fuse)
    repeatable: bool   # --shape NAME=AxB, given once per name
    value_name: str
    help: str


def _keyword(flag: str) -> str:
    return flag[2:].replace("-", "_")


# The compile options: the pcc tool's own table (tools/compile_flags.cpp).
_OPTIONS: Dict[str, _Option] = {_keyword(row[0]): _Option(*row) for row in _pcc.option_table()}
# Keywords that are compile()'s own parameters, and the flags they become.
_NAMED = {"gpus": "gpus", "strategy": "strategy", "batch": "batch", "shapes": "shape", "freeze": "freeze",
          "objective": "objective", "gpu": "gpu", "cluster": "cluster", "target": "target"}


def options() -> Dict[str, str]:
    """\\returns every compile option: keyword -> its help (the same table as
    `pcc --help`)."""
    return {k: " ".join(o.help.split()) for k, o in _OPTIONS.items()}


def _dims(value) -> str:
    if isinstance(value, str):
        return value
    return "x".join(str(int(d)) for d in value)


def _value_text(key: str, value) -> str:
    if key == "strategy" and isinstance(value, Mapping):
        return ",".join(f"{k}={int(v)}" for k, v in value.items())
    if key == "arch" and not isinstance(value, str):
        return ",".join(value)
    if isinstance(value, bool):
        raise TypeError(f"compile(): {key} takes a value, not {value!r}")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _flags(options: Mapping[str, Any]) -> List[str]:
    """\\returns the command-line flags for compile()'s keywords (None: not given)."""
    out: List[str] = []
    for key, value in options.items():
        if value is None:
            continue
        opt = _OPTIONS.get(_NAMED.get(key, key))
        if opt is None:
            raise TypeError(f"compile() got an unexpected keyword argument '{key}' (pcc.options() lists them)")
        if not opt.takes_value:
            if not isinstance(value, bool):
                raise TypeError(f"compile(): {key} is a switch: True or False, not {value!r}")
            if value:
                out.append(opt.flag)
            continue
        if opt.repeatable:
            if not isinstance(value, Mapping):
                raise TypeError(f"compile(): {key} takes a dict of name -> value")
            for name, v in value.items():
                text = _dims(v) if key == "shapes" else os.fspath(v)
                out.append(f"{opt.flag}={name}={text}")
            continue
        out.append(f"{opt.flag}={_value_text(key, value)}")
    return out


def _model_path(model, tmp: str) -> str:
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    serialize = getattr(model, "SerializeToString", None)
    if serialize is None:
        raise TypeError(f"compile(): model must be a path or an onnx.ModelProto, not {type(model).__name__}")
    path = os.path.join(tmp, "model.onnx")
    with open(path, "wb") as f:
        f.write(serialize())
    return path


def compile(model, gpus: Optional[int] = None, *, strategy: Union[str, Mapping[str, int], None] = None,
            batch: Union[int, str, None] = None, shapes: Optional[Mapping[str, Union[str, Sequence[int]]]] = None,
            objective: str = "latency", gpu: str = "h100", cluster: Optional[str] = None,
            target: Optional[str] = None, output: Optional[str] = None,
            progress: Optional[Callable[[str], None]] = None, **options) -> "Plan":
    """Compiles an ONNX model into a plan for `gpus` devices.

    model     a path, or an onnx.ModelProto (its weights inside the proto)
    gpus      devices to spread the model over (default: the devices a forced
              `strategy` uses, else 1)
    strategy  "auto" (default: the cost model's pp x dp x tp), "tp=4",
              "dp=2,tp=2,pp=2", or a dict such as {"dp": 2, "tp": 4}
    batch     binds the leading symbolic dimension: an int, or "auto"
    shapes    {input name: shape}, a shape as (2, 128) or "2x128"
    freeze    {input name: path of a TensorProto .pb}: the input becomes a constant
    objective "latency" or "throughput"
    gpu       the device the cost model plans for: "h100", "h200", "a100-80g",
              "a100-40g" or "cpu" (CPU ranks)
    cluster   a cluster spec JSON file in place of gpu's
    target    "cpu" or "cuda" kernels
    output    the plan bundle directory to write; default: a temporary one,
              removed with the Plan (Plan.save keeps a copy)
    progress  called with each progress line; default: the "pcc" logger (INFO)

    Every other option of `pcc --help` is a keyword of its name:
    max_context=4096, no_fuse=True, microbatches=4, arch=["sm_90"], ...
    (the full list, with each one's help, is below and in pcc.options()).

    Raises BadInputError (also a ValueError) for a bad model or option,
    UnsupportedError for what pcc cannot compile yet.
    """
    named = {"gpus": gpus, "strategy": strategy, "batch": batch, "shapes": shapes, "objective": objective,
             "gpu": gpu, "cluster": cluster, "target": target}
    flags = _flags({**named, **options})
    tmp = tempfile.mkdtemp(prefix="pcc-")
    try:
        path = _model_path(model, tmp)
        out = os.fspath(output) if output is not None else os.path.join(tmp, "plan.pcc")
        log = progress if progress is not None else (lambda line: _log.info("%s", line))
        _pcc.compile(path, out, flags, log)
        bundle = _pcc.Bundle.load(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if output is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp = None
    return Plan(bundle, _owned_dir=tmp)


def _option_help() -> str:
    lines = ["", "Options (keyword: the flag of `pcc --help`):"]
    for key, o in _OPTIONS.items():
        if key in _NAMED.values():  # compile()'s own parameters, documented above
            continue
        kind = "switch" if not o.takes_value else (o.value_name or "value")
        lines.append(f"    {key} ({kind}): {' '.join(o.help.split())}")
    return "\n".join(lines)


compile.__doc__ = (compile.__doc__ or "") + _option_help()


def load(path) -> "Plan":
    """Reads a plan bundle written by `pcc` or Plan.save (checked as pcc-run checks it)."""
    return Plan(_pcc.Bundle.load(os.fspath(path)))


class Plan:
    """A compiled plan bundle: what it computes, how it is split, its report."""

    def __init__(self, bundle, _owned_dir: Optional[str] = None):
        self._bundle = bundle
        self._owned_dir = _owned_dir
        self._report = None

    def __del__(self):
        if getattr(self, "_owned_dir", None):
            shutil.rmtree(self._owned_dir, ignore_errors=True)

    def __repr__(self) -> str:
        m = self.mesh
        return f"<pcc.Plan {self.path!r}: {self.ranks} ranks, pp={m['pp']} dp={m['dp']} tp={m['tp']}>"

    @property
    def path(self) -> str:
        """The bundle directory (a temporary one until save())."""
        return self._bundle.dir

    @property
    def ranks(self) -> int:
        return self._bundle.ranks

    def save(self, path) -> None:
        """Writes a copy of the bundle to `path` (a new directory)."""
        path = os.fspath(path)
        if os.path.exists(path):
            raise BadInputError(f"{path}: already exists")
        shutil.copytree(self.path, path)

    @property
    def report(self) -> Dict[str, Any]:
        """The report (report.json's content, as `pcc-report --format json` prints it)."""
        if self._report is None:
            self._report = json.loads(self._bundle.report_json())
        return self._report

    def report_text(self) -> str:
        """The report as `pcc-report` prints it."""
        return self._bundle.report_text()

    @property
    def mesh(self) -> Dict[str, int]:
        """{"pp": P, "dp": D, "tp": T}."""
        return dict(self.report["mesh"])

    @property
    def alternatives(self) -> List[Dict[str, Any]]:
        """The meshes the search weighed, with their estimates."""
        return list(self.report.get("alternatives", []))

    @property
    def generation(self) -> Optional[Dict[str, Any]]:
        """A generation plan's batch, max_context, prefill length (the longest prefill program's prompt
        tokens), prefill_lengths (every prefill program's, ascending) and end tokens; None otherwise."""
        g = self._bundle.generation
        return dict(g) if g else None

    def to_html(self, path) -> None:
        """Writes the one-page HTML report (`pcc-report --format html`)."""
        text = self._bundle.html()
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            f.write(text)

    @property
    def inputs(self) -> List[TensorInfo]:
        return [TensorInfo(n, list(s), t) for n, s, t in self._bundle.inputs]

    @property
    def outputs(self) -> List[TensorInfo]:
        return [TensorInfo(n, list(s), t) for n, s, t in self._bundle.outputs]

    def run_reference(self, feeds: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        """Runs the plan's reference program (the unpartitioned graph on the
        reference kernels: what `pcc-run --check` compares with)."""
        arrays = _feeds_in_order(self.inputs, feeds)
        return dict(zip((o.name for o in self.outputs), self._bundle.run_reference(arrays)))


def _as_array(value):
    if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
        return value
    a = np.asarray(value)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _feeds_in_order(inputs: List[TensorInfo], feeds: Mapping[str, Any]) -> list:
    if not isinstance(feeds, Mapping):
        raise TypeError("feeds must be a dict of input name -> array")
    names = [i.name for i in inputs]
    missing = [n for n in names if n not in feeds]
    extra = [n for n in feeds if n not in names]
    if extra:
        raise BadInputError(f"feeds: '{extra[0]}' is not an input of the plan (inputs: {', '.join(names)})")
    if missing:
        i = inputs[names.index(missing[0])]
        raise BadInputError(f"feeds: input '{i.name}' is missing (expected {i.type}[{','.join(map(str, i.shape))}])")
    return [_as_array(feeds[n]) for n in names]


class Session:
    """Runs a plan, shaped like onnxruntime.InferenceSession.

    plan         a Plan, or the path of a plan bundle
    backend      "cpu" (CPU ranks), "cuda" or "auto"
    threads      kernel threads per rank (default: the processors over the ranks)
    timeout      seconds to wait for a peer rank
    distributed  one process per rank, started by torchrun, mpirun or srun (or
                 RANK/WORLD_SIZE set by hand): this process runs its rank,
                 the launcher's variables say which (docs/runtime.md#launchers);
                 run() returns the whole outputs on rank 0, and elsewhere the
                 part of each output that rank computed.
                 Every process must make the same runs in the same order.
    rendezvous   where a distributed session's processes meet, as pcc-run's
                 --rendezvous: a directory they all see, or tcp:HOST:PORT
                 (default: PCC_RENDEZVOUS, else the launcher's address)

    The ranks (their weights, memory and a generation plan's cache) stay
    ready between runs. Ctrl-C stops a run; the session is then closed.
    """

    def __init__(self, plan: Union[Plan, str, os.PathLike], backend: str = "cpu", threads: Optional[int] = None,
                 timeout: int = 300, distributed: bool = False, rendezvous: Optional[str] = None):
        if not isinstance(plan, Plan):
            plan = load(plan)
        if backend not in ("cpu", "cuda", "auto"):
            raise BadInputError(f"backend must be cpu, cuda or auto, not {backend!r}")
        self._plan = plan
        self._session = _pcc.Session(plan._bundle, backend, int(threads or 0), int(timeout), bool(distributed),
                                     os.fspath(rendezvous) if rendezvous is not None else "")

    @property
    def plan(self) -> Plan:
        return self._plan

    @property
    def rank(self) -> int:
        """This process's rank in a distributed session; -1 otherwise."""
        return self._session.rank

    @property
    def world_size(self) -> int:
        return self._session.world_size

    def get_inputs(self) -> List[TensorInfo]:
        return self._plan.inputs

    def get_outputs(self) -> List[TensorInfo]:
        return self._plan.outputs

    def run(self, output_names: Optional[Iterable[str]], feeds: Mapping[str, Any]) -> List[np.ndarray]:
        """Runs every rank once. \\returns the outputs named (all when None), in
        that order. Off rank 0 in a distributed session: this rank's own part of
        each (its slice of a split output, None where it computes none of it;
        own_slices() says where each lies)."""
        outs = self._session.run(_feeds_in_order(self.get_inputs(), feeds))
        names = [o.name for o in self.get_outputs()]
        if output_names is None:
            return list(outs)
        picked = []
        for n in output_names:
            if n not in names:
                raise BadInputError(f"output '{n}' is not an output of the plan (outputs: {', '.join(names)})")
            picked.append(outs[names.index(n)])
        return picked

    def run_dict(self, feeds: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        """Runs every rank once. \\returns {output name: array} (off rank 0 in a
        distributed session: the parts this rank computed, see own_slices)."""
        outs = self.run(None, feeds)
        return {o.name: a for o, a in zip(self.get_outputs(), outs) if a is not None}

    def own_slices(self) -> Dict[str, Optional[Tuple[int, int, int]]]:
        """A distributed session: where this rank's part of each output of the
        last run lies, (dim, start, length) with dim -1 for the whole output,
        None where the rank computes none of it. {} in a threads session."""
        return dict(zip((o.name for o in self.get_outputs()), self._session.own_slices()))

    def profile(self, feeds: Mapping[str, Any], iters: int = 1) -> List[Dict[str, Any]]:
        """Runs `feeds` `iters` times with every instruction timed (ranks
        prepared afresh for it). \\returns one dict per instruction of every
        rank: rank, index, op, node, seconds (mean), min_seconds, calls, provider."""
        return list(self._session.profile(_feeds_in_order(self.get_inputs(), feeds), int(iters)))

    def generate(self, prompt_ids, max_new_tokens: int = 16, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, stop_at_eos: bool = True, prefill: bool = True,
                 check: bool = False) -> Dict[str, Any]:
        """Generates with a generation plan (docs/generation.md).

        prompt_ids  one prompt (a list of token ids) or a list of them (at most
                    the plan's generation batch)
        check       also run the export's own decode step and compare every
                    step's logits (CheckError on a mismatch)

        \\returns {"tokens": new tokens per prompt, "steps", "prefill_tokens",
        "prefill_length" (the prompt tokens of the prefill program that ran, 0: none),
        "first_token_seconds", "decode_seconds", "decode_tokens", "overflow", "checked_steps",
        "max_logit_diff"}.
        """
        prompts = [list(map(int, p)) for p in prompt_ids] if len(prompt_ids) and not np.isscalar(prompt_ids[0]) \
            else [list(map(int, prompt_ids))]
        return dict(self._session.generate(prompts, int(max_new_tokens), float(temperature), int(top_k),
                                           float(top_p), int(seed), bool(stop_at_eos), bool(prefill), bool(check)))

    def close(self) -> None:
        """Stops the ranks and frees their memory (also when the session is collected)."""
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
