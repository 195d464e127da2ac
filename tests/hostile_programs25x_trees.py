"""Issue 24 item 4, session 25 (with ``hostile_programs25x.py``): recursion models exported:
gluon_cf.models' TreeRNN, RNTN, ChildSumTreeLSTM (a bound of 4) and TopDownTreeLSTM, users'
recursive functions returning several outputs, mutual recursion by node kind, int32 index
arrays, a recursion whose leaf runs a foreach over the leaf's characters, and a foreach over
the roots keeping only a state."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf

import hostile_harness
from hostile_programs17b import BAL, comb, forest
from hostile_programs23x import csr, tokens
from hostile_programs25x import H, V

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


def _token_forest(trees, seed):
    _, left, right, roots = forest(trees, seed=seed, features=1)
    return [tokens(len(left), seed=seed), left, right, roots]


TOKEN_FORESTS = (_token_forest([BAL, (None, None)], 251), _token_forest([None], 252),
                 _token_forest([comb(4), None, BAL], 253))
TREES = (forest([BAL, (None, None)], seed=254, features=H),
         forest([None, None], seed=255, features=H),
         forest([comb(3), (None, (None, None))], seed=256, features=H))


class _ModelOf(HybridBlock):
    MODEL = None
    ARGS = ()

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.tree = self.MODEL(*self.ARGS)

    def hybrid_forward(self, F, *args):
        return self.tree(*args)


@program(*TOKEN_FORESTS)
class GluonCfTreeRnnClassifier(_ModelOf):
    """gluon_cf.models' TreeRNN classifier over token forests."""
    from gluon_cf.models.recursive import TreeRNN as MODEL
    ARGS = (V, H, H, 3)


@program(*TOKEN_FORESTS)
class GluonCfRntnClassifier(_ModelOf):
    """gluon_cf.models' RNTN classifier (a bilinear tensor combine) over token forests."""
    from gluon_cf.models.recursive import RNTN as MODEL
    ARGS = (V, H, H, 3)


def _nary(children, roots, seed):
    _, ptr, cidx, r = csr(children, roots, seed)
    return [tokens(len(children), seed=seed), ptr, cidx, r]


@program(_nary([[1, 2, 3, 4], [], [5], [], [], []], [0], 257),
         _nary([[], [0]], [1, 0], 258),
         _nary([[1], [2], [3], []], [0], 259))
class GluonCfChildSumTreeLstmFourChildren(HybridBlock):
    """gluon_cf.models' ChildSumTreeLSTM with max_children=4 on forests using the bound."""

    def __init__(self):
        super().__init__()
        from gluon_cf.models.recursive import ChildSumTreeLSTM
        with self.name_scope():
            self.tree = ChildSumTreeLSTM(V, H, H, 2, max_children=4)

    def hybrid_forward(self, F, toks, ptr, cidx, roots):
        return self.tree(toks, ptr, cidx, roots)


@program([rand(2, 3)], [rand(1, 3, seed=1) * 3], [rand(3, 3, seed=2) - 1])
class GluonCfTopDownTreeLstmDepth3(_ModelOf):
    """gluon_cf.models' TopDownTreeLSTM generator of max depth 3: (total, count) per row."""
    from gluon_cf.models.recursive import TopDownTreeLSTM as MODEL
    ARGS = (3, H, 2, 3)


@program(*TREES)
class UserRecursionSumCountDepth(HybridBlock):
    """A user's recursive function returning three values: the subtree's decayed sum of rows,
    its node count and its depth (a leaf's count and depth constants)."""

    def leaf_count(self, F, i):
        return F.ones((1,))

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def internal():
                sl, nl, dl = node(F.take(left, i))
                sr, nr, dr = node(F.take(right, i))
                return (sl + sr) * 0.5 + F.take(x, i), nl + nr + 1, F.maximum(dl, dr) + 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: (
                F.take(x, i), self.leaf_count(F, i), self.leaf_count(F, i)), internal)
        (s, n, d), _ = gluon_cf.foreach(lambda r, _: (list(node(r.reshape((1,)))), []),
                                        roots, [])
        return s.reshape((-3, -2)), n, d


@program(*TREES)
class UserRecursionSumCountDepthOfArgument(UserRecursionSumCountDepth):
    """UserRecursionSumCountDepth as export's refusal advises: the leaf's count and depth
    computed from the argument (F.ones_like(i)), so that each call has a row of its own."""

    def leaf_count(self, F, i):
        return F.ones_like(i)


@program(*TREES)
class MutualRecursionLeafAndBranchKinds(HybridBlock):
    """Two functions calling each other: ``branch`` (its own Dense) calls ``child`` on both
    sides; ``child`` reads a leaf or calls ``branch``."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.combine = nn.Dense(H, in_units=2 * H)

    def hybrid_forward(self, F, x, left, right, roots):
        table = {}

        def child(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 2,
                                 lambda: table["branch"](i))

        def branch(i):
            a, b = table["child"](F.take(left, i)), table["child"](F.take(right, i))
            return F.tanh(self.combine(F.concat(a, b, dim=1)))
        table["child"] = gluon_cf.recursive(child, name="child")
        table["branch"] = gluon_cf.recursive(branch, name="branch")
        hs, _ = gluon_cf.foreach(lambda r, _: (table["child"](r.reshape((1,))), []), roots, [])
        return hs.reshape((-3, -2))


def _int32(arrays):
    x, left, right, roots = arrays
    return [x, left.astype(np.int32), right.astype(np.int32), roots.astype(np.int32)]


@program(*[_int32(t) for t in TREES])
class TreeRnnInt32Indices(HybridBlock):
    """A TreeRNN whose left/right/roots arrays are int32 (the comparisons and takes on int32)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.combine = nn.Dense(H, in_units=2 * H)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: F.tanh(self.combine(F.concat(node(F.take(left, i)),
                                                     node(F.take(right, i)), dim=1))))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return hs.reshape((-3, -2))


@program(*TREES)
class RootsForeachStateOnlyDecayedSum(HybridBlock):
    """A foreach over the roots with no outputs: its state sums each root's tree value,
    decayed by position."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.maximum(node(F.take(left, i)),
                                                   node(F.take(right, i))) - 0.1)
        _, (total, k) = gluon_cf.foreach(
            lambda r, s: ([], [s[0] * 0.5 + node(r.reshape((1,))), s[1] + 1]), roots,
            [F.zeros((1, H)), F.zeros((1,))])
        return total, k


def _char_forest(trees, seed):
    x, left, right, roots = forest(trees, seed=seed, features=H)
    chars = rand(len(left), 3, H, seed=seed + 100)
    return [chars, left, right, roots]


@program(_char_forest([BAL], 260), _char_forest([None, None], 261),
         _char_forest([(None, None)], 262))
class RecursionLeafRunsForeachOverCharacters(HybridBlock):
    """A TreeRNN whose leaf encodes the node's 3 characters with a foreach (a char RNN)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.char = nn.Dense(H, in_units=H)
            self.combine = nn.Dense(H, in_units=2 * H)

    def hybrid_forward(self, F, chars, left, right, roots):
        def leaf(i):
            rows = F.take(chars, i).reshape((-3, -2))
            _, (h,) = gluon_cf.foreach(lambda c, s: ([], [F.tanh(self.char(c.reshape(
                (1, -1))) + s[0])]), rows, [F.zeros((1, H))])
            return h

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: leaf(i),
                lambda: F.tanh(self.combine(F.concat(node(F.take(left, i)),
                                                     node(F.take(right, i)), dim=1))))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return hs.reshape((-3, -2))
