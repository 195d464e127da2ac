"""Round 31h's harness: programs written once against ``C`` (``C.while_loop``, ``C.foreach``,
``C.cond``), as ported code swaps ``F.contrib``'s for gluon_cf's by import. The oracle runs the
same block with MXNet's own ``F.contrib`` ops (``mx.nd.contrib`` eagerly, ``mx.sym.contrib``
hybridized); programs marked ``ORACLE = "python"`` (autograph, recursion) compare with their
plain Python ``plain_forward`` (or ``hybrid_forward.__wrapped__``) run eagerly on NDArrays."""
import contextlib
import warnings

import mxnet as mx

import gluon_cf
import hostile_harness


class _Contrib:
    """MXNet's own control flow ops, chosen by the inputs' kind (NDArray or Symbol)."""
    @staticmethod
    def _ops(values):
        flat = values if isinstance(values, (list, tuple)) else [values]
        while any(isinstance(v, (list, tuple)) for v in flat):
            flat = [w for v in flat for w in (v if isinstance(v, (list, tuple)) else [v])]
        return mx.sym.contrib if any(isinstance(v, mx.sym.Symbol) for v in flat) else \
            mx.nd.contrib

    def while_loop(self, cond, func, loop_vars, max_iterations=None):
        ops = self._ops(loop_vars)
        steps = [0]

        def counted(*args):
            steps[0] += 1
            return func(*args)
        outs, states = ops.while_loop(cond, counted, loop_vars, max_iterations=max_iterations)
        if ops is mx.nd.contrib:      # (MXNet pads with mx.nd.empty: zeros, as gluon_cf's)
            single = not isinstance(outs, (list, tuple))
            outs = [mx.nd.concat(o[:steps[0]], mx.nd.zeros((o.shape[0] - steps[0],) +
                                                           o.shape[1:], dtype=o.dtype), dim=0)
                    if o.shape[0] > steps[0] else o for o in ([outs] if single else outs)]
            outs = outs[0] if single else outs
        return outs, states

    def foreach(self, body, data, init_states):
        return self._ops([data, init_states]).foreach(body, data, init_states)

    def cond(self, pred, then_func, else_func):
        return self._ops(pred).cond(pred, then_func, else_func)

    @staticmethod
    def recursive(fn=None, **_):
        """Plain Python recursion."""
        return fn if fn is not None else (lambda f: f)


class _Unrolled:
    """Control flow as plain Python on NDArrays (eager only): the oracle where MXNet's own
    eager ops fail (a hybridized child block inside a foreach body fails in backward)."""
    @staticmethod
    def foreach(body, data, init_states):
        many = isinstance(data, (list, tuple))
        states, outs = init_states, []
        for t in range((data[0] if many else data).shape[0]):
            out, states = body([d[t] for d in data] if many else data[t], states)
            outs.append(out)
        single = not isinstance(outs[0], (list, tuple))
        stacked = [mx.nd.stack(*items) for items in zip(*[[o] if single else o
                                                           for o in outs])]
        return (stacked[0] if single else stacked), states

    @staticmethod
    def while_loop(cond, func, loop_vars, max_iterations=None):
        many = isinstance(loop_vars, (list, tuple))
        steps, outs = 0, []
        while steps < max_iterations and \
                cond(*(loop_vars if many else [loop_vars])).asscalar():
            out, loop_vars = func(*(loop_vars if many else [loop_vars]))
            outs.append(out if isinstance(out, (list, tuple)) else [out])
            steps += 1
        stacked = [mx.nd.concat(mx.nd.stack(*items), mx.nd.zeros(
            (max_iterations - steps,) + items[0].shape, dtype=items[0].dtype), dim=0)
            for items in zip(*outs)]
        return stacked, loop_vars

    @staticmethod
    def cond(pred, then_func, else_func):
        return then_func() if pred.asscalar() else else_func()

    recursive = _Contrib.recursive


class _Switch:
    backend = gluon_cf

    def __getattr__(self, name):
        return getattr(type(self).backend, name)


C = _Switch()


class PythonOracle(mx.gluon.HybridBlock):
    """A program whose oracle is its plain Python forward (autograph's)."""
    ORACLE = "python"


def log_add(F, a, b):
    """log(exp(a) + exp(b)), stable: CTC's recursions."""
    m = F.maximum(a, b)
    return m + F.log(F.exp(a - m) + F.exp(b - m))
CONTRIB = _Contrib()
UNROLLED = _Unrolled()


@contextlib.contextmanager
def backend(ops):
    old, _Switch.backend = _Switch.backend, ops
    try:
        yield
    finally:
        _Switch.backend = old


def outcome(cls, arrays, hybridize, ops=gluon_cf, net=None, plain=False, children=True):
    """The :func:`hostile_harness._outcome` of a (fresh unless ``net``) block of ``cls`` on
    ``arrays``, recorded, with ``ops`` as ``C``; ``plain``: its plain Python forward."""
    with backend(ops), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if net is None:
            net = hostile_harness._make(cls)
            if hybridize or not children:
                net.hybridize(hybridize)      # (children the user hybridized too, or none)
        forward = None
        if plain:
            forward = getattr(cls, "plain_forward", None) or cls.hybrid_forward.__wrapped__
        return hostile_harness._outcome(
            lambda: hostile_harness.run_with_gradients(net, arrays, forward=forward))


def oracle(cls, arrays, hybridize):
    """What the program must give: MXNet's F.contrib ops in the same mode, or plain Python."""
    if getattr(cls, "ORACLE", "contrib") == "python":
        return outcome(cls, arrays, False, plain=True)
    # (MXNet's own hybridized loops give garbage gradients or fail where their eager ops
    # run, e.g. a while_loop whose outputs are fed back: the eager ops are the oracle)
    return outcome(cls, arrays, False, ops=CONTRIB)


def fallback_oracle(cls, arrays):
    """Where MXNet's eager ops fail (its own bugs: a hybridized child in a loop body), the
    same with no child hybridized, or the loops unrolled in plain Python."""
    for ops, children in ((CONTRIB, False), (UNROLLED, False)):
        want = outcome(cls, arrays, False, ops=ops, children=children)
        if want[0] == "value":
            return want
    return want


def classify(cls, inputs, files):
    """{"eager"/"hybrid": [kind per input]} against :func:`oracle`, one block per mode
    reused over ``inputs`` (kinds as :func:`hostile_harness.classify_pair`'s)."""
    result = {}
    tol = getattr(cls, "TOL", (1e-5, 1e-6))
    for mode in ("eager", "hybrid"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            net = hostile_harness._make(cls)
            if mode == "hybrid":
                net.hybridize()
        kinds = []
        for arrays in inputs:
            want = oracle(cls, arrays, mode == "hybrid")
            got = outcome(cls, arrays, mode == "hybrid", net=net)
            kind = hostile_harness.classify_pair(want, got, files, tol=tol)
            if want[0] == "error" and got[0] == "error" and type(want[1]) is type(got[1]) \
                    and hostile_harness._unnamed(want[1]) == hostile_harness._unnamed(got[1]):
                kind = "equal-error"           # (MXNet's own failure, the same)
            elif want[0] == "error" and isinstance(want[1], mx.MXNetError) and \
                    got[0] == "value":
                want = fallback_oracle(cls, arrays)
                kind = hostile_harness.classify_pair(want, got, files, tol=tol)
            if kind == "refused" and want[0] == "error":
                kind = "equal-error"
            kinds.append((kind, "" if got[0] == "value" else
                          f"{type(got[1]).__name__}: {str(got[1])[:400]}",
                          "" if want[0] == "value" else
                          f"{type(want[1]).__name__}: {str(want[1])[:200]}"))
        result[mode] = kinds
    return result
