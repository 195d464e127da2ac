"""What a recursion node lowers to, decided before any ONNX node is emitted: the functions
reachable from its entry (the ahead-of-time schedules' analysis, ``skeleton._Plan``), each
one's argument specs, how its outputs pack into one row per call, and its variants (the branches
a call may take); a model the loops cannot express is refused here, naming the function and why.
Also the skeleton of a body (what computes the predicates and the calls' arguments) as an MXNet
graph, which both the plan and the expansion Loop run (NOTE [recursion as ONNX loops])."""
import itertools
import types
from typing import Dict, List, Tuple

import numpy as np

from gluon_cf.graph import decode
from gluon_cf.rowwise import Shaped, lowering_rows
from gluon_cf.recursion import schedule, skeleton, value_graphs
from gluon_cf.recursion.table import _FunctionTable

MAX_INVOCATIONS = schedule.MAX_INVOCATIONS

# An entry of an MXNet graph being built (``value_graphs._Emitter``): (node id, output index).
Entry = Tuple[int, int]


def _refuse(where, why):
    return NotImplementedError(f"export_onnx: {where} cannot be lowered to standard ONNX loops: "
                               f"{why}. Export the model with gluon_cf.export.save_artifact")


def _plan(custom_node, node):
    """``(plan, {qname: argument ValueSpecs}, {qname: output layout})`` of the recursion node:
    the functions reachable from its entry, each one's argument shapes (rows unknown) and
    dtypes - the entry's from the node's inputs, a callee's from what its callers pass - and
    how its outputs pack into one row per call."""
    spec = node.spec
    entry = spec["entry"]
    decoded = decode("recursion", custom_node.attrs["spec"])
    context = types.SimpleNamespace(graphs=decoded.graphs, specs=spec["graphs"],
                                    namespace=spec["namespace"])
    where = f"recursion node {node.name!r} (function {spec['graphs'][entry]['name']!r})"
    try:
        plan = skeleton._Plan(context, entry, export=True)
    except skeleton._NotPlannable as why:
        raise _refuse(where, why) from None
    num_args = spec["num_args"]
    if any(s is None for s in node.in_shapes):
        raise _refuse(where, f"the shapes of its inputs are not known (MXNet inferred "
                             f"{node.in_shapes}); the lowering needs their ranks")
    for k, shape in enumerate(node.in_shapes[:num_args]):
        if not shape or shape[0] != 1:
            raise _refuse(where, f"its argument #{k} has shape {shape}, not one row per call "
                                 f"(the loops stack the calls of a level as rows): give "
                                 f"per-call arguments a leading axis of 1")
        if None in shape:
            raise _refuse(where, f"its argument #{k} has shape {shape}, with dimensions known "
                                 f"only at run time, which the loops' state must declare")
    env_types = [np.dtype(d) for d in custom_node.input_dtypes[num_args:]]
    arg_specs = {entry: [(tuple(s), np.dtype(t)) for s, t in
                         zip(node.in_shapes[:num_args], custom_node.input_dtypes[:num_args])]}
    # A function's output rows must not depend on the sizes of the environment's dynamic
    # dimensions (a forest's node count): everything is inferred with each at two sizes, in
    # tables of our own (the process's tables serve the run-time inference).
    found = []
    for size in (2, 3):
        env_shapes = [tuple(size if d is None else d for d in s)
                      for s in node.in_shapes[num_args:]]
        table = _FunctionTable(decoded)
        table.env_shapes, table.env_types = env_shapes, env_types
        layouts, todo = {}, [entry]
        while todo:
            qname = todo.pop(0)
            if qname in layouts:
                continue
            function = plan.functions[qname]
            name = f"function {function.name!r}"
            shapes = [s for s, _ in arg_specs[qname]]
            dtypes = [t for _, t in arg_specs[qname]]
            # Every level runs the body on all its calls at once: it must act row by row.
            graph = decoded.graphs[qname]
            values = [Shaped((size,) + s[1:]) for s in shapes] + [Shaped(s) for s in env_shapes]
            flags = [True] * len(shapes) + [False] * len(env_shapes)
            with lowering_rows():   # (NOTE [loops lowered on rows] in gluon_cf/rowwise.py)
                rejected = graph.rows_rejected([values[k] for k in graph.slots],
                                               [flags[k] for k in graph.slots])
            if rejected is not None:
                raise _refuse(where, f"{name}: its body does not act row by row (the loops run "
                                     f"each level's calls together): {rejected.describe()}")
            try:
                outs = table.out_shapes(qname, shapes)
            except ValueError:
                outs = None
            types_ = table.out_types(qname, dtypes)
            if not outs or None in outs or any(not o or o[0] != 1 for o in outs) \
                    or not types_ or None in types_ or len({np.dtype(t) for t in types_}) != 1:
                raise _refuse(where, f"{name}: its outputs (shapes {outs}, dtypes {types_}) are "
                                     f"not one row per call of one dtype, which the lowering "
                                     f"packs")
            sizes = [int(np.prod(o[1:], dtype=np.int64)) for o in outs]
            layouts[qname] = {"shapes": [tuple(o[1:]) for o in outs], "sizes": sizes,
                              "width": sum(sizes), "dtype": np.dtype(types_[0])}
            for callee, passed in _call_signatures(function, shapes, dtypes, env_shapes,
                                                   env_types):
                known = arg_specs.setdefault(callee, passed)
                if known != passed:
                    raise _refuse(where, f"{name} calls {plan.functions[callee].name!r} with "
                                         f"arguments {passed}, another call with {known}")
                todo.append(callee)
        # (the calls a while_loop makes take their arguments' specs from the callee's; one
        # called from loops only has none: an unchecked KeyError in the lowering, before)
        missing = sorted(plan.functions[q].name for q in plan.functions if q not in layouts)
        if missing:
            raise _refuse(where, f"{', '.join(map(repr, missing))} is called only from inside "
                                 f"a while_loop, whose calls take their arguments' shapes from "
                                 f"a call of the same function outside any loop (none here)")
        found.append(layouts)
    if found[0] != found[1]:
        raise _refuse(where, f"its outputs change with the dynamic dimensions ({found[0]} vs "
                             f"{found[1]})")
    return plan, arg_specs, found[0]


def _call_signatures(function, shapes, dtypes, env_shapes, env_types):
    """``[(callee, [(shape, dtype) per argument])]`` of each call site of ``function``, from
    MXNet's inference on its skeleton (one row per call)."""
    if not function.sites:
        return []
    em = value_graphs._Emitter()
    body = function.body
    inputs = {name: em.var("%s%d" % (kind, k), kind == "arg")
              for name, (kind, k) in body.inputs.items()}
    preds: Dict[tuple, Entry] = {}
    site_args: Dict[int, List[Entry]] = {}
    _emit_skeleton(body, inputs, em, preds, site_args, path=())
    heads = [e for site in sorted(site_args) for e in site_args[site]]
    sym = em.symbol(heads)
    known = {"arg%d" % k: s for k, s in enumerate(shapes)}
    known.update({"env%d" % i: s for i, s in enumerate(env_shapes)})
    kinds = {"arg%d" % k: t for k, t in enumerate(dtypes)}
    kinds.update({"env%d" % i: t for i, t in enumerate(env_types)})
    used = sym.list_inputs()
    _, out_shapes, _ = sym.infer_shape(**{n: known[n] for n in used})
    _, out_types, _ = sym.infer_type(**{n: kinds[n] for n in used})
    if out_shapes is None or out_types is None or None in out_types \
            or any(not s for s in out_shapes):
        raise _refuse(f"function {function.name!r}",
                      f"MXNet cannot infer the shapes and dtypes of its calls' arguments (got "
                      f"{out_shapes}, {out_types})")
    calls, k = [], 0
    for site in sorted(site_args):
        n = len(site_args[site])
        calls.append((function.sites[site],
                      [((1,) + tuple(s[1:]), np.dtype(t))
                       for s, t in zip(out_shapes[k:k + n], out_types[k:k + n])]))
        k += n
    return calls


def _variant_keys(body):
    """Every variant of ``body``: per ``cond``, in order, (choice, the taken branch's key) -
    the keys the schedule's host expansion gives (``_Body.evaluate``)."""
    options = [[(choice, sub) for choice in (True, False)
                for sub in _variant_keys(branches[choice][0])]
               for _, _, branches in body.conds]
    return [tuple(combo) for combo in itertools.product(*options)]


def _loops_of(body):
    """The while_loops making calls in ``body`` and its branches."""
    found = list(body.loops.values())
    for _, _, branches in body.conds:
        for choice in (True, False):
            found += _loops_of(branches[choice][0])
    return found


def _emit_skeleton(body, inputs, em, preds, site_args, path, loops=None):
    """Emit ``body``'s skeleton with both sides of every cond: ``preds[path]`` gets each cond's
    predicate (path: cond index, choice, cond index, ...), ``site_args[site]`` each call's
    arguments, ``loops[first column]`` each while_loop making calls and its inputs."""
    emitted: Dict[Entry, Entry] = {}   # this body's entries -> the emitter's
    copied: Dict[int, int] = {}        # node id -> the emitter's copy
    cond_index = {nid: i for i, (nid, _, _) in enumerate(body.conds)}

    def get(ref):
        ref = skeleton._entry(ref)
        return (copied[ref[0]], ref[1]) if ref[0] in copied else emitted[ref]

    for nid, n in enumerate(body.nodes):
        if n["op"] == "null":
            if n["name"] in inputs:
                emitted[(nid, 0)] = inputs[n["name"]]
        elif nid in body.rules:
            copied[nid] = em.copy(n, [get(i) for i in n["inputs"]])
        elif nid in cond_index:
            i = cond_index[nid]
            _, pred, branches = body.conds[i]
            preds[path + (i,)] = get(pred)
            for choice in (True, False):
                branch = branches[choice][0]
                sub_inputs = {name: get(entry) for name, entry in branches[choice][1]}
                _emit_skeleton(branch, sub_inputs, em, preds, site_args, path + (i, choice),
                               loops)
        elif nid in body.site_of:
            site_args[body.site_of[nid]] = [get(i) for i in n["inputs"]]
        elif nid in body.loops and loops is not None:
            loop = body.loops[nid]
            loops[loop.calls[0][0]] = (loop, loop.in_slot_order([get(i) for i in n["inputs"]]))
    return emitted

