"""What MXNet's vendored tests import from MXNet's ``tests/python/unittest/common.py``.

MXNet's own file imports nose and MXNet's test models; ``with_seed`` is its behaviour without
them: numpy's, MXNet's and Python's generators seeded alike before each test (the seed from
MXNET_TEST_SEED, else a fixed one, so that CI runs are reproducible), numpy's state restored
after it. The rest is gluon_cf's: the vendored tests' reduced sizes.
"""
import functools
import itertools
import os
import random

import mxnet as mx
import numpy as np

DEFAULT_SEED = 1234
# The vendored tests at their full sizes (else reduced, each change marked "gluon_cf:")
FULL_SIZE = os.getenv("GLUON_CF_FULL_MXNET_SUITE") == "1"


def with_seed(seed=None):
    def decorate(test):
        @functools.wraps(test)
        def seeded(*args, **kwargs):
            this_seed = seed if seed is not None else int(os.getenv("MXNET_TEST_SEED",
                                                                    DEFAULT_SEED))
            state = np.random.get_state()
            np.random.seed(this_seed)
            mx.random.seed(this_seed)
            random.seed(this_seed)
            try:
                return test(*args, **kwargs)
            finally:
                mx.nd.waitall()
                np.random.set_state(state)
        return seeded
    return decorate


def cond_combinations(cond_funcs, body_funcs):
    """``test_cond``'s (cond, then, else) functions: all 405 with GLUON_CF_FULL_MXNET_SUITE=1
    (~40 s here), else 11 (~1 s) in which every function takes every role it has in the full
    product at least once, then and else differing, and two where both are one function."""
    if FULL_SIZE:
        return list(itertools.product(cond_funcs, body_funcs, body_funcs))
    n = len(body_funcs)
    return ([(cond_funcs[i % len(cond_funcs)], body_funcs[i], body_funcs[(i + 1) % n])
             for i in range(n)]
            + [(cond_funcs[0], body_funcs[0], body_funcs[0]),
               (cond_funcs[-1], body_funcs[-1], body_funcs[-1])])


def step_subset(step_funcs):
    """A case of ``test_while_loop_for_foreach``'s step functions: all with
    GLUON_CF_FULL_MXNET_SUITE=1 (~22 s a run here), else every third and the last (~8 s):
    the first ones combine all inputs, the last ones return one input unchanged."""
    if FULL_SIZE:
        return list(step_funcs)
    kept = list(step_funcs[::3])
    return kept if (len(step_funcs) - 1) % 3 == 0 else kept + [step_funcs[-1]]
