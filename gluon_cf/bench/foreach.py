"""Benchmark: ``gluon_cf.foreach`` vs MXNet's ``F.contrib.foreach`` (the ``_foreach`` op), and
``gluon_cf.while_loop`` vs ``F.contrib.while_loop`` (``--op while_loop``).

Run it with ``python -m gluon_cf.bench.foreach [--quick] [--static] [--op while_loop]``.

A hybridized ``gluon.rnn.LSTMCell`` is scanned over a sequence inside a ``HybridBlock``, once with
each implementation and the same weights. For each configuration the script first checks that
both give the same outputs and gradients, then times inference (forward) and training (forward +
backward) with warm-up, alternating the two implementations between repeats and taking the
median, with ``mx.nd.waitall()`` around every timed call. It prints milliseconds per call, per
scan step, and the ratio gluon_cf / MXNet.

The main configuration is T=100 steps, batch 25, hidden 150, input 150 (target ratio <= 1.2);
hidden 8 shows the per-step overhead, where the body itself costs almost nothing.
"""
import argparse
import statistics
import sys
import time

from typing import Dict, List

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf

IMPLS = ("gluon_cf", "mxnet")


class LSTMScan(gluon.HybridBlock):
    """Scan an LSTMCell over axis 0 of ``seq`` with ``impl``'s foreach."""

    def __init__(self, impl, hidden, input_size, **kwargs):
        super().__init__(**kwargs)
        self.impl = impl
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(hidden, input_size=input_size)

    def hybrid_forward(self, F, seq, h, c):
        foreach = gluon_cf.foreach if self.impl == "gluon_cf" else F.contrib.foreach
        outputs, states = foreach(lambda x, s: self.cell(x, s), seq, [h, c])
        return outputs, states[0], states[1]


class LSTMWhileLoop(LSTMScan):
    """The same scan as a counted ``while_loop`` (step i reads ``seq[i]``), with ``impl``'s
    while_loop; ``max_iterations`` equals the length, so both return unpadded outputs."""

    def hybrid_forward(self, F, seq, h, c):
        while_loop = gluon_cf.while_loop if self.impl == "gluon_cf" else F.contrib.while_loop
        steps = self.steps

        def body(i, h, c):
            out, (h, c) = self.cell(F.reshape(F.take(seq, i), (-3, 0)), [h, c])
            return [out], [i + 1, h, c]

        outputs, (_, h, c) = while_loop(lambda i, h, c: i < steps, body,
                                        [F.zeros((1,)), h, c], max_iterations=steps)
        return outputs[0], h, c


def build(impl, hidden, input_size, static, op="foreach", steps=None):
    if op == "while_loop":
        net = LSTMWhileLoop(impl, hidden, input_size)
        net.steps = steps
    else:
        net = LSTMScan(impl, hidden, input_size)
    mx.random.seed(0)
    net.initialize(mx.init.Uniform(0.1))
    net.hybridize(static_alloc=static, static_shape=static)
    return net


def make_inputs(steps, batch, hidden, input_size):
    rng = np.random.RandomState(0)
    return [mx.nd.array(rng.uniform(-1, 1, size=s))
            for s in ((steps, batch, input_size), (batch, hidden), (batch, hidden))]


def infer(net, inputs):
    outs = net(*inputs)
    mx.nd.waitall()
    return outs


def train_step(net, inputs):
    with autograd.record():
        outs, h, c = net(*inputs)
        loss = outs.sum() + h.sum() + c.sum()
    loss.backward()
    mx.nd.waitall()
    return loss


def _outputs_and_gradients(net, inputs):
    outs = [o.asnumpy() for o in infer(net, inputs)]
    train_step(net, inputs)
    return outs + [p.grad().asnumpy() for p in net.collect_params().values()]


def check_same(nets, inputs, oracle=None):
    """Outputs and parameter gradients of gluon_cf agree with MXNet's, or, when ``oracle``
    (the same block run eagerly) is given, with the oracle's; returns whether MXNet's agree."""
    results = {impl: _outputs_and_gradients(net, inputs) for impl, net in nets.items()}
    expected = results["mxnet"] if oracle is None else _outputs_and_gradients(oracle, inputs)
    for a, b in zip(results["gluon_cf"], expected):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return all(np.allclose(a, b, rtol=1e-4, atol=1e-5)
               for a, b in zip(results["mxnet"], expected))


def time_calls(nets, fn, inputs, warmup, repeats):
    """Median seconds per call for each implementation, interleaved to share any drift."""
    for _ in range(warmup):
        for net in nets.values():
            fn(net, inputs)
    times: Dict[str, List[float]] = {impl: [] for impl in nets}
    for _ in range(repeats):
        for impl, net in nets.items():
            mx.nd.waitall()
            start = time.perf_counter()
            fn(net, inputs)
            mx.nd.waitall()
            times[impl].append(time.perf_counter() - start)
    return {impl: statistics.median(t) for impl, t in times.items()}


def run_config(steps, batch, hidden, input_size, static, warmup, repeats, op="foreach"):
    nets = {impl: build(impl, hidden, input_size, static, op, steps) for impl in IMPLS}
    inputs = make_inputs(steps, batch, hidden, input_size)
    oracle = None
    if op == "while_loop":   # MXNet's hybridized _while_loop is no oracle: see main()
        oracle = build("gluon_cf", hidden, input_size, static, op, steps)
        oracle.hybridize(active=False)
    if not check_same(nets, inputs, oracle):
        print("hidden %d: MXNet's %s gives gradients different from eager (timed anyway)"
              % (hidden, op))
    rows = []
    for mode, fn in (("inference", infer), ("training", train_step)):
        t = time_calls(nets, fn, inputs, warmup, repeats)
        rows.append((hidden, mode, t["gluon_cf"], t["mxnet"], steps))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--static", action="store_true",
                        help="hybridize(static_alloc=True, static_shape=True) for both")
    parser.add_argument("--op", choices=("foreach", "while_loop"), default="foreach",
                        help="the loop compared (default foreach)")
    args = parser.parse_args(argv)
    warmup, repeats = (1, 3) if args.quick else (3, 15)
    steps, batch = 100, 25
    print("%s over an LSTMCell: T=%d, batch=%d, %s, warm-up %d, median of %d"
          % (args.op, steps, batch, "static_alloc" if args.static else "hybridize()", warmup,
             repeats))
    rows = []
    for hidden in (150, 8):
        rows += run_config(steps, batch, hidden, hidden, args.static, warmup, repeats, args.op)
    print("gluon_cf's outputs and gradients match %s (rtol 1e-4)"
          % ("eager Python" if args.op == "while_loop" else "MXNet's"))
    header = "%-6s %-10s %14s %14s %16s %16s %7s" % (
        "hidden", "mode", "gluon_cf ms", "MXNet ms", "gluon_cf ms/step", "MXNet ms/step",
        "ratio")
    print(header)
    print("-" * len(header))
    for hidden, mode, ours, theirs, n in rows:
        print("%-6d %-10s %14.2f %14.2f %16.4f %16.4f %6.2fx"
              % (hidden, mode, ours * 1e3, theirs * 1e3, ours * 1e3 / n, theirs * 1e3 / n,
                 ours / theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
