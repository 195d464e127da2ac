"""The memory benchmark (``python -m gluon_cf.bench.memory``): its quick preset's cells on tiny
sizes, each in a fresh process, give the JSON summary and the table (the test runs a subset of
the cells that still reaches every impl, model and mode: each cell is a process of its own)."""
import dataclasses
import importlib.util
import json
import subprocess
import sys

import pytest

from gluon_cf.bench import memory


def test_quick_preset_on_tiny_sizes():
    quick = memory.PRESETS["quick"]
    tiny = dataclasses.replace(quick, steps=(4,), chain_nodes=9, forest_trees=2, hidden=8,
                               batch=2, tree_hidden=8)
    every = memory._preset_cells(tiny)
    assert {c.model for c in every} == {"lstm", "treelstm_chain", "treelstm_forest"}
    assert {c.impl for c in every} == set(memory.LSTM_IMPLS)
    assert {c.mode for c in every if c.model == "lstm"} == {"train", "infer"}
    # 13 of the 19: every LSTM impl training, inference without remat (gluon_cf, MXNet) and
    # with it, and each tree model with and without remat once
    cells = [c for c in every if c.model == "lstm" and (
        c.mode == "train" or c.impl in ("gluon_cf", "gluon_cf_remat", "mxnet"))]
    cells += [c for c in every if (c.model, c.impl) in (("treelstm_chain", "gluon_cf_remat"),
                                                       ("treelstm_forest", "gluon_cf"))]
    assert len(cells) == 13 and {c.impl for c in cells} == set(memory.LSTM_IMPLS)
    if importlib.util.find_spec("torch") is None:
        # without torch, torch and torch_ckpt are one branch of the child (NA_TORCH before
        # anything of the impl): one process shows it
        cells = [c for c in cells if c.impl != "torch_ckpt"]
    summary = memory.run_preset(dataclasses.replace(tiny, cells=cells))
    json.dumps(summary)   # JSON as it is
    assert set(summary) == {"hidden", "batch", "tree_hidden", "state_mb_per_step",
                            "output_mb_per_step", "cells"}
    assert set(summary["cells"]) == {c.key for c in cells}
    measured = 0
    for key, result in summary["cells"].items():
        assert "error" not in result, (key, result)
        if "na" in result:   # only torch where it is not installed
            assert key.split("/")[1].startswith("torch"), (key, result)
            assert result["na"] == memory.NA_TORCH, (key, result)
            continue
        measured += 1
        assert result["seconds"] > 0 and result["peak_mb"] >= 0, (key, result)
        per = "mb_per_step" if key.startswith("lstm/") else "mb_per_node"
        assert result[per] == result["peak_mb"] / result.get("nodes", int(key.split("/")[-1]))
        if key.startswith("treelstm"):
            assert result["nodes"] > 0
    # gluon_cf, MXNet and the trees always run; memory grows in at least one of them
    assert measured >= 6
    assert any(r.get("peak_mb", 0) > 0 for r in summary["cells"].values())
    table = memory.format_table(summary)
    assert table.splitlines()[0].startswith("model | mode | size | gluon_cf")
    assert "lstm | train | 4 |" in table


def test_a_failing_cell_is_reported_not_raised():
    """A child that fails (here: an unknown model) gives an error entry with its last line."""
    result = memory.measure(memory.Cell("nonsense", "gluon_cf", "train", 3), 8, 2, 8)
    assert set(result) == {"error"} and result["error"]


def test_peak_rss_sees_an_allocation():
    """In a fresh process, as the benchmark measures: after many tests glibc may serve the
    16 MiB from freed heap pages that are still resident, and the RSS would not grow."""
    script = ("import numpy as np\n"
              "from gluon_cf.bench import memory\n"
              "with memory.PeakRSS() as peak:\n"
              "    block = np.ones(16 * 1024 * 1024 // 8)\n"
              "    del block\n"
              "print(peak.growth)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) >= 15 * 1024 * 1024


def test_command_line_help(capsys):
    """In this process: the ``python -m gluon_cf.bench.memory`` entry point itself runs as a
    real process in every test above (each cell is a ``--child`` of it)."""
    with pytest.raises(SystemExit) as exit_:
        memory.main(["--help"])
    assert exit_.value.code == 0 and "--quick" in capsys.readouterr().out
