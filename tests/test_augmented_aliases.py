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
from hypothesis import HealthCheck, event, given, settings, strategies as st
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
import contextlib

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
            self.fcf = nn.Dense(4, in_units=4, flatten=False)

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
    return out.asnumpy(), x.grad.asnumpy(), net.fc.weight.grad().asnumpy(), \
        net.fcf.weight.grad().asnumpy()


def _check(lines, tmp_dir):
    """The program's plain value; converted eagerly the same; hybridized the same with
    the eager gradients, or an AutographError at an ``op=``'s line. Returns the line of the
    op= refused, or False."""
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
        return lines[int(where.group(2)) - first]        # (the op= refused)
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


# -- where the order matters: the bindings that reach an op=, and what may share the array
# on the way (NOTE [autograph augmented assignment]; pyct/static_analysis/reaching.py)
_FRESH = ["h = F.relu(r)", "h = self.fcf(r)", "h = r * 2", "h = h * 2"]
_HELD = ["h = r", "h = keep(r)"]
_CHANGES = ["h += r", "h *= 2", "h -= 0.5"]
_SHARES = ["outs.append(h)", "g = h", "outs += [h]"]


@st.composite
def flow_programs(draw):
    """A loop (over the tensor's rows, or a Python range) whose body binds, changes and
    shares ``h`` in any order, maybe under an if, maybe left by continue or break, maybe an
    op= after it. Returns the lines and, for a straight-line body, whether it must be
    refused (a binding not known new, or a share, on some path from a binding that reaches
    an op= to it: computed here on the straight-line body, independently of the
    conversion)."""
    tensor_loop = draw(st.booleans())
    init = draw(st.sampled_from(["F.relu(x[0])", "x[0] * 2", "self.fcf(x[0])", "x[0]"]))
    lines = ["outs = []" if tensor_loop else "outs = [x[1] * 0]", "g = x[1] * 3",
             f"h = {init}"]
    lines += ["for r in x:"] if tensor_loop else ["for i in range(2):", "    r = x[i] + 0"]
    shares = ["g = h"] if tensor_loop else _SHARES
    body = draw(st.lists(st.sampled_from(_FRESH + _HELD + _CHANGES + shares), min_size=1,
                         max_size=5))
    if tensor_loop and not set(body) - set(shares):
        # (a value a tensor loop appends but never changes is another matter: reported)
        body.append("h *= 2")
    if tensor_loop:           # (one append a step: the rows a tensor loop collects)
        body.insert(draw(st.integers(0, len(body))), "outs.append(h)")
    jumps = not tensor_loop and draw(st.integers(0, 2)) == 0
    if jumps:
        # a step left early: what it shared before reaches the next step, or after the loop
        body.insert(draw(st.integers(0, len(body))), draw(st.sampled_from(
            ["if i == 0:", "if i == 1:"])) + " " + draw(st.sampled_from(["continue", "break"])))
    branched = draw(st.integers(0, 2)) == 0
    if branched:
        # an if around a statement: a tensor if around a bind or change (a tensor if's
        # branch cannot append to a list made outside it), a Python one around any
        python_if = not tensor_loop and draw(st.booleans())
        inside = [k for k, line in enumerate(body) if not line.startswith("if ") and
                  (python_if or line not in _SHARES)]
        if inside:
            k = draw(st.sampled_from(inside))
            test = "i == 0" if python_if else "F.sum(r) > 0"
            branch = ["if " + test + ":", "    " + body[k]]
            if draw(st.booleans()):
                branch += ["else:", "    " + draw(st.sampled_from(
                    _FRESH + _CHANGES + (shares if python_if else [])))]
            body = body[:k] + branch + body[k + 1:]
        else:
            branched = False
    lines += ["    " + line for line in body]
    after = draw(st.sampled_from([None, "h *= 2", "h += g"]))   # (r is the loop's)
    if after:
        lines.append(after)
    lines.append("return F.stack(*outs).sum(axis=0) + h + g")
    if branched or jumps:              # (no oracle of refusal)
        return lines, None
    # may the array of h be held elsewhere ("dirty")? at the loop's start: before it, or
    # after a step
    start = {init != "x[0]"}            # {True}: new, {False}: held elsewhere
    refused, end = False, start
    for _ in range(3):                  # (to the fixed point: three passes suffice)
        state = start | end
        for line in body:
            if line in _FRESH:
                state = {True}
            elif line in _HELD:
                state = {False}
            elif line in _SHARES:
                state = {False}
            elif line in _CHANGES and False in state:
                refused = True
        end = state
    if after and False in (start | end):
        refused = True
    return lines, refused


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(program=flow_programs())
def test_flow_programs_equal_plain_python_or_are_refused_where_the_order_shares(program,
                                                                              tmp_path):
    lines, must_refuse = program
    refused = _check(lines, tmp_path)
    event("refused" if refused else "accepted")
    event("with an if" if must_refuse is None else "straight-line body")
    if must_refuse is not None:
        assert bool(refused) == must_refuse, lines


class Unroll(HybridBlock):
    """The commonest RNN unroll: each step binds h to Dense's new output, changes it, then
    appends it; the next step rebinds h before its +=."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.fc = nn.Dense(3, flatten=False)

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, b):
        outs = []
        for row in x:
            h = self.fc(row)
            h += b
            outs.append(h)
        return F.stack(*outs)


def _unroll_out_of_place(net, F, x, b):
    """The same in plain Python, out of place (the oracle of gradients: plain MXNet refuses
    the in-place += on an array autograd records)."""
    outs = []
    for row in x:
        h = net.fc(row)
        h = h + b
        outs.append(h)
    return F.stack(*outs)


def test_the_rnn_unroll_hybridizes_with_plain_pythons_values_and_gradients():
    rng = np.random.RandomState(2)
    x_np, b_np = rng.uniform(-1, 1, (4, 2, 5)), rng.uniform(-1, 1, (3,))
    head = mx.nd.array(rng.uniform(-1, 1, (4, 2, 3)))
    net = Unroll()
    net.initialize(mx.init.Xavier())
    plain = inspect.unwrap(Unroll.hybrid_forward)(net, mx.nd, mx.nd.array(x_np),
                                                  mx.nd.array(b_np)).asnumpy()

    def run(fn):
        x, b = mx.nd.array(x_np), mx.nd.array(b_np)
        for a in (x, b):
            a.attach_grad()
        with autograd.record():
            out = fn(x, b)
            (out * head).sum().backward()
        return [out.asnumpy(), x.grad.asnumpy(), b.grad.asnumpy(),
                net.fc.weight.grad().asnumpy(), net.fc.bias.grad().asnumpy()]

    want = run(lambda x, b: _unroll_out_of_place(net, mx.nd, x, b))
    np.testing.assert_allclose(want[0], plain, rtol=1e-6)
    for hybridized in (False, True):
        if hybridized:
            net.hybridize()
        np.testing.assert_allclose(net(mx.nd.array(x_np), mx.nd.array(b_np)).asnumpy(), plain,
                                   rtol=1e-5, atol=1e-6)
        for got, expected in zip(run(net), want):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# (lines, the op= refused (its index among the op= lines), what the message names)
_REFUSED_ORDERS = [
    # shared before its op= in the same step
    (["outs = []", "for r in x:", "    h = self.fcf(r)", "    outs.append(h)", "    h += r",
      "return F.stack(*outs)"], 0, "outs.append(h)"),
    # a binding reaching the op= through the back edge, after the append
    (["outs = [x[1] * 0]", "h = F.relu(x[0])", "for i in range(3):", "    if i % 2 == 0:",
      "        h = self.fcf(x[i % 2])", "    h += x[0]", "    outs.append(h)",
      "return F.stack(*outs).sum(axis=0) + h"], 0, "outs.append(h)"),
    (["outs = []", "h = F.relu(x[0])", "for r in x:", "    h = self.fcf(r) if F.sum(r) > 0 else h",
      "    h += r", "    outs.append(h)", "return F.stack(*outs).sum(axis=0) + h"], 0,
     "h = self.fcf(r) if"),
    (["h = self.fcf(x[0])", "g = h", "h += 1", "return h + g"], 0, "g = h"),
    (["outs = [x[1] * 0]", "h = self.fcf(x[0])", "i = 0", "while i < 2:", "    h += 1",
      "    outs.append(h)", "    i += 1", "return F.stack(*outs).sum(axis=0) + h"], 0,
     "outs.append(h)"),
    # an op= does not rebind: a share after the first still reaches the second
    (["h = self.fcf(x[0])", "h += 1", "outs = [h]", "h *= 2", "return h + outs[0]"], 1,
     "outs = [h]"),
    # out of the loop by its break, after the append
    (["outs = []", "for i in range(3):", "    h = self.fcf(x[i % 2])", "    h += 1",
      "    outs.append(h)", "    if i == 1:", "        break", "h += 1",
      "return h + F.stack(*outs).sum(axis=0)"], 1, "outs.append(h)"),
    # a context manager suppressing an exception between the append and the binding
    (["outs = []", "h = F.relu(x[0])", "with contextlib.suppress(KeyError):",
      "    outs.append(h)", "    h = {}['k']", "h += 1", "return h + outs[0]"], 0,
     "outs.append(h)"),
    # try: not followed, today's answer (shared anywhere in the function)
    (["outs = []", "for i in range(2):", "    try:", "        h = self.fcf(x[i])",
      "    finally:", "        pass", "    h += 1", "    outs.append(h)",
      "return F.stack(*outs).sum(axis=0)"], 0, "outs.append(h)"),
    # what a frame's dict holds is every variable's array
    (["a2 = F.relu(x)", "a1 = locals()['a2']", "a2 += 1", "return a1 + a2"], 0, "locals()"),
    # the loop's iterable holds the array
    (["outs = []", "h = F.relu(x)", "for v in (h,):", "    outs.append(v)", "h += 1",
      "return h + outs[0]"], 0, "for v in (h,)"),
    (["h = F.relu(x)", "outs = [v for v in (h,)]", "h += 1", "return h + outs[0]"], 0,
     "outs = [v for v in (h,)]"),
    # a nested function may rebind h when it runs (nonlocal), to an array held elsewhere
    (["outs = [F.relu(x)]", "h = F.relu(x)", "def rebind():", "    nonlocal h",
      "    h = outs[0]", "rebind()", "h += 1", "return h + outs[0]"], 0, "def rebind"),
    # a generator expression kept for later reads h when it runs, whatever binds h then
    (["g = (h for _ in range(1))", "h = F.relu(x)", "a1 = next(g)", "h += 1",
      "return h + a1"], 0, "g = (h for"),
    # arithmetic on containers repeats or keeps their items: one array, two names
    (["h, g = [F.relu(x)] * 2", "h += 1", "return h + g"], 0, "h, g = [F.relu(x)] * 2"),
    (["a1, *rest = 2 * (self.fcf(x),)", "a1 *= 2", "return a1 + rest[0]"], 0,
     "a1, *rest = 2 * (self.fcf(x),)"),
    (["pair = [F.relu(x)]", "h, g = pair * 2", "h += 1", "return h + g"], 0,
     "h, g = pair * 2"),
    (["outs = [F.relu(x)]", "h = (outs + [])[-1]", "h += 1", "return h + outs[0]"], 0,
     "h = (outs + [])[-1]"),
    # a dict display's ** keeps d's items
    (["d = {'a': F.relu(x)}", "h = {**d}['a']", "h += 1", "return h + d['a']"], 0,
     "h = {**d}['a']"),
    # a match pattern's capture is the subject's item
    (["outs = [F.relu(x)]", "match outs:", "    case [h]:", "        pass", "h += 1",
      "return h + outs[0]"], 0, "case [h]"),
    # what a generator's caller sends, the caller holds
    (["def gen():", "    h = yield", "    h *= 2", "    yield h", "g = gen()", "next(g)",
      "a1 = x * 1", "a2 = g.send(a1)", "return a1 + a2"], 0, "h = yield"),
    # a view of its own array, shared before
    (["h = self.fcf(x)", "outs = [h]", "h = h.reshape((4, 2))", "h += 1",
      "return h.reshape((2, 4)) + outs[0]"], 0, "outs = [h]"),
    (["outs = [x[1] * 0]", "h = self.fcf(x[0])", "for i in range(2):", "    h = h[0:2]",
      "    h += 1", "    outs.append(h)", "return h + outs[-1]"], 0, "outs.append(h)"),
    # a refusal (a ValueError) the user's try or with catches is raised when the function
    # returns: caught, the call's result was not bound, or the op= not done
    (["h = F.relu(x)", "try:", "    h = keep(x)", "except ValueError:", "    pass", "h += 1",
      "return h + x"], 0, "keep(x)"),
    (["h = x * 1", "g = h", "try:", "    h += 1", "except Exception:", "    pass",
      "return h + g"], 0, "g = h"),
    (["h = x * 1", "g = h", "with contextlib.suppress(ValueError):", "    h += 1",
      "return h + g"], 0, "g = h"),
    (["h = x * 1", "g = h", "try:", "    h += 1", "except Exception:", "    raise KeyError()",
      "return h + g"], 0, "g = h"),
]


@pytest.mark.parametrize("lines,which,why", _REFUSED_ORDERS,
                         ids=lambda v: v if isinstance(v, str) else None)
def test_an_order_that_shares_the_array_is_refused_at_its_op(lines, which, why, tmp_path):
    net, path = _block(lines, tmp_path)
    np.testing.assert_allclose(net(mx.nd.array(X)).asnumpy(), _plain(net), rtol=1e-6)
    net.hybridize()
    line = len(_HEADER.splitlines()) + 1 + [
        k for k, text in enumerate(lines) if re.match(r"\s*\w+ [-+*]= ", text)][which]
    with pytest.raises(gluon_cf.AutographError, match=r"^%s:%d: .*%s" % (
            re.escape(path), line, re.escape(why))):
        net(mx.nd.array(X))


@pytest.mark.parametrize("lines", [
    # shared before it is rebound: the op= changes a new array
    ["outs = [x[1] * 0]", "h = F.relu(x[0])", "for i in range(2):", "    outs.append(h)",
     "    h = self.fcf(x[i])", "    h += 1", "return F.stack(*outs).sum(axis=0) + h"],
    ["outs = []", "h = F.relu(x[0])", "for r in x:", "    h = self.fcf(r)", "    h *= 2",
     "    h += r", "    outs.append(h)", "return F.stack(*outs).sum(axis=0) + h"],
    ["outs = [x[1] * 0]", "i = 0", "while i < 2:", "    h = self.fcf(x[i])", "    h += 1",
     "    outs.append(h)", "    i += 1", "return F.stack(*outs).sum(axis=0) + h"],
    # the share's path leaves by continue, not through the op=
    ["outs = [x[1] * 0]", "for i in range(3):", "    h = self.fcf(x[i % 2])", "    if i == 1:",
     "        outs.append(h)", "        continue", "    h += 1", "    outs.append(h)",
     "return F.stack(*outs).sum(axis=0)"],
    # a with's body, nothing shared
    ["with contextlib.suppress(KeyError):", "    h = self.fcf(x)", "    h += 1", "return h + x"],
    # bound by both branches of an if, both new
    ["outs = [x[1] * 0]", "for i in range(2):", "    if i == 0:", "        h = F.relu(x[i])",
     "    else:", "        h = x[i] * 2", "    h -= 0.5", "    outs.append(h)",
     "return F.stack(*outs).sum(axis=0)"],
    # a list's += after its append: the list is no array (the call given it is not checked)
    ["outs = [x[1] * 0]", "h = F.relu(x[0])", "outs.append(h)", "outs += [h]",
     "return F.stack(*outs).sum(axis=0) + h"],
    # rebound to a view or item of its own new array: nothing else holds it
    ["h = self.fcf(x)", "h = h.reshape((4, 2))", "h += 1", "return h.reshape((2, 4)) + x"],
    ["h = self.fcf(x)", "h = h[0]", "h *= 2", "return h + x"],
    # unpacking new arrays (not arithmetic on containers)
    ["h, c = F.relu(x), F.tanh(x)", "h += c", "c *= 2", "return h + c"],
    ["h, c = F.split(x, num_outputs=2, axis=0)", "h += 1", "return F.concat(h, c, dim=0)"],
    # a consumed generator expression keeps nothing
    ["h = F.relu(x)", "s = sum(h * k for k in (1, 2))", "h += 1", "return h + s"],
], ids=lambda lines: " ".join(lines[1:4]))
def test_an_order_that_shares_nothing_hybridizes_as_plain_python(lines, tmp_path):
    assert not _check(lines, tmp_path)
