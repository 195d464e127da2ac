"""The benchmark figure is drawn from the JSON summary, and shows what the summary says."""
import json

import numpy as np
import pytest

from gluon_cf.bench.plot import main, plot_summary, speedup_table

SUMMARY = {
    'preset': 'quick', 'hidden_size': 32, 'embed_size': 16,
    'methods': {'a': 'eager per-node (Gluon)', 'e': 'gluon_cf batching', 'f': 'PyTorch'},
    'trees_per_second': {
        'treernn/sst/infer/b25': {'a': 100.0, 'e': 2500.0, 'f': None},
        'treelstm/sst/train/b1': {'a': 20.0, 'e': 30.0, 'f': 10.0},
        'treelstm/sst/infer/b1': {'a': 50.0, 'e': 100.0, 'f': 500.0},
        'treelstm/linear/infer/b1': {'a': 1.0, 'e': 1000.0, 'f': 1.0},   # not on SST: left out
    },
}


def test_speedup_table_orders_rows_and_divides_by_the_baseline():
    table = speedup_table(SUMMARY)
    assert table.rows == ['TreeLSTM inference, batch 1', 'TreeLSTM training, batch 1',
                          'TreeRNN inference, batch 25']
    assert table.methods == ['a', 'e', 'f']
    assert table.baseline == [50.0, 20.0, 100.0]
    assert table.speedups == [[1.0, 2.0, 10.0], [1.0, 1.5, 0.5], [1.0, 25.0, None]]


def test_only_other_shapes_are_shown_when_there_is_no_sst_cell():
    summary = dict(SUMMARY, trees_per_second={
        'treernn/linear/infer/b1': {'a': 2.0, 'e': 8.0, 'f': 1.0}})
    table = speedup_table(summary)
    assert table.rows == ['TreeRNN inference, batch 1, linear']
    assert table.speedups == [[1.0, 4.0, 0.5]]


def test_plot_is_drawn_from_the_json_file(tmp_path):
    matplotlib_image = pytest.importorskip('matplotlib.image')
    path = tmp_path / 'summary.json'
    path.write_text(json.dumps(SUMMARY))
    main([str(path), str(tmp_path / 'plot.png')])
    image = matplotlib_image.imread(str(tmp_path / 'plot.png'))
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
    # A different summary draws a different picture.
    table = plot_summary(dict(SUMMARY, trees_per_second={
        'treernn/sst/infer/b25': {'a': 100.0, 'e': 10.0, 'f': 100.0}}), tmp_path / 'other.png')
    assert table.speedups == [[1.0, 0.1, 1.0]]
    other = matplotlib_image.imread(str(tmp_path / 'other.png'))
    assert other.shape != image.shape or not np.array_equal(other, image)
