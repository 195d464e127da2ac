"""More real client code of MXNet 1.9.1's ``F.contrib`` control flow, ported as small excerpts
for ``test_client_code27.py`` (NOTE [other client code of F.contrib] in
``test_client_code26.py``). Each excerpt keeps its source's license and URL in the comment above
it; changes are marked "gluon_cf:". The code calls ``F.contrib.X`` / ``nd.contrib.X`` /
``mx.sym.contrib.X`` as upstream does, so the test switches it by replacing MXNet's ops, as
client code switches by import.
"""
import functools
import math
from typing import List, Union

import mxnet as mx
from mxnet import gluon, nd
from mxnet.gluon import HybridBlock, nn

# --------------------------------------------------------------------------------------------
# apache/mxnet 1.5.0, docs/tutorials/control_flow/ControlFlowTutorial.md (examples 1-4, 6)
# https://github.com/apache/mxnet/blob/1.5.0/docs/tutorials/control_flow/ControlFlowTutorial.md
# Licensed to the Apache Software Foundation (ASF) under one or more contributor license
# agreements; the ASF licenses this file to you under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0), distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND.
# gluon_cf: the tutorial's print() of RNNLayer left out; the Tutorial* wrappers (ours) take
# the state lists as separate arguments.


def add1(data, _):
    return data + 1, []


class Map(HybridBlock):
    def hybrid_forward(self, F, data):
        out, _ = F.contrib.foreach(add1, data, [])
        return out


def sum_state(data, state):   # gluon_cf: the tutorial's name is sum, defined twice
    return [], state + data


class Scan(HybridBlock):
    def hybrid_forward(self, F, data):
        _, state = F.contrib.foreach(sum_state, data, F.zeros((1)))
        return state


def sum_both(data, state):
    return state + data, state + data


class ScanV2(HybridBlock):
    def hybrid_forward(self, F, data):
        out, state = F.contrib.foreach(sum_both, data, F.zeros((1)))
        return out, state


class DynamicRNNLayer(HybridBlock):
    def __init__(self, cell, prefix=None, params=None):
        super(DynamicRNNLayer, self).__init__(prefix=prefix, params=params)
        self.cell = cell

    def hybrid_forward(self, F, inputs, begin_state, valid_length):
        states = begin_state
        zeros = []
        for s in states:
            zeros.append(F.zeros_like(s))
        # the last state is the iteration number.
        states.append(F.zeros((1)))

        def loop_body(inputs, states):
            cell_states = states[:-1]
            # Get the iteration number from the states.
            iter_no = states[-1]
            out, new_states = self.cell(inputs, cell_states)
            # Copy the old state if we have reached the end of a sequence.
            for i, state in enumerate(cell_states):
                new_states[i] = F.where(F.broadcast_greater(valid_length, iter_no),
                                        new_states[i], state)
            new_states.append(iter_no + 1)
            return out, new_states

        outputs, states = F.contrib.foreach(loop_body, inputs, states)
        outputs = F.SequenceMask(outputs, sequence_length=valid_length,
                                 use_sequence_length=True, axis=0)
        # the last state is the iteration number. We don't need it.
        return outputs, states[:-1]


class SkipRNNCell(HybridBlock):
    def __init__(self, cell, prefix=None, params=None):
        super(SkipRNNCell, self).__init__(prefix=prefix, params=params)
        self.cell = cell

    def hybrid_forward(self, F, i, length, data, states):
        def run_rnn():
            return self.cell(data, states)

        def copy_states():
            return F.zeros_like(data), states
        out, state = F.contrib.cond(i < length, run_rnn, copy_states)
        return out, state


class RNNLayer(HybridBlock):
    def __init__(self, cell, prefix=None, params=None):
        super(RNNLayer, self).__init__(prefix=prefix, params=params)
        self.cell = SkipRNNCell(cell)

    def hybrid_forward(self, F, length, data, init_states):
        def body(data, states):
            i = states[0]
            out, states = self.cell(i, length, data, states[1])
            return out, [i + 1, states]
        out, state = F.contrib.foreach(body, data, [F.zeros((1)), init_states])
        return out, state


class TutorialDynamicRNN(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.layer = DynamicRNNLayer(gluon.rnn.LSTMCell(6, input_size=5))

    def hybrid_forward(self, F, inputs, h, c, valid_length):
        return self.layer(inputs, [h, c], valid_length)


class TutorialSkipRNN(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.layer = RNNLayer(gluon.rnn.LSTMCell(3, input_size=3))

    def hybrid_forward(self, F, length, data, h, c):
        return self.layer(length, data, [h, c])


# --------------------------------------------------------------------------------------------
# A linear-chain CRF and its Viterbi decoder over F.contrib.foreach with functools.partial
# bodies (the CRF module "borrows mostly from Tensorflow CRF"), crf.py of a public GitHub
# repository found by the library's code index (file id 21504030127; its repository is not
# named there). Upstream's __main__ checks its values: -8.072865, -10.966491, paths [[0, 3, 4],
# [4, 4, 0]] and scores 5.0239, 4.7324, which the test reproduces.
# gluon_cf: docstrings and comments trimmed. ViterbiDecoder reads a global num_tags (upstream's
# __main__ defines it).
num_tags = 5


def log_sum_exp(F, arr, axis=1):
    offset = F.max(arr, axis=axis, keepdims=True)
    safe_sum = F.log(F.sum(F.exp(F.broadcast_minus(arr, offset)), axis=axis))
    return F.squeeze(offset) + safe_sum


def _slice(F, t, begin, end):
    return F.squeeze(F.slice(t, begin=begin, end=end))


def _broadcast_score(F, num_tags, transitions, log_probs):
    broadcast_log_probs = F.reshape(log_probs, shape=(-1, num_tags, 1))
    return F.broadcast_add(broadcast_log_probs, transitions)


def _crf_viterbi_forward(F, num_tags, transitions, inputs, scores):
    emission, mask = inputs
    transition_scores = _broadcast_score(F, num_tags, transitions, scores)
    path = F.argmax(transition_scores, axis=1)
    new_scores = F.where(mask,
                         emission + F.max(transition_scores, axis=1),
                         scores)
    return path, new_scores


def _crf_viterbi_backward(F, path, last_tag):
    best_tag = F.pick(path, last_tag, axis=1)
    return best_tag, best_tag


class ViterbiDecoder(nn.HybridBlock):

    def __init__(self, num_tags, transitions, prefix='viterbi_'):
        super().__init__(prefix=prefix)
        self.num_tags = num_tags
        with self.name_scope():
            self.transitions = self.params.get_constant(
                'transitions', value=transitions)

    def hybrid_forward(self, F, emissions, mask, transitions):
        viterbi_paths, last_scores = F.contrib.foreach(
            functools.partial(_crf_viterbi_forward, F, num_tags, transitions),
            [F.slice(emissions, begin=(1, None), end=(None, None)),
             F.slice(mask, begin=(1, None), end=(None, None))],
            _slice(F, emissions, begin=(0, None), end=(1, None)))
        last_tag = F.argmax(last_scores, axis=1)
        best_path, _ = F.contrib.foreach(
            functools.partial(_crf_viterbi_backward, F),
            F.SequenceReverse(viterbi_paths), last_tag)
        best_path = F.concat(last_tag.reshape((1, -1)), best_path, dim=0)
        return F.SequenceReverse(best_path) * mask, F.max(last_scores, axis=1)


def _crf_unary_score(F, inputs, states):
    emission, cur_tag, mask = inputs
    scores = F.pick(emission, cur_tag, axis=1) * mask
    return [], states + scores


def _crf_binary_score(F, transitions, inputs, states):
    cur_tag, next_tag, mask = inputs
    scores = F.gather_nd(transitions, F.stack(cur_tag, next_tag)) * mask
    return [], states + scores


def _crf_log_norm(F, num_tags, transitions, inputs, log_probs):
    emission, mask = inputs
    transition_scores = _broadcast_score(F, num_tags, transitions, log_probs)
    scores = log_sum_exp(F, transition_scores, axis=1)
    return [], F.where(mask, emission + scores, log_probs)


class Crf(nn.HybridBlock):
    def __init__(self, num_tags, prefix='crf_'):
        super().__init__(prefix=prefix)
        self.num_tags = num_tags
        with self.name_scope():
            self.transitions = self.params.get('transitions',
                                               shape=(num_tags, num_tags),
                                               init=mx.init.Uniform(0.1))

    def hybrid_forward(self, F, emissions, tags, mask, transitions):
        sequence_score = self._joint_loglikelihood(
            F, emissions, tags, mask, transitions)
        log_norm = self._loglikelihood(F, emissions, mask, transitions)
        return sequence_score - log_norm

    def _joint_loglikelihood(self, F, emissions, tags, mask, transitions):
        llh = F.zeros_like(_slice(
            F, tags, begin=(0, None), end=(1, None)))

        _, llh = F.contrib.foreach(
            functools.partial(_crf_unary_score, F),
            [emissions, tags, mask], llh)

        cur_tags = F.slice_axis(tags, axis=0, begin=0, end=-1)
        next_tags = F.slice_axis(tags, axis=0, begin=1, end=None)
        _, llh = F.contrib.foreach(
            functools.partial(_crf_binary_score, F, transitions),
            [cur_tags, next_tags,
             F.slice_axis(mask, axis=0, begin=1, end=None)], llh)
        return llh

    def _loglikelihood(self, F, emissions, mask, transitions):
        _, log_probs = F.contrib.foreach(
            functools.partial(_crf_log_norm, F, self.num_tags, transitions),
            [F.slice(emissions, begin=(1, None), end=(None, None)),
             F.slice(mask, begin=(1, None), end=(None, None))],
            _slice(F, emissions, begin=(0, None), end=(1, None)))
        return log_sum_exp(F, log_probs, axis=1)


# --------------------------------------------------------------------------------------------
# An ELMo language model's adaptive softmax loss: per cluster of classes, an F.contrib.cond
# whose branch runs boolean_mask, index_copy and a tail layer only when a label falls in the
# cluster; a public GitHub file found by the library's code index (file id 19600174830; its
# repository is not named there). gluon_cf: the docstring (Chinese) and the cutoffs' check
# trimmed.
HybridType = Union[mx.ndarray.NDArray, mx.symbol.Symbol]


class AdaptiveSoftmax(nn.HybridBlock):
    def __init__(
        self, input_size: int, num_classes: int, cutoffs: List[int],
        div_factor: int = 4, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        cutoffs = list(cutoffs)
        self._num_clusters = len(cutoffs)
        projection_sizes = [
            max(1, input_size // div_factor ** (i + 1))
            for i in range(self._num_clusters)
        ]

        if isinstance(cutoffs, list):
            self._cutoffs = cutoffs
        else:
            self._cutoffs = list(cutoffs)
        self._cutoffs.append(num_classes)

        with self.name_scope():
            head_size = self._cutoffs[0] + self._num_clusters
            self.head_layer = nn.Dense(
                head_size, flatten=False, use_bias=False,
                weight_initializer=mx.init.Normal(1 / math.sqrt(input_size)),
                prefix='head_', in_units=input_size
            )
            self.tail_layers: List[mx.gluon.HybridBlock] = []
            for i in range(self._num_clusters):
                tail_layer = nn.HybridSequential(prefix=f'tail{i}_')
                with tail_layer.name_scope():
                    tail_layer.add(nn.Dense(
                        projection_sizes[i], flatten=False, use_bias=False,
                        prefix='proj_', in_units=input_size
                    ))
                    tail_layer.add(nn.Dense(
                        self._cutoffs[i + 1] - self._cutoffs[i],
                        flatten=False, use_bias=False,
                        prefix='w_', in_units=projection_sizes[i]
                    ))
                self.tail_layers.append(tail_layer)
                # Note that Blocks inside the list, tuple or dict will
                # not be registered automatically
                self.register_child(tail_layer)
            self.softmaxce = mx.gluon.loss.SoftmaxCrossEntropyLoss()

    def hybrid_forward(
        self, F, input: HybridType, labels: HybridType, help_idx: HybridType,
    ) -> HybridType:
        def update_tail_loss(tail_loss, mask, tail_layer, offset):
            # compute tail loss
            # shape(sum(mask), num_classes)
            tail_input = F.contrib.boolean_mask(input, mask)
            # shape(batch_size, cutoffs[i + 1] - cutoffs[i])
            tail_logits = tail_layer(tail_input)
            # shape(sum(mask), )
            tail_labels = F.contrib.boolean_mask(
                labels - offset, mask
            )
            idx = F.contrib.boolean_mask(help_idx, mask)
            pred = -F.log_softmax(tail_logits, axis=-1)
            return F.contrib.index_copy(
                tail_loss, idx, F.pick(pred, tail_labels)
            )

        head_labels = labels
        ones = F.ones_like(labels)
        tail_loss = F.zeros_like(labels)
        for i in range(self._num_clusters):
            mask = F.broadcast_logical_and(
                F.broadcast_greater_equal(labels, ones * self._cutoffs[i]),
                F.broadcast_lesser(labels, ones * self._cutoffs[i + 1])
            )
            # update head labels
            head_labels = F.where(
                mask, ones * (self._cutoffs[0] + i), head_labels
            )
            tail_loss = F.contrib.cond(
                F.sum(mask) > 0,
                functools.partial(
                    update_tail_loss, tail_loss, mask,
                    self.tail_layers[i], self._cutoffs[i]
                ),
                lambda: tail_loss
            )

        head_logits = self.head_layer(input)
        head_loss = self.softmaxce(head_logits, head_labels)
        return head_loss + tail_loss


# --------------------------------------------------------------------------------------------
# A Keras-like TimeDistributed layer of a Darknet (YOLO) backbone, its 'for' style: the model
# applied by F.contrib.foreach over the time axis, returning a list when the model does; a
# public GitHub file found by the library's code index (file id 31242122541; its repository
# is not named there). gluon_cf: the 'reshape1'/'reshape2' styles left out; TwoOutputs (ours)
# is a model returning two arrays.


class TimeDistributed(gluon.HybridBlock):
    def __init__(self, model, style='for', **kwargs):
        super(TimeDistributed, self).__init__(**kwargs)
        self._style = style
        with self.name_scope():
            self.model = model

    def apply_model(self, x, _):
        return self.model(x), []

    def hybrid_forward(self, F, x):
        if self._style == 'for':
            # For loop style
            x = F.swapaxes(x, 0, 1)  # swap batch and seqlen channels
            x, _ = F.contrib.foreach(self.apply_model, x, [])  # runs on first channel
            if isinstance(x, tuple):  # for handling multiple outputs
                x = (F.swapaxes(xi, 0, 1) for xi in x)
            elif isinstance(x, list):
                x = [F.swapaxes(xi, 0, 1) for xi in x]
            else:
                x = F.swapaxes(x, 0, 1)  # swap seqlen and batch channels
        return x


class TwoOutputs(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=4, flatten=False)

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        return [y, F.tanh(y)]


# --------------------------------------------------------------------------------------------
# apache/mxnet v2.0.0.alpha.rc1, python/mxnet/gluon/data/vision/transforms/image.py
# (RandomGray, its legacy-NDArray branch)
# https://github.com/apache/mxnet/blob/v2.0.0.alpha.rc1/python/mxnet/gluon/data/vision/transforms/image.py
# Apache License, Version 2.0 (ASF header as above).
# gluon_cf: the numpy-array branch and _append_return(gray, *args) (gray without args) left out.


class RandomGray(HybridBlock):
    def __init__(self, p=0.5):
        super(RandomGray, self).__init__()
        self.p = p

    def hybrid_forward(self, F, x, *args):
        mat = F.concat(F.full((3, 1), 0.2989),
                       F.full((3, 1), 0.5870),
                       F.full((3, 1), 0.114), dim=1)
        cond = self.p < F.random.uniform(shape=1)
        x = F.cast(x, dtype='float32')
        gray = F.contrib.cond(cond, lambda: x, lambda: F.dot(x, mat))
        return gray


# apache/mxnet v2.0.0.alpha.rc1, python/mxnet/gluon/data/vision/transforms/__init__.py
# (HybridRandomApply, its legacy-NDArray branch: it passes arrays, not functions, to cond)
# https://github.com/apache/mxnet/blob/v2.0.0.alpha.rc1/python/mxnet/gluon/data/vision/transforms/__init__.py
# Apache License, Version 2.0 (ASF header as above). gluon_cf: as RandomGray.


class HybridRandomApply(HybridBlock):
    def __init__(self, transforms, p=0.5):
        super(HybridRandomApply, self).__init__()
        assert isinstance(transforms, HybridBlock)
        self.transforms = transforms
        self.p = p

    def hybrid_forward(self, F, x, *args):
        cond = self.p < F.random.uniform(low=0, high=1, shape=1)
        return F.contrib.cond(cond, x, self.transforms(x))


# --------------------------------------------------------------------------------------------
# apache/mxnet 1.9.1, python/mxnet/symbol/contrib.py (the docstring examples of foreach and
# while_loop), https://github.com/apache/mxnet/blob/1.9.1/python/mxnet/symbol/contrib.py
# Apache License, Version 2.0 (ASF header as above). gluon_cf: the outputs grouped.


def doc_foreach():
    step = lambda data, states: (data + states[0], [states[0] * 2])  # noqa: E731
    data = mx.sym.var('data')
    states = [mx.sym.var('state')]
    outs, states = mx.sym.contrib.foreach(step, data, states)
    return mx.sym.Group([outs] + states)


def doc_while_loop():
    cond = lambda i, s: i <= 5  # noqa: E731
    func = lambda i, s: ([i + s], [i + 1, s + i])  # noqa: E731
    loop_vars = (mx.sym.var('i'), mx.sym.var('s'))
    outputs, states = mx.sym.contrib.while_loop(cond, func, loop_vars, max_iterations=10)
    return mx.sym.Group(outputs + states)


# --------------------------------------------------------------------------------------------
# A CRF of NDArray code (a gluon.nn.Block) whose loops are nd.contrib.foreach, its score loop
# incrementing a state in place (idx += 1). "This is a reusable CRF module ... @author:
# kenjewu @date: 2018/11/05", under the ASF header above, found by the library's code index
# (file id 23616263586; its repository is not named there).
# gluon_cf: docstrings, comments, try_gpu and _viterbi_decode's start-tag asserts trimmed.
START_TAG = "<eos>"
STOP_TAG = "<bos>"


def nd_log_sum_exp(vec):   # gluon_cf: upstream's log_sum_exp, renamed beside the one above
    max_score = nd.max(vec, axis=-1, keepdims=True)
    score = nd.log(nd.sum(nd.exp(vec - max_score), axis=-1, keepdims=True)) + max_score
    return nd.squeeze(score, axis=-1)


class CRF(gluon.nn.Block):
    def __init__(self, tag2idx, ctx=mx.cpu(), **kwargs):
        super(CRF, self).__init__(** kwargs)
        with self.name_scope():
            self.tag2idx = tag2idx
            self.ctx = ctx
            self.tagset_size = len(tag2idx)
            self.transitions = self.params.get(
                'transitions', shape=(self.tagset_size, self.tagset_size),
                init=mx.init.Xavier(magnitude=2.24))

    def _forward_alg(self, feats):
        batch_size = feats.shape[1]
        alphas = nd.full((batch_size, self.tagset_size), -10000., ctx=self.ctx)
        alphas[:, self.tag2idx[START_TAG]] = 0.

        def update_alphas(data, alphas):
            alphas_t = nd.broadcast_axis(nd.expand_dims(alphas, axis=0), axis=0,
                                         size=self.tagset_size)
            emit_score = nd.transpose(nd.expand_dims(data, axis=0), axes=(2, 1, 0))
            trans_score = nd.expand_dims(self.transitions.data(), axis=1)
            next_tag_var = alphas_t + emit_score + trans_score
            alphas = nd_log_sum_exp(next_tag_var)
            alphas = nd.transpose(alphas, axes=(1, 0))
            return data, alphas

        _, alphas = nd.contrib.foreach(update_alphas, feats, alphas)
        terminal_var = alphas + self.transitions.data()[self.tag2idx[STOP_TAG]]
        alpha = nd_log_sum_exp(terminal_var)
        assert alpha.shape == (batch_size, )
        return alpha

    def _score_sentence(self, feats, tags):
        batch_size = feats.shape[1]
        score = nd.zeros((batch_size,), ctx=self.ctx)
        temp = nd.array([self.tag2idx[START_TAG]] * batch_size,
                        ctx=self.ctx).reshape((batch_size, 1))
        tags = nd.concat(temp, tags, dim=1)

        def update_score(data, states):
            feat = data
            idx, tags_iner, score = states
            i = int(idx.asscalar())
            score = score + nd.pick(self.transitions.data()[tags_iner[:, i + 1]],
                                    tags_iner[:, i], axis=1) + nd.pick(feat, tags_iner[:, i + 1],
                                                                       axis=1)
            idx += 1
            return feat, [idx, tags, score]

        states = [nd.array([0]), tags, score]
        _, states = nd.contrib.foreach(update_score, feats, states)
        score = states[2]
        score = score + self.transitions.data()[self.tag2idx[STOP_TAG],
                                                tags[:, int(tags.shape[1]-1)]]
        return score

    def _viterbi_decode(self, feats):
        batch_size = feats.shape[1]
        vvars = nd.full((batch_size, self.tagset_size), -10000., ctx=self.ctx)
        vvars[:, self.tag2idx[START_TAG]] = 0.0

        def update_decode(data, states):
            feat = data
            vvars_iner = states
            vvars_t = nd.broadcast_axis(nd.expand_dims(vvars_iner, axis=0), axis=0,
                                        size=self.tagset_size)
            trans = nd.expand_dims(self.transitions.data(), axis=1)
            next_tag_var = vvars_t + trans
            best_tag_id = nd.argmax(next_tag_var, axis=-1)
            viterbivars_t = nd.transpose(nd.pick(next_tag_var, best_tag_id, axis=-1),
                                         axes=(1, 0))
            bptrs_t = nd.transpose(best_tag_id, axes=(1, 0))
            vvars_iner = viterbivars_t + feat
            return bptrs_t, vvars_iner

        backpointers, vvars = nd.contrib.foreach(update_decode, feats, vvars)
        terminal_var = vvars + self.transitions.data()[self.tag2idx[STOP_TAG]]
        best_tag_id = nd.argmax(terminal_var, axis=1)
        path_score = nd.pick(terminal_var, best_tag_id, axis=1)
        best_path = [best_tag_id]
        for bptrs_t in nd.reverse(backpointers, axis=0):
            best_tag_id = nd.pick(bptrs_t, best_tag_id, axis=1)
            best_path.append(best_tag_id)
        best_path.pop()
        best_path.reverse()
        best_path_matrix = nd.stack(*best_path, axis=1)
        return path_score, best_path_matrix

    def neg_log_likelihood(self, feats, tags):
        forward_score = self._forward_alg(feats)
        gold_score = self._score_sentence(feats, tags)
        return forward_score - gold_score

    def forward(self, feats):
        score, tag_seq = self._viterbi_decode(feats)
        return score, tag_seq
