"""Round 31: gluon_cf's own whole-engine waits (a remat ``backward()``) raise no other call's
failure and keep preventing the Trainer step's hang (NOTE [a whole-engine wait of gluon_cf's]
in gluon_cf/failed_calls.py)."""
from test_failed_calls_r29fail import PRELUDE, _result


STEAL = PRELUDE + r"""
from mxnet.gluon import nn
W = nd.array([2.0]); W.attach_grad()
@gluon_cf.recursive(remat=True)
def tri(n):
    return gluon_cf.cond(n > 0, lambda: tri(n - 1) + W * n, lambda: W * 0)
net = make(3, lambda F, y: y)
x = nd.array([30.0]); x.attach_grad()
out = {}
for mode in ("record", "predict-recorded"):
    with autograd.record(train_mode=mode == "record"):
        y = net(x)   # failed, left unread
    try:
        with autograd.record():
            t = tri(nd.array([4.0]))
        t.backward()   # (waits for the whole engine: a remat node is alive)
        out[mode] = [read(t), read(W.grad), read(y), read(y)]
    except Exception as e:
        out[mode] = ["backward raised", type(e).__name__, str(e)[:200], read(y)]
# a Trainer step right after the remat backward (it hung without the whole wait), with a
# failed call of another block pending: the step runs, the failed output still raises
dense = nn.Dense(1, in_units=1); dense.initialize(mx.init.One())
trainer = gluon.Trainer(dense.collect_params(), "sgd", {"learning_rate": 0.1})
@gluon_cf.recursive(remat=True)
def chain(n, h):
    return gluon_cf.cond(n > 0, lambda: chain(n - 1, dense(h)), lambda: h)
steps = []
for step in range(3):
    with autograd.record():
        y = net(x)
        loss = chain(nd.array([3.0]), nd.ones((1, 1))).sum()
    loss.backward()
    trainer.step(1)
    steps.append([float(loss.asscalar()), read(y)])
out["steps"] = steps
out["weight"] = dense.weight.data().asnumpy().tolist()
print("RESULT " + json.dumps(out))
"""


def test_a_remat_backward_never_raises_another_call_s_failure():
    """NOTE [a whole-engine wait of gluon_cf's]: a failed block's output left unread, then a
    healthy eager remat call's ``backward()``: its whole-engine wait raised the block's
    RecursionDepthError, and the block's output then read unwritten memory (7e+22, 0.0).
    Oracle: ``tri(4) = w * (4 + 3 + 2 + 1)``, d/dw = 10; ``chain`` is three Dense(1) layers of
    weight w and bias b on 1: w**3 + b*(w**2 + w + 1); SGD on it in plain Python."""
    out = _result(STEAL)
    err = ["RecursionDepthError", 3]
    for mode in ("record", "predict-recorded"):
        assert out[mode] == [["value", [20.0]], ["value", [10.0]], err, err], out[mode]
    w, b, want = 1.0, 0.0, []
    for step in range(3):
        want.append([w ** 3 + b * (w ** 2 + w + 1), err])
        dw, db = 3 * w ** 2 + b * (2 * w + 1), w ** 2 + w + 1
        w, b = w - 0.1 * dw, b - 0.1 * db
    assert [[round(s[0], 4), s[1]] for s in out["steps"]] == [[round(v, 4), e] for v, e in want]
    assert abs(out["weight"][0][0] - w) < 1e-5
