"""``@gluon_cf.recursive(remat=True)`` in eager mode: each call one autograd node.

NOTE [rematerialised recursive calls]
    Under ``autograd.record()`` a call of a recursive function with ``remat=True`` (and, inside
    its body, every nested call of one) becomes one autograd node (``remat.record_node``). Its
    forward runs the body *unrecorded* (``autograd.pause``, training mode kept), so none of its
    intermediates is kept; the nested remat calls it makes are recorded as their own nodes, and
    their (recorded) results are what the body receives. The node keeps

    * the call's arguments, and its results;
    * as inputs: the arguments that were recorded already when the call was made (passed
      through from outside the unrecorded body: the outermost call's arguments, parameters,
      another call's results), the arrays its body reads from its closure
      (``remat.closure_arrays``, through variables standing for them: NOTE [closure
      gradients per backward pass] in ``remat_gates.py``), and the results of the nested
      calls it made.

    Its backward re-runs the body under ``record()`` from the saved arguments, with every
    nested remat call answered, in order, by a fresh leaf (``attach_grad``) holding that call's
    saved results, and backpropagates the node's head gradients through that one call's graph;
    the gradients of the leaves are the gradients of the nested calls' nodes' outputs, which
    MXNet's engine then hands to their backward. So every call's body is computed twice (once
    forward, once in backward), never more, and only one call's intermediates are alive at a
    time; no backward runs inside another (the nesting that can hang MXNet 1.9.1's engine,
    NOTE [nested custom backward] in ``tests/test_remat_nesting.py``): a parent's backward
    sees its children only as leaves. For the same reason a loop run while a call's body is
    recomputed runs without remat (``remat.applies``), as do remat calls in a remat loop's
    body (``wanted``): the enclosing node recomputes them, one step or call at a time.

    A nested call's argument *computed* in the body from values needing a gradient runs the
    call inside its caller's node (NOTE [arguments computed in a remat body]).

    What it refuses, each with an error naming the function and the user's line:

    * such an argument where the caller's checked run passed none at its position: found in
      the parent's backward (the recomputed argument is recorded, the forward's was not).
      Indices computed from indices, and arrays passed through unchanged, are fine;
    * randomness (``Dropout``, ``mx.nd.random.*``): found in the forward, as the user's code in
      the body calls a random operator (the escape watch sees every operator call, a draw
      without inputs too, which MXNet does not record), naming the op and the line (no seed
      is replayed per call: seeding costs ~2 ms, more than a small call); auxiliary state
      (BatchNorm) under training, found in the recomputed graph; any other difference
      between the recomputed results and the forward's fails the backward too, never a
      different gradient (compared in batches of ``_CHECK_EVERY`` calls: a comparison waits
      for the engine);
    * a body in which a gluon_cf node ran as an MXNet Custom operator (its backward would run
      inside the call's, which hung MXNet 1.9.1's engine): found in the forward, by the count
      of node runs (``node.node_runs``) around the body. A hybridized block holding gluon_cf
      ops runs partitioned in a remat body, its nodes inline (``remat.running_body``), so
      this is a guard;
    * an array needing a gradient that the recomputed graph reads but that was not found in
      the closure (its gradient would be lost), and a body reading an array recorded before
      the call (NOTE [values recorded before a remat call]);
    * an array made in the body that outlives it other than as its result (in a list, an
      attribute, a global, a view, the result also stored elsewhere): it carries no history,
      so a loss reading it would get a wrong gradient. Found in the forward, naming the line
      that made it (NOTE [arrays escaping a remat body] in ``remat_escapes.py``; the
      arguments, results and saved results of the nested calls are kept by their nodes);
    * ``remat`` other than ``True``/``False``.

    Hybridized, the unit of recomputation is the recursion node (NOTE [hybridized remat
    recursion] in recursion/planned_backward.py).

NOTE [arguments computed in a remat body]
    A nested call's argument computed in the body from values needing a gradient (a top-down
    recursion passing ``tanh(W h)`` down) has a gradient that would run through the parent's
    graph after the child's backward. Such a call is not a node of its own: it runs inside its
    caller's body, in the forward (paused) and in the caller's recomputation in backward
    (recorded), so its gradients, to the parent's arguments and closure too, are the
    recomputed graph's; the calls it makes are nodes of their own again unless they too take
    such an argument. Which arguments are such is found in the run of a caller recorded to be
    checked (NOTE [values recorded before a remat call]: ``Call.computed``), kept per function
    and argument position for the outermost call, and asked alike of every later call, paused
    or recomputed, so the forward and the recomputation agree. A later call passing such an
    argument where the checked ones did not is refused in its caller's backward, as before.
    This is what hybridized remat does too, whose unit of recomputation is the recursion node
    (round 29r: eagerly such calls were refused).

NOTE [values recorded before a remat call]
    A body may read, from its closure, an array recorded before the outermost call (``z =
    dense(x)``, then ``tanh(cell(f(n - 1)) + z)``). It is not an input of any call's node (only
    arrays with a gradient buffer are found in the closure), and by the time a call's backward
    recomputes the body the user's ``backward`` has cleared ``z``'s history (as for loops,
    NOTE [values recorded before a remat loop] in ``remat.py``): the gradient through ``z``
    was silently lost, or MXNet failed with "any container is empty". So the first call of
    each function under one outermost call runs its body recorded, not paused, on its
    arguments detached (what it passes down reaches the calls below as the arguments
    themselves, ``Call.originals``); its graph (dropped with the body's results), walked from
    its results without entering the autograd nodes recorded during the body (the calls
    below, whose inputs are their own), is refused when it holds an operator recorded before
    the call (MXNet numbers recorded operators from one counter). The same array passed as an
    argument and read as an argument is fine. The first call making no recursive call (a
    base case: leaves reading embeddings computed before the recursion) is run a second time
    so, recorded, after its paused run (only its own body runs twice; nothing below it: a
    counter or print in it shows the second run). Running every call recorded down to the
    first base case instead (each body once) made a chain's forward quadratic in its depth:
    the graph serialised to inspect each recorded body grew with the depth (2.3 s -> 8.6 s
    for 500 -> 1,000 calls; 0.6 s -> 1.3 s with this rule). Later calls run unrecorded and
    are not inspected (as a loop's steps after step 0): a read only on a path neither
    inspected call took, or inside a user's ``autograd.Function`` in the body, is not found.
"""
import threading
from typing import Optional

import mxnet as mx
from mxnet import autograd

from .. import node as _node
from .. import remat as _remat, remat_escapes as _escapes
from .._cachedop import copy_of
from .._graph_json import reached_ids
from .._structure import flatten, regroup
from ..operators import user_location
from ..remat_gates import Gate, in_pass, reached_on_mxnet_thread
from ..remat_record import live_integer
from ..shared_handles import private_leaves

_CHECK_EVERY = 256
_state = threading.local()   # .call: the Call whose body runs now; .replaying: in its backward


def _float(a):
    return isinstance(a, mx.nd.NDArray) and _remat._float(a)


_needs_grad = _remat.live   # a float array marked or recorded from a marked one


def replaying():
    """Whether a remat call's body is being recomputed (its nested calls answer saved leaves)."""
    return getattr(_state, "replaying", False)


def wanted(fn) -> bool:
    """Whether the eager call of ``fn`` now is a rematerialised one: not inside a remat loop's
    run, where calls run as with remat=False, recomputed with the loop (NOTE [nested custom
    backward] in ``tests/test_remat_nesting.py``)."""
    return bool(fn.remat) and (autograd.is_recording() or getattr(_state, "call", None)
                               is not None) and getattr(_remat._inside, "loop", None) is None


class _Root:
    """What the calls below one outermost remat call share."""

    def __init__(self, where):
        self.where = where
        self.training = autograd.is_training()
        self.closures: dict = {}   # RecursiveFunction -> its closure arrays
        self.gates: dict = {}      # RecursiveFunction -> the Gate its calls read for them
        self.checked: set = set()  # functions whose recomputed graph's operators were checked
        self.pending = 0           # calls whose backward has not run
        self.flags: list = []      # comparisons not checked yet (Call._check_values)
        self.read_checked: set = set()   # functions whose forward was run recorded (_reads)
        # function -> the positions of its arguments computed by a caller's body from values
        # needing a gradient (NOTE [arguments computed in a remat body])
        self.computed_arguments: dict = {}

    def closure(self, fn):
        if fn not in self.closures:
            self.closures[fn] = _remat.closure_arrays(fn.fn)
        return self.closures[fn]

    def gated(self, fn):
        """The variables the calls' nodes of ``fn`` read for its closure arrays (NOTE [closure
        gradients per backward pass] in ``remat_gates.py``)."""
        if fn not in self.gates:
            self.gates[fn] = Gate.of(self.closure(fn))
        return self.gates[fn]

    def at(self):
        return " at %s" % self.where if self.where else ""

    def refuse_integer(self, j, fn):
        """NOTE [integers computed from values needing a gradient] in ``remat_record.py``."""
        line = user_location()
        raise NotImplementedError(
            "gluon_cf.recursive%s: with remat, argument %d of the call to %r%s is an array of an "
            "integer type computed from values needing a gradient; MXNet passes gradients "
            "through Cast to integer types, and remat does not carry them through the "
            "arguments of recursive calls (NOTE [integers computed from values needing a "
            "gradient]): compute it from indices only, .detach() it if it needs no gradient, "
            "or use remat=False" % (self.at(), j, fn.name, " at %s" % line if line else ""))


class Call:
    """One rematerialised call: what its node keeps and its backward."""

    def __init__(self, fn, root, args, fmt):
        self.fn, self.root, self.args, self.fmt = fn, root, args, fmt
        root.pending += 1
        # An argument is live if recorded when the call was made (passed through, see NOTE);
        # not one a parent run recorded (to inspect its reads) computed: run paused, as the
        # parent's other runs are, it is not recorded.
        parent = getattr(_state, "call", None)
        self.live = [_needs_grad(a) and not (parent is not None and parent.computed(a))
                     for a in args]
        self.children: list = []
        # the children's outputs: this call's node's inputs; a call does not hold its own
        # (its node's callback holds the call: the cycle would keep both for good)
        self.child_outputs: list = []
        self.out_fmt = None
        self.next_child = 0
        self.leaves: list = []
        self.originals: dict = {}   # id(detached argument) -> argument, while checked
        self.first_node = None      # the first operator recorded by its body, while checked

    # -- forward ----------------------------------------------------------------------------

    def forward(self):
        parent = getattr(_state, "call", None)
        runs = _node.node_runs()
        # The first call of each function runs recorded, and so again does its first call
        # making no recursive call (a base case): their graphs show reads of arrays recorded
        # before the call (NOTE [values recorded before a remat call]).
        read_checked = self.root.read_checked
        check = self.fn not in read_checked
        read_checked.add(self.fn)
        watches: list = []   # one per run of the body (NOTE [arrays escaping a remat body])
        try:
            return self._forward(parent, runs, check, watches)
        finally:
            for watch in watches:
                watch.release()

    def _forward(self, parent, runs, check, watches):
        read_checked = self.root.read_checked
        flat = self._run_body(parent, check, watches)
        draws = [d for watch in watches for d in watch.draws]
        if draws:   # refused here, before any recomputation could draw other numbers
            op, name, line = draws[0]
            self._refuse_operators([op], " at %s:%s" % (name, line) if name else "")
        if _node.node_runs() != runs:
            raise NotImplementedError(
                "gluon_cf.recursive%s: remat=True for %r whose body runs a hybridized block "
                "holding gluon_cf ops (cond, loops, recursion) is not supported (their backward "
                "inside the call's hangs MXNet 1.9.1's engine); use remat=False, or the block "
                "without hybridize()" % (self.root.at(), self.fn.name))
        if not self.children and (self.fn, "base") not in read_checked:
            read_checked.add((self.fn, "base"))
            if not check:   # re-run recorded (no recursive call: nothing else runs twice)
                self._run_body(parent, True, watches)
                if self.children:
                    self._differ()
        outputs = _remat.fresh(flat)
        self.saved = [o.detach() for o in outputs]
        self.inputs = self._pairs_inputs()
        with autograd.record(train_mode=self.root.training):
            _remat.record_node(self.inputs, outputs, self.backward)
        del flat   # the body's own results: what is alive now escaped
        for watch in watches:
            watch.check(self._refuse_escape)
        _escapes.keep(self.args + outputs + self.saved)   # (from the parent's body)
        if parent is not None:
            parent.children.append(self)
            parent.child_outputs.append(outputs)
        return regroup(outputs, self.out_fmt)[0]

    def _refuse_escape(self, what, where):
        raise _escapes.EscapedArrayError(
            "gluon_cf.recursive%s: with remat, an array %s by the body of %r outlives the call "
            "other than as its result (kept in a list, an attribute, a dict or a global, a view "
            "of a body's array or of its result, or the result also stored elsewhere): the "
            "body runs unrecorded, so that array carries no gradient and a loss reading it "
            "would get a wrong one (NOTE [arrays escaping a remat body]). Return it from the "
            "call, compute it outside the remat function, .detach() it if it needs no "
            "gradient, or use remat=False" % (self.root.at(), what, self.fn.name), where)

    def _run_body(self, parent, check, watches):
        """The body's flat results, run paused; or, to ``check`` its reads, recorded on its
        arguments detached (NOTE [values recorded before a remat call]); what it makes is
        watched by a watch added to ``watches`` (NOTE [arrays escaping a remat body])."""
        _state.call, in_body = self, getattr(_remat._inside, "call", False)
        _remat._inside.call = True   # (remat.running_body)
        first_node = self.first_node = _remat.next_recorded_node() if check else None
        try:
            if check:   # arguments detached: their history is not the body's reads
                detached = [a.detach() if isinstance(a, mx.nd.NDArray) else a
                            for a in self.args]
                self.originals = {id(d): a for d, a in zip(detached, self.args)}
                with autograd.record(train_mode=self.root.training):
                    watches.append(_escapes.Watch())
                    result = self.fn.fn(*regroup(detached, self.fmt))
            else:
                with autograd.pause(train_mode=self.root.training):
                    watches.append(_escapes.Watch())
                    result = self.fn.fn(*regroup(self.args, self.fmt))
        finally:
            if watches:
                watches[-1].stop()
            _state.call, _remat._inside.call = parent, in_body
            self.originals, self.first_node = {}, None
        flat, self.out_fmt = flatten([result], "gluon_cf.recursive",
                                     "the results of %r" % self.fn.name)
        _remat._throttle(flat)   # one call at a time (NOTE [rematerialisation]'s _throttle)
        if check:
            self._refuse_reads_before(flat, first_node)
        return flat

    def computed(self, array):
        """Whether ``array`` was computed by this call's body run recorded (to inspect its
        reads), from an array needing a gradient: an operator recorded by the body made it."""
        if self.first_node is None or array.grad is not None:
            return False
        graph = _remat.recorded_graph(array)
        number = _operator_number(graph["nodes"][graph["heads"][0][0]])
        return number is not None and number >= self.first_node

    def _refuse_reads_before(self, flat, first_node):
        """Refuse a body that read an array recorded before its call other than through its
        arguments (NOTE [values recorded before a remat call]): ``flat``'s recorded graph,
        walked from the heads without entering the nodes of the calls below (autograd nodes
        recorded during the body), holds an operator numbered below ``first_node``."""
        heads = [h for h in flat if _float(h) and _node.recorded(h)]
        if not heads:
            return
        graph = _remat.recorded_graph(*heads)   # (NOTE [tojson keeps custom nodes alive])
        nodes = graph["nodes"]

        def before(n):
            k = _operator_number(n)
            return n["op"] != "null" and k is not None and k < first_node

        def entering(n):
            if n["op"] == "null" or _operator_number(n) is None or before(n) or \
                    n["op"] == "_CustomFunction":   # a call below: its inputs are its own
                return ()
            return [e[0] for e in n["inputs"]]
        outside = [nodes[i] for i in reached_ids(nodes, [h[0] for h in graph["heads"]], entering)
                   if before(nodes[i])]
        if outside:
            raise NotImplementedError(
                "gluon_cf.recursive%s: with remat, %r reads an array computed under "
                "autograd.record() before the call (from its closure: the result of %s); the "
                "recomputation in backward cannot reach that array's history, so the gradient "
                "through it would be lost. Pass it to the call as an argument, or use "
                "remat=False" % (self.root.at(), self.fn.name, outside[-1]["op"]))

    def _pairs_inputs(self):
        """The node's inputs: live arguments, closure arrays, nested calls' results (unique)."""
        seen, inputs = set(), []
        for a in ([a for a, live in zip(self.args, self.live) if live] +
                  self.root.gated(self.fn).variables +
                  [o for outs in self.child_outputs for o in outs]):
            if id(a) not in seen:
                seen.add(id(a))
                inputs.append(a)
        return inputs

    # -- backward ---------------------------------------------------------------------------

    def backward(self, out_grads):
        args = [copy_of(a) if isinstance(a, mx.nd.NDArray) else a for a in self.args]
        pairs = []   # (the node's input it stands for, the leaf the recomputed graph reads)
        for real, copy, live in zip(self.args, args, self.live):
            if live:
                copy.attach_grad()
                pairs.append((real, copy))
        gate = self.root.gated(self.fn)
        pairs += list(zip(gate.variables, gate.closure))
        for child, outputs in zip(self.children, self.child_outputs):
            child.leaves = [o.copy() for o in child.saved]
            for real, leaf in zip(outputs, child.leaves):
                if _float(leaf):
                    leaf.attach_grad()
                    pairs.append((real, leaf))
        self.next_child = 0
        saved_state = (getattr(_state, "call", None), replaying(), _remat._inside.__dict__.get(
            "loop"))
        _state.call, _state.replaying = self, True
        _remat._inside.loop = "gluon_cf.recursive %r%s" % (self.fn.name, self.root.at())
        try:   # See NOTE [inputs shared between threads]
            with autograd.record(train_mode=self.root.training), private_leaves():
                result = self.fn.fn(*regroup(args, self.fmt))
        finally:
            _state.call, _state.replaying, _remat._inside.loop = saved_state
        _remat.recomputed.add(1)
        flat, _ = flatten([result], "gluon_cf.recursive", "the results of %r" % self.fn.name)
        recorded = [h for h in flat if _float(h) and _node.recorded(h)]
        if recorded and self.fn not in self.root.checked:
            self._check_operators(_remat.recorded_graph(*recorded))
        if self.next_child != len(self.children):
            self._differ()
        if len(flat) != len(self.saved):
            self._differ()
        self._check_values([_remat._differs(o, kept) for o, kept in zip(flat, self.saved)])
        keep = _node.merged_heads([(h, g) for h, g in zip(flat, out_grads)
                                   if _float(h) and _node.recorded(h)])
        grads: dict = {}
        if keep:
            sym = mx.sym.Group([autograd.get_symbol(h) for h, _ in keep])
            reached = set(sym.list_inputs())
            leaves = {_remat._leaf_name(leaf): (real, leaf) for real, leaf in pairs}
            _remat.refuse_unknown_leaves(reached, leaves, "gluon_cf.recursive%s" % self.root.at(),
                                         repr(self.fn.name), "Pass them as arguments")
            used = [leaves[n] for n in sorted(reached) if n in leaves]
            if gate.sparse and any(id(leaf) in gate.sparse for _, leaf in used):
                raise NotImplementedError(
                    "gluon_cf.recursive%s: remat=True for %r whose body reads an array with a "
                    "gradient of storage type %r (an Embedding with sparse_grad=True?): remat "
                    "carries dense gradients only. Use sparse_grad=False or remat=False"
                    % (self.root.at(), self.fn.name, next(
                        leaf.grad.stype for _, leaf in used if id(leaf) in gate.sparse)))
            if gate.closure and not in_pass(gate):
                self._refuse_unseen_pass(gate)
            gate.reading([leaf for _, leaf in used])
            if used:
                values = autograd.grad([h for h, _ in keep], [leaf for _, leaf in used],
                                       [g for _, g in keep], train_mode=self.root.training)
                for (real, _), g in zip(used, values):
                    grads[id(real)] = g if id(real) not in grads else grads[id(real)] + g
        for child in self.children:   # the saved leaves go with this backward
            child.leaves = []
        return [grads.get(id(a)) for a in self.inputs]

    def _refuse_unseen_pass(self, gate):
        """No pass moves what this backward reads (NOTE [closure gradients per backward
        pass] in ``remat_gates.py``)."""
        # Its pass had ended (NOTE [a backward inside a Custom operator's backward]).
        if reached_on_mxnet_thread(gate):
            raise RuntimeError(
                "gluon_cf.recursive%s: remat=True for %r is differentiated by a backward "
                "started inside a Custom operator's or autograd.Function's backward, and "
                "the backward pass that held these calls' thread's lock when it started (the "
                "recording thread's, or one reaching the calls) has ended, which would leave "
                "their parameters' gradients unwritten: backpropagate them outside that "
                "backward, or use remat=False" % (self.root.at(), self.fn.name))
        raise RuntimeError(
            "gluon_cf.recursive%s: remat=True for %r is differentiated by a backward "
            "gluon_cf does not see (MXNet's autograd.backward, autograd.grad or "
            "NDArray.backward bound before gluon_cf was imported, e.g. `from "
            "mxnet.autograd import backward`), which would leave its parameters' "
            "gradients unwritten: import gluon_cf first and call autograd.backward "
            "/ autograd.grad through the module" % (self.root.at(), self.fn.name))

    def inlines(self, fn, args):
        """Whether the nested call ``fn(*args)`` made by this call's body runs in the body, as
        part of this call's node (NOTE [arguments computed in a remat body])."""
        flat, _ = flatten(list(args), "gluon_cf.invoke", "the arguments of %r" % fn.name)
        computed = self.root.computed_arguments.setdefault(fn, set())
        if self.first_node is not None and not replaying():   # (a run recorded to check it)
            computed.update(j for j, a in enumerate(flat)   # (a walk of a's record: once)
                            if j not in computed and _needs_grad(a) and self.computed(a))
        return any(j in computed for j, a in enumerate(flat) if _float(a))

    def replay(self, fn, args):
        """A nested remat call met while recomputing this call's body: its saved results."""
        if self.next_child >= len(self.children) or self.children[self.next_child].fn is not fn:
            self._differ()
        child = self.children[self.next_child]
        self.next_child += 1
        flat, _ = flatten(list(args), "gluon_cf.invoke", "the arguments of %r" % fn.name)
        for j, (a, live) in enumerate(zip(flat, child.live)):
            if live_integer(a):   # (recorded now, paused in the forward)
                self.root.refuse_integer(j, fn)
            if not live and _needs_grad(a):
                raise NotImplementedError(
                    "gluon_cf.recursive%s: with remat, argument %d of a call to %r is computed "
                    "in the body of %r from values needing a gradient; remat does not carry "
                    "gradients through the arguments of recursive calls (NOTE [rematerialised "
                    "recursive calls]): pass only indices (or arrays unchanged) down, or use "
                    "remat=False" % (self.root.at(), j, fn.name, self.fn.name))
        return regroup(child.leaves, child.out_fmt)[0]

    def _check_values(self, flags):
        """Compare the recomputed results with the forward's, in batches (a comparison waits
        for the engine): when every call below the outermost has run its backward, or every
        ``_CHECK_EVERY`` calls."""
        root = self.root
        root.flags.extend(f for f in flags if f is not None)
        root.pending -= 1
        if root.flags and (root.pending <= 0 or len(root.flags) >= _CHECK_EVERY):
            flags, root.flags = root.flags, []
            if mx.nd.add_n(*flags).asscalar() > 0:
                self._differ()

    def _check_operators(self, graph):
        """Refuse randomness and auxiliary state, once per function and outermost call (the
        comparison with the forward's results catches any other difference)."""
        self.root.checked.add(self.fn)
        ops = {n["op"] for n in graph["nodes"]}
        from ..operators import AUX_STATE_OPS
        bad = sorted(op for op in ops if _remat.is_random_op(op))
        if self.root.training:
            bad += sorted(ops & AUX_STATE_OPS)
        if bad:
            self._refuse_operators(bad)

    def _refuse_operators(self, bad, where=""):
        raise NotImplementedError(
            "gluon_cf.recursive%s: remat=True for %r whose body runs %s%s: recomputing a call "
            "would draw different random numbers or update running statistics twice. Use "
            "remat=False" % (self.root.at(), self.fn.name, ", ".join(bad), where))

    def _differ(self):
        raise RuntimeError(
            "gluon_cf.recursive%s: with remat, recomputing a call of %r in backward gave "
            "different values or made different recursive calls than the forward (randomness, "
            "a body that is not deterministic, or parameters or arrays it reads written "
            "between the forward and this backward (a Trainer.step between two backward "
            "passes of one record(): backpropagate the heads before the step, together or "
            "one by one), so its gradient would not be that of the forward: use remat=False"
            % (self.root.at(), self.fn.name))


def _operator_number(n):
    """The number MXNet's autograd gave the recorded operator of JSON node ``n`` (None for
    others)."""
    name = n["name"]
    return int(name[5:]) if name.startswith("node_") and name[5:].isdigit() else None


def inlined(fn, args) -> bool:
    """Whether the call ``fn(*args)`` runs inside its caller's body, not as a node of its own
    (NOTE [arguments computed in a remat body])."""
    parent = getattr(_state, "call", None)
    return parent is not None and parent.inlines(fn, args)


def call(fn, args, where: Optional[str] = None):
    """The eager call ``fn(*args)`` rematerialised (NOTE [rematerialised recursive calls])."""
    parent = getattr(_state, "call", None)
    if inlined(fn, args):
        return fn.fn(*args)   # NOTE [arguments computed in a remat body]
    if replaying():
        return _state.call.replay(fn, args)
    root = parent.root if parent is not None else _Root(where)
    flat, fmt = flatten(list(args), "gluon_cf.invoke", "the arguments of %r" % fn.name)
    for j, a in enumerate(flat):
        if live_integer(a):
            root.refuse_integer(j, fn)
    if parent is not None:   # an argument the parent received detached, as received
        flat = [parent.originals.get(id(a), a) for a in flat]
        return Call(fn, root, flat, fmt).forward()
    with _escapes.hooks():   # (NOTE [arrays escaping a remat body])
        return Call(fn, root, flat, fmt).forward()


def inside() -> bool:
    """Whether a remat call's body runs now (so a call is a nested one)."""
    return getattr(_state, "call", None) is not None
