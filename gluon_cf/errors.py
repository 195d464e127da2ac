"""gluon_cf's own exception types that need no MXNet (the artifact runtime raises them too)."""


class RecursionDepthError(RuntimeError):
    """A recursive function went deeper than its ``max_depth`` (no base case reached)."""


class CallTreeTooLargeError(RecursionDepthError):
    """A batch's recursive call tree grew beyond what one schedule holds (a cycle in the tree
    arrays makes it double at every level long before ``max_depth``)."""
