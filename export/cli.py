"""``gluon-cf-export``: convert ``net.export()`` files to ONNX or an artifact, and run them.

    gluon-cf-export convert net-symbol.json net-0000.params \\
        --input data0:n=45 --input data1:n=45 --input data2:n=45 --input data3:b=3 -o tree.onnx
    gluon-cf-export run tree.onnx --input tokens.npy left.npy right.npy roots.npy -o out/
    gluon-cf-export info tree.onnx

``convert`` writes standard ONNX (``export_onnx_symbol``; recursion lowered to loops, NOTE
[recursion as ONNX loops]) and, when the model's recursion cannot be lowered, an artifact
(``save_artifact``, NOTE [artifact format]), saying why; ``--format`` forces one.
``--input NAME:SHAPE[:DTYPE]``, one per data input of the symbol, in the order the converted
model takes them: SHAPE is comma-separated dims, each a size (fixed) or ``DIM=SIZE``, an axis
that may change size, named DIM, with SIZE as the example used to infer shapes (axes that must
stay equal share a name); DTYPE defaults to float32, MXNet's default.  ``run`` runs plain ONNX
and artifacts alike with :func:`gluon_cf.export.load` (its default ``Limits``), reading inputs
from ``.npy`` files (no pickles) and writing one ``<output name>.npy`` per output.  Python
equivalent: ``python -m gluon_cf.export`` (or ``python -m gluon_cf.export.cli``).
"""
import argparse
import json
import os
import re
import sys

import numpy as np

_FORMATS = ("auto", "onnx", "artifact")


def main(argv=None):
    """Entry point; returns the exit status (0 ok, 1 failed, 2 bad usage).

    A failure is exactly one line on stderr, ours: what the libraries print there while a
    command runs (onnxruntime's and MXNet's own log lines, Python warnings) is held back and
    shown only if the command succeeds."""
    held = _HeldStderr()
    try:
        status, error = _main(argv)
    finally:
        printed = held.release()
    if error is None:
        sys.stderr.write(printed)
    else:
        print(f"gluon-cf-export: error: {error}", file=sys.stderr)
    return status


def _main(argv):
    """``(exit status, the error's one line or None)``."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        return args.command(args), None
    except _UsageError as err:
        return 2, _one_line(err)
    except (ValueError, NotImplementedError, OSError) as err:
        return 1, _one_line(err)
    except Exception as err:  # noqa: BLE001 -- a bad file must never print a traceback
        if type(err).__name__ == "MXNetError":   # (MXNet is imported only by convert)
            from gluon_cf.errors import mxnet_message
            return 1, f"MXNet refuses the model: {mxnet_message(_one_line(err))}"
        return 1, f"{type(err).__name__}: {_one_line(err)}"


class _HeldStderr:
    """File descriptor 2 redirected to a temporary file until :meth:`release` (C++ libraries
    write there directly, past ``sys.stderr``)."""

    def __init__(self):
        import tempfile

        sys.stderr.flush()
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)

    def release(self):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        text = self.file.read().decode("utf-8", "replace")
        self.file.close()
        return text


def _one_line(err):
    """The message of ``err`` on one line (MXNet's errors carry a C++ traceback)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Traceback", "File \"", "["))]
    line = (useful or lines or [type(err).__name__])[-1 if lines and lines[0].startswith(
        "Traceback") else 0]
    # A long line keeps its start (the file, the node) and its end (what is wrong with it: a
    # node nested in subgraphs is named by a path of several hundred characters).
    return line if len(line) <= 800 else line[:300] + " ... " + line[-480:]


def _check_readable(path, what):
    """A file MXNet would fail to open says so in our words, not MXNet's file-system check."""
    try:
        with open(path, "rb"):
            pass
    except OSError as err:
        raise OSError(f"cannot read the {what} {path}: {err.strerror}") from None


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, reporting a usage error as a _UsageError (one line, see main)."""

    def error(self, message):
        raise _UsageError(f"{message} (see {self.prog} --help)")


def _parser():
    parser = _Parser(
        prog="gluon-cf-export",
        description="Convert gluon_cf models saved with net.export() to ONNX (or a gluon_cf "
                    "artifact when they use recursion) and run them.")
    commands = parser.add_subparsers(dest="name", required=True)

    convert = commands.add_parser("convert", help="net.export() files -> ONNX / artifact")
    convert.add_argument("symbol", help="the -symbol.json file")
    convert.add_argument("params", help="the .params file")
    convert.add_argument("--input", "-i", action="append", required=True, metavar="NAME:SHAPE"
                         "[:DTYPE]", help="a data input, e.g. data0:n=45 or data:2,5:float32; "
                         "repeat for each input, in order")
    convert.add_argument("-o", "--output", required=True, help="the file to write")
    convert.add_argument("--format", choices=_FORMATS, default="auto",
                         help="onnx: standard ONNX (no recursion); artifact: gluon_cf "
                              "artifact; auto (default): artifact iff the model recurses")
    convert.add_argument("--opset", type=int, default=13, choices=(12, 13),
                         help="ONNX opset (12 or 13)")
    convert.add_argument("--output-name", action="append", metavar="NAME",
                         help="name of a model output (repeat for each, in order)")
    convert.set_defaults(command=_convert)

    run = commands.add_parser("run", help="run an ONNX model or artifact on .npy inputs")
    run.add_argument("model", help="the .onnx file (ONNX or artifact)")
    run.add_argument("--input", "-i", nargs="+", required=True, metavar="ARRAY.npy",
                     help="one .npy file per model input, in order")
    run.add_argument("-o", "--output", required=True, metavar="DIR",
                     help="directory for the <output name>.npy files")
    run.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                     help="stop the run after this many seconds, inside onnxruntime too "
                          "(default: load()'s, 600)")
    run.set_defaults(command=_run)

    info = commands.add_parser("info", help="describe an ONNX model or artifact")
    info.add_argument("model")
    info.set_defaults(command=_info)
    return parser


# ----------------------------------------------------------------------------- convert

def _convert(args):
    import mxnet as mx
    import onnx

    from gluon_cf.symbol_entries import check_symbol_text_contents, load_parameter_file
    from gluon_cf.symbol_file import decode_symbol_file

    from . import artifact_save
    from .onnx_export import _has_recursion, export_onnx_symbol

    inputs, dynamic_axes = zip(*[_parse_input(text) for text in args.input]) \
        if args.input else ((), ())
    _check_readable(args.params, "parameter file")
    try:   # read once: MXNet's own messages for these are its file system's and parser's
        with open(args.symbol, "rb") as f:
            text = decode_symbol_file(f.read(), args.symbol)
    except OSError as err:
        raise OSError(f"cannot read the symbol file {args.symbol}: {err.strerror}") from None
    try:
        json.loads(text)
    except ValueError as err:
        raise ValueError(f"{args.symbol}: not a symbol file (MXNet writes JSON): {err}") \
            from None
    # Checked before MXNet reads it (NOTE [files are checked before MXNet reads them]).
    check_symbol_text_contents(text, args.symbol)
    sym = mx.sym.load(args.symbol)
    params = load_parameter_file(args.params)
    param_names = {name.split(":", 1)[-1] for name in params}
    data_names = [n for n in sym.list_inputs() if n not in param_names]
    given = [name for name, _, _ in inputs]
    unknown = [n for n in given if n not in data_names]
    missing = sorted(n for n in data_names if n not in given)
    if unknown or missing or len(set(given)) != len(given):
        lacking = [n for n in missing if not re.fullmatch(r"data\d*", n)]
        hint = (f" ({', '.join(lacking)}: not in the parameter file {args.params} either; is "
                f"it the model's?)" if lacking else "")
        raise _UsageError(f"--input must name each data input of the symbol once: it has "
                          f"{sorted(data_names)}; missing {missing}, unknown {unknown}{hint}")
    axes = {name: dims for (name, _, _), dims in zip(inputs, dynamic_axes) if dims}
    kind, why = ("artifact" if args.format == "artifact" else "onnx"), None
    if kind == "onnx":
        try:
            model = export_onnx_symbol(sym, params, list(inputs), args.output, args.opset,
                                       dynamic_axes=axes, output_names=args.output_name)
        except NotImplementedError as err:
            # auto: what standard ONNX cannot express (recursion the lowering refuses) is
            # saved as an artifact, saying why.
            if args.format != "auto" or not _has_recursion(json.loads(sym.tojson())):
                raise
            kind, why = "artifact", str(err)
    if kind == "artifact":
        model = artifact_save.convert(sym, params, list(inputs), args.opset,
                                      dynamic_axes=axes, output_names=args.output_name)
        onnx.save(model, args.output)
    described = "gluon_cf artifact" if kind == "artifact" else "ONNX model"
    print(f"wrote {described} {args.output}")
    if why is not None:
        print(f"not standard ONNX: {why}")
    _describe(model)
    return 0


MAX_EXAMPLE_ELEMENTS = 1 << 28   # the largest tensor load() accepts declared in a file


def _parse_input(text):
    """``NAME:SHAPE[:DTYPE]`` -> ``((name, example shape, dtype), {axis: dim name})``."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise _UsageError(f"--input {text!r}: expected NAME:SHAPE[:DTYPE], e.g. data0:n=45 or "
                          f"data:2,5:float32")
    name, shape_text = parts[0], parts[1]
    try:
        dtype = np.dtype(parts[2] if len(parts) == 3 else "float32")
    except TypeError:
        raise _UsageError(f"--input {text!r}: unknown dtype {parts[2]!r}") from None
    shape, dims = [], {}
    for axis, dim in enumerate(d.strip() for d in shape_text.split(",")) if shape_text else ():
        match = re.fullmatch(r"(?:([A-Za-z_]\w*)=)?(\d+)", dim)
        if match is None or int(match.group(2)) < 1:
            raise _UsageError(f"--input {text!r}: dim {dim!r} must be a size >= 1 or "
                              f"DIM=SIZE (an axis that may change size, example SIZE)")
        shape.append(int(match.group(2)))
        if match.group(1):
            dims[axis] = match.group(1)
    size = int(np.prod(shape, dtype=object))
    if size > MAX_EXAMPLE_ELEMENTS:   # (convert makes an example array of this shape)
        raise _UsageError(f"--input {text!r}: an example of {size:,} elements; at most "
                          f"{MAX_EXAMPLE_ELEMENTS:,} (2^28): give small example sizes (a "
                          f"named dim, n=45, may change size when the model runs)")
    return (name, tuple(shape), dtype), dims


# ----------------------------------------------------------------------------- run / info

def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def _run(args):
    from .artifact import Limits, load

    # Plain ONNX too: load() runs it in onnxruntime under the same Limits as an artifact
    # (NOTE [limits inside pieces] in artifact.py: the time limit and the per-tensor limit
    # hold inside onnxruntime), and checks its index inputs (NOTE [index bounds]).
    limits = Limits() if args.timeout is None else Limits(timeout=args.timeout)
    artifact = load(args.model, limits=limits)
    arrays = [np.load(path, allow_pickle=False) for path in args.input]
    names = [name for name, _, _ in artifact.outputs]
    outputs = artifact(*arrays)
    os.makedirs(args.output, exist_ok=True)
    used = set()
    for name, value in zip(names, outputs):
        stem = re.sub(r"[^\w.-]", "_", name).lstrip(".") or "output"
        while stem in used:
            stem += "_"
        used.add(stem)
        path = os.path.join(args.output, stem + ".npy")
        np.save(path, value)
        print(f"{name}: {list(value.shape)} {value.dtype} -> {path}")
    return 0


def _info(args):
    model = _read(args.model)
    _describe(model)
    return 0


def _read(path):
    import onnx

    from .artifact_format import ArtifactError, Limits

    size = os.path.getsize(path)
    if size > Limits().max_file_bytes:
        raise ArtifactError(f"{path!r} is {size} bytes, more than the loader's bound")
    model = onnx.ModelProto()
    try:
        with open(path, "rb") as f:
            model.ParseFromString(f.read())
    except Exception as err:  # noqa: BLE001 -- protobuf's DecodeError and friends
        raise ArtifactError(f"{path!r} is not an ONNX model: {err}") from None
    return model


def _describe(model):
    from onnx import helper

    from .artifact_format import DOMAIN, RECURSION_KEY, is_artifact

    def show(value_info):
        tensor = value_info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in tensor.shape.dim]
        try:
            dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        except KeyError:
            dtype = "?"
        return f"{value_info.name}{dims}:{dtype}"

    constants = {init.name for init in model.graph.initializer}
    kind = "gluon_cf artifact" if is_artifact(model) else "ONNX"
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    print(f"format: {kind} ({opsets})")
    lowered = {p.key: p.value for p in model.metadata_props}.get(RECURSION_KEY)
    if lowered:
        print(f"recursion: {lowered}")
    print("inputs: " + ", ".join(show(v) for v in model.graph.input if v.name not in constants))
    print("outputs: " + ", ".join(show(v) for v in model.graph.output))
    stack = [model.graph]
    while stack:
        for node in stack.pop().node:
            if node.domain == DOMAIN and node.op_type == "Recursion":
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                names = [n.decode("utf-8", "replace") for n in attrs.get("function_names", [])]
                print(f"recursion {node.name}: functions {names}, max_depth "
                      f"{list(attrs.get('max_depth', []))}")
            for attr in node.attribute:
                stack.extend([attr.g] if attr.type == attr.GRAPH else attr.graphs)


if __name__ == "__main__":
    sys.exit(main())
