"""Converts the user's ``except`` clauses and ``with`` statements: a refusal (an
AutographError) raised in their ``try`` or ``with`` goes on to the user instead of being
caught (NOTE [a refusal the user's code catches])."""
import ast
import copy
import itertools

from ..pyct.templates import runtime_call, thunk
from .base import Converter
from ..pyct.nodes import child_nodes, replace_statements

# NOTE [a refusal the user's code catches]
#     An AutographError is a ValueError (what a construct that cannot run as a graph, or a use
#     of a variable without a value, would be in Python), so the user's ``except Exception:``
#     or ``except ValueError:`` around it would catch it and run the fallback: hybridized,
#     ``try: s = x.sum().asscalar() / except Exception: s = 0.0`` silently computed with 0.0
#     where eager code uses the sum. Each ``except`` clause the user wrote in converted code
#     re-raises an AutographError first (``__ag__.refusal_caught``), unless it names
#     ``AutographError`` itself (a fallback the user chose), and an ``except*`` clause one in
#     the group it caught; ``contextlib.suppress`` called by converted code is one that does
#     not suppress it, and the context manager of a ``with`` (a user's class whose
#     ``__exit__`` returns True, a ``@contextlib.contextmanager`` whose generator catches)
#     does not suppress it either (``__ag__.refusals_kept``). Except an AmbiguousTruthError:
#     the truth of an NDArray of several elements, where plain Python raises its own
#     ValueError on the same values; catching that one is Python's (a Symbol's is refused
#     as an AutographError, which goes on: its fallback would be the graph for every shape). The
#     refusals of ``x op= v`` and of an exception leaving a tensor loop also surface when the
#     function returns (``call_results.surfacing_refusals``), whatever caught them.
_NAMES = itertools.count(1)


def _suspends(body):
    """Whether ``body`` yields or awaits (not in functions it defines): a generator left
    suspended inside ``__ag__.catching`` would leave its entry on the stack."""
    pending = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            pending.extend(child_nodes(node))
    return False


def _read_alone(expr):
    """Whether an ``except`` clause's expression only reads names (``IndexError``,
    ``mx.MXNetError``, a tuple of them): read again by ``__ag__.catching`` when no exception
    reached the clause. Another (``except errors():``, whose call Python makes only when an
    exception reaches it) is left out: the index inside is left as it was, past its axis
    failing as the graph runs (NOTE [an index error the user's try catches])."""
    if isinstance(expr, ast.Tuple):
        return all(_read_alone(e) for e in expr.elts)
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


# NOTE [a finally that jumps]
#     Python's ``finally`` left by a ``return``, ``break`` or ``continue`` drops whatever the
#     ``try`` raised: ``try: for r in x: h = h + r * x[9] / finally: return h * 3`` returns.
#     Converted, a jump inside a loop is a flag assignment (NOTE [autograph jumps]), which
#     drops nothing, so the error went on eagerly, and hybridized an index past a traced
#     shape failed as the graph ran (no handler was known to catch it). Before the jumps'
#     rewrite, such a ``try`` becomes ``try: <the try without its finally> / except
#     BaseException: pass / finally: ...`` where its ``finally`` ends in a jump on every
#     path, else ``__ag_pending_N = None / try: ... / except BaseException as e:
#     __ag_pending_N = e / finally: ... / __ag__.raised_pending(__ag_pending_N)`` (after
#     the ``finally``'s statements, which a jump's flag skips): what Python does, written
#     as a handler, so that ``__ag__.catching`` knows an IndexError is caught (NOTE [an
#     index error the user's try catches]) and a refusal still goes on (NOTE [a refusal
#     the user's code catches]); as the jump drops it as Python drops any error, it is
#     also made known to ``surfacing_refusals`` (``__ag__.refusal_kept``), raised as the
#     function returns (dropped, the rest of the ``try`` did not run: other values
#     hybridized, silently, review r30ag). The jump also replaces the
#     ``try``'s own pending jump (``return h`` in the body, ``finally: continue``): the
#     jumps' rewrite clears those flags as the ``finally`` jumps (``jumps._cancelling``).
#     A loop's ``else`` is not inside that loop: its ``break`` leaves the ``finally``.
def _always_jumps(block):
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Break, ast.Continue)):
        return True
    if isinstance(last, ast.If):
        return _always_jumps(last.body) and _always_jumps(last.orelse)
    return False


def _jumps(block, in_loop=False):
    """Whether ``block`` holds a jump leaving it (not a nested function's, nor a nested
    loop's break or continue)."""
    for statement in block:
        if isinstance(statement, ast.Return) or not in_loop and isinstance(
                statement, (ast.Break, ast.Continue)):
            return True
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        looping = in_loop or isinstance(statement, (ast.For, ast.While, ast.AsyncFor))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(statement, field, None)
            # (a loop's else is not inside it: its break or continue leaves the finally)
            if isinstance(inner, list) and _jumps(inner, looping if field == "body"
                                                  else in_loop):
                return True
        if any(_jumps(part.body, looping) for part in
               getattr(statement, "handlers", []) + getattr(statement, "cases", [])):
            return True
    return False


def finally_jumps_as_handlers(func):
    """Rewrite, in ``func``, each ``try`` whose ``finally`` jumps (NOTE [a finally that
    jumps])."""
    replace_statements(func, lambda statement: _handled(statement) if isinstance(
        statement, ast.Try) and _jumps(statement.finalbody) else None)


def _handled(statement):
    inner = statement.body if not (statement.handlers or statement.orelse) else \
        [ast.copy_location(ast.Try(body=statement.body, handlers=statement.handlers,
                                   orelse=statement.orelse, finalbody=[]), statement)]
    number = next(_NAMES)
    pending, caught = f"__ag_pending_{number}", f"__ag_exc_{number}"
    always = _always_jumps(statement.finalbody)
    handler = ast.ExceptHandler(
        type=ast.Name("BaseException", ast.Load()), name=caught,
        body=[ast.Pass() if always else ast.Assign(
            targets=[ast.Name(pending, ast.Store())], value=ast.Name(caught, ast.Load()))])
    setattr(handler, "ag_kept", True)   # (a refusal it drops surfaces: visit_ExceptHandler)
    finalbody = statement.finalbody + ([] if always else [ast.Expr(runtime_call(
        "raised_pending", [ast.Name(pending, ast.Load())]))])
    out = ([] if always else [ast.Assign(targets=[ast.Name(pending, ast.Store())],
                                         value=ast.Constant(None))]) + \
        [ast.Try(body=inner, handlers=[handler], orelse=[], finalbody=finalbody)]
    for part in out:
        ast.copy_location(part, statement)
        for node in ast.walk(part):
            if not hasattr(node, "lineno") and isinstance(node, (ast.stmt, ast.expr,
                                                                 ast.excepthandler)):
                ast.copy_location(node, statement)
    return out


def _inside(body, entered):
    """``body`` run inside ``with <entered>:``; in a generator, each run of statements between
    its yields (a yield's value computed inside, the yield outside: a generator suspended
    inside would leave its entry on ``catching``'s stack; round 31ag: ``try: yield x[5]`` /
    ``except IndexError:`` in a generator raised hybridized where Python's handler ran)."""
    if not _suspends(body):
        return [ast.copy_location(ast.With(items=[ast.withitem(
            context_expr=copy.deepcopy(entered))], body=body), body[0])]
    out: list = []
    run: list = []
    for statement in body + [None]:
        if statement is not None and not _suspends([statement]):
            run.append(statement)
            continue
        if run:
            out += _inside(run, entered)
            run = []
        if statement is None:
            break
        value = getattr(statement, "value", None)
        if isinstance(statement, (ast.Expr, ast.Assign)) and isinstance(value, ast.Yield) \
                and value.value is not None and not _suspends([value.value]):
            name = f"__ag_yielded_{next(_NAMES)}"
            out += _inside([ast.copy_location(ast.Assign(
                targets=[ast.Name(name, ast.Store())], value=value.value), statement)],
                entered)
            value.value = ast.copy_location(ast.Name(name, ast.Load()), value)
        else:       # (an if's or loop's own statements; a yield from as it is)
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner and \
                        not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef)):
                    setattr(statement, field, _inside(inner, entered))
            for part in getattr(statement, "handlers", []) + getattr(statement, "cases", []):
                part.body = _inside(part.body, entered)
        out.append(statement)
    return out


class ExceptionsConverter(Converter):
    """The user's ``except`` clauses and ``with`` statements."""

    def visit_With(self, node):
        self.generic_visit(node)
        if node in self.parents:
            for item in node.items:
                item.context_expr = ast.copy_location(
                    runtime_call("refusals_kept", [item.context_expr]), item.context_expr)
        return node

    def visit_Try(self, node):
        # its body inside ``__ag__.catching``: NOTE [an index error the user's try catches]
        self.generic_visit(node)
        if node in self.parents and node.handlers and node.body:
            types = ast.Tuple(elts=[ast.Constant(None) if h.type is None else
                                    h.type if _read_alone(h.type) else ast.Constant(False)
                                    for h in node.handlers], ctx=ast.Load())
            what = ast.Constant("the try at " + self.where(node).split(": ", 1)[0])
            entered = runtime_call("catching", [what, thunk(types)])
            node.body = _inside(node.body, entered)
        return node

    # (``except* IndexError`` catches a bare IndexError too, as a group of it)
    visit_TryStar = visit_Try

    def visit_ExceptHandler(self, node):
        self.generic_visit(node)
        if node not in self.parents or node.type is not None and \
                "AutographError" in ast.unparse(node.type):
            return node
        if node.name is None:
            node.name = f"__ag_caught_{next(_NAMES)}"
        node.body.insert(0, ast.copy_location(ast.Expr(value=runtime_call(
            "refusal_kept" if getattr(node, "ag_kept", False) else "refusal_caught",
            [ast.Name(id=node.name, ctx=ast.Load())])), node))
        return node
