"""gluon_cf's own exception types that need no MXNet (the artifact runtime raises them too)."""


class RecursionDepthError(RuntimeError):
    """A recursive function went deeper than its ``max_depth`` (no base case reached)."""
