"""The main demo (``python -m gluon_cf.demo``): early stopping keeps the best dev epoch, test
accuracy is that model's, the saved file reloads to it, and piped output shows each epoch."""
import os
import re
import subprocess
import sys

import numpy as np

from conftest import REPO


def test_demo_keeps_and_saves_the_best_dev_epoch(tmp_path):
    from gluon_cf.models.recursive import TreeLSTM
    from gluon_cf.models.train import accuracy, demo_splits, train_demo

    path = str(tmp_path / "best.params")
    result = train_demo(epochs=6, num_trees=160, patience=2, save_path=path, seed=3,
                        learning_rate=0.3, progress=False)
    devs = [epoch.dev_accuracy for epoch in result.history]
    assert result.best_epoch == 1 + int(np.argmax(devs))       # the first of the best
    assert result.dev_accuracy == max(devs)
    stopped_early = len(result.history) < 6
    assert not stopped_early or len(result.history) - result.best_epoch == 2
    assert len(result.history) - result.best_epoch <= 2
    # This run's last epoch is worse than its best, so keeping the last would show below.
    assert devs[-1] < result.dev_accuracy

    _, vocab, _, dev, test = demo_splits(160, seed=3)
    assert accuracy(result.net, dev) == result.dev_accuracy    # the best epoch's, not the last
    assert accuracy(result.net, test) == result.test_accuracy
    reloaded = TreeLSTM(len(vocab), embed_size=48, hidden_size=48, num_classes=5)
    reloaded.load_parameters(path)
    reloaded.hybridize()
    assert accuracy(reloaded, test) == result.test_accuracy
    for mine, saved in zip(reloaded.collect_params().values(),
                           result.net.collect_params().values()):
        np.testing.assert_array_equal(mine.data().asnumpy(), saved.data().asnumpy())


def test_demo_piped_prints_a_line_per_epoch_and_the_final_summary(tmp_path):
    """What the demo prints, not how well it learns (that is the test above): 30 trees, as
    tests/test_launch.py's demo jobs (was 120; the same lines)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gluon_cf.demo", "--trees", "30", "--epochs", "3",
         "--patience", "1", "--save", str(tmp_path / "m.params")],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    epochs = re.findall(r"^epoch (\d+): loss", out, re.M)
    assert epochs and epochs == [str(i) for i in range(1, len(epochs) + 1)]
    assert "\r" not in out                                      # no progress bar in a pipe
    last = out.strip().splitlines()[-3:]
    assert re.match(r"best epoch \d+ of \d+: dev accuracy 0\.\d+, test accuracy 0\.\d+", last[0])
    assert re.match(r"speed: \d+ trees/s training, \d+ trees/s inference", last[1])
    assert last[2].startswith("model saved to " + str(tmp_path / "m.params"))
    assert os.path.getsize(tmp_path / "m.params") > 0


def test_training_batches_are_uploaded_without_an_engine_round_trip(monkeypatch):
    """NOTE: [Uploads]: the training loop's mini-batches reach MXNet by a zero-copy from_numpy
    of a fresh copy (float32, as nd.array gave them), never by SyncCopyFromCPU."""
    import mxnet as mx
    from gluon_cf.data.trees import batchify_forest
    from gluon_cf.models import train

    _, _, trees, _, _ = train.demo_splits(20, seed=0)
    forest = batchify_forest(trees[:3])

    def refused(*args, **kwargs):
        raise AssertionError("an upload by SyncCopyFromCPU (mx.nd.array)")
    monkeypatch.setattr(mx.nd.NDArray, "_sync_copyfrom", refused)
    inputs, labels = train._arrays(trees[:3])
    wanted = [forest.tokens, forest.left, forest.right, forest.roots, forest.root_labels]
    for got, want in zip(inputs + [labels], wanted):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.asnumpy(), np.asarray(want, np.float32))
