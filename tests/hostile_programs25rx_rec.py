"""Review round 25x (session 25), recursion: programs around round 25r's two fixes, for
``tests/test_review_round25x.py``: a cond whose rows of a batch all take one branch (branch
outputs of several shapes and dtypes, some with no per-row dim: constants) and cycles of two
and four functions, each reading an Embedding of its node's token (NOTE [taint through a cycle
of calls]). ``plain_forward`` (Python recursion on NDArrays) is the oracle."""
import numpy as np

import gluon_cf

import hostile_harness
from hostile_programs14 import _rows_of
from hostile_programs17b import BAL, comb, forest
from hostile_programs25r import H, _Net, cat, rows_tuple, tokens_of, walk

PROGRAMS, program = hostile_harness.program_registry()

# leaves only (every row of every level a leaf), a balanced tree and a comb (the deepest
# level's rows all leaves, the others mixed), and a single node
LEAVES = forest([None, None, None, None], 401, H)
TREES = (LEAVES, forest([BAL, comb(3)], 402, H), forest([None], 403, H),
         forest([(BAL, BAL)], 404, H))
TOKENS = tuple(tokens_of(a, 410 + k) for k, a in enumerate(TREES))


@program(*TREES)
class ConstantOutputsOfShapesAndDtypes(_Net):
    """A leaf returns its row and constants: a (1, 2, 3) float32 block of ones, an int32
    count, a float64 depth and a (1, H) row of 0.5; an internal node combines its children's."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                return [F.take(x, i), F.ones((1, 2, 3)), F.ones((1, 1), dtype="int32"),
                        F.zeros((1, 1), dtype="float64"), F.ones((1, H)) * 0.5]

            def internal():
                a, b = node(F.take(left, i)), node(F.take(right, i))
                return [F.tanh(self.w(F.concat(a[0], b[0], dim=1))), a[1] + b[1] * 2,
                        a[2] + b[2], F.maximum(a[3], b[3]) + 1, a[4] * b[4] + a[0]]
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        return rows_tuple(F, node, roots, 5)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return [x[i:i + 1], F.ones((1, 2, 3)), F.ones((1, 1), dtype="int32"),
                        F.zeros((1, 1), dtype="float64"), F.ones((1, H)) * 0.5]
            a, b = node(lt), node(rt)
            return [F.tanh(self.w(F.concat(a[0], b[0], dim=1))), a[1] + b[1] * 2, a[2] + b[2],
                    F.maximum(a[3], b[3]) + 1, a[4] * b[4] + a[0]]
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


def _cycle(self, F, x, left, right, roots, count):
    """``count`` functions in turn by level, each reading the Embedding of its node's token
    and a Dense of its own (the last one none)."""
    dense = [self.u, self.u2, lambda v: v * 0.5, self.u][:count]
    table = []

    def make(k):
        def body(i):
            nxt = table[(k + 1) % count]
            own = self.embed(F.take(x, i))
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: dense[k](own),
                lambda: F.tanh(dense[k](nxt(F.take(left, i))) - nxt(F.take(right, i)) + own))
        return gluon_cf.recursive(body, name="cycle%d_%d" % (count, k))
    table.extend(make(k) for k in range(count))
    return _rows_of(F, table[0], roots)


def _plain_cycle(self, F, x, left, right, roots, count):
    dense = [self.u, self.u2, lambda v: v * 0.5, self.u][:count]

    def body(node, i, lt, rt, k):
        own = self.embed(x[i:i + 1])
        if lt < 0:
            return dense[k](own)
        return F.tanh(dense[k](node(lt, (k + 1) % count)) - node(rt, (k + 1) % count) + own)
    return cat(F, walk(F, left, right, roots, x.shape[0], body, 0))


@program(*TOKENS)
class TwoFunctionsInTurnReadEmbeddings(_Net):
    NO_GRAD = (0, 1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        return _cycle(self, F, x, left, right, roots, 2)

    def plain_forward(self, F, x, left, right, roots, **kw):
        return _plain_cycle(self, F, x, left, right, roots, 2)


@program(*TOKENS)
class FourFunctionsInTurnReadEmbeddings(TwoFunctionsInTurnReadEmbeddings):
    def hybrid_forward(self, F, x, left, right, roots, **kw):
        return _cycle(self, F, x, left, right, roots, 4)

    def plain_forward(self, F, x, left, right, roots, **kw):
        return _plain_cycle(self, F, x, left, right, roots, 4)
