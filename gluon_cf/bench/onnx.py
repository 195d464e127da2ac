"""``python -m gluon_cf.bench.onnx``: recursive models exported, against the machine's limits.

TreeLSTM and TreeRNN (H=150, E=300, SST-like trees), inference, trees/s, for: j. the model
exported as standard ONNX by ``export_onnx`` (recursion lowered to loops over the levels of the
call trees) in onnxruntime; k. the same model saved as an artifact and run by
``gluon_cf.export.load``; e. gluon_cf hybridized in MXNet (batching executor); h. numpy
level-batched (the same arithmetic without a framework: the machine's limit); f. PyTorch eager
per-node recursion (optional). Every method is checked against h on one mini-batch first, with
the harness of ``python -m gluon_cf.bench`` (methods take turns, median of rounds, new forests
each mini-batch). Then one 5,001-node chain (a left-deep tree), the deep and narrow case, timed
per call. The last line is a JSON summary.
"""
import argparse
import json
import time
from typing import Dict, Optional

import mxnet as mx
import numpy as np

from gluon_cf.bench import METHODS
from gluon_cf.bench.__main__ import Preset, _cells, format_table, run
from gluon_cf.bench.baselines import Batch, MethodUnavailable, ModelConfig, make_model
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, parse_tree

METHOD_ORDER = ['h', 'j', 'k', 'e', 'f']
RATIOS = [('j', 'k', 'vs_artifact'), ('j', 'h', 'vs_numpy'), ('j', 'f', 'vs_torch'),
          ('j', 'e', 'vs_mxnet')]
PRESETS = {
    'full': Preset(300, 150, 500, 19.0, 2.0, 1, tuple(
        _cells(['treelstm', 'treernn'], ['sst'], ['infer'], [1, 25]))),
    'quick': Preset(300, 150, 100, 19.0, 0.5, 1, tuple(
        _cells(['treelstm', 'treernn'], ['sst'], ['infer'], [1, 25]))),
    'smoke': Preset(8, 8, 30, 6.0, 0.02, 1, tuple(
        _cells(['treelstm', 'treernn'], ['sst'], ['infer'], [1, 4]))),
}
CHAIN_LEAVES = {'full': 2501, 'quick': 2501, 'smoke': 40}


def chain_seconds(kind, preset, methods, leaves, seed=0, repeats=3):
    """{method: seconds per call} on one left-deep tree of ``2 * leaves - 1`` nodes."""
    text = '(2 w0)'
    for k in range(1, leaves):
        text = '(2 %s (2 w%d))' % (text, k % 7)
    tree = parse_tree(text)
    vocab = build_vocab([tree])
    encoded = encode_tree(tree, vocab)
    batch = Batch([encoded], batchify_forest([encoded]))
    model = make_model(ModelConfig(kind, len(vocab), preset.embed_size, preset.hidden_size),
                       seed)
    out, reference = {}, None
    for name in methods:
        if name == 'f':      # per-node Python recursion: 5,000 frames deep
            continue
        try:
            runner = METHODS[name].builder(model)
        except MethodUnavailable:
            continue
        result = runner.infer(batch)        # warm-up, and the check
        mx.nd.waitall()
        logits = np.asarray(result[1].asnumpy() if hasattr(result[1], 'asnumpy') else result[1])
        if reference is None:
            reference = logits
        np.testing.assert_allclose(logits, reference, rtol=1e-4, atol=1e-4,
                                   err_msg=f'chain: method {name} disagrees')
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            runner.infer(batch)
            mx.nd.waitall()
            times.append(time.perf_counter() - start)
        out[name] = float(np.median(times))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m gluon_cf.bench.onnx', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument('--quick', action='store_true', help='shorter timing, about 2 minutes')
    size.add_argument('--smoke', action='store_true', help='tiny sizes, seconds')
    parser.add_argument('--methods', default=','.join(METHOD_ORDER))
    args = parser.parse_args(argv)
    preset_name = 'smoke' if args.smoke else 'quick' if args.quick else 'full'
    preset = PRESETS[preset_name]
    methods = [m for m in args.methods.split(',') if m]
    print(f'gluon_cf.bench.onnx ({preset_name}): H={preset.hidden_size} E={preset.embed_size}, '
          f'inference, trees/s (higher is better)')
    for name in methods:
        print(f'  {name}: {METHODS[name].label}')
    results, skipped = run(preset, methods, 0, preset.budget)
    for name, reason in skipped.items():
        print(f'method {name} skipped: {reason}')
    print(format_table(results, methods, RATIOS))
    trees_per_second: Dict[str, Dict[str, Optional[float]]] = {}
    chains: Dict[str, Dict[str, float]] = {}
    summary: Dict[str, object] = {'preset': preset_name, 'trees_per_second': trees_per_second,
                                  'chain_seconds': chains}
    for cell, row in results.items():
        trees_per_second[cell.key] = {m: row.get(m) for m in methods}
        for num, den, suffix in RATIOS:
            if row.get(num) and row.get(den):
                summary[f'{cell.kind}_b{cell.batch_size}_onnx_{suffix}'] = \
                    round(row[num] / row[den], 3)
    leaves = CHAIN_LEAVES[preset_name]
    print(f'\none chain of {2 * leaves - 1} nodes, seconds per call (lower is better):')
    for kind in ('treelstm', 'treernn'):
        seconds = chain_seconds(kind, preset, methods, leaves)
        chains[kind] = seconds
        print(f'  {kind}: ' + ', '.join(f'{m} {s:.3f} s' for m, s in seconds.items()))
    print(json.dumps(summary))


if __name__ == '__main__':
    main()
