"""Issue 24, third round: users' own recursive functions over forests given as arrays
(``hostile_programs4.py``: binary left/right and CSR ptr/cidx forests, mutual recursion,
tuples, int and float arguments, loops in recursion and recursion in loops, shared subtrees,
repeated and out-of-range roots, one-node trees), each against plain Python recursion on
NDArrays, eager and hybridized with gradients and exported to onnxruntime
(``hostile_harness.classify``); the tests below pin what this round fixed."""
import os
import re
import signal
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import gluon_cf

import hostile_harness
import hostile_programs4 as programs
from gluon_cf.export import export_onnx, load, save_artifact

FILES = [programs.__file__]

@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_recursive_program_equals_plain_python_or_is_refused_at_its_line(block_class):
    result = hostile_harness.classify(block_class, programs.PROGRAMS[block_class], FILES)
    bad = hostile_harness.not_equal_or_refused(result)
    assert not bad, bad


def _hybridized(block_class):
    net = hostile_harness._make(block_class)
    net.hybridize()
    return net


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


def test_artifact_reads_fractional_index_inputs_as_take_does(tmp_path):
    """take reads a float index toward zero (-0.5 is row 0, 6.7 row 6 of 7): the artifact's
    index check refused -0.5 as out of range; it still refuses what is past the rows."""
    net = _hybridized(programs.FractionalIndices)
    example = programs.PROGRAMS[programs.FractionalIndices][0]
    path = str(tmp_path / "tree.onnx")
    save_artifact(net, _nd(example), path, dynamic_axes={3: [0]})
    model = load(path)
    x, left, right, _ = example
    for roots in ([-0.5, 3.0], [6.7, -0.99], [0.9, 3.7]):
        arrays = [x, left, right, np.array(roots, np.float32)]
        want = net(*_nd(arrays)).asnumpy()
        got, = model(*arrays)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for roots in ([7.0, 0.0], [-1.0, 0.0], [np.nan, 0.0]):
        with pytest.raises(ValueError, match="'data3' holds .* must lie in \\[0, 6\\]"):
            model(x, left, right, np.array(roots, np.float32))


@pytest.mark.parametrize("block_class", [programs.ConstantLeaf, programs.LeafReadsParameter],
                         ids=lambda c: c.__name__)
def test_refusal_to_lower_a_shared_leaf_value_has_no_mxnet_internals(block_class):
    """A leaf returning a value of shared inputs only (a constant, a parameter) cannot be
    lowered to loops that stack a level's calls: the refusal named MXNet's C++ check
    ('elemwise_op_common.h:134: Check failed: assign(&dattr, ...)'); now MXNet's words only.
    The artifact runs it, equal to Gluon."""
    net = _hybridized(block_class)
    inputs = programs.PROGRAMS[block_class]
    with pytest.raises(NotImplementedError) as refused:
        export_onnx(net, _nd(inputs[0]), dynamic_axes={0: [0], 1: [0], 2: [0], 3: [0]})
    text = str(refused.value)
    assert text.startswith(programs.__file__ + ":"), text
    assert "Incompatible attr" in text and "F.zeros_like" in text, text
    assert not hostile_harness.INTERNAL.search(text) and "::" not in text, text


def test_python_dash_m_gluon_cf_export_runs_the_command_line(tmp_path):
    """``python -m gluon_cf.export`` was 'No module named gluon_cf.export.__main__'."""
    net = _hybridized(programs.BinaryForestSum)
    inputs = programs.PROGRAMS[programs.BinaryForestSum]
    net(*_nd(inputs[0]))
    net.export(str(tmp_path / "net"))
    args = [sys.executable, "-m", "gluon_cf.export", "convert", str(tmp_path / "net-symbol.json"),
            str(tmp_path / "net-0000.params"), "--input", "data0:n=7,3", "--input",
            "data1:n=7", "--input", "data2:n=7", "--input", "data3:b=2",
            "-o", str(tmp_path / "tree.onnx")]
    converted = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert converted.returncode == 0, converted.stderr[-600:]
    arrays = inputs[1]                      # another forest than the example
    files = []
    for k, a in enumerate(arrays):
        files.append(str(tmp_path / f"in{k}.npy"))
        np.save(files[-1], a)
    ran = subprocess.run([sys.executable, "-m", "gluon_cf.export", "run",
                          str(tmp_path / "tree.onnx"), "--input", *files, "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, ran.stderr[-600:]
    got, = [np.load(str(tmp_path / "out" / name)) for name in os.listdir(tmp_path / "out")]
    np.testing.assert_allclose(got, net(*_nd(arrays)).asnumpy(), rtol=1e-5, atol=1e-6)
    assert ran.returncode != -signal.SIGSEGV


def test_foreach_steps_as_rows_gives_an_output_wider_than_its_leaves_as_eager():
    """A recursive function whose output grows with the tree, under a foreach over roots run
    as rows: the call after a first (refused) one failed inside MXNet's reshape ('Check
    failed: shape_.Size() == shape.Size() (12 vs. 6)'); then both were refused at the line;
    since round 28r the calls' shapes are known at run time (NOTE [one shape per call] in
    recursion/table.py): both give plain Python's values, recorded or not."""
    net = _hybridized(programs.OutputWidthGrowsWithDepth)
    for arrays in programs.PROGRAMS[programs.OutputWidthGrowsWithDepth]:
        want = net.plain_forward(mx.nd, *_nd(arrays)).asnumpy()
        for record in (True, False):
            with mx.autograd.record(record):
                got = net(*_nd(arrays)).asnumpy()
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_eager_recursion_depth_error_names_the_users_call():
    net = hostile_harness._make(programs.MaxDepthTwo)
    with pytest.raises(gluon_cf.RecursionDepthError) as refused:
        net(*_nd(programs.DEEPER))
    assert re.match(re.escape(programs.__file__) + r":\d+: gluon_cf.recursive: 'node' "
                    r"exceeded max_depth=2", str(refused.value)), str(refused.value)
