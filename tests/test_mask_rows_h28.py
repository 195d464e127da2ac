"""An int index past the rows a ``boolean_mask`` kept, in a hybridized block's own graph (no
gluon_cf node): ``kept = F.contrib.boolean_mask(x, m); y = kept[1]`` with one row kept was
MXNet's "Operator squeeze inferring shapes failed" naming no line, and the slice of no row left
on MXNet's engine failed in its MKLDNN kernel ("Check failed: delay_alloc"), raised by the next
call's output of valid data and by MXNet's shutdown at exit (NOTE [rows of a run-time shape cut
in a block's own graph] in gluon_cf/hybrid.py). Now it is the IndexError at the user's line, as
eagerly, the next valid call gives eager's values and gradients, and the process exits
cleanly. Run in a subprocess with a timeout: a signal, a nonzero status or MXNet's error at exit
fails."""
import subprocess
import sys

from conftest import REPO

SCENARIO = r'''
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
from gluon_cf import autograph

A = np.array([[1., 2], [3, 4], [5, 6], [7, 8]], dtype=np.float32)
ONE_ROW = A * np.array([[1], [-1], [-1], [-1]], dtype=np.float32)


class Rows(gluon.HybridBlock):
    def __init__(self, how):
        super().__init__()
        self.how = how

    @autograph
    def hybrid_forward(self, F, x):
        kept = F.contrib.boolean_mask(x, x.sum(axis=1) > 0)
        if self.how == "int":
            return kept[1] * 3   # LINE int
        if self.how == "negative":
            return kept[-3] * 3   # LINE negative
        return kept[2:3] * 3   # LINE empty


def call(block, data):
    x = mx.nd.array(data)
    x.attach_grad()
    with autograd.record():
        y = block(x)
    y.backward()
    return y.asnumpy(), x.grad.asnumpy()


for how in ("int", "negative", "empty"):
    eager = call(Rows(how), A)
    block = Rows(how)
    block.hybridize()
    first = call(block, A)
    try:
        call(block, ONE_ROW)
        print("NO ERROR", how)
    except Exception as err:
        print("ERROR", how, type(err).__name__, isinstance(err, IndexError), str(err))
    again = call(block, A)
    ok = all(np.array_equal(e, h) for e, h in zip(eager + eager, first + again))
    print("VALUES", how, ok)
print("DONE")
'''


def _line(tag):
    return next(k for k, text in enumerate(SCENARIO.splitlines(), 1) if "# LINE " + tag in text)


def test_index_past_kept_rows_is_an_index_error_and_exits_cleanly(tmp_path):
    script = tmp_path / "rows_scenario.py"
    script.write_text(SCENARIO)
    done = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "delay_alloc" not in done.stderr and "MXNetError" not in done.stderr, done.stderr
    out = done.stdout
    assert "DONE" in out, out
    for how in ("int", "negative"):
        error = next(line for line in out.splitlines() if line.startswith("ERROR " + how))
        assert error.startswith("ERROR %s IndexError True %s:%d: " % (how, script, _line(how))), \
            error
        assert "index out of range: an int in this index is past the size of its axis" in error
    # a slice of no row: MXNet 1.x cannot compute on it (eagerly neither): refused at its line
    error = next(line for line in out.splitlines() if line.startswith("ERROR empty"))
    assert "ZeroSizeError" in error and "slice (node " in error, error
    assert "(at %s:%d: return kept[2:3] * 3" % (script, _line("empty")) in error, error
    for how in ("int", "negative", "empty"):
        assert "VALUES %s True" % how in out, out
