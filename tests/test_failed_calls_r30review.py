"""Review round 30 of failed calls carried by their outputs (NOTE [failures carried by the
outputs] in gluon_cf/failed_calls.py): each read of a failed call raises that call's own error,
for every dtype a node outputs, with its outputs fed to other blocks and gluon_cf nodes, in
predict mode run as the Custom operator, from several threads sharing blocks, next to a user's
own ``cumsum`` axis error (which stays MXNet's); and the process exits cleanly with failed calls
never read. The oracle: plain Python's recursion (``f(n)`` needs n + 1 nested calls, so
``max_depth=d`` fails on 30 and ``f(1) == 1``) and MXNet's own message for its own error."""
from test_failed_calls_r29fail import PRELUDE, _result

CODE = PRELUDE + r"""
import numpy as np
from gluon_cf import hybrid_inline

def attempt(fn):   # a failure may also be raised by the call that reads the failed output
    try:
        return read(fn())
    except Exception as e:
        found = re.search(r"max_depth=(\d+)", str(e))
        return [type(e).__name__, int(found.group(1)) if found else str(e)[:200]]

out = {}
x = nd.array([30.0]); x.attach_grad()
ident = lambda F, y: y
for dt in ("float16", "int32", "int64"):
    nets = [make(d, ident) for d in (2, 3, 4)]
    first = nets[0](nd.array([1], dtype=dt))
    with autograd.record():
        ys = [net(nd.array([30], dtype=dt)) for net in nets]
    out[dt] = [read(first), str(np.dtype(first.dtype)), [read(y) for y in ys[::-1]]]

g, other = make(3, ident), make(6, ident)
class Plain(gluon.HybridBlock):
    def hybrid_forward(self, F, y):
        return F.exp(y) + 1
plain = Plain(); plain.hybridize()
users = {
    "plain": plain, "gluon_cf": other, "cumsum": lambda y: nd.cumsum(y, axis=0),
    "foreach": lambda y: gluon_cf.foreach(lambda d, s: (d + s[0], [s[0] + d]),
                                          y.reshape((1, 1)), [nd.zeros((1,))])[0]}
for name, use in users.items():
    with autograd.record():
        y = g(x)
    out["fed to " + name] = attempt(lambda: use(y))

nets = [make(d, ident) for d in (2, 3, 4, 5)]
with autograd.record():
    ys = [net(x) for net in nets]
try:
    nd.cumsum(nd.ones((2, 3)), axis=5).asnumpy()
    out["user axis"] = "value"
except Exception as e:   # MXNet's own message, not a kept failure's
    out["user axis"] = [type(e).__name__, "axis value 5 out of range" in str(e),
                        "gluon_cf" in str(e)]
out["pending after user axis"] = [read(y) for y in ys]

hybrid_inline.INLINE[0] = False   # predict mode run as the Custom operator
ys = [net(nd.array([30.0])) for net in nets]
out["predict"] = [read(y) for y in ys[::-1]]
hybrid_inline.INLINE[0] = True

got = []
def work(k):
    for rep in range(3):
        with autograd.record():
            ys = [net(x) for net in nets]
        order = range(4) if (k + rep) % 2 else range(3, -1, -1)
        got.append([[2 + i] + read(ys[i]) for i in order])
threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
for t in threads: t.start()
for t in threads: t.join()
out["threads"] = got

def unread():   # never read: the process must still exit cleanly
    with autograd.record():
        [net(x) for net in nets]
threads = [threading.Thread(target=unread) for k in range(2)]
for t in threads: t.start()
for t in threads: t.join()
print("RESULT " + json.dumps(out))
"""


def test_each_read_raises_its_own_call_s_error():
    out = _result(CODE)   # (returncode 0: a clean exit with failed calls never read)
    for dt in ("float16", "int32", "int64"):
        assert out[dt] == [["value", [1]], dt, [["RecursionDepthError", d] for d in (4, 3, 2)]]
    # Fed to another gluon_cf block (max_depth=6) too: its run in the calling thread read the
    # failure and cleared it, and its CachedOp then recursed on what the failed output held
    # (its own max_depth=6 error in 1 run of ~7 under load), until session 33 (NOTE [an
    # input's failure read in the calling thread]; tests/test_failed_input_inline_r33.py).
    for name in ("plain", "cumsum", "foreach", "gluon_cf"):
        assert out["fed to " + name] == ["RecursionDepthError", 3], name
    assert out["user axis"] == ["MXNetError", True, False]
    assert out["pending after user axis"] == [["RecursionDepthError", d] for d in (2, 3, 4, 5)]
    assert out["predict"] == [["RecursionDepthError", d] for d in (5, 4, 3, 2)]
    assert len(out["threads"]) == 9
    for reads in out["threads"]:
        assert all(r == [r[0], "RecursionDepthError", r[0]] for r in reads), reads
