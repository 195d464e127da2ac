"""Running a job's processes: forward their output, watch them, stop them all on a failure.

NOTE [stopping a job]: in a ps-lite job, one dead process leaves the others waiting in the next
push, pull or barrier for ever (measured: a worker that exits after its first step blocks its
peer until killed). So the supervisor treats the job as one unit. Each process starts in a
session (and process group) of its own; when a process exits non-zero or by a signal, a worker
makes no progress for ``progress_timeout`` seconds (NOTE [progress of a worker]), or the
launcher receives SIGINT or SIGTERM, every process group gets SIGTERM, then SIGKILL after a
grace period, and the processes' descendants found before (which may have left their group)
get SIGKILL too. The launcher then prints one line naming the process, how it failed and its
last lines of output. The first failure is the one reported; the others follow from stopping.
A worker whose script fails exits with its script's status at once rather than waiting in
ps-lite's shutdown (NOTE [a failed worker exits at once]), so that failure is the first; it
says so on standard error before its exit functions run, and from then on no silent peer is
blamed: the job waits for that worker's exit, which comes within `FAILED_EXIT_WAIT` seconds
(NOTE [a failed worker's bounded exit]), and stops it after that plus the grace period if it
has still not come.
"""
import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Deque, Dict, List, Optional, TextIO

import psutil

from .job import ProcessSpec
from .worker import FAILED_EXIT_WAIT, HEARTBEAT_MARKER, SCRIPT_ENDED_MARKER, \
    SCRIPT_FAILED_MARKER

__all__ = ["Supervisor", "Outcome"]

_POLL = 0.05
_LAST_LINES = 3
_FAILED = re.compile(re.escape(SCRIPT_FAILED_MARKER) + r"(\d+)>")


class _Running:
    """A started process: its `Popen`, its last lines of output, when it last made progress."""

    def __init__(self, spec: ProcessSpec, popen: subprocess.Popen):
        self.spec = spec
        self.popen = popen
        self.last_lines: Deque[str] = collections.deque(maxlen=_LAST_LINES)
        self.last_progress = time.monotonic()
        self.script_ended = False       # a worker whose script returned, now in ps-lite's exit
        self.failed_at: Optional[float] = None   # when its script failed, with this status:
        self.failed_status = 0                   # NOTE [a failed worker's bounded exit]
        self.readers: List[threading.Thread] = []


class Outcome:
    """How a job ended: the launcher's exit status and its one-line report (None: success)."""

    def __init__(self, status: int, report: Optional[str]):
        self.status = status
        self.report = report


def _describe_status(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal %d" % -returncode
        return "was killed by %s" % name
    return "exited with status %d" % returncode


def _exit_status(returncode: int) -> int:
    """The shell's convention: 128 + N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """Runs ``specs`` and returns an `Outcome` from `run` (NOTE [stopping a job])."""

    def __init__(self, specs: List[ProcessSpec], progress_timeout: Optional[float],
                 grace: float = 3.0, shutdown_timeout: float = 30.0,
                 stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr):
        self.specs = specs
        self.progress_timeout = progress_timeout
        self.grace = grace
        self.shutdown_timeout = shutdown_timeout
        self.stdout, self.stderr = stdout, stderr
        self.running: List[_Running] = []
        self.interrupted: Optional[str] = None
        self._lock = threading.Lock()

    # -- output ---------------------------------------------------------------------------

    def _forward(self, proc: _Running, pipe, out: TextIO) -> None:
        prefix = "[%s] " % proc.spec.name
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            proc.last_progress = time.monotonic()
            markers = [m for m in (HEARTBEAT_MARKER, SCRIPT_ENDED_MARKER) if m in line]
            for marker in markers:
                line = line.replace(marker, "")
            proc.script_ended |= SCRIPT_ENDED_MARKER in markers
            failed = _FAILED.search(line)
            if failed:
                line = line[:failed.start()] + line[failed.end():]
                markers.append(SCRIPT_FAILED_MARKER)
                proc.failed_status = int(failed.group(1))
                if proc.failed_at is None:
                    proc.failed_at = proc.last_progress
            if markers and not line.strip():
                continue
            proc.last_lines.append(line)
            with self._lock:
                try:
                    out.write(prefix + line + "\n")
                    out.flush()
                except (OSError, ValueError):
                    pass
        pipe.close()

    # -- starting and stopping ----------------------------------------------------------

    def _start(self, spec: ProcessSpec) -> _Running:
        env = dict(os.environ, **spec.env)
        env["PYTHONUNBUFFERED"] = "1"     # lines reach the launcher as they are printed
        popen = subprocess.Popen(spec.argv, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        proc = _Running(spec, popen)
        for pipe, out in ((popen.stdout, self.stdout), (popen.stderr, self.stderr)):
            reader = threading.Thread(target=self._forward, args=(proc, pipe, out),
                                      daemon=True)
            reader.start()
            proc.readers.append(reader)
        return proc

    def stop_all(self) -> None:
        """Stop every process of the job and its descendants (NOTE [stopping a job])."""
        descendants: Dict[int, psutil.Process] = {}
        for proc in self.running:
            try:
                for child in psutil.Process(proc.popen.pid).children(recursive=True):
                    descendants[child.pid] = child
            except psutil.Error:
                pass
        alive = [p for p in self.running if p.popen.poll() is None]
        for sig, wait in ((signal.SIGTERM, self.grace), (signal.SIGKILL, self.grace)):
            for proc in alive:
                try:
                    os.killpg(proc.popen.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + wait
            while alive and time.monotonic() < deadline:
                alive = [p for p in alive if p.popen.poll() is None]
                time.sleep(_POLL)
            if not alive:
                break
        for child in descendants.values():
            try:
                child.kill()
            except psutil.Error:
                pass
        for proc in self.running:
            try:
                os.killpg(proc.popen.pid, signal.SIGKILL)   # stragglers left in the group
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.popen.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:   # SIGKILLed but not yet gone (uninterruptible)
                pass
            for reader in proc.readers:
                reader.join(timeout=1.0)

    def _on_signal(self, signum, frame) -> None:
        self.interrupted = signal.Signals(signum).name

    # -- the job --------------------------------------------------------------------------

    def _report(self, proc: _Running, how: str) -> str:
        for reader in proc.readers:            # its last words, before they are quoted
            reader.join(timeout=1.0)
        lines = " | ".join(line.strip() for line in proc.last_lines if line.strip())
        where = ", ssh to %s" % proc.spec.host if proc.spec.remote else ""
        return "gluon_cf.launch: %s (pid %d%s) %s; stopped the job's other processes; last " \
               "output: %s" % (proc.spec.name, proc.popen.pid, where, how, lines or "(none)")

    def _stall(self, proc: _Running, now: float) -> str:
        silent = "%.0f s (--progress-timeout)" % (now - proc.last_progress)
        if proc.script_ended:      # so had every worker: the job's shutdown itself stalls
            return "ended its script but has not exited for %s: ps-lite's shutdown did not " \
                   "finish" % silent
        ended = [p.spec.name for p in self.running if p.script_ended]
        why = "; %s ended its script before it: every worker must run as many steps " \
              "(pushes and pulls) as the others" % " and ".join(ended) if ended else ""
        return "made no progress (no output, no heartbeat) for %s%s" % (silent, why)

    def _failure(self, now: float) -> Optional[Outcome]:
        """The first failure among the running processes, or None."""
        for proc in self.running:
            code = proc.popen.poll()
            if code is not None and code != 0:
                return Outcome(_exit_status(code), self._report(proc, _describe_status(code)))
        failed = [(p.failed_at, i) for i, p in enumerate(self.running)
                  if p.failed_at is not None]
        if failed:                      # its exit is coming: NOTE [a failed worker's bounded exit]
            since, first = min(failed)
            if now - since <= FAILED_EXIT_WAIT + 2 * self.grace:
                return None
            proc = self.running[first]
            return Outcome(proc.failed_status, self._report(
                proc, "ended its script with status %d but had not exited %.0f s later"
                % (proc.failed_status, now - since)))
        if self.progress_timeout:
            workers = [p for p in self.running if p.spec.role == "worker"]
            # A worker whose script ended waits in ps-lite's shutdown for its peers: silent,
            # and not the one to blame, unless every worker has ended.
            watched = [p for p in workers if not p.script_ended] or workers
            for proc in watched:
                if proc.popen.poll() is None and \
                        now - proc.last_progress > self.progress_timeout:
                    return Outcome(1, self._report(proc, self._stall(proc, now)))
        return None

    def run(self) -> Outcome:
        handlers = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            return self._run()
        finally:
            self.stop_all()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _run(self) -> Outcome:
        for spec in self.specs:
            try:
                self.running.append(self._start(spec))
            except OSError as e:
                return Outcome(127, "gluon_cf.launch: cannot start %s (%s): %s"
                               % (spec.name, " ".join(spec.argv[:1]), e.strerror or e))
        workers = [p for p in self.running if p.spec.role == "worker"]
        while True:
            if self.interrupted:
                return Outcome(128 + getattr(signal, self.interrupted).value,
                               "gluon_cf.launch: interrupted by %s: stopped the job's %d "
                               "processes" % (self.interrupted, len(self.running)))
            now = time.monotonic()
            failure = self._failure(now)
            if failure is not None:
                return failure
            if all(p.popen.poll() == 0 for p in workers):
                break
            time.sleep(_POLL)
        # Every worker succeeded: servers and the scheduler exit once the workers finalise.
        deadline = time.monotonic() + self.shutdown_timeout
        while time.monotonic() < deadline and not self.interrupted:
            if all(p.popen.poll() is not None for p in self.running):
                break
            time.sleep(_POLL)
        for reader in (r for p in self.running for r in p.readers):
            reader.join(timeout=1.0)
        return Outcome(0, None)
