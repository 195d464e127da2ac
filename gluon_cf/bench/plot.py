"""The benchmark's figure, drawn from the JSON summary ``python -m gluon_cf.bench`` writes.

``python -m gluon_cf.bench.plot bench_results.json bench_results.png`` redraws it.

One heat map: a row per measured cell (model, mode, batch size) on SST-like trees, a column per
method, each square the method's speed-up over method 'a' (eager per-node Gluon, the code a user
writes first) in trees per second, printed in the square. The colour scale is logarithmic and
centred on 1x, because the speed-ups span three orders of magnitude: blue is faster than 'a',
red slower. A per-method line chart per shape, as before, needed eight panels and a legend of
nine lines to say the same, and could not be read.
"""
import argparse
import json
import math
import textwrap
from dataclasses import dataclass
from typing import Dict, List, Optional

BASELINE = 'a'
HIGHLIGHT = 'e'   # gluon_cf's default executor: framed, so the eye finds it first
SHAPE = 'sst'
MODELS = {'treelstm': 'TreeLSTM', 'treernn': 'TreeRNN', 'rntn': 'RNTN'}
MODES = {'infer': 'inference', 'train': 'training'}


@dataclass
class SpeedupTable:
    """What the figure shows: ``speedups[i][j]`` is method ``methods[j]``'s trees/s over the
    baseline's in row ``rows[i]`` (None where either was not measured); ``baseline[i]`` is the
    baseline's trees/s in that row."""
    rows: List[str]
    methods: List[str]
    speedups: List[List[Optional[float]]]
    baseline: List[Optional[float]]


def speedup_table(summary, shape=SHAPE):
    """The :class:`SpeedupTable` of a benchmark JSON summary, for the cells on ``shape`` trees
    (all cells if none is on ``shape``), ordered by model, mode and batch size.

    Example::

        >>> from gluon_cf.bench.plot import speedup_table
        >>> summary = {"preset": "quick", "methods": {"a": "eager per-node", "e": "gluon_cf"},
        ...            "trees_per_second": {"treelstm/sst/infer/b25": {"a": 50.0, "e": 1500.0},
        ...                                 "treelstm/sst/infer/b1": {"a": 60.0, "e": None}}}
        >>> table = speedup_table(summary)
        >>> table.rows
        ['TreeLSTM inference, batch 1', 'TreeLSTM inference, batch 25']
        >>> table.methods, table.speedups
        (['a', 'e'], [[1.0, None], [1.0, 30.0]])
    """
    cells = {}
    for key, speeds in summary['trees_per_second'].items():
        kind, cell_shape, mode, batch = key.split('/')
        cells[(kind, cell_shape, mode, int(batch.lstrip('b')))] = speeds
    if any(cell[1] == shape for cell in cells):
        cells = {cell: speeds for cell, speeds in cells.items() if cell[1] == shape}
    model_order = list(MODELS) + sorted({c[0] for c in cells} - set(MODELS))
    order = sorted(cells, key=lambda c: (model_order.index(c[0]), c[2] != 'infer', c[3], c[1]))
    methods = list(summary.get('methods') or
                   dict.fromkeys(m for speeds in cells.values() for m in speeds))
    rows, speedups, baseline = [], [], []
    for cell in order:
        speeds = cells[cell]
        base = speeds.get(BASELINE)
        shape_note = '' if cell[1] == shape else f', {cell[1]}'
        rows.append(f'{MODELS.get(cell[0], cell[0])} {MODES.get(cell[2], cell[2])}, '
                    f'batch {cell[3]}{shape_note}')
        baseline.append(base)
        speedups.append([speeds[m] / base if base and speeds.get(m) is not None else None
                         for m in methods])
    return SpeedupTable(rows, methods, speedups, baseline)


def plot_summary(summary, path, shape=SHAPE):
    """Draw the speed-up heat map of a benchmark JSON summary (a dict) into ``path`` (PNG);
    returns the :class:`SpeedupTable` drawn.

    Example::

        >>> import os
        >>> from gluon_cf.bench.plot import plot_summary
        >>> summary = {"preset": "quick", "methods": {"a": "eager per-node", "e": "gluon_cf"},
        ...            "trees_per_second": {"treelstm/sst/infer/b25": {"a": 50.0, "e": 1500.0},
        ...                                 "treelstm/sst/infer/b1": {"a": 60.0, "e": None}}}
        >>> plot_summary(summary, "speedups.png").speedups
        [[1.0, None], [1.0, 30.0]]
        >>> os.path.getsize("speedups.png") > 0
        True
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    table = speedup_table(summary, shape)
    labels: Dict[str, str] = summary.get('methods') or {}
    values = [v for row in table.speedups for v in row if v]
    extreme = max([2.0] + [max(v, 1 / v) for v in values])
    norm = LogNorm(vmin=1 / extreme, vmax=extreme)
    cmap = plt.get_cmap('RdBu')
    grid = [[math.nan if v is None else v for v in row] for row in table.speedups]

    width = 2.6 + 1.05 * len(table.methods)
    height = 2.4 + 0.36 * len(table.rows)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(grid, cmap=cmap, norm=norm, aspect='auto')
    for i, row in enumerate(table.speedups):
        for j, value in enumerate(row):
            if value is None:
                ax.text(j, i, 'n/a', ha='center', va='center', fontsize=8, color='0.45')
                continue
            text = f'{value:.0f}x' if value >= 10 else f'{value:.1f}x'
            dark = abs(math.log(value)) > 0.6 * math.log(extreme)
            ax.text(j, i, text, ha='center', va='center', fontsize=8,
                    color='white' if dark else 'black')
    ax.set_xticks(range(len(table.methods)))
    ax.set_xticklabels([f'{m}\n' + textwrap.fill(labels.get(m, ''), 14,
                                                  break_long_words=False)
                        for m in table.methods], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(table.rows)))
    ax.set_yticklabels([f'{row}\n(a: {base:.3g} trees/s)' if base else row
                        for row, base in zip(table.rows, table.baseline)], fontsize=7.5)
    if HIGHLIGHT in table.methods:
        column = table.methods.index(HIGHLIGHT)
        ax.add_patch(Rectangle((column - 0.5, -0.5), 1, len(table.rows), fill=False,
                               edgecolor='black', linewidth=2.5, zorder=3))
        ax.get_xticklabels()[column].set_fontweight('bold')
    ax.set_xticks([x - 0.5 for x in range(1, len(table.methods))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(table.rows))], minor=True)
    ax.grid(which='minor', color='white', linewidth=1.5)
    ax.tick_params(which='minor', length=0)
    colorbar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    colorbar.set_label('speed-up over a (trees/s ÷ trees/s of a), log scale')
    sizes = ', '.join(f'{name}={summary[key]}' for name, key in
                      (('H', 'hidden_size'), ('E', 'embed_size')) if key in summary)
    ax.set_title(f'Speed-up over eager per-node Gluon (method a): higher is better\n'
                 f'trees per second on SST-like trees, {sizes + ", " if sizes else ""}'
                 f'preset {summary.get("preset", "?")}; n/a: not run', fontsize=9, pad=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('summary', help="the JSON file 'python -m gluon_cf.bench' wrote")
    parser.add_argument('png', help='where to draw the figure')
    args = parser.parse_args(argv)
    with open(args.summary) as f:
        plot_summary(json.load(f), args.png)
    print(f'plot: {args.png}')


if __name__ == '__main__':
    main()
