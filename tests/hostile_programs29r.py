"""Round 29r (issue 24): recursion written the way people port TreeLSTM/TreeRNN code: mutual
recursion, closures over Blocks (a dict of them, a helper, a layer list), per-invocation state
passed down, results of several arrays, n-ary trees (children in CSR ``ptr``/``cidx``) with a
``while_loop`` over the children inside the recursion. ``plain_forward`` (plain Python
recursion on NDArrays, indices read on the host) is the oracle."""
import numpy as np
from mxnet.gluon import nn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of
from hostile_programs17b import BAL, comb, forest
from hostile_programs25r import H, _Net, cat, walk

PROGRAMS, program = hostile_harness.program_registry()
MIXED = forest([BAL, None, (None, None), comb(3)], 291, H)
BALANCED = forest([(BAL, BAL)], 292, H)
BIN = (MIXED, BALANCED)


def _leaf(F, left, i):
    return F.take(left, i) < 0


@program(*BIN)
class MutualEvenOdd(_Net):
    """Two functions by level parity, each calling the other (u at even, u2 at odd levels)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        table = {}

        def make(cell, other):
            def body(i):
                return gluon_cf.cond(_leaf(F, left, i), lambda: cell(F.take(x, i)), lambda: F.tanh(
                    cell(table[other](F.take(left, i)) + table[other](F.take(right, i)))))
            return body
        table["even"] = gluon_cf.recursive(make(self.u, "odd"), name="even")
        table["odd"] = gluon_cf.recursive(make(self.u2, "even"), name="odd")
        return _rows_of(F, table["even"], roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, k):
            cell = (self.u, self.u2)[k]
            if lt < 0:
                return cell(x[i:i + 1])
            return F.tanh(cell(node(lt, 1 - k) + node(rt, 1 - k)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body, 0))


@program(*BIN)
class DictOfBlocks(_Net):
    """Cells looked up in a dict closed over: {"leaf": u, "node": w}."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        cells = {"leaf": self.u, "node": self.w}

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: cells["leaf"](F.take(x, i)),
                                 lambda: F.tanh(cells["node"](F.concat(
                                     node(F.take(left, i)), node(F.take(right, i)), dim=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return self.u(x[i:i + 1])
            return F.tanh(self.w(F.concat(node(lt), node(rt), dim=1)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


def _compose(F, cell, a, b):
    """A helper outside the block: the TreeRNN composition."""
    return F.tanh(cell(F.concat(a, b, dim=1)))


@program(*BIN)
class HelperFunction(_Net):
    """The composition in a module-level helper given the Block."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.take(x, i), lambda: _compose(
                F, self.w, node(F.take(left, i)), node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else _compose(F, self.w, node(lt), node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class BinaryTreeLSTM(_Net):
    """(h, c) pairs: a leaf's from u, a node's gated by w of both children's h."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                c = self.u(F.take(x, i))
                return [F.tanh(c), c]

            def internal():
                hl, cl = node(F.take(left, i))
                hr, cr = node(F.take(right, i))
                z = self.w(F.concat(hl, hr, dim=1))
                c = F.sigmoid(z) * (cl + cr) + F.tanh(z) * 0.5
                return [F.tanh(c) * F.sigmoid(self.u2(hl)), c]
            return gluon_cf.cond(_leaf(F, left, i), leaf, internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return [F.reshape(o, (-3, -2)) for o in outs]

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                c = self.u(x[i:i + 1])
                return [F.tanh(c), c]
            (hl, cl), (hr, cr) = node(lt), node(rt)
            z = self.w(F.concat(hl, hr, dim=1))
            c = F.sigmoid(z) * (cl + cr) + F.tanh(z) * 0.5
            return [F.tanh(c) * F.sigmoid(self.u2(hl)), c]
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class DepthPassedDown(_Net):
    """Per-invocation state as an argument: the depth, scaling each level's contribution."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i, d):
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.broadcast_mul(F.take(x, i), d + 1),
                                 lambda: F.tanh(self.u(node(F.take(left, i), d + 1)))
                                 + F.broadcast_div(node(F.take(right, i), d + 1), d + 1))
        return _rows_of(F, lambda r: node(r, F.zeros((1, 1))), roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, d):
            if lt < 0:
                return x[i:i + 1] * (d + 1)
            return F.tanh(self.u(node(lt, d + 1))) + node(rt, d + 1) / (d + 1)
        return cat(F, walk(F, left, right, roots, x.shape[0], body, 0.0))


@program(*BIN)
class HiddenPassedDown(_Net):
    """Top-down then bottom-up: a parent's state (an array computed from parameters) passed to
    its children, as attention-over-context TreeRNNs do."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i, top):
            down = F.tanh(self.u(top))
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.take(x, i) * down,
                                 lambda: node(F.take(left, i), down) - node(F.take(right, i),
                                                                            down * 0.5))
        return _rows_of(F, lambda r: node(r, F.ones((1, H))), roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, top):
            down = F.tanh(self.u(top))
            if lt < 0:
                return x[i:i + 1] * down
            return node(lt, down) - node(rt, down * 0.5)
        return cat(F, walk(F, left, right, roots, x.shape[0], body, F.ones((1, H))))


@program(*BIN)
class LayerList(_Net):
    """A Python list of Blocks closed over, indexed by a Python constant."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        layers = [self.u, self.u2]

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: layers[0](F.take(x, i)),
                                 lambda: layers[1](node(F.take(left, i)))
                                 * F.sigmoid(layers[0](node(F.take(right, i)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return self.u(x[i:i + 1])
            return self.u2(node(lt)) * F.sigmoid(self.u(node(rt)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class ThreeWay(_Net):
    """A leaf, a unary node (right < 0) and a binary node: a cond inside a cond."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                _leaf(F, left, i), lambda: F.take(x, i),
                lambda: gluon_cf.cond(F.take(right, i) < 0,
                                      lambda: self.u(node(F.take(left, i))),
                                      lambda: _compose(F, self.w, node(F.take(left, i)),
                                                       node(F.take(right, i)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            if rt < 0:
                return self.u(node(lt))
            return _compose(F, self.w, node(lt), node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class LeafCountAndState(_Net):
    """Two results of different widths: the state and the count of leaves below."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                a, na = node(F.take(left, i))
                b, nb = node(F.take(right, i))
                return [F.broadcast_mul(F.tanh(self.u(a) + self.u2(b)), na + nb), na + nb]
            return gluon_cf.cond(_leaf(F, left, i), lambda: [F.take(x, i), F.ones((1, 1))],
                                 internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return [F.reshape(o, (-3, -2)) for o in outs]

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return [x[i:i + 1], F.ones((1, 1))]
            (a, na), (b, nb) = node(lt), node(rt)
            return [F.tanh(self.u(a) + self.u2(b)) * (na + nb), na + nb]
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class TwoFunctionsSummed(_Net):
    """Two independent recursive functions over one tree, their results added."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def up(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: self.u(F.take(x, i)),
                                 lambda: up(F.take(left, i)) + up(F.take(right, i)))

        @gluon_cf.recursive
        def deep(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.take(x, i),
                                 lambda: F.maximum(deep(F.take(left, i)),
                                                   self.u2(deep(F.take(right, i)))))
        return _rows_of(F, lambda r: up(r) + deep(r), roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def up(node, i, lt, rt):
            return self.u(x[i:i + 1]) if lt < 0 else node(lt) + node(rt)

        def deep(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else F.maximum(node(lt), self.u2(node(rt)))
        n = x.shape[0]
        return cat(F, [a + b for a, b in zip(walk(F, left, right, roots, n, up),
                                             walk(F, left, right, roots, n, deep))])


@program(*BIN)
class ResidualAtTheTop(_Net):
    """The recursion's result combined with the input row outside the recursion."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.take(x, i), lambda: _compose(
                F, self.w, node(F.take(left, i)), node(F.take(right, i))))
        return _rows_of(F, lambda r: node(r) + self.u(F.take(x, r)), roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else _compose(F, self.w, node(lt), node(rt))
        n = x.shape[0]
        res = walk(F, left, right, roots, n, body)
        return cat(F, [h + self.u(x[_row(r, n):_row(r, n) + 1])
                       for h, r in zip(res, _ids(roots))])


class _Cell(nn.HybridBlock):
    """A user's cell Block with two Dense layers, called inside the recursion."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = nn.Dense(H, in_units=H, flatten=False)
            self.b = nn.Dense(H, in_units=H, flatten=False)

    def hybrid_forward(self, F, left, right):
        return F.tanh(self.a(left) + self.b(right))


@program(*BIN)
class NestedCellBlock(_Net):
    """A child HybridBlock of its own (a cell) called from the recursive body."""

    def extra(self):
        self.cell = _Cell()

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.take(x, i), lambda: self.cell(
                node(F.take(left, i)), node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else self.cell(node(lt), node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class ChildrenSoftmax(_Net):
    """Attention over the two children: softmax of v's scores."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                a, b = node(F.take(left, i)), node(F.take(right, i))
                s = F.softmax(F.concat(self.v(a), self.v(b), dim=1), axis=1)
                return F.broadcast_mul(a, F.slice_axis(s, axis=1, begin=0, end=1)) + \
                    F.broadcast_mul(b, F.slice_axis(s, axis=1, begin=1, end=2))
            return gluon_cf.cond(_leaf(F, left, i), lambda: self.u(F.take(x, i)), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return self.u(x[i:i + 1])
            a, b = node(lt), node(rt)
            s = F.softmax(F.concat(self.v(a), self.v(b), dim=1), axis=1)
            return F.broadcast_mul(a, s[:, 0:1]) + F.broadcast_mul(b, s[:, 1:2])
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class ConstantFromPython(_Net):
    """A Python float and a Python tuple closed over (fixed, not changed: no state)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        scale, widths = 0.75, (H,)

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: F.take(x, i) * scale,
                                 lambda: F.reshape(self.u(node(F.take(left, i))) * scale
                                                   + node(F.take(right, i)), (1,) + widths))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1] * 0.75
            return self.u(node(lt)) * 0.75 + node(rt)
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


# ---- n-ary trees: children in CSR (ptr, cidx), a while_loop over them in the recursion ------
# x (n, H), ptr (n + 1,), cidx, roots: 0 -> (1, 2, 3), 2 -> (4, 5); 6 a single node;
# 7 -> (8), 8 -> (9, 10, 11, 12)
NARY_CHILDREN = {0: [1, 2, 3], 2: [4, 5], 7: [8], 8: [9, 10, 11, 12]}


def _csr(children, n):
    ptr, cidx = [0], []
    for k in range(n):
        cidx += children.get(k, [])
        ptr.append(len(cidx))
    return np.array(ptr, "float32"), np.array(cidx or [0], "float32")


def _nary(roots, seed):
    ptr, cidx = _csr(NARY_CHILDREN, 13)
    return [hostile_harness.rand(13, H, seed=seed), ptr, cidx, np.array(roots, "float32")]


NARY = (_nary([0, 6, 7], 293), _nary([8, 2], 294))


def _child_loop(F, node, ptr, cidx, i, init, combine):
    """while_loop over the children of ``i``: ``combine(acc, child_result)``."""
    start, end = F.take(ptr, i), F.take(ptr, i + 1)

    def step(k, acc):
        return [], [k + 1, combine(acc, node(F.take(cidx, k)))]
    _, (_, acc) = gluon_cf.while_loop(lambda k, acc: k < end, step, [start, init],
                                      max_iterations=8)
    return acc


def _plain_nary(F, x, ptr, roots, cidx, body):
    p, c = _ids(ptr), _ids(cidx)

    def node(i):
        return body(node, i, [c[k] for k in range(p[i], p[i + 1])])
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


class _NaryNet(_Net):
    NO_GRAD = (1, 2, 3)


@program(*NARY)
class ChildSumNary(_NaryNet):
    """Child-sum TreeRNN: h = tanh(u(x) + u2(sum of children's h))."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            total = _child_loop(F, node, ptr, cidx, i, F.zeros((1, H)), lambda a, h: a + h)
            return F.tanh(self.u(F.take(x, i)) + self.u2(total))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            total = F.zeros((1, H))
            for k in kids:
                total = total + node(k)
            return F.tanh(self.u(x[i:i + 1]) + self.u2(total))
        return _plain_nary(F, x, ptr, roots, cidx, body)


@program(*NARY)
class MaxPoolNary(_NaryNet):
    """Children max-pooled (a leaf's pool: the -1e9 start, then clipped by the relu)."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            pool = _child_loop(F, node, ptr, cidx, i, F.ones((1, H)) * -1e9, F.maximum)
            return self.u(F.take(x, i)) + F.relu(pool)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            pool = F.ones((1, H)) * -1e9
            for k in kids:
                pool = F.maximum(pool, node(k))
            return self.u(x[i:i + 1]) + F.relu(pool)
        return _plain_nary(F, x, ptr, roots, cidx, body)


@program(*NARY)
class CountNodesNary(_NaryNet):
    """The size of the subtree (a base case that is an empty loop) times a projection."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def size(i):
            return _child_loop(F, size, ptr, cidx, i, F.ones((1, 1)), lambda a, s: a + s)
        return _rows_of(F, lambda r: F.broadcast_mul(self.u(F.take(x, r)), size(r)), roots)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        p, c = _ids(ptr), _ids(cidx)

        def size(i):
            return 1 + sum(size(c[k]) for k in range(p[i], p[i + 1]))
        return F.concat(*[self.u(x[r:r + 1]) * size(r) for r in _ids(roots)], dim=0)


@program(*NARY)
class MutualNary(_NaryNet):
    """Mutual recursion on an n-ary tree: ``node`` sums ``wrap`` of its children, ``wrap``
    applies u2 to ``node``."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        table = {}

        @gluon_cf.recursive
        def node(i):
            total = _child_loop(F, table["wrap"], ptr, cidx, i, F.zeros((1, H)),
                                lambda a, h: a + h)
            return F.tanh(self.u(F.take(x, i)) + total)

        @gluon_cf.recursive
        def wrap(i):
            return self.u2(node(i)) * 0.5
        table["wrap"] = wrap
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        def body(node, i, kids):
            total = F.zeros((1, H))
            for k in kids:
                total = total + self.u2(node(k)) * 0.5
            return F.tanh(self.u(x[i:i + 1]) + total)
        return _plain_nary(F, x, ptr, roots, cidx, body)


@program(*NARY)
class ChildSumTreeLSTMNary(_NaryNet):
    """Child-sum TreeLSTM (Tai et al.) over CSR children: (h, c), a forget gate per child."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            xi = F.take(x, i)
            start, end = F.take(ptr, i), F.take(ptr, i + 1)

            def step(k, hs, fc):
                h, c = node(F.take(cidx, k))
                f = F.sigmoid(self.u(xi) + self.u2(h))
                return [], [k + 1, hs + h, fc + f * c]
            _, (_, hsum, fcsum) = gluon_cf.while_loop(
                lambda k, hs, fc: k < end, step, [start, F.zeros((1, H)), F.zeros((1, H))],
                max_iterations=8)
            c = F.sigmoid(self.u(xi) + hsum) * F.tanh(self.u2(hsum)) + fcsum
            return [F.sigmoid(self.u(xi)) * F.tanh(c), c]
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return [F.reshape(o, (-3, -2)) for o in outs]

    def plain_forward(self, F, x, ptr, cidx, roots, **kw):
        p, c = _ids(ptr), _ids(cidx)

        def node(i):
            xi = x[i:i + 1]
            hsum, fcsum = F.zeros((1, H)), F.zeros((1, H))
            for k in range(p[i], p[i + 1]):
                h, cc = node(c[k])
                hsum = hsum + h
                fcsum = fcsum + F.sigmoid(self.u(xi) + self.u2(h)) * cc
            cell = F.sigmoid(self.u(xi) + hsum) * F.tanh(self.u2(hsum)) + fcsum
            return [F.sigmoid(self.u(xi)) * F.tanh(cell), cell]
        results = [node(r) for r in _ids(roots)]
        return [F.concat(*[r[k] for r in results], dim=0) for k in range(2)]


@program(*BIN)
class LeafRunsAForeach(_Net):
    """A leaf encodes its row with a foreach over its features (an RNN over a leaf's tokens)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        def encode(row):
            steps, state = gluon_cf.foreach(
                lambda t, s: ([], [F.tanh(self.u(F.broadcast_add(s[0], t)))]),
                F.reshape(row, (H, 1, 1)), [F.zeros((1, H))])
            return state[0]

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(_leaf(F, left, i), lambda: encode(F.take(x, i)), lambda: _compose(
                F, self.w, node(F.take(left, i)), node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def encode(row):
            s = F.zeros((1, H))
            for k in range(H):
                s = F.tanh(self.u(s + row[0, k]))
            return s

        def body(node, i, lt, rt):
            return encode(x[i:i + 1]) if lt < 0 else _compose(F, self.w, node(lt), node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))
