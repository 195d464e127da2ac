"""Review round 25x (session 25): blocks writing rows with ``F.contrib.index_copy`` inside
gluon_cf's graphs (a foreach body, a while_loop body, a cond branch, a recursive function),
for ``tests/test_review_round25x.py``: given an index out of range, MXNet 1.9.1's kernel
writes outside the array (NOTE [index_copy out of bounds] in gluon_cf/graph/cached_graph.py).
Run as a script (``python hostile_programs25rx.py <block>:<record> ... <index> ...``) it calls
each block 5 times with each index, printing the error's type and text, then ``survived``."""
import sys

import mxnet as mx
from mxnet.gluon import HybridBlock

import gluon_cf

W = 1000   # a row of 4 kB: a row or two past the end is past the array's allocation


class IndexCopyInForeach(HybridBlock):
    def hybrid_forward(self, F, buf, idx, rows):
        def body(r, states):
            return [], [F.contrib.index_copy(states[0], idx, r.reshape((1, -1)))]
        _, (out,) = gluon_cf.foreach(body, rows, [buf])
        return out


class IndexCopyInWhileLoop(HybridBlock):
    def hybrid_forward(self, F, buf, idx, rows):
        def func(i, b):
            row = F.take(rows, i)
            return [], [i + 1, F.contrib.index_copy(b, idx, row)]
        _, (_, out) = gluon_cf.while_loop(lambda i, b: i < 2, func, [F.zeros((1,)), buf],
                                          max_iterations=3)
        return out


class IndexCopyInCondBranch(HybridBlock):
    def hybrid_forward(self, F, buf, idx, rows):
        row = F.slice_axis(rows, axis=0, begin=0, end=1)
        return gluon_cf.cond(F.sum(buf) > -1, lambda: F.contrib.index_copy(buf, idx, row),
                             lambda: buf * 2)


class IndexCopyInRecursion(HybridBlock):
    def hybrid_forward(self, F, buf, idx, rows):
        row = F.slice_axis(rows, axis=0, begin=0, end=1)

        @gluon_cf.recursive
        def down(i):
            return gluon_cf.cond(i <= 0, lambda: F.contrib.index_copy(buf, idx, row),
                                 lambda: down(i - 1) * 1)
        return down(F.ones((1,)) * 2)


BLOCKS = [IndexCopyInForeach, IndexCopyInWhileLoop, IndexCopyInCondBranch,
          IndexCopyInRecursion]


def call(cls, index, record, times=5):
    """``cls`` hybridized, called ``times`` times on a (5, W) buffer with rows index ``index``
    (recorded and backward when ``record``): the error's type and text, or None."""
    net = cls()
    net.hybridize()
    buf, rows = mx.nd.zeros((5, W)), mx.nd.ones((3, W))
    idx = mx.nd.array([index], dtype="int64")
    for _ in range(times):
        try:
            if record:
                buf.attach_grad()
                with mx.autograd.record():
                    out = net(buf, idx, rows)
                out.backward()
            else:
                out = net(buf, idx, rows)
            out.wait_to_read()
            filler = [mx.nd.ones((W, W)) for _ in range(20)]   # (reuses what was overwritten)
            mx.nd.waitall()
            del filler
        except mx.MXNetError as err:
            return type(err).__name__, str(err)
    return None


if __name__ == "__main__":   # argv: "Block:record" cases, then the rows each case writes
    cases = [a for a in sys.argv[1:] if ":" in a]
    for case in cases:
        name, record = case.split(":")
        print("case", case, flush=True)
        for index in sys.argv[1 + len(cases):]:
            print(repr(call(globals()[name], int(index), record == "1")), flush=True)
    print("survived")


# ---- a dim agreeing at two sizes by chance --------------------------------------------------

class PoolStrideInLoop(HybridBlock):
    """A foreach step pooling its scores over memory of run-time rows with stride 20: a step
    output of (n - 1) // 20 + 1 columns, 1 for every n up to 20."""

    def hybrid_forward(self, F, mem, targets):
        def body(y, states):
            scores = F.dot(states[0], mem, transpose_b=True)        # (1, n)
            pooled = F.Pooling(scores.reshape((1, 1, -1)), kernel=(1,), stride=(20,),
                               pool_type="max")
            h = states[0] + F.broadcast_mul(F.sum(pooled), y.reshape((1, -1)))
            return pooled, [h]
        outs, (h,) = gluon_cf.foreach(body, targets, [F.ones((1, 3))])
        total = F.sum(outs, axis=0)
        return F.broadcast_like(F.ones((1, 1, 1)), total), total, h


def _rand(*shape, seed=0):
    import numpy as np
    return np.random.RandomState(seed).rand(*shape).astype("float32")


POOL_CALLS = [[_rand(5, 3), _rand(2, 3)], [_rand(2, 3, seed=1), _rand(3, 3)],
              [_rand(1, 3, seed=2), _rand(1, 3)], [_rand(30, 3, seed=3), _rand(4, 3)],
              [_rand(45, 3, seed=4), _rand(2, 3)], [_rand(700, 3, seed=5), _rand(1, 3)]]


class TakeRaiseInForeach(HybridBlock):
    """A foreach step adding a row taken with mode='raise' to its state."""

    def hybrid_forward(self, F, buf, idx, rows):
        def body(r, states):
            return [], [F.broadcast_add(states[0], F.take(states[0], idx, mode="raise"))]
        _, (out,) = gluon_cf.foreach(body, rows, [buf])
        return out


class SliceClippedInLoop(HybridBlock):
    """A foreach step's first four scores over memory of run-time rows, ``F.slice`` clipping
    the end to the length: min(n, 4) columns, 4 for every n from 4 on."""

    def hybrid_forward(self, F, mem, targets):
        def body(y, states):
            scores = F.dot(states[0], mem, transpose_b=True)        # (1, n)
            first = F.slice(scores, begin=(0, 0), end=(1, 4))
            h = states[0] + F.broadcast_mul(F.sum(first), y.reshape((1, -1)))
            return first, [h]
        outs, (h,) = gluon_cf.foreach(body, targets, [F.ones((1, 3))])
        return outs, h
