"""The loop benchmark (``python -m gluon_cf.bench.foreach``) on tiny sizes: gluon_cf is checked
against its oracle before timing (MXNet's ``_foreach``; eager Python for ``while_loop``, because
MXNet's hybridized ``_while_loop`` returns wrong gradients for this model)."""
import pytest

from gluon_cf.bench import foreach as loop_bench


@pytest.mark.parametrize("op", ["foreach", "while_loop"])
def test_loop_benchmark_checks_then_times(op):
    rows = loop_bench.run_config(steps=4, batch=2, hidden=3, input_size=3, static=False,
                                 warmup=1, repeats=1, op=op)
    assert [mode for _, mode, *_ in rows] == ["inference", "training"]
    assert all(ours > 0 and theirs > 0 for _, _, ours, theirs, _ in rows)


def test_while_loop_benchmark_model_equals_eager_python():
    """The counted while_loop scan equals the foreach scan it replaces (same weights)."""
    import numpy as np
    inputs = loop_bench.make_inputs(5, 2, 3, 3)
    scan = loop_bench.build("gluon_cf", 3, 3, False)
    loop = loop_bench.build("gluon_cf", 3, 3, False, "while_loop", 5)
    for a, b in zip(loop_bench.infer(scan, inputs), loop_bench.infer(loop, inputs)):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)
