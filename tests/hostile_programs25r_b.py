"""Issue 24, hostile recursion round 25r (b): three functions in turn and chosen by value,
top-down decoders whose tree the values decide, recursion inside ``foreach`` and
``while_loop`` carrying state, DAGs with repeated roots, a forest of 500 trees and a chain of
3,000 nodes, float64, ``remat`` over mutual recursion, Dropout, and n-ary trees in CSR
(``ptr``/``cidx``) with loops over the children, zero-children nodes, softmax and max over the
children, counts in int32. The oracle is each block's ``plain_forward`` (plain Python
recursion on NDArrays, indices and predicates read on the host; iterative for the chain)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import nn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of
from hostile_programs17b import BAL, comb, forest
from hostile_programs25r import BIN, H, MIXED, SINGLE, V, _Net, cat, rows_tuple, walk

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


# ---- three functions, chosen by level and by value ---------------------------------------------

@program(*BIN)
class ThreeFunctionsChosenByValue(_Net):
    """f, g, h: each node's children are handled by the function its feature sum picks (f
    below -0.3, g up to 0.3, h above); each function its own Dense."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        dense = {"f": self.u, "g": self.u2, "h": lambda v: -v}
        table = {}

        def make(name):
            def body(i):
                def kid(j):
                    s = F.sum(F.take(x, j), axis=1)
                    return gluon_cf.cond(
                        s < -0.3, lambda: table["f"](j),
                        lambda: gluon_cf.cond(s > 0.3, lambda: table["h"](j),
                                              lambda: table["g"](j)))
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: dense[name](F.take(x, i)),
                    lambda: F.tanh(dense[name](kid(F.take(left, i)) + kid(F.take(right, i)))))
            table[name] = gluon_cf.recursive(body, name=name)
        for name in "fgh":
            make(name)
        return _rows_of(F, table["g"], roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        dense = {"f": self.u, "g": self.u2, "h": lambda v: -v}

        def pick(j):
            s = float(x[_row(j, x.shape[0])].sum().asscalar())
            return "f" if s < -0.3 else ("h" if s > 0.3 else "g")

        def body(node, i, lt, rt, name):
            if lt < 0:
                return dense[name](x[i:i + 1])
            return F.tanh(dense[name](node(lt, pick(lt)) + node(rt, pick(rt))))
        return cat(F, walk(F, left, right, roots, x.shape[0], body, "g"))


@program(*BIN)
class RematThreeFunctionsInTurn(_Net):
    """a -> b -> c -> a by level, each ``remat=True``, with a Dense each."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        dense = [self.u, self.u2, lambda v: v * 0.5]
        table = []

        def make(k):
            def body(i):
                nxt = table[(k + 1) % 3]
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: dense[k](F.take(x, i)),
                    lambda: F.tanh(dense[k](nxt(F.take(left, i))) - nxt(F.take(right, i))))
            return gluon_cf.recursive(body, name="turn%d" % k, remat=True)
        table.extend(make(k) for k in range(3))
        return _rows_of(F, table[0], roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        dense = [self.u, self.u2, lambda v: v * 0.5]

        def body(node, i, lt, rt, k):
            if lt < 0:
                return dense[k](x[i:i + 1])
            return F.tanh(dense[k](node(lt, (k + 1) % 3)) - node(rt, (k + 1) % 3))
        return cat(F, walk(F, left, right, roots, x.shape[0], body, 0))


# ---- decoders whose tree the values decide -----------------------------------------------------

STARTS = ([rand(3, H, seed=270)], [rand(1, H, seed=271)], [rand(4, H, seed=272) * 2])


@program(*STARTS)
class TopDownDecoderSumsAndCounts(_Net):
    """A generator: node(h, d) expands while sigmoid(v(h)) > 0.5 and d < 3 into children
    tanh(u(h)) and tanh(u2(h)); returns (sum of leaf states, node count int32, depth max)."""

    NO_GRAD = ()

    def hybrid_forward(self, F, starts, **kw):
        @gluon_cf.recursive
        def node(h, d):
            def expand():
                sl, nl, dl = node(F.tanh(self.u(h)), d + 1)
                sr, nr, dr = node(F.tanh(self.u2(h)), d + 1)
                return [sl + sr, nl + nr + 1, F.maximum(dl, dr)]
            go = (F.sigmoid(self.v(h)).reshape((-1,)) > 0.5) * (d < 3)
            one = F.ones_like(d)
            return gluon_cf.cond(go, expand, lambda: [h * 2, one.astype("int32"), d])
        outs, _ = gluon_cf.foreach(
            lambda s, _: (list(node(s.expand_dims(0), F.zeros((1,)))), []), starts, [])
        return [F.reshape(outs[0], (-3, -2)), outs[1], outs[2]]

    def plain_forward(self, F, starts, **kw):
        def node(h, d):
            if float(F.sigmoid(self.v(h)).asscalar()) > 0.5 and d < 3:
                sl, nl, dl = node(F.tanh(self.u(h)), d + 1)
                sr, nr, dr = node(F.tanh(self.u2(h)), d + 1)
                return sl + sr, nl + nr + 1, max(dl, dr)
            return h * 2, 1, d
        res = [node(starts[k:k + 1], 0) for k in range(starts.shape[0])]
        return [F.concat(*[r[0] for r in res], dim=0),
                F.array([[r[1]] for r in res], dtype="int32"),
                F.array([[r[2]] for r in res])]


@program(*STARTS)
class DecoderWithValueBaseCaseAndLoop(_Net):
    """A decoder whose expansion runs a while_loop refining h until its norm passes 1 (at
    most 4 steps), then stops when the refined state's first feature is negative (depth <= 3)."""

    NO_GRAD = ()

    def hybrid_forward(self, F, starts, **kw):
        @gluon_cf.recursive
        def node(h, d):
            _, (_, g) = gluon_cf.while_loop(
                lambda k, g: (k < 4) * (F.norm(g, axis=1) < 1),
                lambda k, g: ([], [k + 1, g * 1.5 + 0.1]), [F.zeros_like(d), h],
                max_iterations=4)
            first = F.slice_axis(g, axis=1, begin=0, end=1).reshape((-1,))
            return gluon_cf.cond((first > 0) * (d < 3),
                                 lambda: node(F.tanh(self.u(g)), d + 1) + g,
                                 lambda: g)
        hs, _ = gluon_cf.foreach(lambda s, _: (node(s.expand_dims(0), F.zeros((1,))), []),
                                 starts, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, starts, **kw):
        def node(h, d):
            g, k = h, 0
            while k < 4 and float(F.norm(g).asscalar()) < 1:
                g, k = g * 1.5 + 0.1, k + 1
            if float(g[0, 0].asscalar()) > 0 and d < 3:
                return node(F.tanh(self.u(g)), d + 1) + g
            return g
        return F.concat(*[node(starts[k:k + 1], 0) for k in range(starts.shape[0])], dim=0)


# ---- recursion inside loops ------------------------------------------------------------------

@program(*BIN)
class ForeachRootsCarriesPreviousTreeIntoRecursion(_Net):
    """foreach over the roots whose state, the previous tree's result, is an argument of the
    next tree's recursion (added at its leaves)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i, s):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i) + s,
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i), s),
                                               node(F.take(right, i), s * 0.5), dim=1))))

        def step(r, states):
            h = node(r, states[0])
            return h, [h * 0.5]
        hs, (last,) = gluon_cf.foreach(step, roots, [F.zeros((1, H))])
        return F.reshape(hs, (-3, -2)), last

    def plain_forward(self, F, x, left, right, roots, **kw):
        s, outs = F.zeros((1, H)), []

        def body(node, i, lt, rt, s):
            if lt < 0:
                return x[i:i + 1] + s
            return F.tanh(self.w(F.concat(node(lt, s), node(rt, s * 0.5), dim=1)))
        for r in _ids(roots):
            h = walk(F, left, right, mx.nd.array([r]), x.shape[0], body, s)[0]
            outs.append(h)
            s = h * 0.5
        return F.concat(*outs, dim=0), s


@program(*BIN)
class WhileLoopOverRootsSumsTrees(_Net):
    """A while_loop over the root positions calling the recursion per step, summing."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i) * 2,
                lambda: F.tanh(self.u(node(F.take(left, i))) * node(F.take(right, i))))
        count = F.sum(F.ones_like(roots)).reshape((1,))
        _, (_, acc) = gluon_cf.while_loop(
            lambda k, acc: k < count,
            lambda k, acc: ([], [k + 1, acc + node(F.take(roots, k))]),
            [F.zeros((1,)), F.zeros((1, H))], max_iterations=8)
        return acc

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] * 2 if lt < 0 else F.tanh(self.u(node(lt)) * node(rt))
        return sum(walk(F, left, right, roots, x.shape[0], body))


# ---- forests of many trees, long chains, DAGs ---------------------------------------------------

def _dag(seed, nodes, roots):
    rng = np.random.RandomState(seed)
    left, right = np.full(nodes, -1.0), np.full(nodes, -1.0)
    for i in range(1, nodes):
        if rng.rand() < 0.6:
            left[i], right[i] = rng.randint(0, i), rng.randint(0, i)
    return [rand(nodes, H, seed=seed), left.astype(np.float32), right.astype(np.float32),
            rng.randint(0, nodes, roots).astype(np.float32)]


_SHAPES = [None, (None, None), BAL, comb(3), ((None, None), None)]
FOREST500 = forest([_SHAPES[k % 5] for k in range(500)], 280, H)


def _chain(n, seed):
    left = np.arange(1, n + 1, dtype=np.float32)
    left[-1] = -1
    return [rand(n, H, seed=seed, low=-0.5, high=0.5), left, left.copy(), floats(0, n // 2)]


@program(_dag(281, 12, 6), _dag(282, 12, 6), MIXED)
class DagSharedSubtreesRepeatedRoots(_Net):
    """A TreeRNN over DAGs (subtrees shared by several parents, roots repeated)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                               dim=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else F.tanh(self.w(F.concat(node(lt), node(rt), dim=1)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(FOREST500, SINGLE)
class FiveHundredTrees(DagSharedSubtreesRepeatedRoots):
    """The same TreeRNN over a forest of 500 small trees of five shapes."""


@program(_chain(3000, 283), _chain(5, 284))
class ChainOfThreeThousand(_Net):
    """A unary chain of 3,000 nodes (left = right = the next node): node = tanh(u(child) +
    x_i); roots the head and the middle."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(self.u(node(F.take(left, i))) * 0.5 +
                                                F.take(x, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        lt, n = _ids(left), x.shape[0]
        h = [None] * n                   # (iterative: the chain is deeper than Python's stack)
        for i in reversed(range(n)):
            h[i] = x[i:i + 1] if lt[i] < 0 else F.tanh(self.u(h[lt[i]]) * 0.5 + x[i:i + 1])
        return F.concat(*[h[_row(r, n)] for r in _ids(roots)], dim=0)


_ONE_CHILD = [rand(6, H, seed=285), floats(1, 2, -1, 4, -1, -1), floats(-1, 3, -1, 5, -1, -1),
              floats(0, 2, 1)]


@program(_ONE_CHILD, MIXED)
class OneChildPassesThroughUnchanged(_Net):
    """A node with a left child only returns it unchanged (an argument's value passed
    through a branch); with both, a combination."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl = node(F.take(left, i))
                return gluon_cf.cond(F.take(right, i) < 0, lambda: hl,
                                     lambda: F.tanh(hl + self.u(node(F.take(right, i)))))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            return node(lt) if rt < 0 else F.tanh(node(lt) + self.u(node(rt)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*[[a[0].astype(np.float64)] + a[1:] for a in BIN[:3]])
class Float64TreeLstmLike(_Net):
    """A float64 block (parameters and x): gated combination of the children."""

    DTYPE = "float64"

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, hr = node(F.take(left, i)), node(F.take(right, i))
                return F.sigmoid(self.u(hl)) * hr + F.tanh(self.u2(hr)) * hl
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            hl, hr = node(lt), node(rt)
            return F.sigmoid(self.u(hl)) * hr + F.tanh(self.u2(hr)) * hl
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


# ---- n-ary trees in CSR ------------------------------------------------------------------------

def csr(children, roots, seed):
    """``[x, ptr, cidx, roots]``: ``children[i]`` lists node i's children."""
    ptr, cidx = [0], []
    for kids in children:
        cidx.extend(kids)
        ptr.append(len(cidx))
    return [rand(len(children), H, seed=seed), floats(*ptr), floats(*(cidx or [0])),
            floats(*roots)]


# 0 -> (1, 2, 3); 2 -> (4); 4 -> (5, 6, 7, 8); 9 alone; 10 -> (4, 9) (shared); roots repeated
NARY = (csr([[1, 2, 3], [], [4], [], [5, 6, 7, 8], [], [], [], [], [], [4, 9]],
            [0, 9, 10, 0], 290),
        csr([[], [], []], [2, 0], 291),                      # zero children everywhere
        csr([[1, 2], [], [], [4], [], [6], []], [0, 3, 5], 292),
        csr([[1, 2, 3], [], [], [], [5], [], [], []], [0, 4, 7], 293))  # same size as 2


def _kids(ptr, cidx, i):
    p, c = _ids(ptr), _ids(cidx)
    return [c[k] for k in range(p[i], p[i + 1])]


def nary_walk(F, x, ptr, cidx, roots, body, *start):
    n = x.shape[0]

    def node(i, *args):
        i = _row(i, n)
        return body(node, i, _kids(ptr, cidx, i), *args)
    return [node(r, *start) for r in _ids(roots)]


@program(*NARY)
class ChildSumWhileLoopHAndC(_Net):
    """Child-sum TreeLSTM-like: (h, c) summed over the children in a while_loop over
    ptr[i]..ptr[i+1] (a leaf's loop runs no step)."""

    NO_GRAD = (1, 2, 3)

    def _cell(self, F, xi, hs, cs):
        z = self.w(F.concat(xi, hs, dim=1))
        c = F.sigmoid(z) * cs + F.tanh(self.u(xi))
        return F.tanh(c), c

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def step(k, hs, cs):
                h, c = node(F.take(cidx, k))
                return [], [k + 1, hs + h, cs + c]
            zero = F.zeros_like(F.take(x, i))
            _, (_, hs, cs) = gluon_cf.while_loop(
                lambda k, hs, cs: k < F.take(ptr, i + 1), step,
                [F.take(ptr, i), zero, zero], max_iterations=4)
            return list(self._cell(F, F.take(x, i), hs, cs))
        return rows_tuple(F, node, roots, 2)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            hs = cs = F.zeros((1, H))
            for k in kids[:4]:
                h, c = node(k)
                hs, cs = hs + h, cs + c
            return self._cell(F, x[i:i + 1], hs, cs)
        return cat(F, nary_walk(F, x, ptr, cidx, roots, body))


@program(*NARY)
class ChildSoftmaxAttentionTwoLoops(_Net):
    """Attention over the children: one while_loop sums exp(v(h_k)) and exp-weighted h_k,
    the node divides (a softmax over its children, however many)."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def step(k, z, acc):
                h = node(F.take(cidx, k))
                e = F.exp(F.tanh(self.v(h)))
                return [], [k + 1, z + e, acc + F.broadcast_mul(h, e)]
            xi = F.take(x, i)
            _, (_, z, acc) = gluon_cf.while_loop(
                lambda k, z, acc: k < F.take(ptr, i + 1), step,
                [F.take(ptr, i), F.zeros_like(self.v(xi)), F.zeros_like(xi)],
                max_iterations=4)
            return F.tanh(self.u(xi) + F.broadcast_div(acc, z + 1e-3))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            xi = x[i:i + 1]
            z, acc = F.zeros((1, 1)), F.zeros((1, H))
            for k in kids[:4]:
                h = node(k)
                e = F.exp(F.tanh(self.v(h)))
                z, acc = z + e, acc + h * e
            return F.tanh(self.u(xi) + acc / (z + 1e-3))
        return cat(F, nary_walk(F, x, ptr, cidx, roots, body))


@program(*NARY)
class ChildMaxPoolOverMaskedForeach(_Net):
    """The children taken by a boolean_mask of ptr's range, a foreach collecting each child's
    result, then a max over the collected rows (axis 0 of the loop's outputs)."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        positions = F.arange(0, 4096).slice_like(cidx, axes=(0,))

        @gluon_cf.recursive(max_depth=16)
        def node(i):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)

            def internal():
                keep = F.broadcast_greater_equal(positions, start) * \
                    F.broadcast_lesser(positions, end)
                kids = F.contrib.boolean_mask(cidx, keep)
                hs, _ = gluon_cf.foreach(lambda k, _: (node(k.reshape((1,))), []), kids, [])
                return F.tanh(self.u(F.max(hs, axis=0)) + F.take(x, i))
            return gluon_cf.cond(end - start < 1, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            if not kids:
                return x[i:i + 1]
            pooled = F.max(F.concat(*[node(k) for k in kids], dim=0), axis=0, keepdims=True)
            return F.tanh(self.u(pooled) + x[i:i + 1])
        return cat(F, nary_walk(F, x, ptr, cidx, roots, body))


@program(*NARY)
class NaryThreeFunctionsNodeRangeChild(_Net):
    """Mutual recursion of three functions over CSR: node(i) -> span(k, end) -> child(k) ->
    node; an empty span is zeros; returns (h, subtree size as int32)."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def child(k):
            h, n = node(F.take(cidx, k))
            return [self.u(h), n]

        @gluon_cf.recursive
        def span(k, end):
            def more():
                h, n = child(k)
                h2, n2 = span(k + 1, end)
                return [h + h2, n + n2]
            return gluon_cf.cond(k >= end, lambda: [F.zeros((1, H)),
                                                    F.zeros((1, 1), dtype="int32")], more)

        @gluon_cf.recursive
        def node(i):
            h, n = span(F.take(ptr, i), F.take(ptr, i + 1))
            return [F.tanh(h + F.take(x, i)), n + 1]
        return rows_tuple(F, node, roots, 2)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            h, n = F.zeros((1, H)), F.zeros((1, 1), dtype="int32")
            for k in kids:
                hk, nk = node(k)
                h, n = h + self.u(hk), n + nk
            return [F.tanh(h + x[i:i + 1]), n + 1]
        return cat(F, nary_walk(F, x, ptr, cidx, roots, body))


NARY_TOKENS = tuple([np.random.RandomState(295 + k).randint(0, V, a[0].shape[0])
                     .astype(np.float32)] + a[1:] for k, a in enumerate(NARY))


@program(*NARY_TOKENS)
class NaryEmbeddingMeanOfChildren(_Net):
    """Leaves embed their token; an internal node averages its children (the count from
    ptr) and adds its own embedding."""

    NO_GRAD = (0, 1, 2, 3)

    def hybrid_forward(self, F, toks, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            e = self.embed(F.take(toks, i))
            start, end = F.take(ptr, i), F.take(ptr, i + 1)

            def internal():
                _, (_, acc) = gluon_cf.while_loop(
                    lambda k, acc: k < end,
                    lambda k, acc: ([], [k + 1, acc + node(F.take(cidx, k))]),
                    [start, F.zeros_like(e)], max_iterations=4)
                return F.tanh(F.broadcast_div(acc, (end - start).reshape((-1, 1))) + e)
            return gluon_cf.cond(end - start < 1, lambda: e, internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, toks, ptr, cidx, roots, **kw):
        t = _ids(toks)

        def body(node, i, kids):
            e = self.embed(F.array([t[i]]))
            if not kids:
                return e
            return F.tanh(sum(node(k) for k in kids) / len(kids) + e)
        return cat(F, nary_walk(F, toks, ptr, cidx, roots, body))


@program(*NARY)
class NaryDepthPassedDownAndLeafCount(_Net):
    """node(i, d): the depth passed down as an argument, leaves x_i / d; returns (h, leaf
    count as float) summed over the children by a while_loop."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i, d):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)

            def internal():
                def step(k, h, n):
                    hk, nk = node(F.take(cidx, k), d + 1)
                    return [], [k + 1, h + hk, n + nk]
                _, (_, h, n) = gluon_cf.while_loop(
                    lambda k, h, n: k < end, step,
                    [start, F.zeros_like(F.take(x, i)), F.zeros((1, 1))], max_iterations=4)
                return [F.tanh(self.u(h)), n]
            return gluon_cf.cond(end - start < 1, lambda: [F.broadcast_div(
                F.take(x, i), d.reshape((-1, 1))), F.ones((1, 1))], internal)
        return rows_tuple(F, lambda r: node(r, F.ones_like(r)), roots, 2)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids, d):
            if not kids:
                return [x[i:i + 1] / d, F.ones((1, 1))]
            h, n = F.zeros((1, H)), F.zeros((1, 1))
            for k in kids[:4]:
                hk, nk = node(k, d + 1)
                h, n = h + hk, n + nk
            return [F.tanh(self.u(h)), n]
        return cat(F, nary_walk(F, x, ptr, cidx, roots, body, 1.0))


# ---- Dropout (predict and train mode; its own tests) --------------------------------------------

class DropoutInCombine(_Net):
    """TreeRNN with Dropout(0.5) on the combination."""

    def extra(self):
        self.drop = nn.Dropout(0.5)

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: self.drop(F.tanh(self.w(F.concat(node(F.take(left, i)),
                                                         node(F.take(right, i)), dim=1)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            return self.drop(F.tanh(self.w(F.concat(node(lt), node(rt), dim=1))))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))
