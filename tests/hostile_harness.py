"""Runs the programs of hostile_programs.py (or any block class with its inputs) plain, eager,
hybridized and exported, and classifies each result (see hostile_programs' docstring)."""
import inspect
import random
import re
import traceback
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd

import gluon_cf
from gluon_cf.graph.operator_errors import OperatorShapeError
from gluon_cf.checks import (ArgumentValueError, ArrayTypeError, MismatchError, PairError,
                             PredShapeError, PredValueError, StructureError)
from gluon_cf.graph.index_gradients import IndexGradientError

INTERNAL = re.compile(r"MXNetError|PendingShape|Check failed|Traceback|mxnet/src|"
                      r"_Map_base|Symbol\.Group|slice_axis|squeeze|infer_shape|"
                      r"Operator _|__ag|gluon_cf/|\.cc:\d+")


# plain MXNet's errors differentiating a value that reads no input (a loop that stopped before
# reading one): where it runs, the gradients are zeros
_NO_GRAPH = ("Cannot differentiate node because it is not in a computational graph",
             "There are no inputs in computation graph that require gradients")


def _make(cls):
    mx.random.seed(0)
    np.random.seed(0)
    net = cls()
    net.initialize(mx.init.Xavier())
    return net


def _run(net, arrays, plain):
    inputs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
    for k, a in enumerate(inputs):
        if k not in getattr(type(net), "NO_GRAD", ()):
            a.attach_grad()
    with autograd.record():
        if plain:
            params = {k: v.data() for k, v in net._reg_params.items()}
            plain_forward = plain if callable(plain) else \
                getattr(type(net), "plain_forward", None) or \
                type(net).hybrid_forward.__wrapped__
            out = plain_forward(net, mx.nd, *inputs, **params)
        else:
            out = net(*inputs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        total = sum((o.astype("float32") * (i + 1.5)).sum() for i, o in enumerate(outs))
    total.backward()
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in inputs
                                          if a.grad is not None]


def run_with_gradients(net, arrays, forward=None, record=True):
    """Outputs, then (recorded) the gradients of the inputs and of every parameter.
    ``forward(net, F, *inputs, **params)``: the oracle's function called instead of ``net``."""
    inputs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
    for k, a in enumerate(inputs):
        if record and k not in getattr(type(net), "NO_GRAD", ()):
            a.attach_grad()
    # (in the block's order: sorted by name, two blocks of a class made at other times
    # order their parameters otherwise, dense9_weight after dense10_weight)
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    for p in params:
        p.zero_grad()
    with autograd.record() if record else autograd.predict_mode():
        if forward is not None:
            out = forward(net, mx.nd, *inputs,
                          **{k: v.data() for k, v in net._reg_params.items()})
        else:
            out = net(*inputs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if record:
            total = sum((o.astype("float64") * (i + 1.5)).sum().astype("float32")
                        for i, o in enumerate(outs))
    if not record:
        return [o.asnumpy() for o in outs]
    total.backward()
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in inputs
                                          if a.grad is not None] + \
        [p.grad().asnumpy() for p in params]


def _outcome(fn):
    try:
        return ("value", fn())
    except Exception as err:            # classified below
        return ("error", err)


def located(err, files):
    text = str(err)
    return (any(re.match(re.escape(f) + r":\d+: ", text) or
                re.search(r"\(in gluon_cf node .* at " + re.escape(f) + r":\d+\)", text) or
                re.match(r"gluon_cf\.\w+ at " + re.escape(f) + r":\d+[ :]", text)
                for f in files) and "::" not in _without_quoted_source(text, files) and
            not INTERNAL.search(text))


def _without_quoted_source(text, files):
    """``text`` without the users' own lines it quotes (a slice ``x[::-1]`` has two colons)."""
    for f in files:
        with open(f) as source:
            for line in source:
                if "::" in line:
                    text = text.replace(line.strip(), "")
    return text


def _compare(want, got, tol=None):
    """Each of ``got`` equals ``want``'s within ``tol`` (rtol, atol; a program's ``TOL``)."""
    rtol, atol = tol or (1e-4, 1e-5)
    if len(want) != len(got):
        return False
    for w, g in zip(want, got):
        if w.shape != g.shape or not np.allclose(w, g, rtol=rtol, atol=atol):
            return False
    return True


def classify_pair(want, got, files, plain_fails=None, tol=None):
    """'equal', 'refused' (a located AutographError or the same error Python raises, located),
    'internal' (any other error) or 'SILENT' (another value, or a value where Python fails)."""
    if got[0] == "value":
        if want[0] == "value" and _compare(want[1], got[1], tol):
            return "equal"
        if want[0] == "error" and any(text in str(want[1]) for text in _NO_GRAPH) and \
                all(not np.any(g) for g in got[1][-len(got[1]) // 2:]):
            return "equal"    # plain MXNet cannot differentiate a value of no input: zeros
        if want[0] == "error" and isinstance(want[1], mx.MXNetError) and \
                plain_fails is not None and plain_fails(got[1]):
            return "equal"    # what plain MXNet cannot run, checked by the program's oracle
        return "SILENT"
    err = got[1]
    if want[0] == "error" and "Cannot differentiate node because it is not in a " \
            "computational graph" in str(want[1]) and \
            "no inputs in computation graph that require gradients" in str(err):
        return "equal"        # (a value of no input: plain MXNet's other words for it)
    if want[0] == "error" and type(err) is type(want[1]) and str(err) == str(want[1]):
        return "equal"        # plain Python's own error (its traceback names the line)
    if isinstance(err, (TypeError, AttributeError, KeyError, mx.MXNetError)) and \
            not isinstance(err, (gluon_cf.AutographError, gluon_cf.IncompleteShapeError,
                                 OperatorShapeError, MismatchError, IndexGradientError,
                                 ArgumentValueError, ArrayTypeError, PairError,
                                 StructureError, PredShapeError, PredValueError,
                                 gluon_cf.ZeroSizeError)):
        # (PredShapeError, PredValueError and a hybridized call's ZeroSizeError: gluon_cf's
        # own, also MXNet's types, as MXNet's ops raise them)
        return "internal"     # (from the library's plumbing, whatever the message)
    if isinstance(err, gluon_cf.ZeroSizeError) and want[0] == "error" and \
            any(re.search(r"\bat " + re.escape(f) + r":\d+\b", str(err)) for f in files) and \
            "::" not in str(err):
        return "refused"      # MXNet's zero-size limit, as plain MXNet fails, at the user's line
    return "refused" if located(err, files) else "internal"


def assert_equal_to_oracle(want, got, files, tol, where):
    """:func:`classify_pair` of the oracle's ``want`` and ``got`` is "equal"; the message
    names ``where`` (the mode and input), the class and the error or value that differs."""
    kind = classify_pair(want, got, files, tol=tol)
    assert kind == "equal", (where, kind, got[1] if got[0] == "error" else
                             (want[1] if want[0] == "error" else "another value"))


def classify(cls, inputs_list, files, export=True):
    """{mode: (class, detail)} for modes eager, hybrid, export, over every input list."""
    result = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _make(cls)
        wants = [_outcome(lambda a=a: _run(net, a, True)) for a in inputs_list]
        # what plain MXNet cannot run (a sum of no row, += on a recorded NDArray), written so
        # that it can
        oracle_where_plain_fails = getattr(cls, "oracle_where_plain_fails", None)
        oracles = [_outcome(lambda a=a: _run(net, a, oracle_where_plain_fails))
                   if oracle_where_plain_fails and want[0] == "error" else None
                   for a, want in zip(inputs_list, wants)]
        for mode in ("eager", "hybrid"):
            net = _make(cls)
            if mode == "hybrid":
                net.hybridize()
            worst = ("equal", "")
            for arrays, want, oracle in zip(inputs_list, wants, oracles):
                got = _outcome(lambda: _run(net, arrays, False))
                kind = classify_pair(want, got, files, getattr(cls, 'plain_fails', None),
                                     getattr(cls, "TOL", None))
                if kind != "equal" and oracle is not None and \
                        classify_pair(oracle, got, files, tol=getattr(cls, "TOL", None)) == "equal":
                    kind = "equal"
                detail = "" if got[0] == "value" else \
                    f"{type(got[1]).__name__}: {str(got[1])[:300]}"
                if kind == "SILENT":
                    detail = f"plain={want[0]} " + (
                        "" if want[0] == "value" else repr(want[1])[:100])
                if _rank(kind) > _rank(worst[0]):
                    worst = (kind, detail)
            result[mode] = worst
        if export and result["hybrid"][0] == "equal":
            result["export"] = _export(cls, inputs_list, files)
    return result


def _rank(kind):
    return ["equal", "refused", "internal", "SILENT"].index(kind)


def _export(cls, inputs_list, files):
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    net = _make(cls)
    net.hybridize()
    try:
        first = inputs_list[0]
        dynamic = {k: [axis for axis in range(a.ndim)
                       if len({arrays[k].shape[axis] for arrays in inputs_list}) > 1]
                   for k, a in enumerate(first)}
        model = export_onnx(net, [mx.nd.array(a, dtype=a.dtype) for a in first],
                            dynamic_axes={k: v for k, v in dynamic.items() if v} or None)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    except Exception as err:
        text = f"{type(err).__name__}: {str(err)[:300]}"
        if isinstance(err, (NotImplementedError, ValueError)) and located(err, files):
            return ("refused", text)
        return ("internal", text + "\n" + traceback.format_exc()[-600:])
    names = [i.name for i in session.get_inputs()]
    for arrays in inputs_list:
        if [a.dtype for a in arrays] != [a.dtype for a in first]:
            continue          # (the model takes the dtypes it was exported with)
        try:
            want = net(*[mx.nd.array(a, dtype=a.dtype) for a in arrays])
        except Exception:     # (a call the hybridized block refuses, classified above)
            continue
        want = [o.asnumpy() for o in (want if isinstance(want, (list, tuple)) else [want])]
        try:
            got = session.run(None, dict(zip(names, arrays)))
        except Exception as err:
            return ("internal", f"ort {type(err).__name__}: {str(err)[:300]}")
        if not _compare(want, got, getattr(cls, "TOL", None)):
            return ("SILENT", f"ort {[g.shape for g in got]} vs {[w.shape for w in want]}")
    return ("equal", "")


def program_registry():
    """A module's ``(PROGRAMS, program)``: ``@program(*inputs)`` registers a block class in
    ``PROGRAMS`` with the inputs it is run on, each a list of arrays."""
    programs = {}

    def program(*inputs):
        def register(cls):
            programs[cls] = list(inputs)
            return cls
        return register
    return programs, program


def cached_classifier(programs, files, export=True):
    """``classified(block_class)``: :func:`classify` of a program of ``programs`` (its refusals
    located in ``files``; exported too unless ``export`` is false), once per test session."""
    results = {}

    def classified(block_class):
        if block_class not in results:
            results[block_class] = classify(block_class, programs[block_class], files,
                                            export=export)
        return results[block_class]
    return classified


def assert_kinds(result, refused_eagerly=False, refused=False):
    """A :func:`classify` result (no export) equals the oracle in both modes, or is refused
    hybridized (``refused``) or in both (``refused_eagerly``) at the user's line."""
    assert not not_equal_or_refused(result), result
    kinds = {mode: kind for mode, (kind, _) in result.items()}
    want = "refused" if refused_eagerly else "equal"
    assert kinds == {"eager": want, "hybrid": "refused" if refused or refused_eagerly
                     else "equal"}, result


def assert_program(block_class, programs, classified, refused):
    """A program of ``programs`` (:func:`program_registry`) equals its oracle in both modes
    (``classified(block_class)``: :func:`cached_classifier`'s), or where ``refused`` (block
    class -> text) holds it, is refused hybridized by an AutographError holding that text."""
    assert_kinds(classified(block_class), refused=block_class in refused)
    if block_class in refused:
        error = hybridized_error(block_class, *programs[block_class][0])
        assert isinstance(error, gluon_cf.AutographError), repr(error)
        assert refused[block_class] in str(error), str(error)


def not_equal_or_refused(result):
    """The modes of a :func:`classify` result that neither equal the oracle nor are a clean
    refusal at the user's line."""
    return {mode: detail for mode, (kind, detail) in result.items()
            if kind not in ("equal", "refused")}


def line_in(path, text, block_class=None):
    """The first line of the file ``path`` holding ``text`` (within ``block_class``'s source
    when given)."""
    first, count = (inspect.getsourcelines(block_class)[1],
                    len(inspect.getsourcelines(block_class)[0])) if block_class else (1, 10**6)
    with open(path) as source:
        return next(k for k, line in enumerate(source, 1)
                    if first <= k < first + count and text in line)


def hybridized_error(block_class, *arrays):
    """What a block of ``block_class`` (made as :func:`classify` makes it), hybridized,
    raises called on ``arrays``."""
    net = _make(block_class)
    net.hybridize()
    try:
        net(*[mx.nd.array(a) for a in arrays])
    except Exception as err:        # (the caller checks what it is)
        return err
    raise AssertionError(f"{block_class.__name__} raised nothing")


def malformed_call(arrays, how):
    """A call's arrays with the first one column wider (``how`` "wider"), of one more axis
    ("rank") or float64 (anything else): calls most programs refuse, for call histories."""
    first = arrays[0]
    if how == "wider":
        first = np.concatenate([first, first[..., :1]], axis=-1)
    elif how == "rank":
        first = first[None]
    else:
        first = first.astype(np.float64)
    return [first] + list(arrays[1:])


def rand(*shape, seed=0, low=-1.0, high=1.0):
    """A program's float32 input: uniform in [low, high), fixed by ``seed``."""
    return np.random.RandomState(seed).uniform(low, high, shape).astype(np.float32)


def floats(*values):
    """A program's float32 input of these values."""
    return np.array(values, np.float32)


def _unnamed(err):
    """``err``'s message without node names (a fresh block's have another prefix)."""
    text = re.sub(r"\[\d\d:\d\d:\d\d\] ", "", str(err))     # (MXNet's time stamps)
    text = re.sub(r"'[a-z0-9_]+'", "'<node>'", text)
    text = re.sub(r"\b([a-z]+_[a-z_]*?)\d+\b", r"\1#", text)   # (MXNet's names: elemwise_add9)
    return re.sub(r"\b[a-z][a-z0-9]*?\d+_", "<block>_", text)     # (unquoted node names)


def run_eager_and_hybridized(cls, inputs, make, check):
    """Every input list of ``cls``, on one eager ``make(cls)`` then one hybridized, recorded
    (:func:`run_with_gradients`): ``check(mode, k, outcome)`` ("eager" or "hybrid", the
    input's index, its :func:`_outcome`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("eager", "hybrid"):
            net = make(cls)
            if mode == "hybrid":
                net.hybridize()
            for k, arrays in enumerate(inputs):
                check(mode, k, _outcome(lambda: run_with_gradients(net, arrays)))


def eager_oracle(cls, inputs):
    """``oracle(k)`` for :func:`check_call_history`: the :func:`_outcome` of
    :func:`run_with_gradients` of a fresh eager block of ``cls`` on ``inputs[k]``, once."""
    cache = {}

    def oracle(k):
        if k not in cache:
            net = _make(cls)
            cache[k] = _outcome(lambda: run_with_gradients(net, inputs[k]))
        return cache[k]
    return oracle


def check_call_history(cls, inputs, make, oracle, tol):
    """Item 2 of issue 24: ``inputs`` in a random order with repeats and malformed calls
    (:func:`malformed_call`), recorded or not, on one hybridized ``make(cls)``: each call
    equals ``oracle(k)`` (an :func:`_outcome` of :func:`run_with_gradients`) where both are
    values, else the same call on a fresh hybridized block (a failing call fails the same
    way, and leaves the block usable)."""
    rng = random.Random(cls.__name__)
    calls = [rng.randrange(len(inputs)) for _ in range(len(inputs))] + \
        list(range(len(inputs)))[::-1]
    for how in ("wider", "rank", "float64"):
        calls.insert(rng.randrange(len(calls)), how)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = make(cls)
        net.hybridize()
        fresh = {}
        for k in calls:
            record = rng.random() < 0.6
            arrays = malformed_call(inputs[0], k) if isinstance(k, str) else inputs[k]
            got = _outcome(lambda: run_with_gradients(net, arrays, record=record))
            if got[0] == "value" and not isinstance(k, str) and oracle(k)[0] == "value":
                # (the oracle, which a fresh hybridized block equals: the first test)
                want = oracle(k)[1][:len(got[1])] if not record else oracle(k)[1]
                assert _compare(want, got[1], tol), (k, record)
                continue
            if (k, record) not in fresh:
                other = make(cls)
                other.hybridize()
                fresh[k, record] = _outcome(
                    lambda: run_with_gradients(other, arrays, record=record))
            want = fresh[k, record]
            if want[0] == "error":
                assert got[0] == "error" and type(got[1]) is type(want[1]) and \
                    _unnamed(got[1]) == _unnamed(want[1]), (k, got, want)
            else:
                assert got[0] == "value" and _compare(want[1], got[1], tol), \
                    (k, record, got[1] if got[0] == "error" else "another value")




def assert_unrecorded_write(block_class, inputs, files, converted):
    """A program of item writes (which plain MXNet refuses under autograd), unrecorded,
    eager and hybridized, on each of ``inputs``: the value of plain Python, or (hybridized,
    unless ``converted``) an AutographError at the user's line."""
    plain = block_class.hybrid_forward.__wrapped__
    for hybridize in (False, True):
        for arrays in inputs:
            net = _make(block_class)
            want = _outcome(lambda: run_with_gradients(net, arrays, forward=plain,
                                                       record=False))
            net = _make(block_class)
            if hybridize:
                net.hybridize()
            got = _outcome(lambda: run_with_gradients(net, arrays, record=False))
            kind = classify_pair(want, got, files)
            expected = "equal" if not hybridize or converted else "refused"
            assert kind == expected, (hybridize, kind, got[1] if got[0] == "error" else "")
            if kind == "refused":
                assert isinstance(got[1], gluon_cf.AutographError), repr(got[1])
