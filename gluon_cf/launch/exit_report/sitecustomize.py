"""Loaded first by every worker ``python -m gluon_cf.launch`` starts (its directory leads the
workers' ``PYTHONPATH``): a worker whose script fails leaves the process with the script's
status at once, instead of waiting for its peers in ps-lite's shutdown.

NOTE [a failed worker exits at once]: when a training script ends with ``sys.exit(3)`` or an
uncaught exception, Python finalises the interpreter, and MXNet's distributed kvstore, freed
then, joins ps-lite's shutdown barrier, which its peers (still training, waiting for this
worker's gradients) never reach: the failed worker never exits, the job stalls until the
progress timeout, and the status and the failed worker are lost. So, in the top-level Python
process of a worker only, `sys.exit` and `sys.excepthook` note a failing status; the first
step of finalisation (``threading``'s exit hooks run before ``atexit``'s) then runs the
``atexit`` functions (the user's and MXNet's own), flushes the standard streams and leaves with
``os._exit(status)``, before any MXNet object is freed. A successful script (status 0) is left
alone: its shutdown barrier is the job's normal end, and it only writes `SCRIPT_ENDED_MARKER`
on standard error, so that when its peers then stall (a worker that ran fewer steps than the
others leaves them waiting in a push for ever), the launcher's progress-timeout report says
so. ``raise SystemExit(3)`` bypasses ``sys.exit`` and is seen as a success here (the progress
timeout stops the job).

NOTE [a failed worker's bounded exit]: the ``atexit`` functions a failed worker runs may
themselves wait for its peers: MXNet's (``mx.nd.waitall``, the engine's ``WaitForAll``) wait
for every pushed operation, and a kvstore push or pull of a distributed kvstore completes only
once the other workers have pushed too (measured under load: the failed worker, its script
ended with ``sys.exit(3)``, never exited; the launcher stopped the job at the progress timeout
with status 1, naming a peer). So before running them the worker writes `SCRIPT_FAILED_MARKER`
with its status on standard error (the launcher then knows the job has failed, and blames no
silent peer), and starts a thread that leaves with ``os._exit(status)`` after
`FAILED_EXIT_WAIT` seconds (``GLUON_CF_LAUNCH_FAILED_EXIT_WAIT`` overrides it) if they have
not returned: the worker always ends with its script's status, in bounded time, whatever the
load.

This file imports only the standard library (never MXNet: a server's ``import mxnet`` would
start it), then hands over to any ``sitecustomize`` it hides.
"""
import os
import sys

#: Written on standard error by a worker whose script ended with status 0 (equal to
#: gluon_cf.launch.worker.SCRIPT_ENDED_MARKER; this file cannot import it).
SCRIPT_ENDED_MARKER = "<gluon_cf.launch script ended>"
#: Written on standard error, followed by the status and ">", by a worker whose script failed
#: (equal to gluon_cf.launch.worker.SCRIPT_FAILED_MARKER).
SCRIPT_FAILED_MARKER = "<gluon_cf.launch script failed with status "
#: Seconds a failed worker's ``atexit`` functions may take (equal to
#: gluon_cf.launch.worker.FAILED_EXIT_WAIT; NOTE [a failed worker's bounded exit]).
FAILED_EXIT_WAIT = 10.0
FAILED_EXIT_WAIT_ENV = "GLUON_CF_LAUNCH_FAILED_EXIT_WAIT"


def _wait() -> float:
    try:
        return max(0.0, float(os.environ.get(FAILED_EXIT_WAIT_ENV) or FAILED_EXIT_WAIT))
    except ValueError:
        return FAILED_EXIT_WAIT


def leave_after(status: int, seconds: float) -> None:
    """NOTE [a failed worker's bounded exit]: ``atexit`` functions still running after
    ``seconds`` are cut short. No stream is flushed here: the main thread may hold a stream's
    lock where it waits (the launcher runs its workers unbuffered, PYTHONUNBUFFERED)."""
    import time
    time.sleep(seconds)
    os._exit(status)


def _install() -> None:
    import _thread
    import atexit
    import threading

    failed: list = []                # the failing status, once noted

    def note(status) -> None:
        if status is None or status == 0:
            return
        failed[:] = [status if isinstance(status, int) else 1]

    real_exit = sys.exit

    def exit(status=None):           # noqa: A001 - replaces sys.exit
        note(status)
        real_exit(status)

    exit.__doc__ = real_exit.__doc__
    sys.exit = exit

    real_hook = sys.excepthook

    def excepthook(kind, value, traceback) -> None:
        note(1)
        real_hook(kind, value, traceback)

    sys.excepthook = excepthook

    def leave_if_failed() -> None:
        if not failed:
            try:
                sys.stderr.write(SCRIPT_ENDED_MARKER + "\n")
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):
                pass
            return
        status = failed[0] & 0xFF
        try:
            sys.stderr.write("%s%d>\n" % (SCRIPT_FAILED_MARKER, status))
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
        _thread.start_new_thread(leave_after, (status, _wait()))
        try:
            atexit._run_exitfuncs()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError, AttributeError):
                    pass
            os._exit(status)

    threading._register_atexit(leave_if_failed)   # type: ignore[attr-defined]


def _chain() -> None:
    """Import the ``sitecustomize`` this one hides on ``sys.path``, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop(__name__, None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import importlib
        try:
            importlib.import_module("sitecustomize")
        except ImportError as e:
            if e.name != "sitecustomize":
                raise
    finally:
        sys.path[:] = saved
        if "sitecustomize" not in sys.modules and mine is not None:
            sys.modules[__name__] = mine


_TOP = "GLUON_CF_LAUNCH_EXIT_REPORT"
if os.environ.get("DMLC_ROLE") == "worker" and not os.environ.get(_TOP):
    os.environ[_TOP] = str(os.getpid())   # the worker's child Python processes keep theirs
    _install()
_chain()
