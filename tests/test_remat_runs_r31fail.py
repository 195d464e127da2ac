"""Round 31 review: a remat call's body is refused only for the gluon_cf nodes made in it, not
for a hybridized block called before it whose node happens to run during the body (NOTE
[rematerialised recursive calls] in gluon_cf/recursion/remat_calls.py, ``node.counting_runs``).

Was: a recorded call of a hybridized recursion, then a healthy ``remat=True`` call: when the
block's node ran on MXNet's thread while the remat body ran (1 of 20 calls under load; here
forced, its input waiting for a large ``dot`` and the body waiting for the block's output),
the remat call raised NotImplementedError ("whose body runs a hybridized block holding
gluon_cf ops"), the count being the thread's. Oracle: ``f(5) == 5`` (plain Python) and three
Dense(1) layers of weight 1 and bias 0 on 1: the loss w**3 + b*(w**2 + w + 1) = 1, d/dw = 3,
d/db = 3."""
from test_failed_calls_r29fail import PRELUDE, _result

CODE = PRELUDE + r"""
from mxnet.gluon import nn
net = make(60, lambda F, y: y)
dense = nn.Dense(1, in_units=1); dense.initialize(mx.init.One()); dense.bias.set_data(nd.zeros(1))
pending = []
@gluon_cf.recursive(remat=True)
def chain(n, h):
    while pending:   # the block called before runs now, on MXNet's thread
        pending.pop().wait_to_read()
    return gluon_cf.cond(n > 0, lambda: chain(n - 1, dense(h)), lambda: h)
x = nd.array([5.0]); x.attach_grad()
B = nd.ones((800, 800))
got = []
for i in range(2):
    with autograd.record():
        y = net(x + nd.dot(B, B).sum() * 0)   # (its node waits for the dot)
        pending.append(y)
        try:
            loss = chain(nd.array([3.0]), nd.ones((1, 1))).sum()
        except NotImplementedError as e:
            got.append(["refused", str(e)[:100]]); continue
    loss.backward()
    got.append([read(loss), read(y), read(dense.weight.grad()), read(dense.bias.grad())])
print("RESULT " + json.dumps(got))
"""


def test_a_block_called_before_a_remat_call_never_refuses_it():
    got = _result(CODE)
    assert got == [[["value", [1.0]], ["value", [5.0]], ["value", [[3.0]]], ["value", [3.0]]]] * 2
