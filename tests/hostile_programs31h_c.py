"""Round 31h (issue 24): gluonnlp 0.10.0's own samplers with gluon_cf's ops swapped in by import
(HybridBeamSearchSampler's ``F.contrib.while_loop``/``cond``), beside the same samplers on
MXNet's ops; and autograph decoders (plain Python is the oracle)."""
import inspect
import textwrap

import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn
from gluonnlp.model import sequence_sampler

import hostile_harness
from hostile_harness31h import C

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


def _ported_forward():
    """HybridBeamSearchSampler.hybrid_forward with ``F.contrib.`` replaced by ``C.`` (as a
    user swaps MXNet's ops for gluon_cf's by editing the import)."""
    lines, first = inspect.getsourcelines(
        sequence_sampler.HybridBeamSearchSampler.hybrid_forward)
    source = "\n" * (first - 1) + textwrap.dedent("".join(lines))   # (its own line numbers)
    source = source.replace("F.contrib.while_loop(", "C.while_loop(").replace(
        "F.contrib.cond(", "C.cond(")
    namespace = dict(vars(sequence_sampler), C=C)
    exec(compile(source, sequence_sampler.__file__, "exec"), namespace)
    return namespace["hybrid_forward"]


class PortedBeamSearchSampler(sequence_sampler.HybridBeamSearchSampler):
    hybrid_forward = _ported_forward()


class _StepDecoder(HybridBlock):
    """A one-step decoder: (step_input (B,), states [h (B, 4)] or [h, c]) -> (log-probs (B,
    V), new states)."""
    def __init__(self, vocab=6, prefix=None, cell=rnn.GRUCell):
        super().__init__(prefix=prefix)
        self._vocab_size = vocab
        with self.name_scope():
            self.embed = nn.Embedding(vocab, 4)
            self.cell = cell(4, input_size=4)
            self.proj = nn.Dense(vocab, in_units=4)

    def hybrid_forward(self, F, step_input, states):
        out, new = self.cell(self.embed(step_input), states)
        return F.log_softmax(self.proj(out)), new


def _beam_program(batch, beam, max_length, eos, alpha, lstm=False):
    class BeamSearch(HybridBlock):
        __doc__ = f"gluonnlp's HybridBeamSearchSampler, batch {batch}, beam {beam}, " \
                  f"max_length {max_length}, eos {eos}, alpha {alpha}, on C's ops."
        NO_GRAD = (0,)

        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.decoder = _StepDecoder(cell=rnn.LSTMCell if lstm else rnn.GRUCell)
                self.init = nn.Dense(4, in_units=3)
            scorer = sequence_sampler.BeamSearchScorer(alpha=alpha, K=5)
            self.sampler = PortedBeamSearchSampler(batch, beam, self.decoder, eos,
                                                   scorer=scorer, max_length=max_length)

        def hybrid_forward(self, F, tokens, feats):
            h = F.tanh(self.init(feats))
            samples, scores, lengths = self.sampler(tokens, [h, h * 0.5] if lstm else [h])
            return samples.astype("float32"), scores, lengths.astype("float32")
    BeamSearch.__name__ = BeamSearch.__qualname__ = \
        f"{'Lstm' if lstm else ''}BeamSearchB{batch}K{beam}L{max_length}E{eos}" \
        f"A{str(alpha).replace('.', '_')}"
    inputs = [[np.arange(batch).astype(np.float32) % 6, rand(batch, 3, seed=s)]
              for s in range(2)]
    return program(*inputs)(BeamSearch)


BEAMS = [_beam_program(*args) for args in
         [(2, 3, 4, 1, 1.0), (1, 1, 3, 2, 0.0), (3, 2, 5, 0, 1.0), (2, 4, 2, 5, 0.5),
          (1, 3, 6, 3, 1.0), (2, 2, 1, 1, 1.0), (2, 3, 4, 1, 1.0, True), (1, 2, 3, 0, 0.0, True),
          (3, 3, 5, 4, 1.0, True), (1, 1, 6, 5, 0.5, True)]]
globals().update({cls.__name__: cls for cls in BEAMS})
