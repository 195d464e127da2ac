"""The gluon_cf artifact format: what a file holds, its limits and its errors.

An artifact is an ONNX model with two extra operators for recursion; ``artifact_validate.py`` checks
a file against this, ``artifact.py`` runs it, ``artifact_save.py`` writes it. No MXNet here.

NOTE [artifact format]).  A model without recursion saves as
plain ONNX that any runtime runs, and ``load`` runs plain ONNX models too.

NOTE [artifact format]
    An artifact is an ONNX ``ModelProto`` (default-domain opset 12 or 13, as ``export_onnx``
    writes; ``load`` accepts opset 11 and later) that also imports the domain ``ai.gluon_cf``
    at version 1 and has the metadata ``format = gluon_cf.artifact``, ``format_version = 1``.
    It may also have ``gluon_cf.index_bounds`` (NOTE [index bounds] in ``index_bounds.py``),
    which plain ONNX models exported by gluon_cf carry too.
    Parameters are initializers of the main graph; ``cond`` / ``foreach`` / ``while_loop`` are
    ``If`` / ``Scan`` / ``Loop`` exactly as in ``export_onnx``.  The two extra operators:

    ``ai.gluon_cf.Recursion(*entry_args, *environment) -> entry outputs`` -- the outermost call
        of a recursive function (gluon_cf's ``recursion`` node, NOTE [recursion design]).
        Attributes: ``functions`` (GRAPHS): the function table, one graph per function, named
        by the graph's ``name``; ``entry`` (STRING): the name of the function called;
        ``num_args``, ``max_depth`` (INTS) and ``function_names`` (STRINGS): per function, in
        the order of ``functions``, its number of arguments, its bound on nested calls and its
        Python name (for messages).  A function graph's inputs are ``[*its args,
        *environment]``; it is *closed*: it reads no outer-scope value, everything it needs
        from outside (parameters, inputs of the model) is in the environment, which all
        functions of the table share.  ``len(environment) = len(inputs) - num_args[entry]``.
    ``ai.gluon_cf.Invoke(*args) -> outputs`` -- a call site, inside a function graph (or a
        subgraph nested in one).  Attribute ``function`` (STRING): the callee, a function of
        an enclosing ``Recursion`` node (the innermost one defining that name).  The
        environment is the one of the running call of that ``Recursion`` node.

    Semantics (what :func:`load` implements, in Python)::

        def recursion(node, *inputs):
            n = node.num_args[node.entry]
            ctx = Context(node.functions, env=inputs[n:], depth=0)
            return ctx.call(node.entry, inputs[:n])

        def call(ctx, name, args):                         # an Invoke: ctx.call(function, args)
            ctx.depth += 1
            if ctx.depth > max_depth[name]: raise ArtifactDepthError
            outputs = run_graph(functions[name], [*args, *ctx.env])
            ctx.depth -= 1
            return outputs
"""
import re
from dataclasses import dataclass

import numpy as np
import onnx

from gluon_cf.errors import RecursionDepthError

FORMAT = "gluon_cf.artifact"
FORMAT_VERSION = "1"
DOMAIN = "ai.gluon_cf"
DOMAIN_VERSION = 1
DEFAULT_DOMAINS = ("", "ai.onnx")
CUSTOM_OPS = ("Recursion", "Invoke")
# Element types a value may have: the numeric numpy types and bool.
ELEM_TYPES = {getattr(onnx.TensorProto, t): np.dtype(d) for t, d in (
    ("FLOAT", np.float32), ("DOUBLE", np.float64), ("FLOAT16", np.float16),
    ("INT8", np.int8), ("INT16", np.int16), ("INT32", np.int32), ("INT64", np.int64),
    ("UINT8", np.uint8), ("UINT16", np.uint16), ("UINT32", np.uint32), ("UINT64", np.uint64),
    ("BOOL", np.bool_))}
TENSOR_OF_DTYPE = {d: t for t, d in ELEM_TYPES.items()}
MIN_OPSET, MIN_IR = 11, 3  # If / Loop / Scan as the loader interprets them


class ArtifactError(ValueError):
    """The file is not a valid artifact, or running it broke one of its bounds."""


class ArtifactDepthError(ArtifactError, RecursionDepthError):
    """A recursive function went deeper than its ``max_depth`` (no base case reached?)."""


# Metadata key of a standard ONNX model whose recursion export_onnx lowered to loops (NOTE
# [recursion as ONNX loops] in onnx_recursion/lowering.py); its value says so in words.
RECURSION_KEY = "gluon_cf.recursion"


@dataclass(frozen=True)
class Limits:
    """Bounds :func:`load` enforces on a file and on each call, since artifacts may come from
    anyone; pass your own to ``load(path, limits=Limits(max_depth=...))``."""
    max_file_bytes: int = 1 << 30          # 1 GiB
    max_nodes: int = 200_000               # nodes and graphs, all graphs together
    max_nesting: int = 24                  # graphs inside graphs (branches, bodies, functions)
    max_tensor_elements: int = 1 << 28     # per initializer, constant or declared shape
    max_functions: int = 10_000            # per Recursion node
    max_depth: int = 100_000               # largest max_depth a function may declare
    max_loop_iterations: int = 10_000_000  # per Loop / Scan run by the loader, and constant
                                           # trip counts of every Loop
    max_steps: int = 5_000_000             # per call: invocations, pieces and loop steps run
                                           # (exponential recursion stops here)
    max_tensor_bytes: int = 1 << 30        # per tensor a piece produces, and what onnxruntime
                                           # holds at once inside a piece (1 GiB)
    max_bytes_produced: int = 1 << 36      # per call, all tensors produced together (64 GiB)
    timeout: float = 600.0                 # seconds per call of the loaded artifact, inside
                                           # onnxruntime too (None: no bound)


def is_artifact(model):
    """Whether the ``ModelProto`` uses the ``ai.gluon_cf`` operators (so needs :func:`load`)."""
    return any(op.domain == DOMAIN for op in model.opset_import)


def describe_value_info(value_info):
    tensor = value_info.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None
                      for d in tensor.shape.dim)
    return value_info.name, shape, ELEM_TYPES[tensor.elem_type]


# onnxruntime's "[ONNXRuntimeError] : 1 : FAIL : " prefix, and the C++ location its messages
# carry: "/onnxruntime_src/.../graph.cc:1357 onnxruntime::Graph::Graph(<signature>) " or
# "tensorprotoutils.cc:2678 ConstantNodeProtoToTensorProto " (file:line, then the function)
_ORT_PREFIX = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : ")
_CPP_WHERE = re.compile(r"(?:/\S*/)?[\w.-]+\.(?:cc|cpp|h):\d+ "
                        r"(?:(?:[\w:<>*&]+ )*?[\w:~<>]+::[\w~<>]+\((?:[^()]|\([^()]*\))*\)"
                        r"(?: const)?(?: \[with [^\]]*\])? "
                        r"|[A-Z]\w+ )?")


def first_line(err):
    """The first line of ``err``'s message; of onnxruntime's, its last message without the
    error-code prefixes and the C++ files, lines and function signatures (what a user of a
    file can act on: "Constant node: 'x' has no data attributes")."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    if _ORT_PREFIX.search(line):
        line = _CPP_WHERE.sub("", _ORT_PREFIX.split(line)[-1]).strip() or line
    return line
