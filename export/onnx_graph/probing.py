"""Shapes of a graph's values where MXNet's legacy inference cannot carry an unknown dim:
probed with two concrete sizes (NOTE [probing run-time dims]); used by the export's shape plan
(``onnx_shapes.py``) and by the converters' per-graph shapes (``conversion.py``)."""
import mxnet as mx

# NOTE [probing run-time dims]
#     MXNet's legacy inference reads a 0 as an unknown dim but not every operator carries one
#     through: ``F.dot(mem, h)`` of a ``mem`` of (0, 4) gives (0,), whose ``reshape((1, -1))``
#     then fails ("Shape dim size cannot be a negative value -1"), though the graph runs for
#     every size (a loop body reading boolean_mask's rows). Where MXNet refuses 0, the run-time
#     dims are given two concrete sizes in turn and the dims that agree are kept (None where
#     they differ), as the shape plan does for dynamic axes (NOTE [shape plan] in
#     ``onnx_shapes.py``); the sizes are primes, and the smallest size the graph takes (1, else
#     2, 3, ...) and a size far from both are tried too (NOTE [dims agreeing by chance]
#     there), so that a dim agreeing by chance is unlikely.
#     The converters' per-graph shapes (``conversion.py``'s entry specs, of loop bodies above
#     all) are probed the same way where MXNet refuses the 0 or loses a value's rank to it
#     (``F.dot`` of a (0,) and a (0, 3) has none): without it a converter needing the rank
#     refused the graph, and a Scan body's output had no shape, which onnxruntime refuses.
_PROBE_SIZES = (7, 11)
# Two more sizes, the smallest the graph takes and one far from both: a dim agreeing at 7 and 11
# by chance (a Pooling of stride 20, a slice clipped to 4) differs there (NOTE [dims agreeing
# by chance] in ``onnx_shapes.py``); a size the graph refuses is left out.
SMALL_SIZES = tuple(range(1, 17)) + (24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
                                      1536, 2048, 3072, 4096)
FAR_SIZE = 1031


def more_sizes(runs, largest=0):
    """The sizes ``runs(size)`` is tried at after the two first (NOTE [dims agreeing by
    chance] in ``onnx_shapes.py``): the smallest size it takes (it returns True), found in
    ``SMALL_SIZES`` then bisected in the gap below it, then ``FAR_SIZE`` and, for examples
    of ``largest`` over a quarter of it, a size four times theirs. Whether a small size was
    taken."""
    below, taken = 0, False
    for size in SMALL_SIZES:
        if runs(size):
            while size - below > 1:   # (24 taken, 16 not: 17 to 23 were never tried)
                middle = (below + size) // 2
                below, size = (below, middle) if runs(middle) else (middle, size)
            taken = True
            break
        below = size
    runs(FAR_SIZE)
    if 4 * largest + 7 > FAR_SIZE:
        runs(4 * largest + 7)
    return taken


def probed_shapes(sym, arg_shapes, known):
    """Output shapes of ``sym`` with the run-time dims (None) of ``arg_shapes`` given each of
    ``_PROBE_SIZES`` and the sizes of :func:`more_sizes` it takes: the dims that agree,
    None elsewhere; None if there are no such dims or one of ``_PROBE_SIZES`` fails too (NOTE
    [probing run-time dims])."""
    if not any(shape and None in shape for name, shape in arg_shapes.items() if name in known):
        return None
    runs = []

    def probe(size):
        given = {name: tuple(size if d is None else d for d in shape)
                 for name, shape in arg_shapes.items() if name in known and shape}
        try:
            _, out_shapes, _ = sym.infer_shape_partial(**given)
        except mx.MXNetError:
            return False
        runs.append([planned_shape(s) for s in out_shapes])
        return True
    if not all(probe(size) for size in _PROBE_SIZES):
        return None
    more_sizes(probe)
    merged = runs[0]
    for shapes in runs[1:]:
        merged = [merge_concrete(a, b) for a, b in zip(merged, shapes)]
    return merged


def planned_shape(shape):
    """A shape in MXNet's legacy form (0: unknown dim, (): unknown rank) as the plan keeps
    it: None for an unknown dim, None for an unknown rank."""
    if not shape:
        return None
    return tuple(None if d == 0 else d for d in shape)


def merge_concrete(a, b):
    """Two shapes' dims where they agree, None where they differ; None unless both are shapes
    of one rank."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))
