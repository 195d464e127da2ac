"""Round 31: an eager ``gluon_cf.recursive(remat=True)`` call's guard against a body running a
gluon_cf node as a Custom operator (NOTE [rematerialised recursive calls]) counts only the nodes
made by its own thread (``node.node_runs``). Was: a process-wide count, so a call was refused
("body runs a hybridized block holding gluon_cf ops") whenever another thread's hybridized
block ran a node meanwhile: 17 of 20 calls refused. Oracle: plain Python's sum and its
derivative (``tri(4) = w * (4 + 3 + 2 + 1)``, d/dw = 10)."""
from test_failed_calls_r29fail import _result

CODE = r"""
import json, threading, warnings
warnings.simplefilter("ignore")
from mxnet import autograd, gluon, nd
import gluon_cf

W = nd.array([2.0]); W.attach_grad()
@gluon_cf.recursive(remat=True)
def tri(n):
    return gluon_cf.cond(n > 0, lambda: tri(n - 1) + W * n, lambda: W * 0)

@gluon_cf.recursive(max_depth=50)
def g(n):
    return gluon_cf.cond(n > 0, lambda: g(n - 1) + 1, lambda: n)
class Net(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return g(x) * 2
net = Net(); net.hybridize()
stop, other = [False], []
def busy():   # recorded: its node runs as MXNet's Custom operator, on MXNet's thread
    while not stop[0]:
        v = nd.array([5.0]); v.attach_grad()
        with autograd.record():
            o = net(v)
        o.backward()
        other.append([float(o.asscalar()), float(v.grad.asscalar())])
t = threading.Thread(target=busy); t.start()
got = []
try:
    for i in range(20):
        try:
            with autograd.record():
                y = tri(nd.array([4.0]))
            y.backward()
            got.append([float(y.asscalar()), float(W.grad.asscalar())])
        except NotImplementedError as e:
            got.append(str(e)[:300])
finally:
    stop[0] = True; t.join()
print("RESULT " + json.dumps({"got": got, "other": other[:3], "n": len(other)}))
"""


def test_another_thread_s_block_does_not_refuse_a_remat_call():
    out = _result(CODE)
    assert out["got"] == [[20.0, 10.0]] * 20, out["got"]
    assert out["n"] >= 1 and out["other"] == [[10.0, 2.0]] * len(out["other"])
