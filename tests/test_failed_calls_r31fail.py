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
for i in range(6):
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
    assert out["fed"] == [["RecursionDepthError", 3]] * 6
    assert out["again"] == [["RecursionDepthError", 3]] * 6
    assert out["healthy"] == [["value", [1.0]]] * 6


MULTI = PRELUDE + r"""
@gluon_cf.recursive(max_depth=3)
def f2(n):
    return gluon_cf.cond(n > 0, lambda: [a + 1 for a in f2(n - 1)], lambda: [n, n * 2])
@gluon_cf.recursive(max_depth=40)
def f40(n):
    return gluon_cf.cond(n > 0, lambda: f40(n - 1) + 1, lambda: n)
class Two(gluon.HybridBlock):   # one failed node's two outputs
    def hybrid_forward(self, F, x):
        return f2(x)
class Tail(gluon.HybridBlock):   # a failed output and two computed from it
    def __init__(self):
        super().__init__()
        self.t = make(3, lambda F, y: y)
    def hybrid_forward(self, F, x):
        y = self.t(x)
        return y, y + 1, F.exp(y)
class Mixed(gluon.HybridBlock):   # healthy outputs beside a failed one: values
    def hybrid_forward(self, F, x):
        return f2(x)[1], x * 2, f40(x) + 1
x = nd.array([30.0]); x.attach_grad()
out = {}
for name, cls in (("two", Two), ("tail", Tail), ("mixed", Mixed)):
    net = cls(); net.hybridize(); net.initialize()
    got = [[read(o) for o in net(nd.array([1.0]))]]
    for rec in (True, False):
        with autograd.record(rec):
            outs = net(x)
        got.append([read(o) for o in outs] + [read(o) for o in outs[::-1]])
    got.append([read(o) for o in net(nd.array([2.0]))])
    fresh = cls(); fresh.initialize()
    got.append([read(o) for o in fresh(nd.array([2.0]))])
    out[name] = got
print("RESULT " + json.dumps(out))
"""


def test_every_output_of_a_failed_call_raises_on_every_read():
    """NOTE [each output raises]: MXNet's one exception_ptr for all the arrays a failure
    reached; the first read raised and every other read (the first array's again too) gave
    unwritten memory (-1e-38, 1e+18, 84.0). The next call equals a fresh block's (eager)."""
    out = _result(MULTI)
    err = ["RecursionDepthError", 3]
    # plain Python: f2(1) = (f2(0)[0] + 1, f2(0)[1] + 1) = (1, 1); f2(2) = (2, 2)
    assert out["two"] == [[["value", [1.0]]] * 2] + [[err] * 4] * 2 + [[["value", [2.0]]] * 2] * 2
    assert out["tail"][0] == [["value", [1.0]], ["value", [2.0]], ["value", [2.7182817459106445]]]
    assert out["tail"][1:3] == [[err] * 6] * 2
    assert out["tail"][3] == out["tail"][4] == [
        ["value", [2.0]], ["value", [3.0]], ["value", [7.389056205749512]]]
    healthy = [["value", [60.0]], ["value", [31.0]]]
    assert out["mixed"][1:3] == [[err] + healthy + healthy[::-1] + [err]] * 2
    assert out["mixed"][3] == out["mixed"][4] == [["value", [2.0]], ["value", [4.0]],
                                                  ["value", [3.0]]]

