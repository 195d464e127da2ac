"""Round 31: failed calls of gluon_cf nodes (NOTE [failures carried by the outputs] in
gluon_cf/failed_calls.py), each read raising that call's own error. Oracle: plain Python's
recursion (``f(n)`` needs n + 1 nested calls, so ``max_depth=d`` fails on 30, names d, and
``f(1) == 1``)."""
from test_failed_calls_r29fail import PRELUDE, _result

FED = PRELUDE + r"""
ident = lambda F, y: y
x = nd.array([30.0]); x.attach_grad()
out = {"fed": [], "again": [], "healthy": []}
g, other = make(3, ident), make(6, ident)
for i in range(12):
    with autograd.record():
        y = g(x)
    try:
        out["fed"].append(read(other(y)))
    except Exception as e:
        found = re.search(r"max_depth=(\d+)", str(e))
        out["fed"].append([type(e).__name__, int(found.group(1)) if found else str(e)[:200]])
    out["again"].append(read(y))
    out["healthy"].append(read(other(nd.array([1.0]))))
print("RESULT " + json.dumps(out))
"""


def test_a_failed_output_fed_to_a_block_run_inline_is_never_read_as_a_value():
    """NOTE [a failed input run inline]: the block's inference in the calling thread read the
    failed input, which cleared its failure, and the block's CachedOp then read its unwritten
    memory: the block's own depth error (11 runs of 60 under load), or a value. And the
    input itself, read again, gave a value (whatever the memory held), on every call."""
    out = _result(FED)
    assert out["fed"] == [["RecursionDepthError", 3]] * 12
    assert out["again"] == [["RecursionDepthError", 3]] * 12
    assert out["healthy"] == [["value", [1.0]]] * 12
