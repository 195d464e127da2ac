"""Benchmark: what shapes known only at run time save (issue 12, item 6).

Run it with ``python -m gluon_cf.bench.dynamic [--quick]``. Every comparison first checks that
its variants give the same outputs (and, for training, gradients), then times them in turns,
``mx.nd.waitall()`` around every timed call, and prints the median and the ratios.

1. **Decode, then re-score** (one hybridized block): greedy decoding with Embedding + LSTMCell +
   Dense (vocabulary 1,000, hidden 256) in a ``while_loop`` bounded by 100 steps, stopping at
   the sequence's own length (5-30, standing for the end-of-sequence token), followed by a
   bidirectional LSTM re-scorer over the decoded tokens. *exact*: ``exact_length=True``, the
   re-scorer reads as many steps as were decoded; *padded*: MXNet's padded shape (100 rows),
   the re-scorer reads 100 steps with ``sequence_length`` masking; *eager*: the same block
   without ``hybridize()``.
2. **Packed sequences**: an LSTM encoder (hidden 512) over a mini-batch of 32 sequences of
   lengths 10-60, rows sorted by length. *packed*: each ``foreach`` step runs the cell on the
   rows still active only (``boolean_mask``), as PyTorch's ``pack_padded_sequence`` does;
   *padded*: every row runs every step, masked. Outputs: each row's final state; training
   differentiates them. PyTorch packed vs padded (``nn.LSTM``) joins the table when torch is
   installed (``pip install -e ".[torch]"``).
3. **Static shapes did not get slower**: ``gluon_cf.foreach`` vs MXNet's ``_foreach``
   (``gluon_cf.bench.foreach``, hidden 150).
"""
import argparse
import statistics
import sys
import time

from typing import Dict, List

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

import gluon_cf

VOCAB, HIDDEN_DECODER, MAX_STEPS = 1000, 256, 100
HIDDEN_ENCODER, BATCH, MIN_LEN, MAX_LEN = 512, 32, 10, 60


# ---------------------------------------------------------------------- decode, then re-score

class FlatLSTM(gluon.HybridBlock):
    """An LSTM layer as one ``RNN`` operator on one flat parameter vector, batch 1.
    (``gluon.rnn.LSTM`` concatenates its four weight arrays into that vector on every call:
    ``_rnn_param_concat``, 2 ms here, more than the RNN itself; both variants would pay it.)"""

    def __init__(self, hidden):
        super().__init__()
        self.hidden = hidden
        with self.name_scope():
            self.weights = self.params.get("weights", shape=(8 * hidden * hidden + 8 * hidden,))

    def hybrid_forward(self, F, x, weights):
        state = F.zeros((1, 1, self.hidden))
        return F.RNN(x, weights, state, state, state_size=self.hidden, num_layers=1,
                     mode="lstm")


class DecodeRescore(gluon.HybridBlock):
    """Greedy decoding from ``start`` for ``length`` steps (at most MAX_STEPS), then a
    bidirectional LSTM score of the decoded tokens."""

    def __init__(self, exact):
        super().__init__()
        self.exact = exact
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, HIDDEN_DECODER)
            self.cell = gluon.rnn.LSTMCell(HIDDEN_DECODER, input_size=HIDDEN_DECODER)
            self.project = gluon.nn.Dense(VOCAB, in_units=HIDDEN_DECODER)
            # The bidirectional re-scorer as two LSTMs: MXNet's CPU RNN has no
            # sequence_length, so the padded variant reverses each sequence within its length
            # itself (SequenceReverse).
            self.forward_lstm = FlatLSTM(HIDDEN_DECODER)
            self.backward_lstm = FlatLSTM(HIDDEN_DECODER)
            self.score = gluon.nn.Dense(1, in_units=2 * HIDDEN_DECODER, flatten=False)

    def hybrid_forward(self, F, start, length):
        def keep_going(token, h, c, i):
            return i < length

        def step(token, h, c, i):
            out, (h, c) = self.cell(self.embed(token), [h, c])
            token = F.argmax(self.project(out), axis=1)
            return token, [token, h, c, i + 1]

        zeros = F.zeros((1, HIDDEN_DECODER))
        tokens, (_, _, _, steps) = gluon_cf.while_loop(
            keep_going, step, [start, zeros, zeros, F.zeros((1,))], max_iterations=MAX_STEPS,
            exact_length=self.exact)
        embedded = self.embed(tokens)                     # (steps, 1, H): time-major
        if self.exact:
            backward = F.reverse(self.backward_lstm(F.reverse(embedded, axis=0)), axis=0)
            encoded = F.concat(self.forward_lstm(embedded), backward, dim=2)
            return tokens, self.score(encoded).sum()

        def reverse(v):   # each sequence within its own length
            return F.SequenceReverse(v, sequence_length=steps, use_sequence_length=True)
        backward = reverse(self.backward_lstm(reverse(embedded)))
        encoded = F.concat(self.forward_lstm(embedded), backward, dim=2)
        valid = F.broadcast_lesser(F.arange(MAX_STEPS).reshape((-1, 1, 1)),
                                   steps.reshape((1, 1, 1)))
        return tokens, F.broadcast_mul(self.score(encoded), valid).sum()


def decode_variants():
    mx.random.seed(0)
    reference = DecodeRescore(exact=True)
    reference.initialize(mx.init.Uniform(0.1))
    start = nd.array([1])
    reference(start, nd.array([5]))
    variants = {}
    for name, exact, hybridize in (("exact", True, True), ("padded", False, True),
                                   ("eager", True, False)):
        net = DecodeRescore(exact=exact)
        net.initialize()
        for mine, theirs in zip(net.collect_params().values(),
                                reference.collect_params().values()):
            mine.set_data(theirs.data())
        if hybridize:
            net.hybridize()
        variants[name] = net
    return variants


def run_decode(variants, lengths, repeats):
    start = nd.array([1])
    for length in lengths[:3]:   # the same tokens and score, padding aside
        results = {}
        for name, net in variants.items():
            tokens, score = net(start, nd.array([length]))
            results[name] = (tokens.asnumpy()[:length], float(score.asscalar()))
        for name in ("padded", "eager"):
            np.testing.assert_array_equal(results[name][0], results["exact"][0])
            np.testing.assert_allclose(results[name][1], results["exact"][1], rtol=1e-4)

    def call(net, length):
        _, score = net(start, nd.array([length]))
        score.wait_to_read()

    return _time_turns(variants, lambda net: [call(net, n) for n in lengths], repeats)


# ------------------------------------------------------------------------------ packed sequences

class Encoder(gluon.HybridBlock):
    """An LSTMCell over time-major ``seq`` (T, B, H) whose rows, sorted by length, are active
    while ``t < lengths[row]``; returns each row's final state."""

    def __init__(self, packed):
        super().__init__()
        self.packed = packed
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN_ENCODER, input_size=HIDDEN_ENCODER)

    def hybrid_forward(self, F, seq, lengths, h0, c0):
        def body(x_t, states):
            h, c, t = states
            active = F.broadcast_greater(lengths, t)   # rows sorted: the active ones first
            if self.packed:
                # The indices of the active rows (never none: the longest row is active at
                # every step; a zero-size value would be MXNet 1.x's "unknown shape"): one
                # boolean_mask, whose output size costs a host synchronisation, then cheap
                # takes; the new states are written back into the batch.
                rows = F.contrib.boolean_mask(F.contrib.arange_like(active), active)
                pick = lambda v: F.take(v, rows)  # noqa: E731
                _, (h_new, c_new) = self.cell(pick(x_t), [pick(h), pick(c)])
                h = F.contrib.index_copy(h, rows, h_new)
                c = F.contrib.index_copy(c, rows, c_new)
            else:
                _, (h_new, c_new) = self.cell(x_t, [h, c])
                keep = active.reshape((-1, 1))
                h = F.where(F.broadcast_like(keep, h), h_new, h)
                c = F.where(F.broadcast_like(keep, c), c_new, c)
            return [], [h, c, t + 1]

        _, (h, c, _) = gluon_cf.foreach(body, seq, [h0, c0, F.zeros((1,))])
        return h, c


def packed_variants():
    variants = {}
    for name in ("packed", "padded"):
        mx.random.seed(0)
        net = Encoder(packed=name == "packed")
        net.initialize(mx.init.Uniform(0.1))
        net.hybridize()
        variants[name] = net
    return variants


def encoder_inputs(seed=0):
    rng = np.random.RandomState(seed)
    lengths = np.sort(rng.randint(MIN_LEN, MAX_LEN + 1, size=BATCH))[::-1].copy()
    lengths[0] = MAX_LEN
    seq = rng.uniform(-1, 1, size=(MAX_LEN, BATCH, HIDDEN_ENCODER)).astype(np.float32)
    zeros = np.zeros((BATCH, HIDDEN_ENCODER), np.float32)
    return seq, lengths.astype(np.float32), zeros


def _encoder_step(net, inputs, train):
    seq, lengths, zeros = inputs
    args = [nd.array(seq), nd.array(lengths), nd.array(zeros), nd.array(zeros)]
    if not train:
        h, c = net(*args)
        return [h.asnumpy(), c.asnumpy()]
    with autograd.record():
        h, c = net(*args)
        loss = (h * h).sum() + c.sum()
    loss.backward()
    return [h.asnumpy()] + [p.grad().asnumpy() for p in net.collect_params().values()]


def run_packed(variants, inputs, repeats):
    for train in (False, True):
        results = {name: _encoder_step(net, inputs, train) for name, net in variants.items()}
        for a, b in zip(results["packed"], results["padded"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return {mode: _time_turns(variants, lambda net: _encoder_step(net, inputs, mode == "train"),
                              repeats)
            for mode in ("infer", "train")}


def run_torch_packed(inputs, repeats):
    """PyTorch's nn.LSTM on the same batch, packed (``pack_padded_sequence``) and padded (every
    row every step, each row's state read at its length); the two are checked equal. None
    without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    torch.set_num_threads(2)
    lstm = torch.nn.LSTM(HIDDEN_ENCODER, HIDDEN_ENCODER)
    seq = torch.tensor(inputs[0])
    lengths = torch.tensor(inputs[1]).long()
    rows = torch.arange(BATCH)

    def packed(train):
        with torch.set_grad_enabled(train):
            _, (h, _) = lstm(torch.nn.utils.rnn.pack_padded_sequence(seq, lengths))
            h = h[0]
            if train:
                (h * h).sum().backward()
        return h

    def padded(train):
        with torch.set_grad_enabled(train):
            out, _ = lstm(seq)
            h = out[lengths - 1, rows]
            if train:
                (h * h).sum().backward()
        return h

    np.testing.assert_allclose(packed(False).numpy(), padded(False).numpy(), rtol=1e-4,
                               atol=1e-5)
    fns = {"packed": packed, "padded": padded}
    return {mode: _time_turns(fns, lambda fn: fn(mode == "train"), repeats)
            for mode in ("infer", "train")}


# --------------------------------------------------------------------------------- timing

def _time_turns(variants, fn, repeats):
    """Median seconds per call of ``fn(variant)`` for each variant, taking turns."""
    for variant in variants.values():
        fn(variant)
    times: Dict[str, List[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, variant in variants.items():
            mx.nd.waitall()
            start = time.perf_counter()
            fn(variant)
            mx.nd.waitall()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 9
    rng = np.random.RandomState(1)
    lengths = [int(n) for n in rng.randint(5, 31, size=8 if args.quick else 20)]

    decode = run_decode(decode_variants(), lengths, repeats)
    print("1. decode then re-score (greedy, vocabulary %d, hidden %d, max_iterations %d, "
          "lengths 5-30, %d sequences per timing): same tokens and scores"
          % (VOCAB, HIDDEN_DECODER, MAX_STEPS, len(lengths)))
    print("   ms per sequence: exact %.2f, padded %.2f, eager %.2f" % tuple(
        decode[k] * 1e3 / len(lengths) for k in ("exact", "padded", "eager")))
    print("   exact vs padded %.2fx (target >= 2), exact vs eager %.2fx (target >= 3)"
          % (decode["padded"] / decode["exact"], decode["eager"] / decode["exact"]))

    inputs = encoder_inputs()
    packed = run_packed(packed_variants(), inputs, repeats)
    print("2. packed sequences (LSTM hidden %d, batch %d, lengths %d-%d): same final states "
          "and gradients" % (HIDDEN_ENCODER, BATCH, MIN_LEN, MAX_LEN))
    torch_times = run_torch_packed(inputs, repeats)
    for mode in ("infer", "train"):
        line = "   %-5s ms: packed %.1f, padded %.1f, packed vs padded %.2fx (target >= 1.5)" % (
            mode, packed[mode]["packed"] * 1e3, packed[mode]["padded"] * 1e3,
            packed[mode]["padded"] / packed[mode]["packed"])
        if torch_times is not None:
            t = torch_times[mode]
            line += "; PyTorch packed %.1f, padded %.1f (%.2fx)" % (
                t["packed"] * 1e3, t["padded"] * 1e3, t["padded"] / t["packed"])
        print(line)
    if torch_times is None:
        print("   (PyTorch not installed: pip install -e \".[torch]\" adds its columns)")

    from . import foreach as foreach_bench
    rows = foreach_bench.run_config(100, 25, 150, 150, False, 1, repeats)
    print("3. static shapes: gluon_cf.foreach / MXNet _foreach (LSTM hidden 150, T=100): "
          + ", ".join("%s %.2fx" % (mode, ours / theirs) for _, mode, ours, theirs, _ in rows)
          + " (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
