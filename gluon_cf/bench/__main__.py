"""``python -m gluon_cf.bench``: trees/second of recursive tree models, method by method.

For every measured cell (model kind x tree shape x mode x batch size) and every method in
`gluon_cf.bench.METHODS`, runs warm-up iterations, then mini-batches until a wall-clock budget is
spent (at least one), calling `mx.nd.waitall()` after each, and reports trees/second. The methods
of a cell take turns in a few rounds and each reports its median round (`time_methods`). Before
timing a model, all methods are checked against method 'a' on one mini-batch.

Prints a table and the speed-up ratios, writes the JSON summary (`--json`: the headline ratios,
null when a method was not run, and every cell's trees/s) and the figure drawn from it
(`--plot`, `gluon_cf.bench.plot`), and prints the summary as the very last line.
"""
import argparse
import dataclasses
import itertools
import json
import sys
import time
from dataclasses import dataclass

from typing import Dict, List

import mxnet as mx
import numpy as np
from tqdm import tqdm

from gluon_cf.bench import METHODS
from gluon_cf.bench.plot import plot_summary
from gluon_cf.bench.baselines import (MethodUnavailable, ModelConfig, import_torch, make_batches,
                                      make_model)
from gluon_cf.data.trees import build_vocab, encode_tree, synthetic_treebank

# Ratio columns: (numerator method, denominator method, JSON suffix).
RATIOS = [('e', 'a', 'vs_eager'), ('e', 'd', 'vs_handbatched'), ('e', 'f', 'vs_torch'),
          ('e', 'g', 'vs_floor'), ('e', 'l', 'vs_floor_with_input_grads'), ('e', 'h', 'vs_numpy'),
          ('d', 'a', None)]
# The headline JSON keys: <kind>_<mode>_b<batch>_<suffix>, on SST-like trees.
HEADLINES = [('treelstm', 'infer', 25, 'vs_eager'), ('treelstm', 'train', 25, 'vs_eager'),
             ('treelstm', 'infer', 25, 'vs_handbatched'), ('treelstm', 'infer', 25, 'vs_torch'),
             ('treelstm', 'infer', 1, 'vs_eager'), ('treelstm', 'infer', 1, 'vs_torch'),
             ('treelstm', 'infer', 25, 'vs_floor'), ('treelstm', 'train', 25, 'vs_handbatched'),
             ('treelstm', 'train', 25, 'vs_floor'), ('treernn', 'infer', 25, 'vs_floor'),
             ('treelstm', 'infer', 1, 'vs_floor'),
             # (not the issue's: the floor that computes what training needs, session 36)
             ('treelstm', 'train', 25, 'vs_floor_with_input_grads'),
             ('treernn', 'train', 25, 'vs_floor_with_input_grads')]
CHECK_TOLERANCE = 1e-4
ROUNDS = 3   # the methods of a cell take turns this many times (see time_methods)
FRESH_TREES_PER_SECOND = 10000   # see run()


@dataclass(frozen=True)
class Cell:
    kind: str
    shape: str
    mode: str
    batch_size: int

    @property
    def key(self):
        return f'{self.kind}/{self.shape}/{self.mode}/b{self.batch_size}'


def _cells(kinds, shapes, modes, batch_sizes):
    return [Cell(*c) for c in itertools.product(kinds, shapes, modes, batch_sizes)]


@dataclass(frozen=True)
class Preset:
    embed_size: int
    hidden_size: int
    num_trees: int          # pool of distinct trees per shape
    mean_length: float      # sentence length of the synthetic treebank
    budget: float           # seconds of timed iterations per cell and method
    warmup: int
    cells: tuple


# 'moderate' is an alias of 'sst' in gluon_cf.data.trees, so TreeRNN's shape variants are sst,
# balanced and linear.
PRESETS = {
    'full': Preset(300, 150, 500, 19.0, 2.0, 1, tuple(
        _cells(['treelstm'], ['sst'], ['infer', 'train'], [1, 10, 25])
        + _cells(['treernn'], ['sst', 'balanced', 'linear'], ['infer', 'train'], [1, 10, 25])
        + _cells(['rntn'], ['sst'], ['infer', 'train'], [1, 10, 25]))),
    # Under 2 minutes on 2 cores (about 1): RNTN training only at batch 1, as eager RNTN training
    # takes ~0.7 s per tree (every node writes a 54 MB gradient of V).
    'quick': Preset(300, 150, 100, 19.0, 0.4, 1, tuple(
        _cells(['treelstm'], ['sst'], ['infer', 'train'], [1, 25])
        + _cells(['treernn'], ['sst'], ['infer', 'train'], [25])
        + _cells(['treernn'], ['balanced', 'linear'], ['infer'], [25])
        + _cells(['rntn'], ['sst'], ['infer'], [25])
        + _cells(['rntn'], ['sst'], ['train'], [1]))),
    # Seconds: exercises every code path with tiny sizes (used by the tests).
    'smoke': Preset(8, 8, 30, 6.0, 0.01, 1, tuple(
        _cells(['treelstm'], ['sst'], ['infer', 'train'], [1, 25])
        + _cells(['treernn', 'rntn'], ['sst'], ['infer', 'train'], [2])
        + _cells(['treernn'], ['linear'], ['infer'], [2]))),
}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='python -m gluon_cf.bench', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument('--quick', action='store_true', help='fewer configs, under 2 minutes')
    size.add_argument('--smoke', action='store_true', help='tiny sizes, a few seconds')
    parser.add_argument('--methods', default=','.join(METHODS),
                        help='comma-separated method names (default: all registered: '
                             f'{",".join(METHODS)})')
    parser.add_argument('--plot', default='bench_results.png', help='PNG path of the plot')
    parser.add_argument('--json', default='bench_results.json',
                        help='where the JSON summary (also the last line printed) is written')
    parser.add_argument('--budget', type=float, default=None,
                        help='seconds of timed iterations per cell and method '
                             '(default: per preset)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--kinds', default=None,
                        help='comma-separated model kinds: only the preset\'s cells of these '
                             '(default: all of them; e.g. treelstm,treernn leaves out RNTN, '
                             'whose eager training takes most of the full preset\'s time)')
    args = parser.parse_args(argv)
    known = sorted({c.kind for preset in PRESETS.values() for c in preset.cells})
    args.kinds = None if args.kinds is None else [k.strip() for k in args.kinds.split(',')
                                                  if k.strip()]
    if args.kinds is not None and (not args.kinds or set(args.kinds) - set(known)):
        parser.error(f'--kinds: expected some of {", ".join(known)}, got {args.kinds}')
    args.methods = [m.strip() for m in args.methods.split(',') if m.strip()]
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        parser.error(f'--methods: unknown method(s) {", ".join(unknown)}; registered methods '
                     f'are {", ".join(METHODS)}')
    return args


# ---------------------------------------------------------------------------------------------
# Building, checking and timing

def _to_numpy(x):
    if isinstance(x, mx.nd.NDArray):
        return x.asnumpy()
    if hasattr(x, 'detach'):         # a torch tensor
        return x.detach().numpy()
    return np.asarray(x)


def build_runners(model, methods, skipped):
    """{method: runner} for the methods whose builder succeeds; others go to `skipped`."""
    runners = {}
    for name in methods:
        if name in skipped:
            continue
        try:
            runners[name] = METHODS[name].builder(model)
        except MethodUnavailable as e:
            skipped[name] = str(e)
    return runners


def check_agreement(kind, runners, batch):
    """Every method's root states and logits must equal the first method's (normally 'a')."""
    outputs = {name: [_to_numpy(x) for x in runner.infer(batch)]
               for name, runner in runners.items() if getattr(runner, 'checked', True)}
    mx.nd.waitall()
    (ref_name, ref), *others = outputs.items()
    for name, out in others:
        for what, got, want in zip(('root states', 'logits'), out, ref):
            np.testing.assert_allclose(
                got, want, rtol=CHECK_TOLERANCE, atol=CHECK_TOLERANCE,
                err_msg=f'{kind}: method {name} ({METHODS[name].label}) disagrees with method '
                        f'{ref_name} on the {what} of a {batch.size}-tree mini-batch')


def time_method(step, batches, budget, first=0):
    """(trees/second of `step(batch)`, next batch index) over `batches`, cycled from `first`,
    for at least `budget` seconds."""
    trees, iters, start = 0, 0, time.perf_counter()
    while True:
        batch = batches[(first + iters) % len(batches)]
        step(batch)
        mx.nd.waitall()
        trees, iters = trees + batch.size, iters + 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return trees / elapsed, first + iters


def time_methods(steps, batches, budget, warmup):
    """{method: trees/second} for `steps` ({method: step}): after `warmup` calls each, the
    methods take turns for ROUNDS rounds of `budget / ROUNDS` seconds; a method's speed is the
    median of its rounds, so that a burst of machine noise hits one round, not one method."""
    for step in steps.values():
        for i in range(warmup):
            step(batches[i % len(batches)])
            mx.nd.waitall()
    rates: Dict[str, List[float]] = {name: [] for name in steps}
    position = dict.fromkeys(steps, warmup)   # timed on batches not seen in warm-up
    for _ in range(ROUNDS):
        for name, step in steps.items():
            rate, position[name] = time_method(step, batches, budget / ROUNDS, position[name])
            rates[name].append(rate)
    return {name: float(np.median(r)) for name, r in rates.items()}


def run(preset, methods, seed, budget):
    """Measure every cell of `preset`; returns ({cell: {method: trees/s}}, {method: reason})."""
    pools = {}
    for shape in sorted({c.shape for c in preset.cells}):
        pools[shape] = synthetic_treebank(preset.num_trees, shape=shape, seed=seed,
                                          mean_length=preset.mean_length)
    vocab = build_vocab(itertools.chain.from_iterable(pools.values()))
    encoded = {shape: [encode_tree(t, vocab) for t in trees] for shape, trees in pools.items()}

    results = {}
    skipped: Dict[str, str] = {}   # method -> why it did not run
    cells_by_kind = itertools.groupby(preset.cells, key=lambda c: c.kind)
    progress = tqdm(total=len(preset.cells) * len(methods), desc='bench', unit='run',
                    file=sys.stderr, leave=False)
    for kind, cells in cells_by_kind:
        config = ModelConfig(kind, len(vocab), preset.embed_size, preset.hidden_size)
        runners = build_runners(make_model(config, seed), methods, skipped)
        if len(runners) > 1:
            check_agreement(kind, runners, make_batches(encoded['sst'], 4, 1)[0])
        # Inference first: training changes each runner's weights.
        for cell in sorted(cells, key=lambda c: c.mode != 'infer'):
            # Enough mini-batches that a method is never timed twice on one forest (up to
            # FRESH_TREES_PER_SECOND): in training every mini-batch is a new forest, and a
            # forest seen before would let CachedOps reuse what they planned for its shapes.
            pool = encoded[cell.shape]
            num_batches = -(-max(len(pool), int(FRESH_TREES_PER_SECOND * budget))
                            // cell.batch_size) + preset.warmup
            batches = make_batches(pool, cell.batch_size, num_batches, seed=seed)
            progress.set_postfix_str(cell.key)
            steps = {name: runners[name].infer if cell.mode == 'infer'
                     else runners[name].train_step for name in methods if name in runners
                     and (cell.mode == 'infer' or getattr(runners[name], 'trains', True))}
            results[cell] = time_methods(steps, batches, budget, preset.warmup)
            progress.update(len(methods))
        del runners
    progress.close()
    return results, skipped


# ---------------------------------------------------------------------------------------------
# Reporting

def _ratio(row, num, den):
    if row.get(num) is None or row.get(den) is None:
        return None
    return row[num] / row[den]


def format_table(results, methods, ratios=None):
    ratios = RATIOS if ratios is None else ratios
    ratio_names = [f'{n}/{d}' for n, d, _ in ratios]
    header = ['model', 'shape', 'mode', 'batch'] + methods + ratio_names
    rows = []
    for cell, row in results.items():
        speeds = [f'{row[m]:.1f}' if row.get(m) is not None else 'n/a' for m in methods]
        shown = [_fmt_ratio(_ratio(row, n, d)) for n, d, _ in ratios]
        rows.append([cell.kind, cell.shape, cell.mode, str(cell.batch_size)] + speeds + shown)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ['  '.join(v.rjust(w) for v, w in zip(r, widths)) for r in [header] + rows]
    lines.insert(1, '-' * len(lines[0]))
    return '\n'.join(lines)


def _fmt_ratio(value):
    return 'n/a' if value is None else f'{value:.2f}x'


def headline_json(results, skipped, preset_name, methods, preset=None):
    by_key = {(c.kind, c.shape, c.mode, c.batch_size): row for c, row in results.items()}
    suffix_ratio = {suffix: (n, d) for n, d, suffix in RATIOS if suffix}
    out = {}
    for kind, mode, batch, suffix in HEADLINES:
        row = by_key.get((kind, 'sst', mode, batch), {})
        value = _ratio(row, *suffix_ratio[suffix])
        out[f'{kind}_{mode}_b{batch}_{suffix}'] = None if value is None else round(value, 4)
    out['trees_per_second'] = {c.key: {m: (None if row.get(m) is None else round(row[m], 2))
                                       for m in methods} for c, row in results.items()}
    out['skipped'] = skipped
    out['preset'] = preset_name
    out['methods'] = {m: METHODS[m].label for m in methods}
    if preset is not None:
        out['hidden_size'], out['embed_size'] = preset.hidden_size, preset.embed_size
    return out


def main(argv=None):
    args = parse_args(argv)
    preset_name = 'smoke' if args.smoke else 'quick' if args.quick else 'full'
    preset = PRESETS[preset_name]
    if args.kinds is not None:
        preset = dataclasses.replace(preset, cells=tuple(c for c in preset.cells
                                                         if c.kind in args.kinds))
    budget = preset.budget if args.budget is None else args.budget
    print(f'gluon_cf.bench ({preset_name}): H={preset.hidden_size} E={preset.embed_size}, '
          f'{preset.num_trees} synthetic trees per shape, {budget:g} s per measurement; '
          f'mxnet {mx.__version__}' + (f', {_torch_note()}' if 'f' in args.methods else '')
          + (f'; only the cells of {", ".join(args.kinds)}' if args.kinds else ''))
    for name in args.methods:
        print(f'  {name}: {METHODS[name].label}')
    results, skipped = run(preset, args.methods, args.seed, budget)
    for name, reason in skipped.items():
        print(f'method {name} skipped: {reason}')
    print('\ntrees/second (higher is better); ratios are trees/s of one method over another')
    print(format_table(results, args.methods))
    summary = headline_json(results, skipped, preset_name, args.methods, preset)
    if args.kinds is not None:
        summary['kinds'] = args.kinds
    with open(args.json, 'w') as f:
        json.dump(summary, f, indent=1)
    plot_summary(summary, args.plot)
    print(f'\nsummary: {args.json}\nplot: {args.plot} (python -m gluon_cf.bench.plot redraws '
          f'it from the summary)')
    print(json.dumps(summary))


def _torch_note():
    try:
        torch = import_torch()
    except MethodUnavailable:
        return 'torch not installed'
    return f'torch {torch.__version__} ({torch.get_num_threads()} threads)'


if __name__ == '__main__':
    main()
