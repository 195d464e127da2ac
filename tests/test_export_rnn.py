"""export_onnx of Gluon's recurrent layers of several layers and both directions (one ONNX
LSTM/GRU/RNN per layer, ``_convert_rnn_layers``): onnxruntime equals the hybridized layer at
1e-5, its output and final states, with Gluon's default initial states and given ones, at
opsets 13 and 12; what ONNX cannot express is refused at the user's line."""
import re

import numpy as np
import pytest
from mxnet import gluon

from gluon_cf.export import export_onnx
from test_export_onnx import build, check_export

rnn = gluon.rnn
_RANDOM = np.random.RandomState(5)
X = _RANDOM.randn(5, 2, 3).astype(np.float32)     # (T, N, C)
LAYERS = [
    pytest.param(lambda: rnn.LSTM(4, bidirectional=True, input_size=3), id="lstm_bidirectional"),
    pytest.param(lambda: rnn.LSTM(4, num_layers=3, input_size=3), id="lstm_three_layers"),
    pytest.param(lambda: rnn.LSTM(4, num_layers=2, bidirectional=True, input_size=3),
                 id="lstm_two_layers_bidirectional"),
    pytest.param(lambda: rnn.GRU(4, num_layers=2, bidirectional=True, input_size=3),
                 id="gru_two_layers_bidirectional"),
    pytest.param(lambda: rnn.RNN(4, num_layers=2, bidirectional=True, activation="relu",
                                 input_size=3), id="rnn_relu_two_layers_bidirectional"),
    pytest.param(lambda: rnn.RNN(4, num_layers=2, input_size=3), id="rnn_tanh_two_layers"),
]


# the converter's ops are the same at both opsets: one case at opset 12
@pytest.mark.parametrize("make, opset", [pytest.param(p.values[0], 13, id=p.id) for p in LAYERS]
                         + [pytest.param(LAYERS[3].values[0], 12, id="gru_opset_12")])
def test_layers_and_directions_equal_mxnet(make, opset):
    net = build(lambda F, n, x: n.l(x), l=make)
    check_export(net, [X], [[X * 1.7]], opset=opset)
    layer = make()
    count = layer._num_layers * layer._dir
    states = [_RANDOM.randn(count, 2, 4).astype(np.float32)
              for _ in range(2 if isinstance(layer, rnn.LSTM) else 1)]
    net = build(lambda F, n, x, *s: n.l(x, list(s)), l=make)
    check_export(net, [X, *states], [[X * 1.7, *[s * -0.5 for s in states]]], opset=opset)


def test_layout_ntc_with_states():
    net = build(lambda F, n, x, h: n.l(x, [h]),
                l=lambda: rnn.GRU(4, num_layers=2, bidirectional=True, layout="NTC",
                                  input_size=3))
    h = _RANDOM.randn(4, 2, 4).astype(np.float32)
    check_export(net, [X.transpose(1, 0, 2).copy(), h], [])


def test_projection_is_refused_at_the_users_line():
    net = build(lambda F, n, x: n.l(x), l=lambda: rnn.LSTM(4, projection_size=2, input_size=3))
    line = test_projection_is_refused_at_the_users_line.__code__.co_firstlineno + 1
    with pytest.raises(NotImplementedError, match=rf"^{re.escape(__file__)}:{line}: .*"
                                                  r"projection_size=2: ONNX's LSTM has no "
                                                  r"projection"):
        export_onnx(net, [X])
