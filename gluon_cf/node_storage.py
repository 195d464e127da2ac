"""Storage types of a node in MXNet's graphs: the answers of its Custom operator's storage
callbacks, and the dense copies a body runs on (NOTE [sparse inputs of a node])."""
import json

from mxnet.ndarray.sparse import BaseSparseNDArray

from ._cachedop import MKLDNN
from .checks import ArgumentValueError
from .errors import created_at

# NOTE [sparse inputs of a node]
#     MXNet 1.9.1's cond and while_loop (a free variable or a loop variable) and foreach (a
#     free variable) run a body reading a csr or row_sparse array (``dot(csr, w)``: sparse
#     features): their storage inference passes the storage type into the body. A node keeps
#     the input's storage type (a Custom operator's answer must agree with MXNet's, which
#     refused otherwise) and gives the body a dense copy: the same values, and gradients
#     of the dense inputs as MXNet's. Only a foreach's data and states are refused, as MXNet's
#     foreach refuses them ("doesn't support the sparse format"): its outputs hold them. A
#     sparse head gradient (an output read as an Embedding(sparse_grad=True)'s table) is
#     likewise kept as MXNet gives it and read as a dense copy.


# NOTE [sparse gradients of a node]
#     An Embedding(sparse_grad=True) read in a body asks the node for a row_sparse gradient of
#     its weight (MXNet's backward storage inference). MXNet's foreach refuses it, and its
#     while_loop fails inside (SparseEmbedding's "req != write"), but its cond gives it. A
#     node cannot: a Custom operator's backward hands its sparse input gradients back to
#     MXNet by counting only the sparse ones (custom-inl.h, ``outputs[out_idx]``), so one
#     after a dense one lands on the wrong array (a shape check fails, or, of one shape,
#     the value goes to another input's gradient). It is refused naming the node, with
#     ``sparse_grad=False`` as the way out (the same values, a dense gradient).


def _carried_inputs(node):
    """The inputs of ``node`` that must be dense (NOTE [sparse inputs of a node])."""
    if node.kind != "foreach":
        return range(0)
    return range(node.spec["num_data"] + node.spec["num_states"])


# NOTE [weights reordered in a body]
#     With MKLDNN, a Convolution, Deconvolution or FullyConnected run for inference changes its
#     weight array's layout in place, asynchronously (``MKLDNNDataReorderAsync``). In a body a
#     node runs, that array is the node's input: MXNet's NDArray over a buffer the node does not
#     own (NOTE [MKLDNN values read by a node] in _cachedop.py), of the default layout's size:
#     MXNet wrote the blocked weight into it, past its end or into a buffer the block's graph
#     then gives other values ("corrupted size vs. prev_size", a segmentation fault: every
#     hybridized inference call of a Conv2D in a cond's branch). So in inference a node whose
#     bodies hold one of those operators runs them on copies of its inputs of two or more
#     dimensions (the weights); training reorders no weight in place.
_REORDERING = ("Convolution", "Deconvolution", "FullyConnected")


def inference_copies(node, arrays):
    """``arrays`` (a node's inputs for an inference forward) with those a body's operator may
    reorder in place copied (NOTE [weights reordered in a body])."""
    reorders = getattr(node, "reorders_weights", None)
    if reorders is None:
        text = json.dumps(node.spec)
        reorders = node.reorders_weights = MKLDNN and any(op in text for op in _REORDERING)
    return [a.copy() if reorders and a.ndim >= 2 else a for a in arrays]


def dense_copies(arrays):
    """``arrays`` as a list, each sparse one as a dense copy (NOTE [sparse inputs of a node])."""
    return [a.tostype("default") if isinstance(a, BaseSparseNDArray) else a for a in arrays]


def _as_given(stypes):
    """Storage types as MXNet gave them, "undefined" (not decided yet) read as dense."""
    return [s if s != "undefined" else "default" for s in stypes]


def forward_storage_types(node, in_stype):
    """MXNet's ``infer_storage_type`` of ``node``: the inputs' as given ("undefined", not
    decided yet, as dense), dense outputs; a foreach's sparse data or state refused."""
    carried = _carried_inputs(node)
    sparse = ["input %d is %s" % (k, s) for k, s in enumerate(in_stype)
              if k in carried and s not in ("default", "undefined")]
    if sparse:
        raise ArgumentValueError(
            "gluon_cf.%s%s (node %r): %s; a loop's data and states are dense arrays in a "
            "graph (MXNet 1.9.1's foreach refuses sparse ones too): convert it with "
            ".tostype('default') before the call"
            % (node.kind, created_at(node), node.spec.get("node"), ", ".join(sparse)))
    return (_as_given(in_stype),
            ["default"] * node.num_outputs, [])


def backward_storage_types(decoded, ograd_stype, in_stype, out_stype, igrad_stype, aux_stype):
    """MXNet's ``infer_storage_type_backward`` of the node ``decoded()`` gives (decoded only
    to name it: this runs on every recorded call): dense gradients, the inputs' and head
    gradients' as given (a row_sparse head gradient: its output read by an
    Embedding(sparse_grad=True)); a sparse gradient asked of it refused (NOTE [sparse
    gradients of a node])."""
    sparse = ["input %d's is %s" % (k, s) for k, s in enumerate(igrad_stype)
              if s not in ("default", "undefined")]
    if sparse:   # (an Embedding(sparse_grad=True) read in a body)
        node = decoded()
        raise ArgumentValueError(
            "gluon_cf.%s%s (node %r): a sparse gradient is asked of it (%s); a gluon_cf node "
            "gives dense gradients (NOTE [sparse gradients of a node]): use "
            "Embedding(..., sparse_grad=False) in the body"
            % (node.kind, created_at(node), node.spec.get("node"), ", ".join(sparse)))
    return (_as_given(ograd_stype),
            _as_given(in_stype),
            ["default"] * len(out_stype), ["default"] * len(igrad_stype),
            ["default"] * len(aux_stype))
