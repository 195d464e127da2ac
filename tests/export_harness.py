"""Exports a program (a block class with its input lists, as in ``hostile_harness``) through
``export_onnx`` and ``save_artifact`` and compares each with the hybridized block on every
input list it runs, at 1e-5: ``{api: (class, detail)}`` with class 'equal', 'refused' (a
NotImplementedError or ValueError at the user's line), 'internal' (any other error) or
'SILENT' (another value or shape)."""
import os
import re
import tempfile
import traceback
import warnings

import mxnet as mx
import numpy as np

import hostile_harness

RTOL, ATOL = 1e-5, 1e-6


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


def _outputs(value):
    return [o.asnumpy() for o in (value if isinstance(value, (list, tuple)) else [value])]


def dynamic_axes(inputs_list):
    """The axes of each input whose size changes between the input lists."""
    first = inputs_list[0]
    axes = {k: [axis for axis in range(a.ndim)
                if len({arrays[k].shape[axis] for arrays in inputs_list}) > 1]
            for k, a in enumerate(first)}
    return {k: v for k, v in axes.items() if v} or None


def _onnx_runner(net, first, axes, opset=13):
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    model = export_onnx(net, _nd(first), dynamic_axes=axes, opset=opset)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda arrays: session.run(None, dict(zip(names, arrays)))


def _artifact_runner(net, first, axes, directory):
    from gluon_cf.export import load, save_artifact
    path = os.path.join(directory, "model.onnx")
    save_artifact(net, _nd(first), path, dynamic_axes=axes)
    model = load(path)
    return lambda arrays: model(*arrays)


def export_outcomes(cls, inputs_list, files):
    """``{"onnx": (class, detail), "artifact": (class, detail)}`` (see the module's doc)."""
    result = {}
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")
        for api in ("onnx", "artifact"):
            net = hostile_harness._make(cls)
            net.hybridize()
            first = inputs_list[0]
            axes = dynamic_axes(inputs_list)
            try:
                run = _onnx_runner(net, first, axes) if api == "onnx" else \
                    _artifact_runner(net, first, axes, tmp)
            except Exception as err:       # classified: a refusal must name the user's line
                text = f"{type(err).__name__}: {str(err)[:1000]}"
                if isinstance(err, (NotImplementedError, ValueError)) and \
                        hostile_harness.located(err, files):
                    result[api] = ("refused", text)
                else:
                    result[api] = ("internal", text + "\n" + traceback.format_exc()[-800:])
                continue
            result[api] = _compare_runs(net, run, inputs_list, first)
    return result


def assert_equal_or_refused(result, refused):
    """Each API's outcome in ``result`` (:func:`export_outcomes`) is "equal", or "refused"
    with a detail matching ``refused[api]`` where the API is expected to refuse."""
    for api, (kind, detail) in result.items():
        if api in refused:
            assert kind == "refused" and re.search(refused[api], detail), (api, detail)
        else:
            assert kind == "equal", (api, detail)


def _compare_runs(net, run, inputs_list, first):
    for arrays in inputs_list:
        if [a.dtype for a in arrays] != [a.dtype for a in first]:
            continue          # (the model takes the dtypes it was exported with)
        try:
            want = _outputs(net(*_nd(arrays)))
        except Exception:     # (a call the hybridized block refuses: its own test's case)
            continue
        try:
            got = run(arrays)
        except Exception as err:
            return ("internal", f"run {type(err).__name__}: {str(err)[:400]}")
        if len(got) != len(want):
            return ("SILENT", f"{len(got)} outputs, Gluon {len(want)}")
        for g, w in zip(got, want):
            if g.shape != w.shape or g.dtype != w.dtype or \
                    not np.allclose(g, w, rtol=RTOL, atol=ATOL):
                return ("SILENT", f"got {g.dtype}{g.shape} {g.ravel()[:4]}, Gluon "
                                  f"{w.dtype}{w.shape} {w.ravel()[:4]} on {arrays}")
    return ("equal", "")


def assert_cli_runs_equal(cli, directory, model_path, net, inputs_list):
    """``cli("run", model_path, ...)`` (the CLI's ``main``, as test_hostile_export23's
    fixture gives it) on every input list, each written as .npy files into ``directory``:
    exit status 0 and every output equal to ``net``'s (shape, dtype and values at 1e-5)."""
    from gluon_cf.export import load
    model = load(str(model_path))
    for k, arrays in enumerate(inputs_list):
        paths = []
        for j, a in enumerate(arrays):
            paths.append(directory / f"in{k}_{j}.npy")
            np.save(paths[-1], a)
        status, _, err = cli("run", model_path, "--input", *paths, "-o", directory / f"o{k}")
        assert status == 0, err
        for (name, _, _), w in zip(model.outputs, _outputs(net(*_nd(arrays)))):
            got = np.load(directory / f"o{k}" / (name + ".npy"))
            assert got.shape == w.shape and got.dtype == w.dtype, (got.shape, w.shape)
            np.testing.assert_allclose(got, w, rtol=RTOL, atol=ATOL)


def cli_convert(cli, directory, net, inputs_list):
    """``net`` (hybridized, called) exported by ``net.export`` into ``directory`` and
    ``convert``ed by the CLI (``cli`` as in :func:`assert_cli_runs_equal`), each input's axes
    that change between ``inputs_list``'s lists named (``--input data0:n0=5,4``; one name for
    axes of the same sizes in every list), its dtype
    given unless float32: the path of the model written."""
    net(*_nd(inputs_list[0]))
    net.export(str(directory / "net"))
    axes = dynamic_axes(inputs_list) or {}
    first = inputs_list[0]
    names = ["data%d" % k for k in range(len(first))] if len(first) > 1 else ["data"]
    specs, dim_names = [], {}    # (axes of the same sizes in every list: one name)
    for k, (name, a) in enumerate(zip(names, first)):
        dims = ["%s=%d" % (dim_names.setdefault(tuple(arrays[k].shape[axis]
                                                      for arrays in inputs_list),
                                                "n%d" % len(dim_names)), n)
                if axis in axes.get(k, ()) else str(n) for axis, n in enumerate(a.shape)]
        specs += ["--input", "%s:%s" % (name, ",".join(dims)) +
                  ("" if a.dtype == np.float32 else ":%s" % a.dtype)]
    status, _, err = cli("convert", directory / "net-symbol.json",
                         directory / "net-0000.params", *specs, "-o", directory / "m.onnx")
    assert status == 0, err
    return directory / "m.onnx"
