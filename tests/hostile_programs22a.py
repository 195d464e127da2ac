"""Issue 24, twenty-second round: autograph blocks ported from decoder, attention and RNN
code that assign in a tensor ``while``'s test (``while (s := F.sum(h)) < 4:``) or a tensor
``if``'s, return from inside tensor loops and from a ``try`` under a tensor ``if``, and use
the lists tensor loops collect (``reversed``, ``zip``, ``enumerate``, ``len`` where the count
is known while tracing), and ``and``/``or`` of tensors. ``PROGRAMS`` maps each block class to
its input lists; the oracle is the plain Python function on NDArrays
(``hybrid_forward.__wrapped__``)."""
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# one-row states of several sizes: small (many steps), large (no step), negative
STATES = ([rand(4, seed=220)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)])
# rows (T, 3), one of them a single row
ROWS = ([rand(4, 3, seed=221)], [rand(1, 3, seed=222) * 2], [rand(3, 3, seed=223) + 1])


class _Cell(HybridBlock):
    """A Dense-and-tanh step with its parameters (for gradients through them)."""

    def __init__(self, units=3):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(units, in_units=units, flatten=False)


# ---- := in a tensor while's or if's test -----------------------------------------------------

@program(*STATES)
class WalrusWhileSum(HybridBlock):
    """The brief's loop: the name the test assigns is read after it, Python's last test."""

    @autograph
    def hybrid_forward(self, F, h):
        while (s := F.sum(h)) < 4:
            gluon_cf.max_iterations(20)
            h = h + 1
        return h * s


@program(*STATES)
class WalrusWhileNormDecay(HybridBlock):
    """A norm-clipping loop: shrink until the norm it measures is small, then scale by it."""

    @autograph
    def hybrid_forward(self, F, h):
        steps = F.zeros((1,))
        while (norm := F.sqrt(F.sum(h * h))) > 1.5:
            gluon_cf.max_iterations(10)
            h = h * 0.7
            steps = steps + 1
        return h / (norm + 1) + steps


@program(*STATES)
class WalrusWhileContinueBreak(HybridBlock):
    """A continue skips the rest of a step, a break leaves before the test runs again."""

    @autograph
    def hybrid_forward(self, F, h):
        k = F.zeros((1,))
        while (s := F.sum(h * h)) < 30:
            gluon_cf.max_iterations(12)
            h = h + 0.5
            k = k + 1
            if F.sum(h) > 3:
                continue
            h = h * 1.5
            if s > 20:
                break
        return h * s + k


@program(*STATES)
class WalrusIfGate(HybridBlock):
    """A gate's score assigned in the if's test, read in both branches and after."""

    @autograph
    def hybrid_forward(self, F, h):
        if (score := F.sum(F.tanh(h))) > 0:
            h = h * score
        else:
            h = h - score
        return h + score


@program(*ROWS)
class WalrusWhileOverRows(_Cell):
    """A decoder: read rows while the running state's energy stays low (the energy kept)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        i = F.zeros((1,))
        while (energy := F.sum(F.abs(h))) < 2.0:
            gluon_cf.max_iterations(6)
            h = F.tanh(self.fc(h + F.take(x, F.clip(i, 0, 2)).reshape((-1,)) * 0.5 + 0.3))
            i = i + 1
        return h * energy + i


# ---- return inside tensor loops, inside try under a tensor if -------------------------------

@program(*STATES)
class ReturnFromWhile(HybridBlock):
    """Stop early once the state passes a threshold, else return after the loop."""

    @autograph
    def hybrid_forward(self, F, h):
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            if F.sum(h) > 5:
                return h
        return h - 1


@program(*STATES)
class ReturnPairFromWhile(HybridBlock):
    """A return of a tuple inside the loop and one of the same structure after it."""

    @autograph
    def hybrid_forward(self, F, h):
        c = F.zeros_like(h)
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            c = c + h
            h = F.abs(h) * 2 + 1
            if F.max(h) > 6:
                return h, c
        return h * 0.5, c - 1


@program(*ROWS)
class ReturnRowFromFor(HybridBlock):
    """``return row, h`` inside a tensor ``for``: which row it stopped at is known only when
    the graph runs (a foreach keeps no row); refused, saying to keep it in a variable."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            if F.sum(h) > 1:
                return row, h
        return x[0], h


@program(*ROWS)
class ReturnLastFromFor(HybridBlock):
    """The same written as the message says: the row kept in a variable."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        last = F.zeros_like(x[0])
        for row in x:
            h = h + row
            last = row
            if F.sum(h) > 1:
                return last, h
        return x[0], h


@program(*STATES)
class ReturnInsideTryUnderIf(HybridBlock):
    """A ``try`` around the early return of a tensor ``if``."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            try:
                return x * 2
            except ValueError:
                pass
        return x - 1


@program(*STATES)
class ReturnInsideTryFinallyUnderIf(HybridBlock):
    """The same with a ``finally`` that only computes Python state."""

    @autograph
    def hybrid_forward(self, F, x):
        y = F.tanh(x)
        if F.sum(y) < 0:
            try:
                return y * y
            finally:
                y = y * 1
        return y + 1


# ---- lists collected by loops ------------------------------------------------------------

@program(*ROWS)
class EnumerateCollectedOverInput(_Cell):
    """An RNN's outputs weighted by position: the count is the input's rows (known)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for row in x:
            h = F.tanh(self.fc(h + row))
            outs.append(h)
        acc = F.zeros_like(h)
        for i, o in enumerate(outs):
            acc = acc + o * (i + 1)
        return acc / len(outs)


@program(*ROWS)
class ZipCollectedListsOverInput(_Cell):
    """Attention scores over two lists a loop over the input collected, zipped."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        keys, values = [], []
        for row in x:
            h = F.tanh(self.fc(h) + row)
            keys.append(h)
            values.append(row * 2)
        total = F.zeros_like(h)
        for k, v in zip(keys, values):
            total = total + F.sigmoid(F.sum(k * h)) * v
        return total


class _WhileCollected(HybridBlock):
    """A decoder's states collected by a tensor while: their count is known only when the
    graph runs."""

    def states(self, F, x):
        outs, doubled = [], []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
            doubled.append(h * 2)
        return outs, doubled


@program(*STATES)
class EnumerateWhileList(_WhileCollected):
    """``for i, o in enumerate(outs)``: refused (a graph gives no Python int per item)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs, _ = self.states(F, x)
        acc = F.zeros_like(x)
        for i, o in enumerate(outs):
            acc = acc + o * i
        return acc


@program(*STATES)
class EnumerateWrittenWithCounter(_WhileCollected):
    """The same written as the message says: a for over the list with a counter array."""

    @autograph
    def hybrid_forward(self, F, x):
        outs, _ = self.states(F, x)
        acc = F.zeros_like(x)
        i = F.zeros((1,))
        for o in outs:
            acc = acc + o * i
            i = i + 1
        return acc


@program(*STATES)
class ZipWhileLists(_WhileCollected):
    """``for a, b in zip(outs, doubled)``: refused at its line."""

    @autograph
    def hybrid_forward(self, F, x):
        outs, doubled = self.states(F, x)
        acc = F.zeros_like(x)
        for a, b in zip(outs, doubled):
            acc = acc + a * b
        return acc


@program(*STATES)
class LenOfWhileList(_WhileCollected):
    """``len(outs)``: refused (Python's int is known only when the graph runs)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs, _ = self.states(F, x)
        return F.add_n(x, *outs) / (len(outs) + 1)


@program(*STATES)
class ReversedIndexOfWhileList(HybridBlock):
    """``reversed(outs)[0]``: Python's TypeError (the iterator is not subscriptable)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        return reversed(outs)[0]


@program(*ROWS)
class ReversedIndexOfForList(HybridBlock):
    """The same over a list whose count the input gives."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        return reversed(outs)[0]


@program(*STATES)
class ReversedStackOfWhileList(HybridBlock):
    """A backward pass over a decoder's states: ``F.stack(*reversed(outs))``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        back = reversed(outs)
        return F.stack(*back) * 2


@program(*STATES)
class ReversedUsedTwice(HybridBlock):
    """One ``reversed(outs)`` unpacked twice: Python's second use sees no item (its
    ``F.stack()`` fails); refused at the second use, not the items again."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        back = reversed(outs)
        first = F.stack(*back)
        return first + F.sum(F.stack(*back))


@program(*STATES)
class ListOfReversedWhileList(_WhileCollected):
    """``list(reversed(outs))``: a new list, indexed and unpacked; ``sum`` of another."""

    @autograph
    def hybrid_forward(self, F, x):
        outs, doubled = self.states(F, x)
        back = list(reversed(outs))
        return F.stack(*back) + back[0] + sum(reversed(doubled))


@program(*STATES)
class ReversedLoopOfWhileList(HybridBlock):
    """A backward RNN over the states a forward loop collected."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        g = F.zeros_like(x)
        for o in reversed(outs):
            g = F.tanh(g * 0.5 + o)
        return g


@program(*ROWS)
class LastOfCollectedAttention(_Cell):
    """Attention over a collected list: the last state attends over all the states."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        states = []
        for row in x:
            h = F.tanh(self.fc(h) + row)
            states.append(h)
        memory = F.stack(*states)
        scores = F.softmax(F.dot(memory, states[-1]))
        return F.dot(scores, memory)


# ---- and/or of tensors ---------------------------------------------------------------------

@program(*STATES)
class AndOfSameDtype(HybridBlock):
    """``a and b`` of two one-element tensors of one dtype: Python's operand itself."""

    @autograph
    def hybrid_forward(self, F, x):
        a = F.sum(x)
        b = F.max(x) * 2
        return x * (a and b)


@program(*STATES)
class OrWithNumber(HybridBlock):
    """``score or 1.0``: the Python number an array of the tensor's shape."""

    @autograph
    def hybrid_forward(self, F, x):
        score = F.sum(F.relu(x))
        return x * (score or 1.0)


@program(*STATES)
class MixedDtypeAnd(HybridBlock):
    """A float32 sum ``and`` an int32 count: refused naming the and and the dtypes."""

    @autograph
    def hybrid_forward(self, F, x):
        a = F.sum(x)
        b = F.cast(F.sum(x > 0), "int32")
        return a and b


@program(*STATES)
class TernaryWithNumberSide(HybridBlock):
    """``a if F.sum(x) > 0 else 1.0``: Python gives the float where it is chosen; refused
    hybridized, saying to write the number as an array."""

    @autograph
    def hybrid_forward(self, F, x):
        a = x * 2
        return x * (a if F.sum(x) > 0 else 1.0)


@program(*STATES)
class TernaryOfArrays(HybridBlock):
    """The same written as the message says: both sides arrays."""

    @autograph
    def hybrid_forward(self, F, x):
        a = x * 2
        return x * (a if F.sum(x) > 0 else F.ones_like(a) * 1.0)


# ---- a greedy decoder whose step count is read with := ----------------------------------

@program(*ROWS)
class GreedyDecoderWalrusStop(_Cell):
    """Decode until the step's best score (assigned in the test) drops below a threshold."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        outs = []
        n = F.zeros((1,))
        while (best := F.max(F.softmax(self.fc(h)))) * (4 - n) > 0.7:
            gluon_cf.max_iterations(5)
            h = F.tanh(self.fc(h) + h * 0.5)
            outs.append(h * best)
            n = n + 1
        return F.add_n(h, *outs) * best


# ---- review h22rev4: := with a break and an else; := in a chained comparison ---------------

@program(*STATES)
class WalrusBreakElse(HybridBlock):
    """A := test, a break and an else: Python's NameError eagerly (the := sat in a function
    of the break's test, binding its own name)."""

    @autograph
    def hybrid_forward(self, F, h):
        k = F.zeros((1,))
        while (s := F.sum(h)) < 6:
            gluon_cf.max_iterations(20)
            h = h + 1
            k = k + 1
            if k > 2:
                break
        else:
            h = h * 3
        return h * s + k


@program(*STATES)
class WalrusInChainedComparison(HybridBlock):
    """A := in a chain's first two operands (it was left Python's chain: MXNet's
    NotImplementedForSymbol hybridized)."""

    @autograph
    def hybrid_forward(self, F, h):
        while -10 < (s := F.sum(h)) < 4:
            gluon_cf.max_iterations(20)
            h = h + 1
        if 0 < 1 < (k := 3) < 5:
            h = h * k
        return h * s


@program(*STATES)
class WalrusLateInChainedComparison(HybridBlock):
    """A := in a chain's third operand: Python's chain, refused at the line hybridized."""

    @autograph
    def hybrid_forward(self, F, h):
        while -10 < F.sum(h) < (s := F.sum(h) * 0 + 4):
            gluon_cf.max_iterations(20)
            h = h + 1
        return h * s
