"""Round 31x's hostile programs (``hostile_programs31x.py``): for each, on every input list,
eager Gluon == hybridized == onnxruntime (``export_onnx``) == ``load()`` of ``save_artifact``
(1e-5), or each refuses: a refusal at export names the user's line; a call Gluon refuses
fails in the exports too. And a call history: a random sequence of calls on one hybridized
block equals each call on a fresh block."""
import os
import random
import re
import warnings

import mxnet as mx
import numpy as np
import pytest

import hostile_harness
import hostile_programs31x as P
from export_harness import _artifact_runner, _onnx_runner, dynamic_axes

FILES = [os.path.abspath(P.__file__)]


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


def _outputs(value):
    """The arrays of a block's result; None for an eager while_loop's ``[]`` of no step
    (MXNet's, NOTE [loops of no step]), compared with nothing."""
    return [None if isinstance(o, list) and not o else o.asnumpy()
            for o in (value if isinstance(value, (list, tuple)) else [value])]


def _call(block, arrays):
    """The block's outputs on ``arrays``, or the exception it raised."""
    try:
        return _outputs(block(*_nd(arrays)))
    except Exception as err:   # noqa: BLE001 - classified by the caller
        return err


def _same(got, want):
    return len(got) == len(want) and all(
        w is None or g.shape == w.shape and g.dtype == w.dtype and np.allclose(g, w, rtol=1e-5, atol=1e-6)
        for g, w in zip(got, want))


def _fresh(cls):
    net = hostile_harness._make(cls)
    net.hybridize()
    return net


def _classify(cls, tmp_path):
    """``[problem, ...]``: every silent difference or unlocated refusal found."""
    problems = []
    inputs = P.PROGRAMS[cls]
    eager = hostile_harness._make(cls)
    hybrid = _fresh(cls)
    wants = []
    for arrays in inputs:
        want, got = _call(eager, arrays), _call(hybrid, arrays)
        if isinstance(want, Exception) != isinstance(got, Exception):
            if getattr(cls, "EAGER_EMPTY", False) and isinstance(want, Exception):
                pass   # (reads an eager while_loop's [] of no step: MXNet's, documented)
            elif isinstance(want, Exception) or not hostile_harness.located(got, FILES):
                problems.append(f"eager {want!r:.200} hybridized {got!r:.200}")
        elif not isinstance(want, Exception) and want != [] and not _same(got, want):
            # (eager ``[]``: MXNet's eager while_loop of no step, NOTE [loops of no step])
            problems.append(f"SILENT hybridized {got} eager {want}")
        wants.append(got)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for api in ("onnx", "artifact"):
            net = _fresh(cls)
            try:
                run = _onnx_runner(net, inputs[0], dynamic_axes(inputs)) if api == "onnx" \
                    else _artifact_runner(net, inputs[0], dynamic_axes(inputs), str(tmp_path))
            except Exception as err:   # noqa: BLE001
                if not hostile_harness.located(err, FILES):
                    problems.append(f"{api} refused without a line: {err!r:.300}")
                continue
            for arrays, want in zip(inputs, wants):
                try:
                    got = [np.asarray(g) for g in run(arrays)]
                except Exception as err:   # noqa: BLE001
                    if not isinstance(want, Exception):
                        problems.append(f"{api} failed where Gluon runs: {err!r:.300}")
                    elif FILES[0] not in str(err):
                        problems.append(f"{api} failed without the user's line: {err!r:.300}")
                    continue
                if isinstance(want, Exception):
                    problems.append(f"SILENT {api} gave {[g.shape for g in got]} where Gluon "
                                    f"raised {want!r:.200}")
                elif not _same(got, want):
                    problems.append(f"SILENT {api} {got} Gluon {want} on {arrays}")
    return problems, wants


def _unnamed(err):
    """``err``'s message without the blocks' own names (``net4_plus0``: one per instance)."""
    return re.sub(r"([a-z])\d+", r"\1", str(err))


def _history_problems(cls, wants):
    """A random sequence of calls on one block == each call on a fresh block (``wants``)."""
    inputs = P.PROGRAMS[cls]
    order = list(range(len(inputs))) + [random.Random(31).randrange(len(inputs))]
    random.Random(31).shuffle(order)
    block, problems = _fresh(cls), []
    for k in order:
        got, want = _call(block, inputs[k]), wants[k]
        if isinstance(want, Exception):
            if not isinstance(got, Exception) or type(got) is not type(want) or \
                    _unnamed(got) != _unnamed(want):
                problems.append(f"history: call {k} gave {got!r:.200}, fresh {want!r:.200}")
        elif isinstance(got, Exception) or not _same(got, want):
            problems.append(f"history: call {k} gave {got!r:.200}, fresh {want}")
    return problems


@pytest.mark.parametrize("cls", list(P.PROGRAMS), ids=lambda c: c.__name__)
def test_program_agrees_everywhere(cls, tmp_path):
    problems, wants = _classify(cls, tmp_path)
    problems += _history_problems(cls, wants)
    assert not problems, "\n".join(problems)
