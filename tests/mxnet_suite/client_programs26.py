"""Real client code of MXNet 1.9.1's ``F.contrib`` control flow, ported as small excerpts for
``test_client_code26.py`` (NOTE [other client code of F.contrib]). Each excerpt keeps its
source's license and URL in the comment above it; changes are marked "gluon_cf:". The code
calls ``F.contrib.X`` / ``mx.sym.contrib.X`` as upstream does, so the test switches it by
replacing MXNet's ops, as client code switches by import.
"""
import mxnet as mx
from mxnet import gluon
from mxnet.gluon import contrib, nn

import gluonnlp

# --------------------------------------------------------------------------------------------
# apache/mxnet 1.9.1, benchmark/python/control_flow/rnn.py
# https://github.com/apache/mxnet/blob/1.9.1/benchmark/python/control_flow/rnn.py
# Licensed to the Apache Software Foundation (ASF) under one or more contributor license
# agreements; the ASF licenses this file to you under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0), distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND.
# gluon_cf: states are passed as separate arguments (*states) so that a hybridized block takes
# them; the state lists are rebuilt with list(states).


class ForeachRNN(gluon.HybridBlock):
    def __init__(self, cell, length, prefix=None, params=None):
        super(ForeachRNN, self).__init__(prefix=prefix, params=params)
        self.length = length
        self.cell = cell

    def hybrid_forward(self, F, inputs, *states):
        out, states = F.contrib.foreach(self.cell, inputs, list(states))
        return out


class WhileRNN(gluon.HybridBlock):
    def __init__(self, cell, length, prefix=None, params=None):
        super(WhileRNN, self).__init__(prefix=prefix, params=params)
        self.length = length
        self.cell = cell

    def hybrid_forward(self, F, inputs, *states):
        def _func(*states):
            i = states[0]
            s = states[1: ]
            data = inputs.take(i).squeeze(axis=0)
            out, new_s = self.cell(data, s)
            new_s = [i + 1] + new_s
            return out, new_s
        out, states = F.contrib.while_loop(
            cond=lambda i, *_: i < self.length,
            func=_func,
            loop_vars=list(states),
            max_iterations=self.length,
        )
        return out


# --------------------------------------------------------------------------------------------
# apache/mxnet 1.9.1, tests/python/unittest/test_gluon_contrib.py (TestRNNLayer, the block of
# test_dynamic_unroll; dynamic_unroll itself is MXNet's, calling F.contrib.foreach)
# https://github.com/apache/mxnet/blob/1.9.1/tests/python/unittest/test_gluon_contrib.py
# Apache License, Version 2.0 (ASF header as above).
# gluon_cf: input_size given (MXNet's hybridized foreach cannot infer a deferred parameter's
# shape); valid_length before the states, which are separate arguments.


class TestRNNLayer(gluon.HybridBlock):
    def __init__(self, cell_type, hidden_size, layout, prefix=None, params=None):
        super(TestRNNLayer, self).__init__(prefix=prefix, params=params)
        self.cell = cell_type(hidden_size, prefix='rnn_', input_size=4)
        self.layout = layout

    def hybrid_forward(self, F, inputs, valid_length, *states):
        return contrib.rnn.rnn_cell.dynamic_unroll(self.cell, inputs, list(states),
                                                   valid_length=valid_length,
                                                   layout=self.layout)


# --------------------------------------------------------------------------------------------
# gluonnlp 0.10.0 (installed), gluonnlp.model.BiLMEncoder: two F.contrib.foreach a layer over
# LSTMPCellWithClip, with SequenceReverse by a mask. Only this wrapper is gluon_cf's.


class BiLM(gluon.HybridBlock):
    def __init__(self, masked, **kwargs):
        super().__init__(**kwargs)
        self.masked = masked
        with self.name_scope():
            self.enc = gluonnlp.model.BiLMEncoder(
                mode="lstmpc", num_layers=2, input_size=4, hidden_size=6, proj_size=4,
                cell_clip=1.0, proj_clip=1.0, skip_connection=True)

    def hybrid_forward(self, F, x, mask, *flat_states):
        it = iter(flat_states)
        states = [[[next(it), next(it)] for _ in range(2)] for _ in range(2)]
        out, states = self.enc(x, states, mask if self.masked else None)
        return [out] + [s for direction in states for layer in direction for s in layer]


# --------------------------------------------------------------------------------------------
# awslabs/sockeye 2.3.24, sockeye/layers.py (SSRU, training-time cell state transform)
# https://github.com/awslabs/sockeye/blob/2.3.24/sockeye/layers.py
# Copyright 2017--2020 Amazon.com, Inc. or its affiliates. All Rights Reserved.
# Licensed under the Apache License, Version 2.0 (http://aws.amazon.com/apache2.0/).
# gluon_cf: QuantizableDense is plain nn.Dense; the inference-only path (no loop) left out.


class SSRU(gluon.HybridBlock):
    def __init__(self, model_size, **kwargs):
        super(SSRU, self).__init__(**kwargs)
        with self.name_scope():
            self.forget_gate = nn.Dense(in_units=model_size, units=model_size,
                                        activation="sigmoid", flatten=False,
                                        prefix="forget_gate_")
            self.linear = nn.Dense(in_units=model_size, units=model_size, use_bias=False,
                                   flatten=False, prefix="linear_")

    @staticmethod
    def _training_cell_state_transform(F, previous_cell_state, weighted_inputs, forget_rates):
        def _time_step_update(step_input_and_forget_rate, previous_step_state):
            step_input, forget_rate = step_input_and_forget_rate
            current_step_state = forget_rate * previous_step_state + step_input
            return current_step_state, current_step_state

        weighted_inputs = F.transpose(weighted_inputs, axes=(1, 0, 2))
        forget_rates = F.transpose(forget_rates, axes=(1, 0, 2))
        cell_state, last_step_state = F.contrib.foreach(_time_step_update,
                                                        [weighted_inputs, forget_rates],
                                                        previous_cell_state)
        return F.transpose(cell_state, axes=(1, 0, 2)), last_step_state

    def hybrid_forward(self, F, inputs, previous_states):
        forget_rates = self.forget_gate(inputs)
        weighted_inputs = (1 - forget_rates) * self.linear(inputs)
        cell_state, last_step_state = self._training_cell_state_transform(
            F, previous_states, weighted_inputs, forget_rates)
        return F.relu(cell_state), last_step_state


# --------------------------------------------------------------------------------------------
# awslabs/gluonts v0.8.1, src/gluonts/mx/distribution/binned.py (Binned.quantile)
# https://github.com/awslabs/gluonts/blob/v0.8.1/src/gluonts/mx/distribution/binned.py
# Copyright 2018 Amazon.com, Inc. or its affiliates. All Rights Reserved.
# Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
# gluon_cf: a HybridBlock taking the distribution's bin_probs and bin_centers as inputs. Its
# foreach mixes a float32 and an int32 state and returns an outer value as each step's output.


class BinnedQuantile(gluon.HybridBlock):
    def hybrid_forward(self, F, bin_probs, bin_centers, level):
        probs = bin_probs.transpose()
        zeros_batch_size = F.zeros_like(
            F.slice_axis(bin_probs, axis=-1, begin=0, end=1).squeeze(axis=-1))
        level = level.expand_dims(axis=0)
        zeros_cdf = F.broadcast_add(zeros_batch_size.transpose().expand_dims(axis=-1),
                                    level.zeros_like())
        start_state = (zeros_cdf, zeros_cdf.astype("int32"))

        def step(p, state):
            cdf, idx = state
            cdf = F.broadcast_add(cdf, p.expand_dims(axis=-1))
            idx = F.where(F.broadcast_greater(cdf, level), idx, idx + 1)
            return zeros_batch_size, (cdf, idx)

        _, states = F.contrib.foreach(step, probs, start_state)
        _, idx = states
        centers_expanded = F.broadcast_add(
            bin_centers.transpose().expand_dims(axis=-1),
            zeros_cdf.expand_dims(axis=0)).transpose()
        return centers_expanded.pick(idx.transpose(), axis=-1)


# --------------------------------------------------------------------------------------------
# icemelon/tvm, tests/python/frontend/mxnet/test_control_flow.py (test_while's Scan, whose
# hybridized graph _cached_graph[1] TVM's MXNet frontend imports)
# https://github.com/icemelon/tvm/blob/4114a8a3b19deaeb50a2905c83278fafb1fe7105/tests/python/frontend/mxnet/test_control_flow.py
# Apache License, Version 2.0 (Apache TVM).
N_SCAN = 5


class Scan(gluon.HybridBlock):
    def hybrid_forward(self, F, data):
        def sum(state, i):
            s = state + F.take(data, i)
            return [s], [s, i + 1]

        def sum_cond(state, i):
            return i < N_SCAN
        out, state = F.contrib.while_loop(sum_cond, sum,
                                          [F.zeros((1)), F.zeros((1))], max_iterations=5)
        return out, state


# apache/tvm, tests/python/frontend/mxnet/test_forward.py (test_forward_cond's symbol)
# https://github.com/apache/tvm/blob/main/tests/python/frontend/mxnet/test_forward.py
# Apache License, Version 2.0 (ASF header as above).
def tvm_forward_cond():
    a_sym, b_sym = mx.sym.var("a"), mx.sym.var("b")
    pred = a_sym * b_sym < 5
    then_func = lambda: (a_sym + 5) * (b_sym + 5)  # noqa: E731 (upstream's lambdas)
    else_func = lambda: (a_sym - 5) * (b_sym - 5)  # noqa: E731
    return mx.sym.contrib.cond(pred, then_func, else_func)


# icemelon/tvm test_control_flow.py's test_cond (URL above)
def tvm_cond():
    x = mx.sym.var('x')
    y = mx.sym.var('y')
    z = mx.sym.var('z')

    def then_func():
        return x + z

    def else_func():
        return mx.sym.square(y)
    return mx.sym.contrib.cond(mx.sym.min(x) < mx.sym.min(y), then_func, else_func)


# --------------------------------------------------------------------------------------------
# awslabs/keras-apache-mxnet 2.2.4.3, keras/backend/mxnet_backend.py
# https://github.com/awslabs/keras-apache-mxnet/blob/2.2.4.3/keras/backend/mxnet_backend.py
# MIT License. Copyright (c) 2015 - 2018, François Chollet, Google, Microsoft and the other
# contributors (see the repository's LICENSE). The symbols of
# multi_hot_sparse_categorical_crossentropy and of rnn()'s foreach with a mask (its
# SimpleRNN step reduced to one dense transition). gluon_cf: KerasSymbol wrappers removed.


def keras_multi_hot_ce():
    output, target = mx.sym.var("output"), mx.sym.var("target")
    mx_output = mx.sym.broadcast_div(output, mx.sym.sum(output, axis=-1, keepdims=True))
    mx_output = mx.sym.clip(mx_output, a_min=1e-7, a_max=1.0 - 1e-7)
    _step = lambda data, _: (mx.sym.take(data[0], data[1]), [])  # noqa: E731
    outputs, _ = mx.symbol.contrib.foreach(_step, [mx_output, target], [])
    return - mx.sym.sum(mx.sym.broadcast_greater_equal(target, mx.sym.zeros((1, 1)))
                        * mx.sym.log(outputs), axis=-1)


def keras_rnn_masked(units=None):
    """``units`` ``(input, hidden)``: the weights declared with their shapes and an
    initializer, as Keras' variables are (what ``Module.bind`` needs)."""
    inputs, mask, h0 = mx.sym.var("inputs"), mx.sym.var("mask"), mx.sym.var("h0")
    shapes = {} if units is None else {"W": units, "U": units[1:] * 2, "b": units[1:]}
    kernel, recurrent, bias = [
        mx.sym.var(n, shape=shapes.get(n), init=mx.init.Uniform(0.5) if shapes else None)
        for n in ("W", "U", "b")]

    def _step(data, states):
        h_tm1 = states[0]
        x, m = data[0], data[1]
        h = mx.sym.tanh(mx.sym.broadcast_add(mx.sym.dot(x, kernel), bias)
                        + mx.sym.dot(h_tm1, recurrent))
        h = mx.sym.where(m, h, h_tm1)
        return h, [h]
    axes = [1, 0, 2]
    data = [mx.sym.transpose(inputs, axes=axes), mx.sym.transpose(mask, axes=axes)]
    outputs, states = mx.symbol.contrib.foreach(_step, data, [h0])
    return mx.sym.Group([mx.sym.transpose(outputs, axes), states[0]])


# --------------------------------------------------------------------------------------------
# dmlc/gluon-nlp v0.10.0, tests/unittest/test_sequence_sampler.py (test_beam_search's
# RNNDecoder, the decoder its HybridBeamSearchSampler runs; the sampler is gluonnlp's, its
# F.contrib.while_loop and F.contrib.cond switched)
# https://github.com/dmlc/gluon-nlp/blob/v0.10.0/tests/unittest/test_sequence_sampler.py
# Apache License, Version 2.0. gluon_cf: log_softmax added (upstream's comment says a real
# decoder has one).


class RNNDecoder(gluon.HybridBlock):
    def __init__(self, vocab_size, hidden_size, prefix=None, params=None):
        super(RNNDecoder, self).__init__(prefix=prefix, params=params)
        self._vocab_size = vocab_size
        with self.name_scope():
            self._embed = nn.Embedding(input_dim=vocab_size, output_dim=hidden_size)
            self._rnn = gluon.rnn.RNNCell(input_size=hidden_size, hidden_size=hidden_size)
            self._map_to_vocab = nn.Dense(vocab_size, in_units=hidden_size)

    def hybrid_forward(self, F, inputs, states):
        out, states = self._rnn(self._embed(inputs), states)
        log_probs = self._map_to_vocab(out).log_softmax()
        return log_probs, states


def beam_search_sampler(vocab_size=5, batch_size=2):
    """gluonnlp's HybridBeamSearchSampler over :class:`RNNDecoder`, initialised alike."""
    mx.random.seed(0)
    decoder = RNNDecoder(vocab_size, 3)
    decoder.initialize(mx.init.Xavier())
    return gluonnlp.model.HybridBeamSearchSampler(
        beam_size=2, decoder=decoder, eos_id=vocab_size - 1,
        scorer=gluonnlp.model.BeamSearchScorer(alpha=0, K=1.0), max_length=4,
        vocab_size=vocab_size, batch_size=batch_size)
