"""Round 29 review (r29failrev): an item or a slice of a collected list that Python's name for
it does not show (``c = a + b``, then ``c[9]``, ``c[1:]``) names the user's line reading it.

Was: its IndexError, and the export refusal of the input shapes its slice read, named the
line of the loop that collected the list (``for r in x:``), not the line indexing it. Oracle:
plain Python lists raise the IndexError; the line is the one of ``c[...]``."""
import inspect

import mxnet as mx
import pytest
from mxnet.gluon import HybridBlock

from gluon_cf import autograph
from gluon_cf.export import export_onnx


class JoinedThenRead(HybridBlock):
    def __init__(self, how, **kwargs):
        super().__init__(**kwargs)
        self.how = how

    @autograph
    def hybrid_forward(self, F, x):
        a = [x[0] * 0]
        for r in x:
            a.append(r * 1)
        b = []
        for r in x:
            b.append(r * 2)
        c = a + b
        if self.how == "index":
            c = [c[9]]   # READ index
        elif self.how == "negative":
            c = [c[-9]]   # READ negative
        else:
            c = c[1:]   # READ slice
        return F.stack(*c, axis=0)


def _line(how):
    source, first = inspect.getsourcelines(JoinedThenRead.hybrid_forward)
    return first + next(k for k, text in enumerate(source) if f"# READ {how}" in text)


@pytest.mark.parametrize("how", ["index", "negative"])
def test_an_item_past_a_joined_list_names_the_line_indexing_it(how):
    with pytest.raises(IndexError):    # plain Python: list index out of range
        JoinedThenRead(how)(mx.nd.ones((2, 2)))
    net = JoinedThenRead(how)
    net.hybridize()
    with pytest.raises(IndexError, match=r"list index -?9 out of range") as info:
        net(mx.nd.ones((2, 2)))
    assert str(info.value).startswith(f"{__file__}:{_line(how)}: "), str(info.value)


def test_an_exported_slice_of_a_joined_list_names_the_line_slicing_it():
    net = JoinedThenRead("slice")
    net.hybridize()
    assert net(mx.nd.ones((3, 2))).shape == (6, 2)   # 1 + 3 + 3 items, the first dropped
    with pytest.raises(ValueError, match="the shape read here") as info:
        export_onnx(net, [mx.nd.ones((2, 2))], dynamic_axes={0: [0]})
    assert str(info.value).startswith(f"{__file__}:{_line('slice')}: "), str(info.value)
