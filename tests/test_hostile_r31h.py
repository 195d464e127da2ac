"""Round 31h (issue 24): 100 programs ported the way practitioners port MXNet/gluonnlp code
(``hostile_programs31h*``: seq2seq with attention, gluonnlp's own HybridBeamSearchSampler with
gluon_cf's ops swapped in, incremental transformer decoders, CTC recursions, pointer
networks, top-down tree decoders, n-ary trees with masks, variable lengths, scheduled
sampling, clipping, Trainer loops over shared blocks, float16/float64, batches of 1 and 0,
loops of 300 steps). Each was run eager and hybridized against MXNet's own F.contrib ops (or
plain Python: ``hostile_harness31h``), values and gradients at 1e-5, exported where it
hybridizes, and through a call history; a sample runs here. The silent difference found is
``test_hostile_r31h_mkldnn``'s."""
import numpy as np
import pytest
from gluonnlp.model import sequence_sampler

import gluon_cf
import hostile_harness
import hostile_harness31h as H
import hostile_programs31h as A
import hostile_programs31h_b as B
import hostile_programs31h_c as BEAM
import hostile_programs31h_d as D
import hostile_programs31h_e as E
import hostile_programs31h_f as TRAIN
import hostile_programs31h_g as G
from export_harness import assert_equal_or_refused, export_outcomes

SAMPLE = [(A, "ForeachDotAttentionGRU"), (A, "GreedyWhileDecoderWithAttention"),
          (A, "PointerNetworkHardPointerWhile"),
          (A, "ForeachRNNThenSequenceMaskLast"), (B, "NaryTreeMaskedChildren"),
          (B, "TopDownDecoderWithWhileInLeaf"),
          (B, "IncrementalTransformerDecoderForeach"), (B, "SharedBlockInTwoParentsAndTopLevel"),
          (BEAM, "BeamSearchB1K1L3E2A0_0"), (BEAM, "LstmBeamSearchB1K2L3E0A0_0"),
          (D, "AutographCTCStyleDP"), (D, "_TypedWhileCondFloat64"),
          (D, "WhileBatchOfZeroRows"), (D, "LongForeachLeakyIntegrator"),
          (E, "LstmAdditiveAttentionOverWhile"), (E, "Tree3AryGated"),
          (G, "AgDecoderRangeWithTensorBreak"), (G, "AgZipTwoSequences"),
          (G, "WhileInsideForeach"), (G, "CTCAlphaWithGatheredEmissions")]


@pytest.mark.parametrize("module,name", SAMPLE, ids=[n for _, n in SAMPLE])
def test_round_31h_programs_equal_mxnet_or_python(module, name):
    cls = getattr(module, name)
    result = H.classify(cls, module.PROGRAMS[cls], [module.__file__, sequence_sampler.__file__])
    kinds = {mode: [kind for kind, _, _ in per_input] for mode, per_input in result.items()}
    # (a located refusal where MXNet's own ops fail too, or plain Python does: "equal-error")
    assert all(kind in ("equal", "equal-error", "refused") for k in kinds.values() for kind in k
               ), result
    assert "equal" in kinds["eager"] + kinds["hybrid"], result


EXPORTED = [(A, "GreedyWhileDecoderWithAttention"), (D, "AutographCTCStyleDP"),
            (E, "GruAdditiveAttentionOverWhile"), (G, "ForeachTwoDataDictStates")]


@pytest.mark.parametrize("module,name", EXPORTED, ids=[n for _, n in EXPORTED])
def test_round_31h_exports_equal_gluon(module, name):
    cls = getattr(module, name)
    assert_equal_or_refused(export_outcomes(cls, module.PROGRAMS[cls], [module.__file__]), {})


@pytest.mark.parametrize("name", ["TwoParentsOneCell", "TreeRegressorSharedLeafSGD"])
def test_round_31h_trainer_loops_equal_mxnet(name):
    """Three Trainer steps over blocks sharing parameters: losses and final parameters of
    gluon_cf (eager, hybridized) equal MXNet's F.contrib ops' (eager), at 1e-5."""
    want = TRAIN.train(name, H.CONTRIB, False, TRAIN.BATCHES[name])
    for hybridize in (False, True):
        got = TRAIN.train(name, gluon_cf, hybridize, TRAIN.BATCHES[name])
        assert len(got) == len(want)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_round_31h_call_history_of_a_decoder():
    """A random order of batches of 2, 1 and 3 rows (and malformed calls), recorded or not, on
    one hybridized decoder: each as on a fresh block (parameters compared in the block's
    order: sorted by name, a block made later ordered them otherwise)."""
    cls = E.RnnNoneAttentionOverForeach
    inputs = E.PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), (1e-5, 1e-6))
