"""gluon_cf's own exception types that need no MXNet (the artifact runtime raises them too)."""
import copy
import hashlib
import itertools
import re
import threading
from typing import Dict, Optional, Tuple


class RecursionDepthError(RuntimeError):
    """A recursive function went deeper than its ``max_depth`` (no base case reached)."""


class CallTreeTooLargeError(RecursionDepthError):
    """A batch's recursive call tree grew beyond what one schedule holds (a cycle in the tree
    arrays makes it double at every level long before ``max_depth``)."""


class EscapedArrayError(NotImplementedError):
    """An array computed in an eager remat body (``remat=`` of ``recursive``, ``foreach``,
    ``while_loop``) outlived the body other than as its result, or the body wrote into an
    array made outside it: without the history ``remat=False`` would give it, a loss reading
    it would get a wrong gradient (NOTE [arrays escaping a remat body]). ``where``: the
    user's file and line that made (or wrote) the array."""

    def __init__(self, message, where=None):
        super().__init__(message)
        self.where = where


class AddressSpaceError(MemoryError):
    """An eager recursion stopped because the process's address space came within
    ``ADDRESS_SPACE_HEADROOM`` of its limit (``RLIMIT_AS``, ``ulimit -v``): MXNet aborts the
    process when it runs out inside an operator, so gluon_cf stops first (NOTE [address-space
    headroom] in ``recursion/api.py``). The calls are unwound and what they recorded is freed."""


class TruncationWarning(RuntimeWarning):
    """A loop converted by ``@gluon_cf.autograph`` stopped at its ``max_iterations`` bound while
    its condition still held: its results are those of the first ``max_iterations`` steps.
    Raise the bound, or make this an error with
    ``warnings.simplefilter("error", gluon_cf.TruncationWarning)``."""


class ZeroSizeError(ValueError):
    """An MXNet operator refused an array with a zero-size dimension (the rows of a
    ``boolean_mask`` that kept none, of a loop of exact length that ran no step): MXNet 1.x's
    shape inference reads 0 as "unknown", and many operators cannot compute on such an array,
    eagerly too. Its message names the operator, the user's line, the shapes and what
    computed the zero-size array. Hybridized, it is raised on every call alike, whatever the
    block ran before.

    ``located``: whether the message names the user's line."""

    def __init__(self, message, located=False):
        super().__init__(message)
        self.located = located


# A boolean_mask's 1-D result of no element, by its handle's address -> the message and
# ``located`` of the ZeroSizeError of using it (NOTE [a one-dimensional result of no element]
# in ``graph/partitioned.py``): whatever reads its shape (an operator, a graph, a gluon_cf
# node's rule) raises that instead of MXNet's "Shape is unknown". The oldest are dropped.
_NO_ELEMENT: Dict[Optional[int], Tuple[str, bool]] = {}


def note_no_element(address: Optional[int], message: str, located: bool) -> None:
    """Remember the error of using the array at ``address``, which MXNet cannot hold."""
    _NO_ELEMENT[address] = (message, located)
    while len(_NO_ELEMENT) > 64:
        _NO_ELEMENT.pop(next(iter(_NO_ELEMENT), None), None)


def no_element_error(address: Optional[int]) -> Optional["ZeroSizeError"]:
    """The ZeroSizeError of using the array at ``address`` (:func:`note_no_element`), or None."""
    noted = _NO_ELEMENT.get(address)
    return None if noted is None else ZeroSizeError(noted[0], located=noted[1])


class SymbolFileError(ValueError):
    """A symbol file (``-symbol.json``) or a gluon_cf node's ``spec`` in one is malformed: not
    the JSON MXNet and gluon_cf write, or tampered with. Its message names the file or node and
    what is wrong (NOTE [files are checked before MXNet reads them] in ``symbol_file.py``)."""


def mxnet_message(line: str) -> str:
    """One line of an MXNet error as a user reads it: without MXNet's own name, its C++
    source location and the C++ condition of a failed check ("MXNetError: Error in operator
    n: [12:00:00] ../src/x.h:134: Check failed: assign(...): Incompatible attr ..." ->
    "Error in operator n: Incompatible attr ...")."""
    while line.startswith("MXNetError: "):
        line = line[len("MXNetError: "):]
    line = re.sub(r"\[\d\d:\d\d:\d\d\] \S+:\d+: ", "", line)
    without = re.sub(r"Check failed: [^:]*?: ", "", line).strip()
    if without.endswith(":") or not without:
        # a check that says nothing but its condition (Reshape's "Check failed: src_idx <
        # dshape_len (2 vs. 2) : " for a 0 code past the input's axes): the condition is all
        # there is to read
        return re.sub(r"Check failed: ([^:]*?)\s*:\s*$", r"its check \1 failed", line).strip()
    return without


# Graph nodes named after the user's line (autograph's ``model_line12_index``): name -> the
# ``file:line: source`` it was made at, for MXNet's errors about them (index_error_of)
NAMED_AT: Dict[str, str] = {}
_OPERATOR = re.compile(r"Error in operator ([^:\s]+?)\d*:")
# MXNet's words for an index past an axis (slice, slice_axis, then squeeze of what is empty)
_PAST_THE_AXIS = ("cannot select an axis to squeeze out which has size=0", "Invalid begin",
                  "Invalid end")


def own_line(name, where):
    """``file:line`` of the converted construct node ``name`` is named after (autograph's
    ``model_line12_if``): its own line, not the one the caller's frame had reached once the
    branches were traced (an if's else branch's last); else ``where``."""
    match = re.match(r"(.*?:\d+)(: |$)", NAMED_AT.get(name, ""))
    return match.group(1) if match else where


# ``file:line: source`` of a tensor's index inside a try catching IndexError whose shape was
# not known while traced -> "the try at file:line", for the IndexError of the graph's run
# (NOTE [an index error the user's try catches])
CAUGHT_AT: Dict[str, str] = {}


def several_elements(where, what, shape):
    """The message of an ``if`` (``what``) on an array of ``shape``, not of one element."""
    return (f"{where}: the {what}'s condition is an array of shape {tuple(shape)}; a tensor "
            f"condition must have one element (Python's ValueError: the truth value of an "
            f"array with several elements is ambiguous): reduce it to one (F.sum(c) > 0, "
            f"F.max(c) > 0), or choose elementwise with F.where(c, a, b)")


def named_line(text):
    """``file:line: source`` of the user's line a node named in ``text`` (``(node 'n')``) is
    named after (autograph's ``model_line12_index0``, NAMED_AT), or None."""
    for name in re.findall(r"\(node '([^']+?)\d*'\)", text):
        where = next((at for key, at in NAMED_AT.items() if name.endswith(key)), None)
        if where is not None:
            return where
    return None


def named_after(node_name, kind) -> Optional[str]:
    """``file:line: source`` (NAMED_AT) of the autograph construct of ``kind`` (``"_if"``,
    ``"_index"``) node ``node_name`` is named after (``model_line12_if0``), or None for any
    other node."""
    base = re.sub(r"\d+$", "", node_name)
    return next((at for key, at in NAMED_AT.items()
                 if key.endswith(kind) and base.endswith(key)), None)


# the autograph constructs whose tensor condition a node's predicate is, by the suffix of the
# node's name (node_name in autograph/errors.py), and the word eager's message uses for each
_CONDITIONS = {"_if": "if", "_ifexp": "conditional expression", "_while": "while"}


def condition_line(node_name):
    """``(what, "file:line: source")`` of the autograph ``if``, conditional expression or
    ``while`` whose condition node ``node_name``'s predicate is, the source without its own
    colon (``if x > 0:``: no "::" in a message); or None for any other node."""
    for kind, what in _CONDITIONS.items():
        at = named_after(node_name, kind)
        if at is not None:
            return what, at[:-1] if at.endswith(":") else at
    return None


def index_error_of(err):
    """The IndexError, at the user's line, for MXNet's error ``err`` about a node that indexes
    a tensor with an int past its axis (converted code's ``x[5]`` of 3 rows: eagerly Python's
    IndexError, hybridized MXNet's squeeze or slice error naming only the node); or None."""
    text = str(err)
    match = _OPERATOR.search(text)
    if match is None or not any(words in text for words in _PAST_THE_AXIS):
        return None
    where = named_after(match.group(1), "_index")
    if where is None:
        return None
    caught = CAUGHT_AT.get(where)
    return IndexError(re.sub(r"^(.*?:\d+: .*?):: ", r"\1: ",
                             "%s: index out of range: an int in this index is past the size of "
                             "its axis of the tensor" % where, count=1) + (
        "" if caught is None else
        f"; it is inside {caught}, which catches IndexError, but while hybridizing the "
        f"tensor's shape was not known as the graph was traced (a value a tensor while loop "
        f"carries), so the index fails only as the graph runs and the except is not taken. "
        f"Check the length before reading instead of catching the IndexError"))


# NOTE [where a node was made]
#     A node's spec text -> "file:line" of the user's call that made it, in this process (not
#     in the spec: saved files stay as they were), keyed by a digest of the spec text: the
#     node's identity as MXNet hands it to our callbacks. Node names are not unique: two
#     blocks' name scopes, or fresh ``mx.name.NameManager()`` contexts, each make a
#     ``_foreach0``, and a lookup by name named the other node's line. A node's spec holds its
#     subgraphs, each traced under a name unique in the process, so specs differ; should two
#     specs made at different lines be equal (the same traced function twice), the later one
#     gets an ``instance`` number, which no rule reads.
_CREATED_AT: Dict[bytes, str] = {}
_MAX_CREATED_AT = 100_000
_instances = itertools.count(1)
_created_lock = threading.Lock()


def spec_key(spec_text) -> bytes:
    """A digest of a node's spec text, its identity (NOTE [where a node was made])."""
    return hashlib.sha1(spec_text.encode("utf-8", "surrogatepass")).digest()


def remember_where(spec_text, where, with_instance):
    """Remember that the node of ``spec_text`` was made at ``where``; returns its spec text
    (``with_instance(n)``'s when another node of the same text was made elsewhere)."""
    key = spec_key(spec_text)
    with _created_lock:   # (threads making nodes at once evicted the same keys: a KeyError)
        if len(_CREATED_AT) >= _MAX_CREATED_AT:     # the oldest half goes (a bounded memory)
            for old in list(itertools.islice(_CREATED_AT, _MAX_CREATED_AT // 2)):
                del _CREATED_AT[old]
        if _CREATED_AT.get(key, where) != where:
            spec_text = with_instance(next(_instances))
            key = spec_key(spec_text)
        _CREATED_AT[key] = where
    return spec_text


def where_created(node):
    """``file:line`` of the user's call that made decoded ``node`` here, or None."""
    key = getattr(node, "spec_key", None)
    return _CREATED_AT.get(key) if key is not None else None


def created_at(node):
    """`` at file:line`` of the user's call that made decoded ``node`` (or "")."""
    where = where_created(node)
    return " at %s" % where if where else ""


# NOTE [failed calls read later]
#     A node's forward that fails on MXNet's worker thread is raised when its outputs are read,
#     or at the next ``mx.nd.waitall()``, as MXNet raises its own operators' failures. Such a
#     failure is carried by the call's own outputs (NOTE [failures carried by the outputs] in
#     ``failed_calls.py``), except under NaiveEngine and for calls whose outputs are all empty:
#     those raise into MXNet, whose error then names only its Custom-op callback (custom.cc),
#     not which call failed. Every such failure is kept here, oldest first, and each of MXNet's
#     errors is replaced by the oldest kept; when different ones are pending, the message says
#     that it is the oldest of them. A ``waitall()`` that returns or raises (MXNet's WaitForAll
#     raises the first of its pending failures and forgets the others) drops what is kept
#     (``node.py``; ``mx.npx.waitall`` too). Not ours to solve (round 30), MXNet's engine for
#     every failing op: (1) a call's outputs share one failure; the first read raises it and
#     clears it for the others (``ThrowException`` empties the shared exception_ptr), which
#     then read unwritten memory. (2) An op skipped after a failure marks the resources it was
#     lent (temporary space: nearly every op asks, ``x * 1`` and ``sum`` too) with it; the
#     next op on that copy with clean inputs takes it over and is skipped. A failing call,
#     ``* 1`` after it, then eight ``nd.sum(y, axis=0)`` pushed before the read: two sums read
#     unwritten memory after the call's read raised (as with ``nd.cumsum(a, axis=5) * 1``,
#     no gluon_cf at all). (3) A block hybridized with ``static_alloc=True,
#     static_shape=True`` reuses its arrays and engine operations from call to call: a later
#     call of it run before a failure is read may take it over (review round 30: four such
#     blocks, each called failing, healthy, failing under one record(), read last first: two
#     healthy calls raised their block's failure, two failed calls then read unwritten memory;
#     MXNet's own ``take(mode='raise')`` there: the healthy call read unwritten memory). Ours,
#     left open (review round 30): (4) gluon_cf waits for the whole engine where it must (a
#     ``backward()`` while remat nodes are alive, NOTE [a remat backward reads what it
#     recomputes from] in ``remat_record.py``), and that wait raises the oldest failure
#     pending from any call while MXNet forgets the others: a failed block's output left
#     unread, then a healthy eager remat call's ``backward()`` raised that block's
#     RecursionDepthError, and the block's output then read unwritten memory (marking the
#     kept calls' outputs failed again after such a wait would mend only outputs the node
#     writes itself, and would mark a static_alloc block's next healthy call; a wait on the
#     pass's own gradients instead was built in round 30rw, branch h30rw, not kept: it
#     weakens the wait that stops a hang). (5) Under load, a failed call's output fed to
#     another block's gluon_cf node was once read there as a value (1 run of ~7, four
#     processes busy), that block then failing on it with its own error. Read a failing
#     call's outputs (or ``mx.nd.waitall()``) before computing more; gluon_cf's own carrying
#     ops ask for no resource (NOTE [failures carried by the outputs] in ``failed_calls.py``).
class PendingFailures:
    """Failures of nodes' callbacks on MXNet's worker threads not reported yet, oldest first
    (NOTE [failed calls read later])."""

    LIMIT = 64

    def __init__(self):
        self._lock = threading.Lock()
        self._kept: list = []

    def add(self, exc):
        with self._lock:
            self._kept.append(exc)
            del self._kept[:-self.LIMIT]

    def clear(self):
        with self._lock:
            del self._kept[:]

    def __len__(self):
        return len(self._kept)

    def oldest(self):
        """The oldest failure kept (None if none), said to be one of several when other,
        different ones are pending."""
        with self._lock:
            if not self._kept:
                return None
            exc = self._kept.pop(0)
            others = {str(e) for e in self._kept} - {str(exc)}
            pending = len(self._kept) + 1
        if others and len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc = copy.copy(exc)
            exc.args = ("%s\n(one of %d failed gluon_cf node calls not reported yet, the "
                        "oldest: MXNet's error does not say which; the others are raised when "
                        "their outputs are read or at mx.nd.waitall())" % (exc.args[0], pending),)
        return exc


# a fresh input variable of a gluon_cf trace (tracing.trace): a foreach body's, a while_loop's
# cond or func, a recursive function's, in Gluon's "Unknown input to HybridBlock" error
_UNKNOWN_TRACE_INPUT = re.compile(
    r"^Unknown input to HybridBlock: (_gcf\d+_(foreach|while_loop|recursive)_(.+)_in\d+)$")


# NOTE [a step's value read outside its body]
#     A body that keeps a value of a step in Python (appends it to a list, stores it on
#     ``self``, or ZoneoutCell keeping its previous output between two foreach loops) hands the
#     block's graph a Symbol computed from the body's own input variables; Gluon then refused
#     the graph naming that variable, gluon_cf's internal name, with no line (MXNet's own ops
#     fail alike with "data1-0"). The error names the line of the body that computed the value
#     (the first node reading the variable) and what to do; an AssertionError still, as Gluon's.


def body_value_outside_error(message, nodes, source_attr, forward):
    """The AssertionError for Gluon's "Unknown input to HybridBlock: _gcf3_foreach_body_in0"
    (``message``; ``nodes``: the block's graph's), or None for other errors (NOTE [a step's
    value read outside its body])."""
    match = _UNKNOWN_TRACE_INPUT.match(str(message))
    if match is None:
        return None
    name, op, role = match.groups()
    ids = {k for k, node in enumerate(nodes) if node["op"] == "null" and node["name"] == name}
    lines = [node.get("attrs", {}).get(source_attr) for node in nodes
             if any(entry[0] in ids for entry in node.get("inputs", ()))]
    where = next((line for line in lines if line), None)
    at = "%s: " % where if where else ""
    unknown = "" if where else " (unknown line)"
    function = re.match(r"(.+)_(?:discover|body)$", role)
    if op == "recursive" and function:   # (its trace's role: "down_discover", "down_body")
        # (review round 26r: the role, gluon_cf's trace name, was said, with a loop's advice)
        return AssertionError(
            "%s%s reads a value computed in the gluon_cf.recursive function %r%s from its "
            "arguments, kept by Python code (appended to a list, stored on self): an "
            "invocation's values exist only inside that invocation. Return it from the "
            "function as part of its result and read that instead"
            % (at, forward, function.group(1), unknown))
    return AssertionError(
        "%s%s reads a value computed in a gluon_cf.%s %s%s from the step's inputs, kept by "
        "Python code (appended to a list, stored on self or in a cell's state): a step's "
        "values exist only inside its loop. Return it from the %s as a step output or a loop "
        "state and read that instead" % (at, forward, op, role, unknown, role))


# NOTE [a variable read in a body]
#     A body (a loop's, a cond branch, a recursive function's) that makes its own variable
#     (``F.var("extra")``, ``mx.sym.var``) hands it to the block's graph as a value the node
#     captures, and Gluon then refused the graph with "Unknown input to HybridBlock: extra",
#     naming no line (an AssertionError, as for a free variable in hybrid_forward itself).
#     The error names the line of the body's operator reading it (or of the gluon_cf call)
#     and what to do; an AssertionError still, as Gluon's. A variable read by no gluon_cf node
#     keeps Gluon's own message: plain Gluon code is not ours to reword.
_UNKNOWN_INPUT = re.compile(r"^Unknown input to HybridBlock: (.+)$")


def body_variable_error(message, nodes, source_attr, forward):
    """The AssertionError for Gluon's "Unknown input to HybridBlock: extra" where a gluon_cf
    node of the block's graph (``nodes``) reads that variable, or None (NOTE [a variable read
    in a body])."""
    import json
    match = _UNKNOWN_INPUT.match(str(message))
    if match is None:
        return None
    name = match.group(1)
    ids = {k for k, node in enumerate(nodes) if node["op"] == "null" and node["name"] == name}
    readers = [node for node in nodes if node["op"] == "Custom" and
               node.get("attrs", {}).get("op_type", "").startswith("_gluon_cf_") and
               any(entry[0] in ids for entry in node.get("inputs", ()))]
    if not readers:
        return None
    spec_text = readers[0]["attrs"].get("spec", "")
    op = "gluon_cf." + readers[0]["attrs"]["op_type"][len("_gluon_cf_"):]
    where = _CREATED_AT.get(spec_key(spec_text))
    try:
        graphs = json.loads(spec_text).get("graphs", {}).values()
        body_nodes = [n for g in graphs for n in json.loads(g["json"])["nodes"]]
    except (ValueError, TypeError, KeyError, AttributeError):
        body_nodes = []
    inner = {k for k, node in enumerate(body_nodes) if node["op"] == "null" and
             node["name"] == name}
    lines = [node.get("attrs", {}).get(source_attr) for node in body_nodes
             if any(entry[0] in inner for entry in node.get("inputs", ()))]
    where = next((line for line in lines if line), where)
    at = "%s: " % where if where else "%s (unknown line): " % forward
    return AssertionError(
        "%sa body of %s reads the variable %r (F.var or mx.sym.var), which is neither an "
        "input nor a parameter of the block, so the block's graph has no value for it "
        "(Gluon: \"Unknown input to HybridBlock: %s\"). Pass the value to the block as an "
        "input, make it a Parameter (self.params.get), or compute it in the body (F.ones, "
        "F.zeros)" % (at, op, name, name))
