"""Review of round 31ag (branch h31ag): ``x.dtype`` of a Symbol read by converted code, the
graph per input shape and dtype. Each program compared with plain Python on NDArrays, eager
and hybridized, values and gradients (``hostile_harness.classify``), or refused hybridized
at the user's line; call histories mixing dtypes and shapes equal fresh eager calls."""
import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand
FILES = [__file__]
SEQ = ([rand(4, 3, seed=1)], [rand(2, 3, seed=2).astype(np.float64)], [rand(5, 3, seed=3)],
       [rand(3, 3, seed=4).astype(np.float16)])


@program([rand(2, 2, 3, seed=1).astype(np.float64), np.array([0, 1], np.int32)])
class EmbeddingOfARowsDtype(HybridBlock):
    """A loop's row as an Embedding's weight: MXNet's type inference gives the unknown
    weight the op's default float32, where the row is float64 (it read float32: SILENT)."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, ws, idx):
        h = F.zeros((2, 3), dtype="float64")
        for w in ws:
            e = F.Embedding(idx, w, input_dim=2, output_dim=3)
            h = h + e * (2 if e.dtype == np.float32 else 7)
        return h


@program(*SEQ)
class GetattrDtypeWithDefault(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * (2 if getattr(x, "dtype", None) == np.float64 else 3)


@program(*SEQ)
class GetattrDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * getattr(x, "dtype")(2) + getattr(x, "shape")[0]


@program(*SEQ)
class HasattrShapeAndDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * (2 if hasattr(x, "shape") else 3) + (5 if hasattr(x, "dtype") else 7)


@program(*SEQ)
class HasattrOfNoNDArrayAttribute(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * (2 if hasattr(x, "no_such_attribute") else 3)


@program([rand(2, 3, seed=1), np.array([2], np.float32)])
class DtypeInARecursiveFunction(HybridBlock):
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive
        def f(v, k):
            if k > 0:
                return f(v * v.dtype(2), k - 1)
            return v
        return f(x, n)


@program(*SEQ)
class DtypeBranches(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if x.dtype == np.float64:
            h = F.cast(x, "float32") * 2
        elif x.dtype == np.float16:
            h = F.cast(x, "float32") * 5
        else:
            h = x * 3
        return h + x.shape[0]


@program(*SEQ)
class HasattrOfSplitOutputs(HybridBlock):
    """F.split's outputs: a list eagerly, which has no shape."""
    @autograph
    def hybrid_forward(self, F, x):
        parts = F.split(x, num_outputs=3, axis=1)
        return x * (2 if hasattr(parts, "shape") else 3)


REFUSED = {EmbeddingOfARowsDtype: "e.dtype", DtypeInARecursiveFunction: "v.dtype(2)"}
classified = hostile_harness.cached_classifier(PROGRAMS, FILES, export=False)


@pytest.mark.parametrize("cls", list(PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_python_or_is_refused_at_the_line(cls):
    result = classified(cls)
    hostile_harness.assert_kinds(result, refused=cls in REFUSED)
    if cls in REFUSED:
        err = hostile_harness.hybridized_error(cls, *PROGRAMS[cls][0])
        assert isinstance(err, gluon_cf.AutographError), repr(err)
        line = hostile_harness.line_in(__file__, REFUSED[cls], cls)
        assert str(err).startswith(f"{__file__}:{line}: "), str(err)
        assert ".dtype of a tensor while hybridizing, whose dtype the inputs" in str(err) and "recursive function" in str(err)


@pytest.mark.parametrize("cls", [DtypeBranches, GetattrDtypeWithDefault],
                         ids=lambda c: c.__name__)
def test_call_history_of_dtypes_and_shapes_equals_fresh_eager_calls(cls):
    inputs = PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), (1e-5, 1e-6))


def test_export_of_a_graph_for_input_dtypes_says_dtype(tmp_path):
    net = hostile_harness._make(DtypeBranches)
    net.hybridize()
    net(mx.nd.ones((2, 3), dtype="float64"))
    with pytest.raises(ValueError) as info:
        net.export(str(tmp_path / "net"))
    line = hostile_harness.line_in(__file__, "if x.dtype == np.float64:", DtypeBranches)
    text = str(info.value)
    assert text.startswith(f"{__file__}:{line}: ") and "the dtype read here" in text, text
    assert "input dtypes it was traced for (float64;" in text and "any dtype" in text, text
    assert "shape read" not in text and "::" not in text, text


@pytest.mark.parametrize("api", ["export_onnx", "save_artifact"])
def test_export_onnx_of_a_graph_for_input_dtypes_says_dtype(api, tmp_path):
    from gluon_cf import export
    net = hostile_harness._make(DtypeBranches)
    net.hybridize()
    with pytest.raises(ValueError, match="the dtype read here while hybridizing"):
        getattr(export, api)(net, [mx.nd.ones((2, 3))], tmp_path / "model")



def _list_program(name, use):
    """A block collecting ``items`` in a tensor loop and returning ``use(F, x, items)``."""
    class Program(HybridBlock):
        @autograph
        def hybrid_forward(self, F, x):
            items = []
            for r in x:
                items.append(r * 2)
            return use(F, x, items)
    Program.__name__ = Program.__qualname__ = name
    return Program


RoundOfAList = _list_program("RoundOfAList", lambda F, x, items: x * round(items))
FloatOfAList = _list_program("FloatOfAList", lambda F, x, items: x * float(items))
IntOfAList = _list_program("IntOfAList", lambda F, x, items: x * int(items))
ListTimesList = _list_program("ListTimesList", lambda F, x, items: F.stack(*(items * items)))
HashOfAList = _list_program("HashOfAList", lambda F, x, items: x * hash(items))


class ListComparedWithAConstant(HybridBlock):
    """``items < None`` and ``1 < items``: Python's comparison, with a constant (the
    comparison was left Python's, whose TypeError named StepList)."""
    REFLECTED = False

    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        if self.REFLECTED:
            return x * (1 < items)
        return x * (items < None)


class ConstantComparedWithAList(ListComparedWithAConstant):
    REFLECTED = True


@pytest.mark.parametrize("cls", [RoundOfAList, FloatOfAList, IntOfAList, ListTimesList,
                                 HashOfAList, ListComparedWithAConstant,
                                 ConstantComparedWithAList],
                         ids=lambda c: c.__name__)
def test_builtin_of_a_collected_list_is_pythons_type_error_for_a_list(cls):
    """Python's own TypeError, word for word, eager and hybridized (it named StepList, or
    said "unsupported operand type(s)" where Python says "can't multiply sequence")."""
    result = hostile_harness.classify(cls, SEQ[:1], FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result
    err = hostile_harness.hybridized_error(cls, *SEQ[0])
    assert type(err) is TypeError and ("'list'" in str(err) or "type list " in str(err)), err


class ParameterDtypeRead(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = self.params.get("w", shape=(3,), init=mx.init.Uniform())

    @autograph
    def hybrid_forward(self, F, x, w):
        return (x + w) * (2 if w.dtype == np.float64 else 3)


@pytest.mark.parametrize("hybridize", [False, True])
def test_parameter_dtype_after_cast_equals_a_fresh_cast_block(hybridize):
    """``w.dtype`` of a parameter after ``net.cast("float64")``: its var kept the dtype it was
    made with (float32), read hybridized where the parameter is float64 (SILENT)."""
    net = hostile_harness._make(ParameterDtypeRead)
    if hybridize:
        net.hybridize()
    first = hostile_harness.run_with_gradients(net, [rand(2, 3, seed=1)])
    oracle = hostile_harness._make(ParameterDtypeRead)
    assert hostile_harness._compare(
        hostile_harness.run_with_gradients(oracle, [rand(2, 3, seed=1)], forward=_plain),
        first, (1e-5, 1e-6))
    for dtype in ("float64", "float32", "float64"):
        net.cast(dtype)
        oracle.cast(dtype)
        x = rand(2, 3, seed=2).astype(dtype)
        want = hostile_harness.run_with_gradients(oracle, [x], forward=_plain)
        got = hostile_harness.run_with_gradients(net, [x])
        assert hostile_harness._compare(want, got, (1e-5, 1e-6)), (dtype, want, got)


_plain = ParameterDtypeRead.hybrid_forward.__wrapped__
