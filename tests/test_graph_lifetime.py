"""Blocks built and deleted leave nothing behind (NOTE [decoded nodes live as long as their users]
in ``gluon_cf/graph/decoded.py``, NOTE [tojson leaks the graph] in ``gluon_cf/_custom_ops.py``):
a fresh process builds, calls, trains one step and deletes blocks of every kind (foreach and
cond, while_loop, recursion; hybridized and eager; exported and loaded back), and what it holds
(decoded nodes, graphs, function tables, MXNet's Custom-op registry, CachedOps, objects, peak
RSS) stays flat. Before, each block added its graphs, CachedOps and registry entries for good
(and every ``Symbol.tojson()`` a copy of the whole graph). A file exported, its block deleted
and every node freed, is loaded back and gives the block's outputs: decoding again is exact."""
from conftest import run_python

_PROGRAM = r'''
import gc, os, queue, resource, sys, tempfile, threading
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd
import gluon_cf
from gluon_cf import _custom_ops
from gluon_cf.graph import decoded
from gluon_cf.graph.runtime import Graph
from gluon_cf.recursion import table as tables


class Loop(gluon.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, s0):
        outs, s = gluon_cf.foreach(lambda r, s: (self.dense(r) + s[0], [s[0] * 0.5]), x, [s0])
        c = gluon_cf.cond(F.sum(x) > 0, lambda: self.dense(s0), lambda: s0 * 2)
        return outs.sum(axis=0) + c + s[0]


class Wh(gluon.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, h):
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < 3,
                                        lambda i, h: ([], [i + 1, self.dense(h)]),
                                        [F.zeros((1,)), h], max_iterations=5)
        return h


class Rec(gluon.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, h, n):
        @gluon_cf.recursive
        def f(k, h):
            return gluon_cf.cond(k < 1, lambda: h, lambda: f(k - 1, self.dense(h)))
        return f(n, h)


x = nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 1, 3)))
s0 = nd.array([[0.5, -0.25, 1.0]])
n = nd.array([2])
kept_dir = tempfile.TemporaryDirectory()   # (removed when the script ends)
tmp = kept_dir.name


# The other thread is one thread for every round: MXNet 1.9.1 itself keeps ~5 MiB for each
# thread that ever ran an operator, until the process ends (plain MXNet, ``(x + 1).asnumpy()``
# in a new thread each time: +4.9 MiB of RSS per thread, MALLOC_ARENA_MAX=1 too; the number of
# threads alive flat), so a new thread per round grew the peak RSS 15 MiB over 3 rounds, past
# its slack, whatever gluon_cf held (session 27; CachedOps and objects flat). A graph keeps its
# CachedOps by thread id and frees them with itself, which this thread, alive throughout,
# checks as well as a thread that ends.
_jobs, _results = queue.Queue(), queue.Queue()


def _serve():
    while True:
        job = _jobs.get()
        try:
            _results.put((True, job()))
        except BaseException as exc:   # raised again in the main thread
            _results.put((False, exc))
        del job


threading.Thread(target=_serve, daemon=True).start()


def in_worker(job):
    _jobs.put(job)
    ok, value = _results.get(timeout=120)
    if not ok:
        raise value
    return value


def one_round(k):
    for hybrid in (True, False):
        for cls, args in ((Loop, (x, s0)), (Wh, (s0,)), (Rec, (s0, n))):
            net = cls()
            net.initialize()
            if hybrid:
                net.hybridize()
            trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
            with autograd.record():
                y = net(*args)
            y.backward()
            trainer.step(1)
            if hybrid and cls is Rec:   # another thread: its own CachedOps
                assert np.isfinite(in_worker(lambda: net(*args).asnumpy())).all()
            if hybrid and cls is Loop and k % 3 == 0:
                expected = net(*args).asnumpy()
                net.export(os.path.join(tmp, "m"))
                del net, trainer, y
                gc.collect()   # the block's nodes go: the file's are decoded again
                loaded = gluon.SymbolBlock.imports(os.path.join(tmp, "m-symbol.json"),
                                                   ["data0", "data1"],
                                                   os.path.join(tmp, "m-0000.params"))
                np.testing.assert_allclose(loaded(*args).asnumpy(), expected, rtol=1e-6)
                del loaded
            else:
                y.wait_to_read()
                del net, trainer, y


def held():
    gc.collect()
    _custom_ops._recent_buffers.clear()   # bounded (NOTE [concurrent shape inference])
    gc.collect()
    return {"graphs": len(Graph._cache), "decoded nodes": len(decoded._SPECS),
            "function tables": len(tables._TABLES),
            "registry entries": len(mx.operator._registry.ref_holder),
            "CachedOps": sum(type(o).__name__ == "CachedOp" for o in gc.get_objects()),
            "objects": len(gc.get_objects()),
            "peak RSS MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


for k in range(3):
    one_round(k)
start = held()
ROUNDS = 3   # (a multiple of 3: start and end after the same kind of round)
for k in range(3, 3 + ROUNDS):
    one_round(k)
end = held()
print("start", start)
print("end", end)
# Flat: what is kept after the warm-up is the last blocks' (a round builds 6 blocks, 3 of
# them hybridized: before, each round added ~10 graphs, ~12 registry entries, ~38 CachedOps
# and ~2,300 objects; what the last blocks leave varies: up to 16 CachedOps, ~500 objects).
slack = {"graphs": 6, "decoded nodes": 4, "function tables": 1, "registry entries": 4,
         "CachedOps": 30, "objects": 900, "peak RSS MiB": 12}
grown = {key: end[key] - start[key] for key in start if end[key] - start[key] > slack[key]}
assert not grown, ("grew over %d rounds" % ROUNDS, grown, start, end)
print("OK")
'''


def test_blocks_built_and_deleted_leave_nothing_behind():
    done = run_python(_PROGRAM, timeout=300)
    assert done is not None, "timed out"
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), (
        done.stdout[-3000:] + done.stderr[-3000:])
