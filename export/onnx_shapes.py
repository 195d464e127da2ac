"""The shape plan of an ONNX export: every shape of every gluon_cf node, at every nesting level.

NOTE [shape plan]
    ONNX graphs want ranks (a top-level output must declare one, a body input of unknown rank
    defeats shape inference), but with dynamic axes MXNet's inference loses most shapes: its
    legacy semantics treat an unknown dim as an unknown shape.  So before converting we infer
    every shape twice with concrete sizes -- the example's, and the example's with each dynamic
    axis grown -- through every nesting level, and keep per dim what agrees (a dim that
    changed is dynamic: None; a model output's dim that changed exactly like a named input dim
    gets its name).  A run that fails means an axis declared dynamic is not.  A shape known
    only at run time (NOTE [run-time shapes] in gluon_cf/graph/shape_inference.py:
    boolean_mask, exact-length loops, cond branches of different sizes) is kept as what is known of
    it, None for each unknown dim, and a subgraph reading it (a loop over it, a body capturing it)
    is inferred from that, MXNet seeing its unknown dim, 0.  gluon_cf nodes are looked up in the
    plan by their `spec` text (unique per traced call).  Converters called outside export_onnx (no
    plan) fall back to MXNet's partial shapes.
"""
import contextvars
import json
import re

from typing import Dict, List, Optional, Set, Tuple, Union

import mxnet as mx

from gluon_cf import registry
from gluon_cf.errors import mxnet_message
from gluon_cf.operators import DYNAMIC_SHAPE_OPS, SOURCE_ATTR

from .artifact_format import first_line
from .onnx_graph.probing import merge_concrete, more_sizes, planned_shape, probed_shapes
from .onnx_graph.specs import NODE_OF_ERROR

# A shape: per axis its size or None (unknown); None for an unknown rank.
Shape = Optional[Tuple[Optional[int], ...]]
# The shape plan (NOTE [shape plan]): a node's spec text, or ("function", qname) of a recursive
# function, -> (its input shapes, its output shapes).
ShapePlan = Dict[Union[str, Tuple[str, str]], Tuple[List[Shape], List[Shape]]]

# Per top-level node of a model (its name), the conds in it (at any nesting level) whose
# branches return different ranks: (the cond's source line or "", its name, output index, then
# rank, else rank).
RankVarying = Dict[str, List[Tuple[str, str, int, int, int]]]

PLAN: "contextvars.ContextVar[Optional[ShapePlan]]" = contextvars.ContextVar(
    "gluon_cf_onnx_shape_plan", default=None)


def shape_plan(sym, params, examples, dims):
    """NOTE [shape plan]: ``({spec text: (input shapes, output shapes)}, model output shapes,
    per model output the conds of branches of different ranks it reads, NOTE [outputs of
    varying rank])`` with ``None`` for dims that depend on the dynamic axes.

    Unnamed dynamic axes all grow by the same amount (they may have to stay equal); each dim
    name grows by its own, so that model outputs can be given the names of the input dims
    they follow.
    """
    names = sorted({d for axes in dims.values() for d in axes.values() if d is not None})
    base = {name: shape for name, (shape, _) in examples.items()}
    param_shapes = {name: tuple(value.shape) for name, value in params.items()}
    plan: ShapePlan = {}
    varying: RankVarying = {}
    runs, given = [], [base]     # (each run's output shapes and input shapes)
    try:
        arg_shapes = {**param_shapes, **base}
        _collect_shapes(sym, arg_shapes, plan, "the model", varying=varying)
        runs.append(_infer_shapes(sym, arg_shapes, "the model"))
    except (mx.MXNetError, ValueError) as err:
        # (a cond's branch that cannot run on these inputs, run by Gluon until taken, is an
        # error here: ONNX's If holds both branches; its line leads)
        raise _located(ValueError(
            f"{_source_of_failing_node(sym, err)}export_onnx: MXNet cannot infer the model's "
            f"shapes for the example inputs {base}: {mxnet_message(first_line(err))}"),
            err) from None
    first_error = None
    for times in _GROWTHS:     # NOTE [growths a model takes]
        growth = {None: 3 * (times or 0),
                  **{name: (4 + k) * (times or 0) for k, name in enumerate(names)}}
        grown = {name: tuple((d * 2 if times is None else d + growth[dims[name][axis]])
                             if axis in dims[name] else d for axis, d in enumerate(shape))
                 for name, shape in base.items()}
        trial, trial_varying = dict(plan), {key: list(v) for key, v in varying.items()}
        try:
            arg_shapes = {**param_shapes, **grown}
            _collect_shapes(sym, arg_shapes, trial, "the model", varying=trial_varying)
            runs.append(_infer_shapes(sym, arg_shapes, "the model"))
            given.append(grown)
        except (mx.MXNetError, ValueError) as error:
            first_error = first_error or (error, grown)
            continue
        plan, varying, first_error = trial, trial_varying, None
        break
    if first_error is not None:
        failed, grown = first_error
        raise _located(ValueError(
            f"{_source_of_failing_node(sym, failed)}export_onnx: the model's shapes do not "
            f"allow the dynamic axes {dict((n, sorted(a)) for n, a in dims.items() if a)} to "
            f"change (inputs {grown} fail: {mxnet_message(first_line(failed))}); remove "
            f"those axes from dynamic_axes, or give axes that must stay equal the same dim "
            f"name"), failed) from None
    sizes = [d for name, shape in base.items() for axis, d in enumerate(shape)
             if axis in dims[name]]
    low = min(sizes, default=0)

    spread = [0]

    def run_at(far):     # NOTE [dims agreeing by chance]
        shapes = {name: tuple(far + spread[0] * (d - low) if axis in dims[name] else d
                              for axis, d in enumerate(shape))
                  for name, shape in base.items()}
        more: ShapePlan = {}
        try:
            arg_shapes = {**param_shapes, **shapes}
            _collect_shapes(sym, arg_shapes, more, "the model")
            runs.append(_infer_shapes(sym, arg_shapes, "the model"))
            given.append(shapes)
        except (mx.MXNetError, ValueError):
            return False     # (sizes the model does not take: a table of 512 positions)
        _merge_plans(plan, more)
        return True
    if sizes and not more_sizes(run_at, max(sizes)) and len(set(sizes)) > 1:
        spread[0] = 1        # (axes one apart: a target one step longer than its source)
        more_sizes(run_at, max(sizes))
    outputs = [None if None in shapes or len({len(s) for s in shapes}) > 1 else
               tuple(dims_[0] if len(set(dims_)) == 1 else _name_followed(dims_, given, dims)
                     for dims_ in zip(*shapes))
               for shapes in zip(*runs)]
    conds_read = _conds_read_by_outputs(sym, varying)
    for k, conds in enumerate(conds_read):
        if conds and outputs[k] is None and \
                _rank_follows_no_branch(sym, {**param_shapes, **base}, conds, k):
            conds_read[k] = []
    return plan, outputs, conds_read


def _name_followed(sizes, given, dims):
    """The dim name whose input axes had ``sizes`` in every run (``given``: the runs' input
    shapes), else None: an output dim that changed like a named input dim between the example
    and the grown run only (``x[:600]``, named like x's length: 1031 gives 600) is no copy of
    it, and ONNX would read it as one."""
    names = sorted({d for axes in dims.values() for d in axes.values() if d is not None})
    followed = [name for name in names
                if all({shape[axis] for input_name, shape in shapes.items()
                        for axis, named in dims[input_name].items() if named == name} == {size}
                       for size, shapes in zip(sizes, given))]
    return followed[0] if len(followed) == 1 else None


# NOTE [growths a model takes]
#     The grown run adds 3 to every unnamed dynamic axis (4, 5, ... to named ones), but a
#     model may take only some lengths: rows taken two by two (``reshape((-4, -1, 2, 0))``)
#     need an even count, and with an example of 8 rows the grown 11 failed, refused as "the
#     model's shapes do not allow the dynamic axes to change" though every even length runs.
#     Where the grown run fails, twice and four times the growths are tried (6 and 12 keep
#     every length a multiple of 2, 3, 4 or 6 that the example is), then every dynamic axis
#     doubled (``None``: a model taking multiples of 5 or 8 only, patches of 8 steps, was
#     refused, "remove those axes from dynamic_axes", with an example of 16 steps), before
#     refusing. Two names doubled alike may follow the same sizes: an output dim is named
#     only where one name alone follows it (``_name_followed``).
_GROWTHS = (1, 2, 4, None)


def _located(error, mxnet_error):
    """``error`` carrying the name of the node MXNet's ``mxnet_error`` names, so that
    export_onnx leads it with the user's line that made the node where the node carries none
    (a top-level operator of the block's own graph)."""
    named = re.search(r"Error in operator (\S+?):", str(mxnet_error))
    if named is not None and not re.match(r"\S+:\d+: ", str(error)):
        setattr(error, NODE_OF_ERROR, named.group(1))
    return error


def _merge_plans(plan, more):
    """``plan`` keeping of each entry's shapes only the dims that agree with ``more``'s."""
    for key, entry in more.items():
        if isinstance(key, tuple) and key[0] == "runs":   # (every run's concrete shapes,
            plan[key] = plan.get(key, ()) + entry          # NOTE [dims a loop's rows follow])
        elif key in plan and isinstance(entry, tuple):
            plan[key] = tuple([merge_concrete(a, b) for a, b in zip(old, new)]
                              for old, new in zip(plan[key], entry))


# NOTE [dims agreeing by chance]
#     A dim that agrees between the example and the grown run is declared static (NOTE [shape
#     plan]), but a dim may depend on a dynamic axis and still agree at two near sizes: a
#     Pooling's or a strided slice's output length ((n - 1) // 20 + 1 is 1 for n = 5 and 8,
#     2 for n = 30), a slice clipped to a length (``F.slice(x, end=(4,))``: min(n, 4), 4 for
#     5 and 8, 2 for 2). Declared static, it was the dim of a loop body's output, and
#     onnxruntime failed every run of another length ("has shape {1,1,1} but the computed
#     output shape for this run is {1,1,2}"). Two more runs give every dynamic axis the
#     smallest size the model takes (1, else 2, 3, ... 16, then 24, 32, 48 ... 4096, the gap
#     below the first taken bisected: see (1) below) and a size over a thousand (shape
#     inference allocates nothing): a dim of a division by less than that, or of a clip
#     to a constant, differs there. The smallest size, not 1 alone: a sequence truncated to 8
#     steps then convolved with a width of 3 refuses 1 and 2 steps, and with 1 alone the
#     truncated length agreed at 8 for the example's 10, the grown 13 and 1031 and was
#     declared static (an output declared (1, 2, 6) for 3 steps out; a loop body reading it
#     failed in onnxruntime). The first size the model takes below a clip's constant shows
#     the clip; one at or over it shows that every size the model takes gives the constant.
#     A run the model refuses (a table of 512 positions sliced to the length; an operator
#     needing two rows) is left out whole, its shapes kept apart until it completes. Dims
#     agreeing at all runs are static, as MXNet's inference with the unknown dim (0) cannot
#     tell them (it loses most shapes to it).
#     Three holes of that search (review of round 26x), each an output declared static that
#     onnxruntime computed otherwise: (1) the smallest size is found in the list, then
#     bisected in the gap below it (a clip to 20 before a width-17 convolution: 24 was the
#     first size taken, over the clip, and 17 to 23 were never tried); the list goes on to
#     4096 (a pooling of width 1000 takes nothing under it). (2) Examples over 256 add a run at
#     four times the largest (a pooling of stride 1000 over 1500 steps gave 1 at 1031 as at
#     the example). (3) Where the model takes no size with every dynamic axis equal (a
#     target one step longer than its source: ``src + tgt[1:]``), the search runs again with
#     the axes keeping the example's differences (smallest axis at the size); before, only
#     the example and the grown run were left, and a truncation to 8 agreed at both. Equal
#     sizes come first: with the differences kept, the smallest axis's run could leave
#     another axis over its clip. A dim depending on the lengths only through a division by
#     more than four times the example and 1031 still agrees by chance. An output dim is
#     given an input dim's name only where it equals that dim in every run, not only in the
#     example and the grown one (``x[:600]`` was declared x's "seq"; ``_name_followed``).


def _rank_follows_no_branch(sym, arg_shapes, conds, k):
    """Whether output ``k`` of ``sym`` has one rank whichever branch of ``conds`` (one
    top-level cond) runs: inferred with the cond's outputs taken from each branch in turn
    (``F.reshape(c, (-4, 1, -1))`` of a cond of ranks 2 and 1 is of rank 2 either way). Of
    several conds, or one nested in another node, the ranks of every mix are not probed:
    False (refused)."""
    names = {name for _, name, *_ in conds}
    if len(names) != 1:
        return False
    name = names.pop()
    if name not in {node["name"] for node in json.loads(sym.tojson())["nodes"]}:
        return False       # (only a top-level cond: a nested one may run per step)
    ranks = set()
    for branch in ("then", "else"):
        token = registry.COND_BRANCH_SHAPES.set(branch)
        try:
            shape = _infer_shapes(sym, arg_shapes, "the model")[k]
        except (mx.MXNetError, ValueError):
            return False
        finally:
            registry.COND_BRANCH_SHAPES.reset(token)
        ranks.add(None if shape is None else len(shape))
    return None not in ranks and len(ranks) == 1


def _conds_read_by_outputs(sym, varying):
    """Per output of ``sym``: the conds of branches of different ranks (``varying``) in the
    top-level nodes it is computed from."""
    graph = json.loads(sym.tojson())
    found = []
    for head in graph["heads"]:
        conds, stack, seen = [], [head[0]], set()
        while stack:
            idx = stack.pop()
            if idx in seen:
                continue
            seen.add(idx)
            node = graph["nodes"][idx]
            conds += varying.get(node["name"], [])
            stack += [src for src, *_ in node["inputs"]]
        found.append(sorted(set(conds)))
    return found

def _source_of_failing_node(sym, err):
    """``"file:line: "`` of the user's code that made the node MXNet's error ``err`` names
    ("Error in operator <name>:"), searched in ``sym`` and its gluon_cf nodes' subgraphs, or
    ``""``: the dynamic axes a model cannot take are the user's to read at their line."""
    named = re.search(r"Error in operator (\S+?):", str(err))
    if named is None:
        return ""
    graphs = [json.loads(sym.tojson())]
    while graphs:
        for node in graphs.pop()["nodes"]:
            if node["name"] == named.group(1) and node.get("attrs", {}).get(SOURCE_ATTR):
                return f"{node['attrs'][SOURCE_ATTR]}: "
            if registry.kind_of(node) is not None:
                graphs += [json.loads(g["json"]) for g in
                           json.loads(node["attrs"]["spec"]).get("graphs", {}).values()]
    return ""


def _collect_shapes(sym, arg_shapes, plan, where, owner=None, varying=None):
    """Concrete shapes of every gluon_cf node in ``sym`` and, recursively, in its subgraphs,
    merged into ``plan``; the conds of branches of different ranks in ``varying`` under the
    top-level node (``owner``) holding them."""
    internals = sym.get_internals()
    graph = json.loads(internals.tojson())  # its heads are every entry, in order
    entry_shapes = _infer_shapes(internals, arg_shapes, where)
    shape_of = {(head[0], head[1]): entry_shapes[k] for k, head in enumerate(graph["heads"])}
    for idx, node in enumerate(graph["nodes"]):
        kind = registry.kind_of(node)
        if kind is None:
            continue
        spec_text = node["attrs"]["spec"]
        spec = json.loads(spec_text)
        ins = [shape_of[(src, out)] for src, out, *_ in node["inputs"]]
        outs = [shape_of[(idx, k)] for k in range(spec["num_outputs"])]
        if None in outs:   # known only at run time: keep the rank when the rule knows it
            outs = _run_time_ranks(kind, spec_text, ins, outs)
        if spec_text in plan:  # seen in the other run (or elsewhere): keep what agrees
            old_ins, old_outs = plan[spec_text]
            plan[spec_text] = ([merge_concrete(a, b) for a, b in zip(old_ins, ins)],
                               [merge_concrete(a, b) for a, b in zip(old_outs, outs)])
        else:
            plan[spec_text] = (ins, outs)
        # (a tuple, not a list: a trial plan is a shallow copy left behind when its run fails)
        plan[("runs", spec_text)] = plan.get(("runs", spec_text), ()) + ((ins, outs),)
        top = node["name"] if owner is None else owner
        if kind == "invoke":  # the call's argument shapes, for _collect_function_shapes
            plan.setdefault(("calls", spec["function"]), set()).add(tuple(ins))
        if kind == "recursion":
            _collect_function_shapes(spec, ins, plan, node["name"], top, varying)
            continue
        slots = registry.rule_of(kind).slot_shapes(spec, ins)
        branch_outs = {}
        for graph_name, sub in spec["graphs"].items():
            sub_sym = mx.sym.load_json(sub["json"])
            sub_shapes = {name: slots[slot] for name, slot
                          in zip(sub_sym.list_inputs(), sub["inputs"])}
            sub_where = f"the {graph_name!r} graph of node {node['name']!r}"
            _collect_shapes(sub_sym, sub_shapes, plan, sub_where, top, varying)
            if kind == "cond" and varying is not None:
                branch_outs[graph_name] = [
                    s if s is None else len(s)
                    for s in _branch_ranks(sub_sym, sub_shapes, sub_where)]
        if branch_outs and varying is not None:
            varying.setdefault(top, []).extend(
                (node["attrs"].get(SOURCE_ATTR, ""), node["name"], k, a, b)
                for k, (a, b) in enumerate(zip(branch_outs["then"], branch_outs["else"]))
                if a is not None and b is not None and a != b)


def _branch_ranks(sym, arg_shapes, where):
    """The output shapes of a cond's branch as the plan infers them; None where a branch
    needs what is inferred only at run time."""
    try:
        return _infer_shapes(sym, arg_shapes, where)
    except (mx.MXNetError, ValueError):
        return [None] * len(sym.list_outputs())


# A recursive function whose argument shapes change from call to call gets this many
# signatures inferred; its other calls keep the shapes that agree (None elsewhere).
_MAX_SIGNATURES = 32


def _collect_function_shapes(spec, in_shapes, plan, node_name, owner=None, varying=None):
    """The functions of a ``recursion`` node (NOTE [recursion design]): the entry function on
    the node's arguments, every other function on the argument shapes its call sites pass,
    until no new signature appears.  ``plan[("function", qname)]`` gets ``(argument shapes,
    output shapes)`` merged over all signatures, like the entries of the nodes."""
    num_args = spec["num_args"]
    env = list(in_shapes[num_args:])
    todo = [(spec["entry"], tuple(in_shapes[:num_args]))]
    done: Set[Tuple[str, tuple]] = set()   # (qname, argument shapes) seen
    while todo:
        qname, args = todo.pop()
        function = spec["graphs"].get(qname)
        if function is None or (qname, args) in done or any(a is None for a in args) \
                or sum(q == qname for q, _ in done) >= _MAX_SIGNATURES:
            continue
        done.add((qname, args))
        slots = list(args) + env
        sym = mx.sym.load_json(function["json"])
        arg_shapes = {name: slots[slot] for name, slot in zip(sym.list_inputs(),
                                                               function["inputs"])}
        where = f"function {function['name']!r} of recursion node {node_name!r}"
        _collect_shapes(sym, arg_shapes, plan, where, owner, varying)
        outs = _infer_shapes(sym, arg_shapes, where)
        key = ("function", qname)
        if key in plan:
            old_args, old_outs = plan[key]
            plan[key] = ([merge_concrete(a, b) for a, b in zip(old_args, args)],
                         [merge_concrete(a, b) for a, b in zip(old_outs, outs)])
        else:
            plan[key] = (list(args), outs)
        for callee in spec["graphs"]:
            todo.extend((callee, call) for call in plan.get(("calls", callee), ()))


def _infer_shapes(sym, arg_shapes, where):
    """Output shapes of ``sym``, None for a dim known only at run time, or for a whole shape
    whose rank is not known either (NOTE [run-time shapes] in
    gluon_cf/graph/shape_inference.py: what depends on boolean_mask, exact-length loops, cond
    branches of different sizes).  ``arg_shapes`` may hold such dims too (the slots of a loop
    reading a value of run-time shape): MXNet is given them as its unknown dim, 0, and infers the
    rest."""
    known = set(sym.list_inputs())
    given = {name: tuple(0 if d is None else d for d in shape)
             for name, shape in arg_shapes.items() if name in known and shape}
    try:
        args, out_shapes, _ = sym.infer_shape_partial(**given)
    except mx.MXNetError:
        probed = probed_shapes(sym, arg_shapes, known)
        if probed is None:
            raise
        return probed
    # (a slot of no known shape, not even its rank, reads a value of run-time shape: the
    # max over boolean_mask's rows; MXNet infers boolean_mask's output as rank unknown)
    run_time_inputs = any(not registry.is_complete(s) for s in given.values()) or \
        any(name in known and not shape for name, shape in arg_shapes.items())
    if any(not registry.is_complete(s) for s in args or []) and not run_time_inputs \
            and not _run_time_shapes(sym):
        raise ValueError(f"shapes in {where} are not fully determined by the inputs")
    return [planned_shape(s) for s in out_shapes]


def _run_time_ranks(kind, spec_text, ins, outs):
    """``outs`` with each unknown shape replaced by what the op's shape rule knows of it
    (``registry.Dynamic``: the rank, some dims): ONNX needs ranks where it cannot infer them."""
    try:
        _, ruled = registry.rule_of(kind).infer_shape(registry.decode(kind, spec_text), [
            s if s is None or None not in s else None for s in ins])
    except Exception:  # noqa: BLE001 - ranks are a help; without them ONNX's inference decides
        return outs
    return [s.dims if o is None and registry.is_dynamic(s) and s.dims is not None
            else o for o, s in zip(outs, ruled)]


def _run_time_shapes(sym):
    """Whether ``sym`` (or a gluon_cf node in it) can compute a value of run-time shape."""
    text = sym.tojson()
    return any(op in text for op in DYNAMIC_SHAPE_OPS) or registry.OP_PREFIX in text




def merge_dims(converted_shape, planned):
    """A model output's declared shape: per dim, the converted graph's (ONNX's inference, else
    MXNet's partial inference) if known, else the plan's; but where the plan's two concrete
    runs found a dim that changes or is known only at run time (None), never a size: MXNet's
    partial inference, given 0 for a dynamic dim, can return one that holds for the example
    only (``concat`` of a known and an unknown-rank value gives the known one's size), and
    onnxruntime then warns on every run that the model declares a wrong shape."""
    if planned is None:
        return converted_shape
    if converted_shape is None or len(converted_shape) != len(planned):
        return planned
    return tuple(p if o is None or (p is None and isinstance(o, int)) else o
                 for o, p in zip(converted_shape, planned))
