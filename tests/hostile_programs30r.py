"""Hostile recursion programs, round 30r (issue 24): users' own recursive functions written
the way people port tree code (n-ary trees as CSR, top-down decoders deciding the tree,
mutual recursion, state on self that the value does not change, other dtypes).
Each block's ``plain_forward`` is plain eager Python recursion on NDArrays: the oracle."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf

from hostile_harness import floats, program_registry, rand

PROGRAMS, program = program_registry()
H = 3


def ids(a):
    return [int(v) for v in a.asnumpy().ravel()]


def csr(children, seed):
    """x (n, H), ptr (n + 1,), cidx: an n-ary tree's children as CSR."""
    ptr, cidx = [0], []
    for kids in children:
        cidx.extend(kids)
        ptr.append(len(cidx))
    return [rand(len(children), H, seed=seed), floats(*ptr), floats(*(cidx or [0]))]


NARY = (csr([[1, 2, 3], [4], [], [], []], 301), csr([[]], 302), csr([[1], [2], [3], []], 303))
BIN = ([rand(5, H, seed=304), floats(1, 3, -1, -1, -1), floats(2, 4, -1, -1, -1), floats(0)],
       [rand(1, H, seed=305), floats(-1), floats(-1), floats(0)],
       [rand(7, H, seed=306), floats(1, -1, 3, -1, 5, -1, -1), floats(2, -1, 4, -1, 6, -1, -1),
        floats(0)])


class _Net(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = nn.Dense(H, in_units=H, flatten=False)
            self.u = nn.Dense(H, in_units=2 * H, flatten=False)
        self.more()

    def more(self):
        pass


@program(*NARY)
class CsrChildSum(_Net):
    """node(i) = tanh(W x_i + sum of node(c) over i's children), children by a while_loop over
    ptr[i]..ptr[i+1] (a leaf: a loop of no step)."""

    def hybrid_forward(self, F, x, ptr, cidx):
        @gluon_cf.recursive
        def node(i):
            lo, hi = F.take(ptr, i), F.take(ptr, i + 1)

            def step(k, acc):
                return None, [k + 1, acc + node(F.take(cidx, k))]
            _, (_, total) = gluon_cf.while_loop(lambda k, acc: k < hi, step,
                                                [lo, F.zeros_like(F.take(x, i))],
                                                max_iterations=8)
            return F.tanh(self.w(F.take(x, i)) + total)
        return node(F.zeros((1,)))

    def plain_forward(self, F, x, ptr, cidx, **_):
        p, c = ids(ptr), ids(cidx)

        def node(i):
            total = F.zeros((1, H))
            for k in range(p[i], p[i + 1]):
                total = total + node(c[k])
            return F.tanh(self.w(x[i:i + 1]) + total)
        return node(0)


@program(*NARY)
class CsrChildRangeMutual(_Net):
    """node(i) and kids(i, k): the children of i from its k-th, by mutual recursion (no loop)."""

    def hybrid_forward(self, F, x, ptr, cidx):
        table = {}

        def node(i):
            return F.tanh(self.w(F.take(x, i)) +
                          table["kids"](F.take(ptr, i), F.take(ptr, i + 1)))

        def kids(k, hi):
            return gluon_cf.cond(k >= hi, lambda: F.zeros((1, H)),
                                 lambda: table["node"](F.take(cidx, k)) * 0.5 +
                                 table["kids"](k + 1, hi))
        table.update(node=gluon_cf.recursive(node), kids=gluon_cf.recursive(kids))
        return table["node"](F.zeros((1,)))

    def plain_forward(self, F, x, ptr, cidx, **_):
        p, c = ids(ptr), ids(cidx)

        def node(i):
            return F.tanh(self.w(x[i:i + 1]) + kids(p[i], p[i + 1]))

        def kids(k, hi):
            return F.zeros((1, H)) if k >= hi else node(c[k]) * 0.5 + kids(k + 1, hi)
        return node(0)


DEPTHS = ([floats(0.3, -0.2, 0.5), floats(3)], [floats(-0.3, 0.1, 0.2), floats(2)],
          [floats(0.9, 0.8, 0.7), floats(0)])


@program(*DEPTHS)
class TopDownDecoder(_Net):
    """expand(h, d): a top-down decoder deciding the tree: a leaf when d is 0 or the summed
    state is negative, else two children from Dense(h) and -Dense(h), joined by ``join`` (the
    sum of the leaves' states here)."""

    @staticmethod
    def join(F, a, b):
        return a + b

    def hybrid_forward(self, F, h0, depth):
        @gluon_cf.recursive
        def expand(h, d):
            child = F.tanh(self.w(h))
            return gluon_cf.cond(F.broadcast_logical_or(d <= 0, F.sum(h) < 0), lambda: h * 1,
                                 lambda: self.join(F, expand(child, d - 1),
                                                   expand(child * -0.5, d - 1)))
        return expand(F.expand_dims(h0, 0), depth)

    def plain_forward(self, F, h0, depth, **_):
        def expand(h, d):
            if d <= 0 or F.sum(h).asscalar() < 0:
                return h * 1
            child = F.tanh(self.w(h))
            return self.join(F, expand(child, d - 1), expand(child * -0.5, d - 1))
        return expand(F.expand_dims(h0, 0), int(depth.asscalar()))


@program(*DEPTHS)
class TopDownDecoderCollects(TopDownDecoder):
    """A decoder whose value is the concat of its leaves (width decided by the tree)."""

    @staticmethod
    def join(F, a, b):
        return F.concat(a, b, dim=0)


COUNTS = ([rand(1, H, seed=307), floats(5)], [rand(1, H, seed=308), floats(0)],
          [rand(1, H, seed=309), floats(4)])


@program(*COUNTS)
class EvenOdd(_Net):
    """even(n) / odd(n) by mutual recursion on a counter, each with its own transform."""

    def hybrid_forward(self, F, x, n):
        table = {}

        def even(h, k):
            return gluon_cf.cond(k <= 0, lambda: h * 1,
                                 lambda: table["odd"](F.tanh(self.w(h)), k - 1))

        def odd(h, k):
            return gluon_cf.cond(k <= 0, lambda: -h,
                                 lambda: table["even"](h * 0.5 + 0.1, k - 1))
        table.update(even=gluon_cf.recursive(even), odd=gluon_cf.recursive(odd))
        return table["even"](x, n)

    def plain_forward(self, F, x, n, **_):
        def even(h, k):
            return h * 1 if k <= 0 else odd(F.tanh(self.w(h)), k - 1)

        def odd(h, k):
            return -h if k <= 0 else even(h * 0.5 + 0.1, k - 1)
        return even(x, int(n.asscalar()))


@program(*COUNTS)
class FibonacciShaped(_Net):
    """f(n) = f(n-1) + f(n-2) * W: two recursive calls of different arguments."""
    NO_GRAD = (1,)   # (the oracle's n is a Python int)

    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive
        def f(k):
            return gluon_cf.cond(k <= 1, lambda: F.broadcast_mul(x, k + 1),
                                 lambda: f(k - 1) + self.w(f(k - 2)) * 0.5)
        return f(n)

    def plain_forward(self, F, x, n, **_):
        def f(k):
            return x * (k + 1) if k <= 1 else f(k - 1) + self.w(f(k - 2)) * 0.5
        return f(int(n.asscalar()))


@program(*BIN)
class TreeLstmPair(_Net):
    """A TreeLSTM-like pair [h, c] returned by each call; an LSTMCell on the children's h."""

    def more(self):
        with self.name_scope():
            self.cell = mx.gluon.rnn.LSTMCell(H, input_size=2 * H)

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            def inner():
                hl, cl = node(F.take(left, i))
                hr, cr = node(F.take(right, i))
                h, (_, c) = self.cell(F.concat(hl, hr, dim=1), [hl + hr, cl + cr])
                return [h, c]
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: [F.take(x, i), F.zeros_like(F.take(x, i))], inner)
        return node(root)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i):
            if lt[i] < 0:
                return [x[i:i + 1], F.zeros((1, H))]
            hl, cl = node(lt[i])
            hr, cr = node(rt[i])
            h, (_, c) = self.cell(F.concat(hl, hr, dim=1), [hl + hr, cl + cr])
            return [h, c]
        return node(ids(root)[0])


@program(*BIN)
class StateOnSelfReadOnly(_Net):
    """Reads self.scale and a list of layers chosen by Python constants (never changed)."""

    def more(self):
        self.scale = 0.75
        self.order = [1, 0]

    def hybrid_forward(self, F, x, left, right, root):
        layers = [lambda v: self.u(v), lambda v: F.tanh(self.u(v))]

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * self.scale,
                                 lambda: layers[self.order[0]](F.concat(
                                     node(F.take(left, i)), node(F.take(right, i)), dim=1)))
        return node(root)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i):
            if lt[i] < 0:
                return x[i:i + 1] * self.scale
            return F.tanh(self.u(F.concat(node(lt[i]), node(rt[i]), dim=1)))
        return node(ids(root)[0])


@program(*[[a[0].astype(np.float64)] + a[1:] for a in BIN])
class Float64Features(_Net):
    """float64 features and parameters (the block cast), float32 indices."""
    DTYPE = "float64"

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(self.u(F.concat(node(F.take(left, i)),
                                                                node(F.take(right, i)), dim=1))))
        return node(root)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i):
            if lt[i] < 0:
                return x[i:i + 1]
            return F.tanh(self.u(F.concat(node(lt[i]), node(rt[i]), dim=1)))
        return node(ids(root)[0])


@program(*[[a[0]] + [v.astype(np.int32) for v in a[1:]] for a in BIN])
class Int32Indices(_Net):
    """int32 child indices and root (no gradient), float32 features; the leaf test compares an
    int32 with 0."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 2,
                                 lambda: self.w(node(F.take(left, i)) - node(F.take(right, i))))
        return node(root)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i):
            return x[i:i + 1] * 2 if lt[i] < 0 else self.w(node(lt[i]) - node(rt[i]))
        return node(ids(root)[0])


@program(*BIN)
class DepthArgument(_Net):
    """The depth passed as an array argument and read by the value (the advice the refusal
    of Python state gives)."""

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i, d):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.broadcast_mul(F.take(x, i), d),
                                 lambda: F.broadcast_mul(node(F.take(left, i), d + 1) +
                                                         node(F.take(right, i), d + 1), 1 / d))
        return node(root, F.ones((1,)))

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i, d):
            if lt[i] < 0:
                return x[i:i + 1] * d
            return (node(lt[i], d + 1) + node(rt[i], d + 1)) / d
        return node(ids(root)[0], 1.0)


@program(*BIN)
class MaxDepth(_Net):
    """The height of the tree times a learned row: F.maximum of the children's."""

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def height(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 0 + 1,
                                 lambda: F.maximum(height(F.take(left, i)),
                                                   height(F.take(right, i))) + 1)
        return self.w(height(root))

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def height(i):
            return 1 if lt[i] < 0 else max(height(lt[i]), height(rt[i])) + 1
        return self.w(x[0:1] * 0 + height(ids(root)[0]))


@program(*BIN)
class TwoCallsOneForward(_Net):
    """The same recursive function called twice in one forward (two roots: the root and its
    left child, or itself at a leaf)."""

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(self.u(F.concat(node(F.take(left, i)),
                                                                node(F.take(right, i)), dim=1))))
        other = F.where(F.take(left, root) < 0, root, F.take(left, root))
        return node(root) * 2 - node(other)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i):
            if lt[i] < 0:
                return x[i:i + 1]
            return F.tanh(self.u(F.concat(node(lt[i]), node(rt[i]), dim=1)))
        r = ids(root)[0]
        return node(r) * 2 - node(r if lt[r] < 0 else lt[r])


@program(*NARY)
class CsrForeachLeaf(_Net):
    """An n-ary tree whose value at each node is a foreach over its own features' rows (a
    running sum), plus its children's by a while_loop."""

    def hybrid_forward(self, F, x, ptr, cidx):
        @gluon_cf.recursive
        def node(i):
            rows, _ = gluon_cf.foreach(lambda r, s: (r + s[0], [s[0] + r]),
                                       F.reshape(F.take(x, i), (H, 1)), [F.zeros((1,))])
            own = F.reshape(rows, (1, H))
            lo, hi = F.take(ptr, i), F.take(ptr, i + 1)
            _, (_, total) = gluon_cf.while_loop(
                lambda k, acc: k < hi,
                lambda k, acc: (None, [k + 1, acc + node(F.take(cidx, k))]),
                [lo, F.zeros_like(own)], max_iterations=8)
            return F.tanh(self.w(own) + total * 0.5)
        return node(F.zeros((1,)))

    def plain_forward(self, F, x, ptr, cidx, **_):
        p, c = ids(ptr), ids(cidx)

        def node(i):
            own = F.reshape(F.cumsum(x[i], axis=0) if hasattr(F, "cumsum") else
                            F.array(np.cumsum(x[i].asnumpy())), (1, H))
            total = F.zeros((1, H))
            for k in range(p[i], p[i + 1]):
                total = total + node(c[k])
            return F.tanh(self.w(own) + total * 0.5)
        return node(0)


@program(*BIN)
class RematMutual(_Net):
    """Two functions in turn, both with remat=True."""

    def hybrid_forward(self, F, x, left, right, root):
        t = {}

        def a(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(self.u(F.concat(
                                     t["b"](F.take(left, i)), t["b"](F.take(right, i)), dim=1))))

        def b(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 2,
                                 lambda: self.w(t["a"](F.take(left, i)) *
                                                t["a"](F.take(right, i))))
        t.update(a=gluon_cf.recursive(a, remat=True), b=gluon_cf.recursive(b, remat=True))
        return t["a"](root)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def a(i):
            return x[i:i + 1] if lt[i] < 0 else F.tanh(self.u(F.concat(b(lt[i]), b(rt[i]),
                                                                        dim=1)))

        def b(i):
            return x[i:i + 1] * 2 if lt[i] < 0 else self.w(a(lt[i]) * a(rt[i]))
        return a(ids(root)[0])


@program(*BIN)
class MxnetForeachInside(_Net):
    """MXNet's own F.contrib.foreach inside the recursive body (over a leaf's features)."""

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                outs, _ = F.contrib.foreach(lambda d, s: (d * s[0], [s[0] + 1]),
                                            F.reshape(F.take(x, i), (H, 1)), [F.ones((1,))])
                return F.reshape(outs, (1, H))
            return gluon_cf.cond(F.take(left, i) < 0, leaf, lambda: F.tanh(self.u(F.concat(
                node(F.take(left, i)), node(F.take(right, i)), dim=1))))
        return node(root)

    def plain_forward(self, F, x, left, right, root, **_):
        lt, rt = ids(left), ids(right)

        def node(i):
            if lt[i] < 0:
                return x[i:i + 1] * F.array([[1, 2, 3]])
            return F.tanh(self.u(F.concat(node(lt[i]), node(rt[i]), dim=1)))
        return node(ids(root)[0])


@program(*DEPTHS)
class DecoderWhileChildren(_Net):
    """A decoder whose number of children (0-2) a while_loop decides from the state."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, h0, depth):
        @gluon_cf.recursive
        def expand(h, d):
            def kids():
                n = F.clip(F.floor(F.sum(h) * 2 + 1), 0, 2)

                def step(k, acc):
                    child = F.broadcast_mul(F.tanh(self.w(h)), k + 1)
                    return None, [k + 1, acc + expand(child, d - 1)]
                _, (_, acc) = gluon_cf.while_loop(lambda k, acc: k < n, step,
                                                  [F.zeros((1,)), F.zeros_like(h)],
                                                  max_iterations=2)
                return acc + h
            return gluon_cf.cond(d <= 0, lambda: h * 1, kids)
        return expand(F.expand_dims(h0, 0), depth)

    def plain_forward(self, F, h0, depth, **_):
        def expand(h, d):
            if d <= 0:
                return h * 1
            n = int(np.clip(np.floor(F.sum(h).asscalar() * 2 + 1), 0, 2))
            acc = F.zeros_like(h)
            for k in range(n):
                acc = acc + expand(F.tanh(self.w(h)) * (k + 1), d - 1)
            return acc + h
        return expand(F.expand_dims(h0, 0), int(depth.asscalar()))
