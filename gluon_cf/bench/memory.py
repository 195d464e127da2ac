"""``python -m gluon_cf.bench.memory``: peak memory (and time) of long loops and deep recursion.

Run it with ``python -m gluon_cf.bench.memory [--quick] [--json PATH] [--cells PATTERN]``.

Every cell runs in a fresh subprocess (``--child``), so no cell sees another's allocator state
or compiled graphs. The child builds its model and inputs, runs one short warm-up (a few steps:
MXNet's and OpenMP's threads and one-time state, which every cell would otherwise pay), resets
the kernel's peak-RSS mark (``/proc/self/clear_refs``; a psutil sampling thread where that is
not available), runs the measured call once (forward, or forward + backward) and reports the
peak RSS minus the RSS before the call: the memory the run itself needed, whatever allocator
holds it (MXNet's, PyTorch's, Python's). Time is that same call's wall time; the machine this
was measured on is shared (2 cores, others at work), so times are indicative, memory is not
affected.

Cells:

* ``lstm``: a hybridized ``LSTMCell`` (hidden 256, batch 32, input 256) scanned over T steps,
  training (forward + backward of the sum of the outputs) and inference (forward, no autograd),
  with gluon_cf.foreach (no ``remat``; ``remat`` True, sqrt(T), "auto", and
  ``gluon_cf.MemoryBudget`` of 0.12 MB per step, see REMAT), MXNet's ``F.contrib.foreach``
  (``_foreach``), and PyTorch's ``LSTMCell`` in a Python loop, plain and with
  ``torch.utils.checkpoint`` per step (when torch is importable).
* ``treelstm``: training of ``gluon_cf.models.TreeLSTM`` (hybridized, batching executor) on one
  chain of N nodes (a left-branching tree) and on a forest of 25 SST-like trees, ``remat``
  False and True.

Cells whose ``remat`` keyword gluon_cf does not accept (before rematerialisation exists) are
reported as ``n/a (remat not available)``; PyTorch cells without torch as
``n/a (torch not installed)``.
"""
import argparse
import fnmatch
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

HIDDEN, BATCH = 256, 32   # the LSTM's input size is its hidden size
NA_REMAT = "n/a (remat not available)"
NA_REMAT_RECURSION = "n/a (remat not implemented for hybridized recursion yet)"
NA_TORCH = "n/a (torch not installed)"
MB = 1024.0 * 1024.0
# What each gluon_cf impl passes as ``remat=`` for a loop of T steps (nothing for None):
# every step's intermediates recomputed; a checkpoint every sqrt(T) steps; chosen by gluon_cf;
# chosen for a budget of BUDGET_MB_PER_STEP x T (issue 25's target for remat=True).
BUDGET_MB_PER_STEP = 0.12
REMAT = {"gluon_cf": None, "gluon_cf_remat": lambda t: True,
         "gluon_cf_sqrt": lambda t: max(1, int(round(t ** 0.5))),
         "gluon_cf_auto": lambda t: "auto",
         "gluon_cf_budget": lambda t: _budget(BUDGET_MB_PER_STEP * t)}
LSTM_IMPLS = ("gluon_cf", "gluon_cf_remat", "gluon_cf_sqrt", "gluon_cf_auto", "gluon_cf_budget",
              "mxnet", "torch", "torch_ckpt")
TREE_IMPLS = ("gluon_cf", "gluon_cf_remat")


@dataclass(frozen=True)
class Cell:
    """One measurement: ``model`` (lstm | treelstm_chain | treelstm_forest), ``impl``, ``mode``
    (train | infer) and ``size`` (loop steps, chain nodes, or trees in the forest)."""
    model: str
    impl: str
    mode: str
    size: int

    @property
    def key(self) -> str:
        return "%s/%s/%s/%d" % (self.model, self.impl, self.mode, self.size)


@dataclass
class Preset:
    steps: tuple
    chain_nodes: int
    forest_trees: int
    hidden: int = HIDDEN
    batch: int = BATCH
    tree_hidden: int = 150
    cells: List[Cell] = field(default_factory=list)


def _preset_cells(p: Preset) -> List[Cell]:
    # torch.utils.checkpoint changes nothing without autograd: no torch_ckpt inference cell.
    cells = [Cell("lstm", impl, mode, t) for t in p.steps for mode in ("train", "infer")
             for impl in LSTM_IMPLS if not (impl == "torch_ckpt" and mode == "infer")]
    cells += [Cell("treelstm_chain", impl, "train", p.chain_nodes) for impl in TREE_IMPLS]
    cells += [Cell("treelstm_forest", impl, "train", p.forest_trees) for impl in TREE_IMPLS]
    return cells


PRESETS = {
    "full": Preset(steps=(400, 1600, 6400), chain_nodes=5000, forest_trees=25),
    # Under 2 minutes on a loaded 2-core machine.
    "quick": Preset(steps=(400,), chain_nodes=500, forest_trees=25),
}


# ------------------------------------------------------------------------------ measuring a call

class PeakRSS:
    """Peak resident memory of this process over a ``with`` block, minus the RSS at its start.

    Uses the kernel's high-water mark (VmHWM, reset through ``/proc/self/clear_refs``) when
    available, else a psutil thread sampling the RSS every millisecond."""

    def __init__(self):
        import psutil
        self.process = psutil.Process()
        self.growth = 0
        self._samples = None

    def __enter__(self):
        import gc
        gc.collect()
        self.start = self.process.memory_info().rss
        self._kernel = _reset_peak()
        if not self._kernel:
            self._stop = threading.Event()
            self._peak = self.start
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self._peak = max(self._peak, self.process.memory_info().rss)
            time.sleep(0.001)

    def __exit__(self, *exc):
        if self._kernel:
            peak = _kernel_peak()
        else:
            self._stop.set()
            self._thread.join()
            peak = self._peak
        peak = max(peak, self.process.memory_info().rss)
        self.growth = peak - self.start
        return False


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _kernel_peak() is not None
    except OSError:
        return False


def _kernel_peak() -> Optional[int]:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


# --------------------------------------------------------------------------------- LSTM, MXNet

class _NoRemat(Exception):
    """gluon_cf here has no rematerialisation (no ``MemoryBudget``)."""


def _budget(megabytes):
    import gluon_cf
    budget = getattr(gluon_cf, "MemoryBudget", None)
    if budget is None:
        raise _NoRemat()
    return budget(int(megabytes * MB))


def _remat_kwargs(impl, size):
    remat = REMAT.get(impl)
    return {} if remat is None else {"remat": remat(size)}


def _lstm_mxnet(impl, hidden, batch, steps, train):
    """Build and return ``run()`` for an MXNet/gluon_cf LSTM scan cell, or an n/a string."""
    import mxnet as mx
    from mxnet import autograd, gluon
    import gluon_cf

    try:
        kwargs = _remat_kwargs(impl, steps)
    except _NoRemat:
        return NA_REMAT

    class Scan(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.cell = gluon.rnn.LSTMCell(hidden, input_size=hidden)

        def hybrid_forward(self, F, seq, h, c):
            body = lambda x, s: self.cell(x, s)  # noqa: E731
            if impl == "mxnet":
                outs, states = F.contrib.foreach(body, seq, [h, c])
            else:
                outs, states = gluon_cf.foreach(body, seq, [h, c], **kwargs)
            return outs, states[0], states[1]

    mx.random.seed(0)
    net = Scan()
    net.initialize(mx.init.Uniform(0.1))
    net.hybridize()
    h, c = mx.nd.zeros((batch, hidden)), mx.nd.zeros((batch, hidden))

    def call(seq):
        if not train:
            outs = net(seq, h, c)
            mx.nd.waitall()
            return outs
        with autograd.record():
            outs, hT, cT = net(seq, h, c)
            loss = outs.sum() + hT.sum() + cT.sum()
        loss.backward()
        mx.nd.waitall()
        return None

    try:
        call(mx.nd.random.uniform(-1, 1, (3, batch, hidden)))   # warm-up (and: remat accepted?)
    except TypeError as err:
        if kwargs and "remat" in str(err):
            return NA_REMAT
        raise
    seq = mx.nd.random.uniform(-1, 1, (steps, batch, hidden))
    mx.nd.waitall()
    return lambda: call(seq)


# ------------------------------------------------------------------------------- LSTM, PyTorch

def _lstm_torch(impl, hidden, batch, steps, train):
    try:
        import torch
        from torch.utils.checkpoint import checkpoint
    except ImportError:
        return NA_TORCH
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(hidden, hidden)
    h0, c0 = torch.zeros(batch, hidden), torch.zeros(batch, hidden)

    def call(seq):
        with torch.set_grad_enabled(train):
            h, c, outs = h0, c0, []
            for x in seq:
                if impl == "torch_ckpt" and train:
                    h, c = checkpoint(cell, x, (h, c), use_reentrant=False)
                else:
                    h, c = cell(x, (h, c))
                outs.append(h)
            stacked = torch.stack(outs)
            if train:
                (stacked.sum() + h.sum() + c.sum()).backward()
                cell.zero_grad(set_to_none=False)
        return stacked

    call(torch.rand(3, batch, hidden))
    seq = torch.rand(steps, batch, hidden) * 2 - 1
    return lambda: call(seq)


# ------------------------------------------------------------------------------------ TreeLSTM

def _treelstm(model, impl, size, hidden):
    import mxnet as mx
    from mxnet import autograd
    import gluon_cf
    from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
    from gluon_cf.models import TreeLSTM

    if model == "treelstm_chain":
        trees = synthetic_treebank(1, "linear", seed=1, length=(size + 1) // 2)
    else:
        trees = synthetic_treebank(size, "sst", seed=1)
    vocab = build_vocab(trees)
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    warm = batchify_forest([encode_tree(t, vocab) for t in synthetic_treebank(
        2, "sst", seed=2, length=3)])
    # remat: the recursive function's (NOTE [hybridized remat recursion]); a gluon_cf whose
    # models take no ``remat`` has none for hybridized recursion.
    kwargs = {"remat": True} if _remat_kwargs(impl, size) else {}
    mx.random.seed(0)
    try:
        net = TreeLSTM(len(vocab), embed_size=hidden, hidden_size=hidden, **kwargs)
    except TypeError:
        return NA_REMAT_RECURSION
    net.initialize(mx.init.Uniform(0.1))
    net.hybridize()
    gluon_cf.set_executor("batched")

    def arrays(f):
        return [mx.nd.array(a, dtype="int32") for a in (f.tokens, f.left, f.right, f.roots)]

    def call(inputs):
        with autograd.record():
            loss = net(*inputs).sum()
        loss.backward()
        mx.nd.waitall()

    call(arrays(warm))
    inputs = arrays(forest)
    return _CountedRun(lambda: call(inputs), len(forest.tokens))


class _CountedRun:
    """A cell's run that processes ``nodes`` tree nodes (reported as MB per node)."""

    def __init__(self, run, nodes: int):
        self.run, self.nodes = run, nodes

    def __call__(self) -> None:
        self.run()


# ------------------------------------------------------------------------------------- a child

def run_cell(cell: Cell, hidden: int, batch: int, tree_hidden: int) -> Dict[str, Any]:
    """Measure ``cell`` in this process: ``{"peak_mb", "seconds"}`` or ``{"na": reason}``."""
    train = cell.mode == "train"
    if cell.model == "lstm":
        if cell.impl.startswith("torch"):
            run = _lstm_torch(cell.impl, hidden, batch, cell.size, train)
        else:
            run = _lstm_mxnet(cell.impl, hidden, batch, cell.size, train)
    elif cell.model in ("treelstm_chain", "treelstm_forest"):
        run = _treelstm(cell.model, cell.impl, cell.size, tree_hidden)
    else:
        raise ValueError("gluon_cf.bench.memory: unknown model %r (lstm, treelstm_chain, "
                         "treelstm_forest)" % cell.model)
    if isinstance(run, str):
        return {"na": run}
    with PeakRSS() as peak:
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
    result = {"peak_mb": peak.growth / MB, "seconds": seconds}
    if isinstance(run, _CountedRun):
        result["nodes"] = run.nodes
    if cell.model == "lstm" and train and cell.impl in ("gluon_cf_auto", "gluon_cf_budget"):
        result.update(_choice(cell.size))
    return result


def _choice(steps: int) -> Dict[str, Any]:
    """The interval "auto"/the budget chose for the measured loop, what it estimated, and what
    the loop grew by beyond its outputs and their gradients (NOTE [remat budgets])."""
    try:
        from gluon_cf.remat_budget import choices
    except ImportError:
        return {}
    mine = [c for c in choices if c.steps == steps]
    if not mine:
        return {}
    return {"interval": mine[-1].k, "budget_mb": mine[-1].budget / MB,
            "estimate_mb": mine[-1].cost / MB}


def measure(cell: Cell, hidden: int = HIDDEN, batch: int = BATCH, tree_hidden: int = 150,
            timeout: float = 1800.0) -> Dict[str, Any]:
    """Measure ``cell`` in a fresh ``python -m gluon_cf.bench.memory --child`` process."""
    args = json.dumps({"cell": asdict(cell), "hidden": hidden, "batch": batch,
                       "tree_hidden": tree_hidden})
    env = dict(os.environ, MXNET_ENGINE_TYPE=os.environ.get("MXNET_ENGINE_TYPE",
                                                            "ThreadedEnginePerDevice"))
    try:
        proc = subprocess.run([sys.executable, "-m", "gluon_cf.bench.memory", "--child", args],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %.0f s" % timeout}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["exit code %d" % proc.returncode])[-1]
        return {"error": tail[:300]}
    return json.loads(lines[-1])


def _child(text):
    spec = json.loads(text)
    result = run_cell(Cell(**spec["cell"]), spec["hidden"], spec["batch"], spec["tree_hidden"])
    print(json.dumps(result), flush=True)
    os._exit(0)   # skip interpreter teardown: nothing to flush, and it only costs time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick preset (< 2 minutes)")
    parser.add_argument("--cells", default="*", help="only cells whose key matches one of these "
                        "comma-separated globs (model/impl/mode/size, e.g. 'lstm/*/train/*')")
    parser.add_argument("--json", default=None, help="write the JSON summary to this file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return None
    preset = PRESETS["quick" if args.quick else "full"]
    summary = run_preset(preset, args.cells)
    print(format_table(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    return summary


def run_preset(preset: Preset, pattern: str = "*", log=sys.stderr) -> Dict[str, Any]:
    """Measure every cell of ``preset`` matching ``pattern``; the JSON summary."""
    patterns = pattern.split(",")
    cells = [c for c in (preset.cells or _preset_cells(preset))
             if any(fnmatch.fnmatch(c.key, p) for p in patterns)]
    results = {}
    for cell in cells:
        result = measure(cell, preset.hidden, preset.batch, preset.tree_hidden)
        if "peak_mb" in result:
            result["mb_per_step" if cell.model == "lstm" else "mb_per_node"] = \
                result["peak_mb"] / max(result.get("nodes", cell.size), 1)
        if "interval" in result:   # the outputs (T steps and the final h, c), their gradients
            io = 2 * (cell.size + 2) * preset.batch * preset.hidden * 4 / MB
            result["beyond_io_mb"] = result["peak_mb"] - io
        results[cell.key] = result
        print("%-40s %s" % (cell.key, json.dumps(result)), file=log, flush=True)
    return {"hidden": preset.hidden, "batch": preset.batch, "tree_hidden": preset.tree_hidden,
            "state_mb_per_step": 2 * preset.batch * preset.hidden * 4 / MB,
            "output_mb_per_step": preset.batch * preset.hidden * 4 / MB,
            "cells": results}


def format_table(summary: Dict[str, Any]) -> str:
    """The summary as a text table: one row per (model, mode, size), MB and seconds per impl."""
    rows: Dict[tuple, Dict[str, str]] = {}
    impls: List[str] = []
    for key, result in summary["cells"].items():
        model, impl, mode, size = key.split("/")
        if impl not in impls:
            impls.append(impl)
        if "peak_mb" in result:
            per = result.get("mb_per_step", result.get("mb_per_node"))
            text = "%.1f MB (%.3f/%s) %.2f s" % (result["peak_mb"], per,
                                              "step" if model == "lstm" else "node",
                                              result["seconds"])
        else:
            text = result.get("na") or "error: " + result.get("error", "?")[:40]
        rows.setdefault((model, mode, int(size)), {})[impl] = text
    header = ["model", "mode", "size"] + impls
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for (model, mode, size), by_impl in rows.items():
        lines.append(" | ".join([model, mode, str(size)] + [by_impl.get(i, "") for i in impls]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
