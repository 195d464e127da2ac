"""What a training process launched by ``python -m gluon_cf.launch`` may call: `heartbeat`.

This module imports neither MXNet nor the rest of gluon_cf, so that a training loop at any layer
can call it and the launcher can read `HEARTBEAT_MARKER` without loading MXNet.

NOTE [progress of a worker]: the launcher stops the job when a worker makes no progress for
``--progress-timeout`` seconds, because a worker whose peer died, or a worker stuck in a
deadlock, waits in ps-lite for ever and says nothing. Progress is a line of output from the
worker, or a heartbeat: a line holding `HEARTBEAT_MARKER` on the worker's standard error, which
the launcher counts and does not forward. Lines are the one channel that reaches the launcher
from every host (over ssh too), so no file, socket or clock is shared with the worker. A loop
whose steps print nothing calls `heartbeat()` once per step: it writes at most one marker a
second, and nothing at all outside the launcher.
"""
import os
import sys
import time

__all__ = ["heartbeat", "HEARTBEAT_MARKER", "HEARTBEAT_ENV", "SCRIPT_ENDED_MARKER",
           "SCRIPT_FAILED_MARKER", "FAILED_EXIT_WAIT"]

#: The text a heartbeat line holds; the launcher removes it from the line it forwards.
HEARTBEAT_MARKER = "<gluon_cf.launch heartbeat>"
#: A worker's line when its script ended with status 0 (NOTE [a failed worker exits at once]).
SCRIPT_ENDED_MARKER = "<gluon_cf.launch script ended>"
#: A worker's line, followed by its status and ">", when its script failed
#: (NOTE [a failed worker's bounded exit]).
SCRIPT_FAILED_MARKER = "<gluon_cf.launch script failed with status "
#: Seconds a failed worker's exit functions may take before it leaves anyway.
FAILED_EXIT_WAIT = 10.0
#: Set (to "1") by the launcher in every worker's environment.
HEARTBEAT_ENV = "GLUON_CF_LAUNCH_HEARTBEAT"

_INTERVAL = 1.0
_last_beat = [float("-inf")]


def heartbeat() -> None:
    """Tell ``python -m gluon_cf.launch`` that this worker makes progress, so that its
    ``--progress-timeout`` does not stop a job whose steps print nothing.

    Cheap enough for every training step: outside ``python -m gluon_cf.launch`` it does
    nothing; under it, it writes one short line to standard error at most once a second,
    which the launcher counts and does not forward.

    >>> import gluon_cf.launch
    >>> for step in range(3):
    ...     gluon_cf.launch.heartbeat()   # outside the launcher: does nothing
    """
    if not os.environ.get(HEARTBEAT_ENV):
        return
    now = time.monotonic()
    if now - _last_beat[0] < _INTERVAL:
        return
    _last_beat[0] = now
    try:
        sys.stderr.write(HEARTBEAT_MARKER + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):   # the launcher is gone (closed pipe): nobody to tell
        pass
