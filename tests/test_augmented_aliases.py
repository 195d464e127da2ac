"""``h op= v`` hybridized (NOTE [autograph augmented assignment]): accepted where plain
Python's in-place change can be seen by nothing else (names bound by MXNet's operators,
arithmetic, the arrays' operator methods, Gluon's built-in layers), refused at its line where
it can (an alias, a view, what a user function or block returns). hypothesis writes programs
of names bound in these ways and ``op=`` on them; each must give plain Python's values
(eagerly and hybridized) and the eager gradients, or be refused at the ``op=``'s line."""
import importlib.util
import inspect
import itertools
import re

import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf.autograph.operators import call_results

# how a name is bound from a source name: (text, whether op= on it is accepted hybridized: a
# new array that nothing else holds, known without running the user's code)
BINDINGS = [("F.relu({s})", True), ("{s} * 2", True), ("{s}.sin()", True),
            ("F.identity({s})", True), ("self.fc({s})", True), ("self.seq({s})", True),
            ("{s}.exp().sum(axis=1, keepdims=True) + {s}", True), ("fresh({s})", False),
            ("{s}", False), ("{s}.reshape((2, 4))", False), ("{s}[0:2]", False),
            ("self.empty({s})", False), ("keep({s})", False), ("self.mine({s})", False),
            ("self.fc({s}) if F.sum({s}) is None else {s}", False),
            ("view({s})", False), ("(lambda: {s})()", False), ("[{s} for _ in range(1)][0]", False),
            ("keep({s}) if F.sum({s}) > 0 else F.relu({s})", False),
            ("self.fc({s}) if F.sum({s}) > 0 else F.relu({s})", True)]

_HEADER = '''
import collections

import mxnet as mx
from mxnet.gluon import HybridBlock, nn
import gluon_cf


def keep(v):
    return v


def fresh(v):
    return v * 1


def view(v):
    return v.reshape((2, 4))


class Memory:
    """What a call returns holding an array: an attribute or item of it may be bound."""
    def __init__(self):
        self.h = None
        self.items = collections.deque()


MEMORY = Memory()


def memory():
    return MEMORY


def twice():
    yield MEMORY.h
    yield MEMORY.h


class Mine(nn.Dense):
    def hybrid_forward(self, F, x, weight, bias=None):
        return x


class Program(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.fc = nn.Dense(4, in_units=4)
            self.seq = nn.HybridSequential()
            self.seq.add(nn.Dense(4, in_units=4, activation="tanh"), nn.LayerNorm(in_channels=4))
            self.empty = nn.HybridSequential()
            self.mine = Mine(4, in_units=4)

    def steps(self):
        return 2

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
'''
_modules = itertools.count()


@st.composite
def programs(draw):
    """Body lines of ``hybrid_forward(self, F, x)`` and the line number of each ``op=``."""
    names, lines = ["x"], []
    for _ in range(draw(st.integers(1, 4))):
        if len(names) > 1 and draw(st.booleans()):
            target = draw(st.sampled_from(names[1:]))
            value = draw(st.sampled_from(names + ["0.5", "2"]))
            op = draw(st.sampled_from(["+=", "-=", "*="]))
            lines.append(f"{target} {op} {value}")
        else:
            text, _ = draw(st.sampled_from(BINDINGS))
            name, source = f"a{len(names)}", draw(st.sampled_from(names))
            if draw(st.integers(0, 3)) == 0:      # bound in a tensor if's branch
                lines += [f"if F.sum({source}) > 0:", f"    {name} = " + text.format(s=source),
                          "else:", f"    {name} = {source} * 3"]
            else:
                lines.append(f"{name} = " + text.format(s=source))
            names.append(name)
    target = draw(st.sampled_from(names[1:]))
    lines.append(f"{target} {draw(st.sampled_from(['+=', '*=']))} 3")
    lines.append("return " + " + ".join(f"{n} * {k + 1}" for k, n in enumerate(names)))
    return lines


def _block(lines, tmp_dir):
    path = tmp_dir / f"augmented_program_{next(_modules)}.py"
    path.write_text(_HEADER + "".join(f"        {line}\n" for line in lines))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mx.random.seed(3)
    net = module.Program()
    net.initialize(mx.init.Xavier())
    return net, str(path)


X = np.random.RandomState(0).uniform(-1, 1, (2, 4)).astype("float32")


def _plain(net):
    return inspect.unwrap(type(net).hybrid_forward)(net, mx.nd, mx.nd.array(X)).asnumpy()


def _with_gradient(net):
    x = mx.nd.array(X)
    x.attach_grad()
    with autograd.record():
        out = net(x)
        (out * mx.nd.array(np.arange(8).reshape(2, 4) + 1.0)).sum().backward()
    return out.asnumpy(), x.grad.asnumpy(), net.fc.weight.grad().asnumpy()


def _check(lines, tmp_dir):
    """The program's plain value; converted eagerly the same; hybridized the same with
    the eager gradients, or an AutographError at an ``op=``'s line. Returns whether it was
    refused."""
    net, path = _block(lines, tmp_dir)
    want = _plain(net)
    np.testing.assert_allclose(net(mx.nd.array(X)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    eager = _with_gradient(net)
    net.hybridize()
    try:
        hybrid = _with_gradient(net)
    except gluon_cf.AutographError as err:
        first = len(_HEADER.splitlines()) + 1
        lines_of_op = {first + k for k, line in enumerate(lines) if line.split()[1:2] in (["+="], ["-="], ["*="])}
        where = re.match(r"^(.*?):(\d+): ", str(err))
        assert where and where.group(1) == path and int(where.group(2)) in lines_of_op, err
        return True
    np.testing.assert_allclose(hybrid[0], want, rtol=1e-5, atol=1e-6)
    for got, expected in zip(hybrid[1:], eager[1:]):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return False


def _all_new(lines):
    """Whether every name is bound by a binding known to make a new array (then nothing else
    can see any array)."""
    fresh = {text.format(s="@") for text, accepted in BINDINGS if accepted}
    for line in lines[:-1]:
        if line.startswith(("if ", "else")):
            continue
        left, op, right = line.strip().split(" ", 2)
        if op == "=" and re.sub(r"\b(x|a\d+)\b", "@", right) not in fresh:
            return False
    return True


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=programs())
def test_augmented_programs_equal_plain_python_or_are_refused_at_their_line(lines, tmp_path):
    refused = _check(lines, tmp_path)
    assert not (refused and _all_new(lines)), lines


@pytest.mark.parametrize("lines", [
    ["a1 = self.fc(x)", "a1 += x", "return a1 * 2 + x"],
    ["a1 = F.relu(x)", "a1 *= 2", "return a1 + x"],
    ["a1 = x.sin()", "a1 -= 0.5", "a2 = x.cbrt()", "a2 += a1", "return a1 + a2 + x"],
    ["a1 = self.seq(x)", "a1 += x", "return a1 + x"],
    ["a1 = F.split(x, num_outputs=2, axis=0)[0]", "a1 += 1", "return a1 + x"],
    ["a1 = x.astype('float32')", "a1 += 1", "return a1 + x"],
    ["a1 = x.flatten()", "a1 += 1", "return a1 + x"],
    ["if F.sum(x) > 0:", "    a1 = self.fc(x)", "else:", "    a1 = F.relu(x)", "a1 += 1",
     "return a1 + x"],
    ["a1 = F.relu(x)", "a2 = F.tanh(a1) + self.fc(a1)", "a1 += 1", "return a1 + a2"],
    ["if (a1 := F.relu(x)) is not None:", "    a1 = a1 * 2", "a1 += 1", "return a1 + x"],
    ["a2 = F.tanh(a1 := F.relu(x))", "a1 += 1", "return a1 + a2"],
    ["n = self.steps()", "n += 1", "a1 = F.relu(x)", "a1 *= n", "return a1 + x"],
    # an array's shape is not its array
    ["a1 = self.fc(x)", "n, c = a1.shape", "a1 *= c", "return a1 + x"],
    ["a1 = F.relu(x)", "a2 = F.zeros(a1.shape)", "a1 += a1.shape[0]", "return a1 + a2"],
    ["a1 = F.relu(x)", "a2 = a1 * 2 + (a1 if True else x)", "a1 += 1", "return a1 + a2"],
    # F.reshape is MXNet's operator (a new array), x.reshape a view
    ["a1 = F.reshape(x, shape=(4, 2))", "a1 += 1", "return F.reshape(a1, shape=(2, 4)) + x"],
    ["a1 = F.relu(x)", "a2 = F.reshape(a1, shape=(4, 2))", "a1 += 1",
     "return a1 + F.reshape(a2, shape=(2, 4))"],
    # Python's sum from 0: 0 + a + b is a new array, also of one item
    ["a1 = sum([F.relu(x), F.tanh(x)])", "a1 += 1", "return a1 + x"],
    ["outs = [F.relu(x)]", "a1 = sum(outs)", "a1 += 1", "return a1 + outs[0]"],
], ids=lambda lines: " ".join(lines[:2]))
def test_new_arrays_augmented_hybridized(lines, tmp_path):
    assert not _check(lines, tmp_path)


# what a generator yields is known only as it is unpacked; locals() is the converted
# function's (eagerly it was the check's own, a KeyError)
_GENERATOR = ["MEMORY.h = F.relu(x)", "a1, a2 = twice()", "a1 += 1", "return a1 + a2"]
_LOCALS = ["a2 = F.relu(x)", "a1 = locals()['a2']", "a1 += 1", "return a1 + a2"]


@pytest.mark.parametrize("lines,why", [
    (["a1 = self.empty(x)", "a1 += 1", "return a1 + x"], "self.empty"),
    (["a1 = keep(x)", "a1 += 1", "return a1 + x"], "keep"),
    (["a1 = self.mine(x)", "a1 += 1", "return a1 + x"], "self.mine"),
    (["a1 = x.reshape((2, 4))", "a1 += 1", "return a1 + x"], "x.reshape"),
    (["a1 = F.relu(x)", "a2 = keep(a1)", "a1 += 1", "return a1 + a2"], "a2 = keep"),
    (["a1 = x * 1", "a2 = F.identity(a1, out=a1)", "a2 += 1", "return a1 + a2"], "out=a1"),
    (["if F.sum(x) > 0:", "    a1 = keep(x)", "else:", "    a1 = x * 3", "a1 += 1",
      "return a1 + x"], "a1 = keep(x)"),
    (["a1 = F.relu(x)", "a2 = view(a1)", "a1 += 1", "return a1 + a2"], "a2 = view(a1)"),
    (["a1 = F.relu(x)", "g = lambda: a1", "a1 += 1", "return a1 + g()"], "g = lambda: a1"),
    (["a1 = F.relu(x)", "outs = [a1 for _ in range(2)]", "a1 += 1", "return a1 + outs[0]"],
     "outs = [a1 for"),
    # a walrus binds one array to two names
    (["a2 = (a1 := F.relu(x))", "a1 += 1", "return a1 + a2"], "a2 = (a1 := F.relu(x))"),
    (["a2 = (a1 := F.relu(x)) if True else x", "a1 += 1", "return a1 + a2"], "a2 = (a1 :="),
    (["outs = []", "outs.append(a1 := F.relu(x))", "a1 += 1", "return a1 + outs[0]"],
     "outs.append(a1 :="),
    (["outs = list([a1 := F.relu(x)])", "a1 += 1", "return a1 + outs[0]"], "outs = list("),
    # an attribute or item of what a call returns, which holds the array
    (["MEMORY.h = F.relu(x)", "a1 = memory().h", "a1 += 1", "return a1 + MEMORY.h"],
     "a1 = memory().h"),
    (["MEMORY.items.clear()", "MEMORY.items.append(F.relu(x))", "a1 = memory().items[0]",
      "a1 += 1", "return a1 + MEMORY.items[0]"], "a1 = memory().items[0]"),
    # a container made by arithmetic on displays holds the array
    (["outs = []", "a1 = F.relu(x)", "outs += [a1]", "a1 += 1", "return a1 + outs[0]"],
     "outs += [a1]"),
    (["outs = []", "a1 = F.relu(x)", "outs = outs + [a1]", "a1 += 1", "return a1 + outs[0]"],
     "outs = outs + [a1]"),
    (["a1 = F.relu(x)", "t = (x,) + (a1,)", "a1 += 1", "return a1 + t[1]"], "t = (x,) + (a1,)"),
    (["a1 = F.relu(x)", "t = [a1] * 2", "a1 += 1", "return a1 + t[1]"], "t = [a1] * 2"),
    (["a1 = F.relu(x)", "t = [x] + ([a1] if True else list((a1,)))", "a1 += 1",
      "return a1 + t[1]"], "t = [x] + ([a1] if"),
    (["a1 = F.relu(x)", "d = {} | {'a': a1}", "a1 += 1", "return a1 + d['a']"], "d = {} | {"),
    (["a2 = F.relu(x)", "a1 = sum([], a2)", "a1 += 1", "return a1 + a2"], "a1 = sum([], a2)"),
    (_GENERATOR, "a1, a2 = twice()"),
    (_LOCALS, "a1 = locals()"),
], ids=lambda v: v if isinstance(v, str) else v[0])
def test_what_may_be_held_elsewhere_is_refused_at_its_line(lines, why, tmp_path):
    net, path = _block(lines, tmp_path)
    np.testing.assert_allclose(net(mx.nd.array(X)).asnumpy(), _plain(net), rtol=1e-6)
    net.hybridize()
    line = len(_HEADER.splitlines()) + 1 + next(k for k, text in enumerate(lines)
                                                if re.match(r"a\d \+= ", text))
    with pytest.raises(gluon_cf.AutographError, match=r"^%s:%d: .*may hold an array .*%s" % (
            re.escape(path), line, re.escape(why))):
        net(mx.nd.array(X))


_LAYERS = {"Activation": lambda: nn.Activation("relu"), "Dense": lambda: nn.Dense(3),
           "Embedding": lambda: nn.Embedding(10, 3), "BatchNorm": nn.BatchNorm,
           "BatchNormReLU": nn.BatchNormReLU, "LayerNorm": nn.LayerNorm,
           "GroupNorm": lambda: nn.GroupNorm(1), "InstanceNorm": nn.InstanceNorm,
           "Dropout": lambda: nn.Dropout(0.5), "Flatten": nn.Flatten, "ELU": nn.ELU,
           "GELU": nn.GELU, "SELU": nn.SELU, "Swish": nn.Swish, "PReLU": nn.PReLU,
           "LeakyReLU": lambda: nn.LeakyReLU(0.1),
           "ReflectionPad2D": lambda: nn.ReflectionPad2D(1)}


@pytest.mark.parametrize("layer", sorted(c.__name__ for c in call_results.NEW_ARRAY_BLOCKS))
def test_a_trusted_layer_returns_an_array_its_input_and_parameters_do_not_hold(layer):
    """Each of Gluon's layers trusted to return a new array: changing its output in place
    leaves its input and its parameters as they were (eagerly, unhybridized and
    hybridized)."""
    kind = getattr(nn, layer)
    spatial = re.search(r"(\d)D", layer)
    shape = (2, 3) + (4,) * (int(spatial.group(1)) if spatial else 2)
    if layer in _LAYERS:
        block = _LAYERS[layer]()
    elif "Conv" in layer:
        block = kind(2, 1)
    else:
        block = kind()
    if layer in ("Dense", "Embedding", "Activation", "Dropout", "ELU", "GELU", "SELU",
                 "Swish", "PReLU", "LeakyReLU", "LayerNorm", "Flatten"):
        shape = (2, 3)
    block.initialize()
    assert call_results.block_returns_new_arrays(block)
    for hybridized in (False, True):
        if hybridized:
            block.hybridize()
        x = mx.nd.array(np.random.RandomState(1).uniform(0, 5, shape))
        before = x.asnumpy()
        block(x)                  # (deferred initialization)
        params = {k: p.data().asnumpy() for k, p in block.collect_params().items()}
        out = block(x)
        assert out is not x
        out += 100
        np.testing.assert_array_equal(x.asnumpy(), before)
        for k, p in block.collect_params().items():
            np.testing.assert_array_equal(p.data().asnumpy(), params[k])


def test_blocks_not_trusted():
    """A subclass (it may override forward), an empty Sequential, a forward hook or pre-hook
    (it may keep the output or input), a forward set on the object, a child not trusted."""
    class Sub(nn.Dense):
        pass
    hooked = nn.Dense(3)
    hooked.register_forward_hook(lambda block, args, out: None)
    pre_hooked = nn.Dense(3)
    pre_hooked.register_forward_pre_hook(lambda block, args: None)
    patched = nn.Dense(3)
    patched.forward = lambda x: x
    seq = nn.HybridSequential()
    seq.add(nn.Dense(3), Sub(3))
    for block in (Sub(3), nn.HybridSequential(), nn.Sequential(), hooked, pre_hooked, patched,
                  seq):
        assert not call_results.block_returns_new_arrays(block), block
    good = nn.HybridSequential()
    good.add(nn.Dense(3, activation="relu"), nn.Dropout(0.1))
    assert call_results.block_returns_new_arrays(good)


def test_operator_methods_call_their_operator():
    """The NDArray methods counted as new arrays (derived from MXNet's registered operator
    names) just call the operator of their name, but for the reviewed few; reshape (a view)
    is not among them."""
    reviewed = {"flatten", "expand_dims", "squeeze", "diag", "broadcast_to", "broadcast_like"}
    methods = call_results.operator_methods()
    assert {"sin", "sum", "cbrt", "tanh", "transpose", "slice_axis"} <= methods
    assert "reshape" not in methods and len(methods) > 60
    for name in methods - reviewed:
        source = inspect.getsource(getattr(mx.nd.NDArray, name))
        assert re.search(r"return op\.%s\(self, \*args, \*\*kwargs\)" % name, source), name
    x = mx.nd.ones((2, 1))
    for name, args, kwargs, new in [("flatten", (), {}, True), ("flatten", (True,), {}, False),
                                    ("squeeze", (1,), {"inplace": True}, False),
                                    ("sin", (), {"out": x}, False), ("sin", (x,), {}, False),
                                    ("astype", ("float32",), {"copy": False}, False),
                                    ("copy", (), {}, True), ("copyto", (x,), {}, False),
                                    ("as_in_context", (x.context,), {}, False)]:
        method = getattr(mx.nd.ones((2, 1)), name)
        assert call_results.returns_new_arrays(method, args, kwargs) == new, name
        result = method(*args, **kwargs)
        assert (result is not method.__self__ and result is not x) == new or not new, name
    assert call_results.returns_new_arrays(mx.nd.relu, (x,), {})
    assert not call_results.returns_new_arrays(mx.nd.relu, (x, x), {})      # out=x
    assert not call_results.returns_new_arrays(mx.nd.contrib.cond, (x, None, None), {})
