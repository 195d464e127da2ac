"""Issue 24, left over: what Python does with a list a tensor loop collected, after the loop,
hybridized as plain Python computes it (values and gradients, eager, hybridized, static, on
every call whatever came before; NOTE [autograph lists]): a ``for`` over a slice that may
keep no item, a slice bound to a name and unpacked, two lists unpacked into one call
(``F.concat(*a, *b, dim=0)``, items of different sizes), ``outs + outs``, ``outs * 2``,
``list(outs)``, ``outs[:]`` and an alias (new lists, or the same one, as Python's), ``sum``;
what cannot be computed (``len``, truth, ``zip``, ``enumerate`` of a list only the run
measures) is refused at the user's line, saying what to write."""
import mxnet as mx
import numpy as np
import pytest

import gluon_cf

from conftest import MODES, set_mode
from test_autograph_list_slices import _While, _plain, _run, assert_counts_are_pythons

HERE = __file__


class ForOverTail(_While):
    """``outs[1:]`` keeps no item for n <= 1: the loop then runs no step."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc, total = x, x * 0
        for o in outs[1:]:
            acc = acc * 2 + o * o
            total = total + o
        return acc + total * 10


class NamedSlice(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        tail = outs[-2:]
        return F.stack(*tail) * 2


class TwoListsConcat(_While):
    """The lists' items differ in size (2 and 4): Python's concat joins them."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        a = []
        b = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            a.append(F.broadcast_mul(x, i + 1))
            b.append(F.concat(x, F.broadcast_add(x, i), dim=0))
            i = i + 1
        return F.concat(*a, *b, dim=0)


class TwoListsStack(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        a = []
        b = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            a.append(F.broadcast_mul(x, i + 1))
            b.append(F.broadcast_add(x, i))
            i = i + 1
        return F.stack(*a, x * 7, *b[1:])


class Joined(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        both = [x * 3] + outs + outs[-1:]
        return F.stack(*both) + F.add_n(*(outs * 2), x)


class CopiesAndAliases(_While):
    """``outs[:]`` and ``list(outs)`` are new lists; ``alias = outs`` the same one."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        copy = outs[:]
        copy.append(x * 5)
        other = list(outs)
        other.append(x * 6)
        alias = outs
        alias.append(x * 7)
        return F.concat(F.stack(*copy), F.stack(*other), F.stack(*outs), dim=0)


class Extended(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        outs.extend([x * 4, x * 5])
        outs.extend(outs[-3:])
        return F.stack(*outs)


class Backwards(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        back = outs[::-1]
        back.append(x * 9)
        return F.concat(F.stack(*back), F.stack(*outs, x * 8), dim=0)


class Replaced(_While):
    """What the refusal of ``outs[1] = x`` says to write; ``outs[2:]`` may keep nothing."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        outs = outs[:1] + [x * 4] + outs[2:]
        return F.stack(*outs)


class Assigned(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        outs[1] = x * 4
        return F.stack(*outs)


def test_item_assignment_is_refused_saying_what_to_write():
    net = Assigned()
    net.hybridize()
    with pytest.raises(ValueError) as info:
        net(mx.nd.array([1.0, 2.0]), mx.nd.array([3]))
    text = "outs[1] = x * 4"
    assert str(info.value).startswith(f"{HERE}:{_line(text)}: {text}:"), str(info.value)
    assert "items = items[:i] + [v] + items[i + 1:]" in str(info.value)


class Summed(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return sum(outs) * x


BLOCKS = [ForOverTail, NamedSlice, TwoListsConcat, TwoListsStack, Joined, CopiesAndAliases,
          Extended, Backwards, Replaced]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block_class", BLOCKS, ids=lambda c: c.__name__)
def test_lists_after_a_tensor_loop_are_pythons(mode, block_class):
    """Counts 3, 1, 0, 2, 4 in one block: plain Python's values and gradients; where Python
    raises (F.stack() or F.concat() of no item) an error too, and the block goes on."""
    net = block_class()
    set_mode(net, mode)
    x = [1.5, -2.0]
    assert_counts_are_pythons(_plain(block_class), net, x, (3, 1, 0, 2, 4))


@pytest.mark.parametrize("mode", MODES)
def test_sum_of_a_collected_list_is_pythons_or_refused_when_empty(mode):
    """``sum(outs)`` is Python's for lists holding an item; of no item Python gives the int
    0, which a graph cannot: an error at the user's line then, and the block goes on."""
    net = Summed()
    set_mode(net, mode)
    x = [1.5, -2.0]
    for n in (3, 1, 2):
        want, got = _run(_plain(Summed), x, n), _run(net, x, n)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=f"n={n}")
    if mode == "eager":
        return
    with pytest.raises(IndexError, match=f"{HERE}:{_line('return sum(outs) * x')}.*sum()"):
        net(mx.nd.array(x), mx.nd.array([0])).asnumpy()
    np.testing.assert_allclose(_run(net, x, 2)[0], _run(_plain(Summed), x, 2)[0], rtol=1e-6)


def test_two_lists_stack_exports_as_gluon_computes_them():
    """onnxruntime equals the hybridized block (1e-5) on several counts."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    net = TwoListsStack()
    net.hybridize()
    x = np.array([1.5, -2.0], np.float32)
    model = export_onnx(net, [mx.nd.array(x), mx.nd.array([3])])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for n in (3, 1, 4, 2):
        got = session.run(None, dict(zip(names, [x, np.array([n], np.float32)])))[0]
        want = net(mx.nd.array(x), mx.nd.array([n])).asnumpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class Zipped(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc = x
        for o, p in zip(outs, outs):
            acc = acc + o * p
        return acc


class Enumerated(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc = x
        for k, o in enumerate(outs):
            acc = acc + o * k
        return acc


class Truth(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return x * (2 if outs else 3)


class Compared(_While):
    """(``outs == []`` was object identity hybridized: False whatever the loop appended.)"""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return x * (2 if outs == [] else 3)


class ComparedOverInput(_While):
    """A for over an input: its number of items is known while tracing, == is Python's."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        for row in n:
            outs.append(F.broadcast_mul(x, row))
        return x * (2 if outs == [] else 3) * (5 if outs != [] else 7)


def test_equality_of_a_list_of_known_length_is_pythons():
    for n in (1, 2):
        net = ComparedOverInput()
        net.hybridize()
        want = ComparedOverInput.hybrid_forward.__wrapped__(None, mx.nd, mx.nd.array([1.0, 2.0]),
                                                            mx.nd.ones((n,)))
        got = net(mx.nd.array([1.0, 2.0]), mx.nd.ones((n,)))
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy())


def _line(text):
    with open(HERE) as f:
        return next(k for k, line in enumerate(f, 1) if line.strip() == text)


@pytest.mark.parametrize("block_class, text, words", [
    (Zipped, "for o, p in zip(outs, outs):", "iterated over"),
    (Enumerated, "for k, o in enumerate(outs):", "iterated over"),
    (Truth, "return x * (2 if outs else 3)", "tested for truth"),
    (Compared, "return x * (2 if outs == [] else 3)", "compared with ==")],
    ids=["zip", "enumerate", "truth", "equality"])
def test_what_only_the_run_measures_is_refused_at_the_users_line(block_class, text, words):
    assert not isinstance(_run(_plain(block_class), [1.0, 2.0], 3), type)
    net = block_class()
    net.hybridize()
    with pytest.raises(ValueError) as info:
        net(mx.nd.array([1.0, 2.0]), mx.nd.array([3]))
    message = str(info.value)
    assert message.startswith(f"{HERE}:{_line(text)}: {text}"), message
    assert words in message and "count the steps as an array" in message
