"""Issue 24 (items 1 and 5), round 30ag: autograph's leftovers, each program run as plain
Python on NDArrays (the oracle) and converted, eagerly and hybridized with gradients
(``hostile_harness.classify``, rtol 1e-5, atol 1e-6).

- A ``finally`` left by a ``return``, ``break`` or ``continue`` drops what its ``try``
  raised: ``try: for r in x: ... x[9] / finally: return h * 3`` raised IndexError
  hybridized (and eagerly inside a loop, where the jump is a flag), and replaces the
  ``try``'s pending jump: ``return h`` in a loop's ``try`` whose ``finally`` continues
  returned, eagerly and hybridized (silently). NOTE [a finally that jumps].
- ``for r in x: try: r[5] / except IndexError:`` took the handler eagerly and failed as the
  graph ran hybridized: a tensor ``for``'s row and carried values have the traced shapes
  there (NOTE [an index error the user's try catches]).
- ``match`` or-patterns of sequences and a subject written as a name bound to a tuple were
  refused hybridized: Python's if/elif chain (NOTE [a match on a tuple display]).
- ``items[i] = v`` and ``del items[i]`` of a collected list were refused: Python's where the
  input shapes give its length, refused inside a tensor if or loop (silently once, else).
  ``try: v = outs[7] / except IndexError:`` failed as the graph ran: Python's IndexError
  where the shapes give the length.
- ``items - items`` and ``items[1.5]``: Python's TypeError naming ``list``.
- A dict holding Python constants beside arrays through a tensor loop or if: carried where
  they do not change (NOTE [autograph carried structures]).
Refusals say what is refused and what to write: ``next(it)`` in a tensor loop, a ``while
True`` appending after a tensor break (the append's line)."""
from mxnet.gluon import HybridBlock

import pytest
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand
ROWS = ([rand(4, 3, seed=3001)], [rand(2, 3, seed=3002)])
TOL = (1e-5, 1e-6)


# ------------------------------------------------------------------ a finally that jumps
@program(*ROWS)
class FinallyReturnDropsIndexError(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        try:
            for r in x:
                h = h + r * x[9]
        finally:
            return h * 3


@program(*ROWS)
class ReturnInLoopsFinallyDropsIndexError(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            try:
                h = h + r[5]
            finally:
                return h * 2
        return h


@program(*ROWS)
class FinallyContinueInRangeLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for k in range(3):
            try:
                h = h + x[k + 2]
            finally:
                continue
        return h


@program(*ROWS)
class FinallyContinueReplacesReturn(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            try:
                h = h + r
                return h
            finally:
                continue
        return h * 5


FLAG = [True]


@program(*ROWS)
class FinallyBreakUnderPythonIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            try:
                h = h + r * x[3]
            finally:
                if FLAG[0]:
                    break
        return h


@program(*ROWS)
class FinallyBreakOfInnerLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            for c in r:
                try:
                    h = h + c
                finally:
                    break
        return h


# ------------------------------------------------------ an index a tensor for's try catches
@program(*ROWS)
class RowIndexCaughtInTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            try:
                h = h + r[1]
                h = h + r[5]
            except IndexError:
                h = h * 2
        return h


@program(*ROWS)
class RowIndexCaughtAroundTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        try:
            for r in x:
                h = h + r[5]
        except IndexError:
            h = h - 1
        return h


@program(*ROWS)
class CarriedIndexCaughtInTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            try:
                h = h + h[3]
            except IndexError:
                h = h + r
        return h


# ---------------------------------------------------------------------------------- match
@program(*ROWS)
class MatchOrPatternOfSequences(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for k, row in enumerate(x):
            match (k, row, h):
                case (0, r, _) | (1, _, r):
                    h = h + r * 2
                case (2 | 3, r, _):
                    h = h * r
        return h


@program(*ROWS)
class MatchOnNameBoundToSequence(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for k, row in enumerate(x):
            pair = [k, row, 1.5] if k == 2 else (k, row)
            match pair:
                case (0, r) | (1, r):
                    h = h + r * 2
                case (2, r, n):
                    h = h * n + r
                case (None, _):
                    h = h * 9
                case whole:
                    h = h - whole[1]
        return h


@program(*ROWS)
class MatchOnNameBoundToTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        pair = x
        match pair:
            case (0, r):
                return r * 2
            case _:
                return x * 3


# ------------------------------------------------------------------------ collected lists
@program(*ROWS)
class ItemsAssignedAndDeleted(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        i = len(outs) - 1
        outs[i] = outs[0] + outs[i] * 7
        del outs[::2]
        outs[0:1] = [x[1], outs[0] * 3]
        return F.stack(*outs).sum(axis=0) * len(outs)


@program(*ROWS)
class ItemAssignedPastTheEnd(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        outs[3] = x[0]
        return F.stack(*outs)


@program(*ROWS)
class ItemsIndexedByFloat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        return outs[1.5]


@program(*ROWS)
class ItemsMinusItems(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        return outs - outs


@program(*ROWS)
class CollectedItemPastTheEndCaught(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        try:
            v = outs[7]
        except IndexError:
            v = outs[-1] * 3
        return v


@program(*ROWS)
class ItemDeletedInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        h = x[0]
        for r in x:
            del outs[0]
            h = h + r
        return h * (len(outs) + 1)


# ---------------------------------------------------------------- dicts holding constants
@program(*ROWS)
class DictConstantsThroughTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0], "k": 2, "mode": None, "c": {"w": x[1], "tag": "a"}}
        outs = []
        for r in x:
            state["h"] = state["h"] * 0.5 + r * state["k"]
            state["c"] = {"w": state["c"]["w"] * 0.5, "tag": "a"}
            outs.append(state["h"])
        return F.stack(*outs).sum(axis=0) + state["c"]["w"]


@program(*ROWS)
class DictConstantsThroughTensorWhileAndIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0], "k": 2.0}
        i = F.zeros((1,))
        while F.sum(i) < 3:
            state["h"] = state["h"] + x[1] * state["k"]
            i = i + 1
        if F.sum(x) > 0:
            state["h"] = state["h"] * state["k"]
        return state["h"]


@program(*ROWS)
class DictConstantChangedInTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0], "k": 2}
        for r in x:
            state["h"] = state["h"] + r
            state["k"] = 2.0
        return state["h"] * state["k"]


# ---------------------------------------------------------------------------- refusals
@program(*ROWS)
class NextWithDefaultInWhileTrue(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        it = iter(x)
        while True:
            r = next(it, None)
            if r is None:
                break
            h = h + r
            if F.sum(h) > 3:
                break
        return h


@program(*ROWS)
class WhileTrueAppendsAfterTensorBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        outs = []
        i = F.zeros((1,))
        while True:
            h = h * 0.5 + x[0]
            i = i + 1
            if F.sum(i) > 3:
                break
            outs.append(h)
        return F.stack(*outs).sum(axis=0)


for _cls in PROGRAMS:
    _cls.TOL = TOL

_REFUSED = {
    ItemDeletedInTensorLoop: ("del outs[0]", "del outs[0]: this statement deletes an item of "
                              "a list the loop on a tensor at {f}:{loop} (for r in x:) "
                              "appended to, inside the for loop on a tensor"),
    DictConstantChangedInTensorFor: (
        "for r in x:", "for r in x: variable 'state' is a dict {{'h': an array, 'k': 2}}, "
        "then a dict {{'h': an array, 'k': 2.0}} in this for loop on a tensor; a graph carries "
        "the same arrays throughout, so keep its structure and its Python values"),
    NextWithDefaultInWhileTrue: (
        "r = next(it, None)", "r = next(it, None): this statement consumes the Python "
        "iterator 'it'"),
    WhileTrueAppendsAfterTensorBreak: (
        "outs.append(h)", "outs.append(h): this statement runs after a break, continue or "
        "return under a tensor if")}
_INSTEAD = {NextWithDefaultInWhileTrue: "Loop over what 'it' iterates instead of calling "
                                        "next() on it (for r in x:"}
_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", [c for c in PROGRAMS if c not in _REFUSED],
                         ids=lambda c: c.__name__)
def test_converted_as_python(block_class):
    """Values and gradients (or Python's own exception) as plain Python, eagerly and
    hybridized."""
    hostile_harness.assert_kinds(_classified(block_class))


@pytest.mark.parametrize("block_class", list(_REFUSED), ids=lambda c: c.__name__)
def test_refused_at_the_line_saying_what_to_write(block_class):
    """Eagerly Python's; hybridized refused at the user's line, saying why (and what to
    write instead)."""
    hostile_harness.assert_kinds(_classified(block_class), refused=True)
    err = hostile_harness.hybridized_error(block_class, ROWS[0][0])
    text, says = _REFUSED[block_class]
    line = hostile_harness.line_in(__file__, text, block_class)
    loop = hostile_harness.line_in(__file__, "for r in x:", block_class) \
        if "{loop}" in says else None
    assert str(err).startswith(f"{__file__}:{line}: " + says.format(f=__file__, loop=loop)), \
        err
    assert _INSTEAD.get(block_class, "") in str(err), err
