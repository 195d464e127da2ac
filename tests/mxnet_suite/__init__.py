"""MXNet 1.9.1's own control-flow tests and gluonnlp's beam search, vendored (a package, so that its
``conftest`` is ``mxnet_suite.conftest`` and does not take the place of ``tests/conftest.py``)."""
