"""Round fix31a: ``MXNET_MKLDNN_ENABLED=0`` turns gluon_cf's MKLDNN guard off (NOTE [MKLDNN
values read by a node] in gluon_cf/_cachedop.py).

Was: the guard read ``MXNETMKLDNN_ENABLED`` (a misspelt name), so it stayed on with MKLDNN
off, and with the guard on (MKLDNN on too: left, see the round's report) a failed call's
failure reaches a healthy output: the round 31 review's block returning ``g(u), g(v) * 2``
fed a failed ``u`` read 1.7e-17 for the healthy ``g(5) * 2`` after ``g(u)`` raised. Oracle:
plain Python (10.0). The review's "shared" case (both outputs through one Dense) is left
out: it fails with MKLDNN off before round 31h too (0.0; FullyConnected asks for temporary
space, NOTE [failures carried by the outputs]).
"""
from test_failed_calls_r29fail import _result
from test_failed_siblings_r31fail import CODE, check_healthy_outputs


def test_healthy_outputs_of_a_block_fed_a_failed_call_with_mkldnn_off():
    check_healthy_outputs(_result(CODE, env={"MXNET_MKLDNN_ENABLED": "0"}), skip=["shared"])
