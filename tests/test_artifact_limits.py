"""Hostile artifacts against the loader's default limits (issue 10, item 10): each ends with an
``ArtifactError`` naming the limit, in a subprocess that must exit normally, never runs for ever
or exhausts memory. Built by hand (NOTE [artifact format]), a few hundred bytes each."""
import textwrap

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import run_python
from gluon_cf.export import ArtifactError, Limits, load

DOMAIN = "ai.gluon_cf"


def _model(graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 7
    helper.set_model_props(model, {"format": "gluon_cf.artifact", "format_version": "1"})
    return model


def _recursion(functions, entry, num_args, inputs, outputs, max_depth=100):
    return helper.make_node(
        "Recursion", inputs, outputs, domain=DOMAIN, functions=functions, entry=entry,
        num_args=[num_args] * len(functions), max_depth=[max_depth] * len(functions),
        function_names=[f.name for f in functions])


def exponential_recursion():
    """f(n) = n <= 0 ? 1 : f(n - 1) + f(n - 1): 2^n calls, depth n (within max_depth)."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])
    then_g = helper.make_graph([helper.make_node("Identity", ["one_c"], ["t"])], "base", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["n", "one_c"], ["m"]),
         helper.make_node("Invoke", ["m"], ["a"], domain=DOMAIN, function="f"),
         helper.make_node("Invoke", ["m"], ["b"], domain=DOMAIN, function="f"),
         helper.make_node("Add", ["a", "b"], ["e"])], "recurse", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1])])
    f = helper.make_graph(
        [helper.make_node("Constant", [], ["one_c"], value=one),
         helper.make_node("Constant", [], ["zero_c"], value=zero),
         helper.make_node("LessOrEqual", ["n", "zero_c"], ["le"]),
         helper.make_node("Squeeze", ["le"], ["p"]),
         helper.make_node("If", ["p"], ["r"], then_branch=then_g, else_branch=else_g)],
        "f", [helper.make_tensor_value_info("n", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1])])
    main = helper.make_graph([_recursion([f], "f", 1, ["x"], ["y"])], "main",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return _model(main)


def huge_constant():
    """ConstantOfShape of 2^29 float32 (2 GiB) from a shape computed at run time."""
    main = helper.make_graph(
        [helper.make_node("Mul", ["s", "k"], ["shape"]),
         helper.make_node("ConstantOfShape", ["shape"], ["y"])], "main",
        [helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
        initializer=[helper.make_tensor("k", TensorProto.INT64, [1], [1 << 20])])
    return _model(main)


def test_defaults_are_finite():
    limits = Limits()
    assert limits.timeout is not None and limits.timeout > 0
    assert limits.max_steps <= 10_000_000
    assert limits.max_tensor_bytes <= 1 << 30


def test_exponential_recursion_stops_at_max_steps():
    model = exponential_recursion()
    assert len(model.SerializeToString()) < 2000
    f = load(model.SerializeToString())
    np.testing.assert_allclose(f(np.array([3.0], np.float32))[0], [8.0])   # small n: exact
    with pytest.raises(ArtifactError, match=r"more than max_steps=2000 steps"):
        load(model.SerializeToString(), limits=Limits(max_steps=2000))(
            np.array([40.0], np.float32))


def test_exponential_recursion_stops_at_wall_time():
    with pytest.raises(ArtifactError, match=r"ran longer than timeout=0.5 s"):
        load(exponential_recursion().SerializeToString(), limits=Limits(timeout=0.5))(
            np.array([60.0], np.float32))


def test_huge_tensor_is_refused():
    f = load(huge_constant().SerializeToString())
    assert f(np.array([2], np.int64))[0].shape == (1 << 21,)
    with pytest.raises(ArtifactError, match=r"more than max_tensor_bytes=1073741824"):
        f(np.array([512], np.int64))        # 2^29 float32 = 2 GiB


HOSTILE_WITH_DEFAULTS = """
    import resource, sys, time
    import numpy as np
    sys.path.insert(0, "tests")
    from test_artifact_limits import exponential_recursion
    from gluon_cf.export import ArtifactError, Limits, load

    # An address-space cap: reading a small file must not reserve max_file_bytes up front.
    cap = 3 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    f = load(exponential_recursion().SerializeToString(), limits=Limits(timeout=5.0))
    start = time.monotonic()
    try:
        f(np.array([40.0], np.float32))
    except ArtifactError as err:
        print("stopped", "max_steps" in str(err) or "timeout" in str(err),
              time.monotonic() - start < 60)
"""


def test_hostile_artifact_ends_under_default_step_budget_in_a_subprocess():
    proc = run_python(textwrap.dedent(HOSTILE_WITH_DEFAULTS), timeout=180)
    assert proc is not None, "hung"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["stopped", "True", "True"]


def test_too_deep_is_a_recursion_depth_error_like_every_executor():
    """Issue 10, item 1: beyond max_depth the artifact runtime raises gluon_cf's public
    RecursionDepthError (also an ArtifactError), naming the function and the bound."""
    import gluon_cf
    f = load(exponential_recursion().SerializeToString())
    with pytest.raises(gluon_cf.RecursionDepthError,
                       match=r"'f' exceeded max_depth=100 nested calls") as raised:
        f(np.array([200.0], np.float32))
    assert isinstance(raised.value, ArtifactError)
