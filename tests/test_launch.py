"""Issue 26: data-parallel training on MXNet's parameter server under ``python -m
gluon_cf.launch``, on loopback: results equal to one process, a failed or silent worker stops
the whole job with one line and leaves no process behind, Ctrl-C stops it; node-balanced
shards; the ssh mode's commands; ``kvstore="device"`` over two CPU contexts.

Every job runs with a timeout, and every process it starts carries a marker in its
environment, by which `_leftovers` finds (and the fixture kills) whatever a job left behind.
"""
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import mxnet as mx
import numpy as np
import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf.data import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from gluon_cf.data.split import balanced_shards, count_shards, shard_loss_scale, shard_sizes
from gluon_cf.launch import cli, job
from gluon_cf.launch.job import ProcessSpec
from gluon_cf.launch.supervisor import Supervisor
from gluon_cf.launch import supervisor
from gluon_cf.launch.worker import (HEARTBEAT_ENV, HEARTBEAT_MARKER, SCRIPT_ENDED_MARKER,
                                     SCRIPT_FAILED_MARKER, heartbeat)
from gluon_cf.models import TreeLSTM
from gluon_cf.models.train import demo_splits

from conftest import REPO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_training  # noqa: E402

MODELS = ["treelstm", "treelstm_unbatched", "decoder", "lstm", "masked"]
JOB_TIMEOUT = 150


# ------------------------------------------------------------------------ running jobs

@pytest.fixture
def marker():
    """A value every process of the test's jobs carries in GLUON_CF_TEST_JOB; whatever is
    left at the end is killed (and the test asserts there is nothing)."""
    value = uuid.uuid4().hex
    yield value
    for proc in _leftovers(value):
        try:
            proc.kill()
        except psutil.Error:
            pass


def _leftovers(value):
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if proc.environ().get("GLUON_CF_TEST_JOB") == value:
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _launch(marker, args, timeout=JOB_TIMEOUT, **env_vars):
    env = dict(os.environ, GLUON_CF_TEST_JOB=marker, **env_vars)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gluon_cf.launch"] + args, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - start


def _worker_command(*args):
    return ["--", sys.executable, os.path.join(REPO, "tests", "dist_training.py")] + list(args)


def _saved(out, name, rank):
    arrays = np.load(os.path.join(out, "%s-rank%d.npz" % (name, rank)))
    return [arrays["arr_%d" % i] for i in range(len(arrays.files))]


# ------------------------------------------------------------- training on a parameter server

def test_dist_sync_training_equals_one_process_and_stops_cleanly(tmp_path, marker):
    """TreeLSTM under both recursion executors, an autograph-converted decoder, a foreach LSTM
    and a block of run-time shapes (boolean_mask), trained by 2 workers + 1 server on
    node-balanced shards, end with the parameters of one process trained on the whole
    mini-batches."""
    proc, _ = _launch(marker, ["-n", "2", "-s", "1", "--progress-timeout", "60"]
                      + _worker_command("--kvstore", "dist_sync", "--out", str(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "[worker 0] trained" in lines and "[worker 1] trained" in lines
    assert sorted(line.split("] ")[1] for line in lines if "rank " in line) == \
        ["rank 0 of 2", "rank 1 of 2"]
    reference = dist_training.train(MODELS, None)
    start = dist_training.train(MODELS, None, steps=0)
    for name in MODELS:
        moved = max(float(np.abs(a - b).max()) for a, b in zip(reference[name], start[name]))
        assert moved > 1e-3, name                          # the steps did change parameters
        for rank in (0, 1):
            for want, got in zip(reference[name], _saved(tmp_path, name, rank)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
    assert _leftovers(marker) == []


def test_a_killed_worker_stops_the_job_with_one_line_and_no_process_left(tmp_path, marker):
    """Without the launcher the other worker would wait in its next push for ever. (The
    progress timeout is far above the job's ~15 s: the whole job, three processes importing
    MXNet, must end before it even on a loaded machine, so that an end by the timeout, not by
    the kill, is what fails.)"""
    timeout = 120
    proc, seconds = _launch(marker, ["-n", "2", "-s", "1", "--progress-timeout", str(timeout)]
                            + _worker_command("--kvstore", "dist_sync", "--out", str(tmp_path),
                                              "--models", "lstm", "--die-at", "1",
                                              "--spawn-child"))
    assert proc.returncode == 128 + signal.SIGKILL, proc.stdout + proc.stderr
    reports = [line for line in proc.stderr.splitlines() if line.startswith("gluon_cf.launch")]
    assert len(reports) == 1, proc.stderr
    assert reports[0].startswith("gluon_cf.launch: worker 1 (pid ")
    assert "was killed by SIGKILL; stopped the job's other processes; last output: " in \
        reports[0]
    assert reports[0].endswith("step 0 | worker task 1 kills itself at step 1")
    assert seconds < timeout
    assert _leftovers(marker) == []                     # the sleep each worker left too


@pytest.mark.parametrize("how, at, status, last_words", [
    ("exit", 1, 3, "worker task 1 fails at step 1"),
    ("raise", 1, 1, "RuntimeError: worker task 1 raises at step 1"),
    ("pending", dist_training.STEPS - 1, 3, "worker task 1 fails at step 2 with a push pending")])
def test_a_worker_whose_script_fails_stops_the_job_with_its_status(tmp_path, marker, how, at,
                                                                    status, last_words):
    """``sys.exit(3)`` or an uncaught exception in worker 1's script: without NOTE [a failed
    worker exits at once] that worker waited in ps-lite's shutdown barrier, and the launcher
    stopped the job at the progress timeout with status 1. ``pending``: worker 1 exits with a
    kvstore push its peer never matches, so MXNet's exit functions wait for ever (as a push
    or pull still in flight did under load, status 1 again): NOTE [a failed worker's bounded
    exit] cuts them short (after 2 s here). The progress timeout is far above the job's time
    even on a loaded machine, as in the killed worker's test."""
    timeout = 120
    proc, seconds = _launch(marker, ["-n", "2", "-s", "1", "--progress-timeout", str(timeout)]
                            + _worker_command("--kvstore", "dist_sync", "--out", str(tmp_path),
                                              "--models", "lstm", "--fail-at", str(at),
                                              "--fail-how", how),
                            GLUON_CF_LAUNCH_FAILED_EXIT_WAIT="2")
    assert proc.returncode == status, proc.stdout + proc.stderr
    reports = [line for line in proc.stderr.splitlines() if line.startswith("gluon_cf.launch")]
    assert len(reports) == 1, proc.stderr
    assert reports[0].startswith("gluon_cf.launch: worker 1 (pid ")
    assert "exited with status %d; stopped the job's other processes" % status in reports[0]
    assert last_words in reports[0]      # stdout and stderr lines may interleave
    assert seconds < timeout
    assert _leftovers(marker) == []


def test_a_worker_that_ends_before_its_peers_is_named_when_they_stall(tmp_path, marker):
    """Worker 1's script ends (status 0) a step early: it waits in ps-lite's shutdown, worker 0
    in its next pull; the progress timeout's report says which worker ended first and why
    that stalls the job."""
    # 15 s, not less: the timeout also counts a worker's start (loading MXNet prints nothing),
    # which took over 8 s while other jobs loaded the machine (worker 0 was then named with no
    # output before worker 1 had ended its script).
    proc, _ = _launch(marker, ["-n", "2", "-s", "1", "--progress-timeout", "15"]
                      + _worker_command("--kvstore", "dist_sync", "--out", str(tmp_path),
                                        "--models", "lstm", "--fail-at", "1",
                                        "--fail-how", "return"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    reports = [line for line in proc.stderr.splitlines() if line.startswith("gluon_cf.launch")]
    assert len(reports) == 1, proc.stderr
    assert reports[0].startswith("gluon_cf.launch: worker 0 (pid ")
    assert re.search(r"made no progress \(no output, no heartbeat\) for 1[5-9] s "
                     r"\(--progress-timeout\); worker 1 ended its script before it: every worker "
                     r"must run as many steps \(pushes and pulls\) as the others; stopped",
                     reports[0]), reports[0]
    assert "script ended" not in proc.stdout + proc.stderr.replace(reports[0], "")
    assert _leftovers(marker) == []


def test_the_script_ended_marker_is_the_same_in_both_files():
    """The worker's sitecustomize cannot import gluon_cf (it would import MXNet first)."""
    namespace = {"__name__": "not_sitecustomize"}
    with open(os.path.join(job.EXIT_REPORT_DIR, "sitecustomize.py")) as f:
        source = f.read()
    exec(compile(source.split("\ndef _install")[0], "sitecustomize.py", "exec"), namespace)
    from gluon_cf.launch.worker import FAILED_EXIT_WAIT, SCRIPT_FAILED_MARKER
    assert namespace["SCRIPT_ENDED_MARKER"] == SCRIPT_ENDED_MARKER
    assert namespace["SCRIPT_FAILED_MARKER"] == SCRIPT_FAILED_MARKER
    assert namespace["FAILED_EXIT_WAIT"] == FAILED_EXIT_WAIT


_FAILING_SCRIPT = """
import atexit, subprocess, sys
class Freed:
    def __del__(self):
        print("freed at teardown", flush=True)
freed = Freed()
atexit.register(lambda: print("atexit ran", flush=True))
child = subprocess.run([sys.executable, "-c", "import sys; sys.exit(5)"])
print("child status", child.returncode)
sys.exit(4)
"""


@pytest.mark.parametrize("role", ["worker", None])
def test_exit_report_leaves_a_failed_worker_before_teardown_and_chains_sitecustomize(
        tmp_path, role):
    """The worker's ``sitecustomize``: a failing status leaves after ``atexit`` (output
    flushed, the user's own ``sitecustomize`` still loaded) but before module teardown, where
    MXNet's kvstore would join ps-lite's barrier; outside a worker, and in a worker's child
    Python processes, nothing changes."""
    user_site = tmp_path / "user_site"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("print('user sitecustomize', flush=True)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "GLUON_CF_"))}
    env["PYTHONPATH"] = os.pathsep.join([job.EXIT_REPORT_DIR, str(user_site)])
    if role:
        env["DMLC_ROLE"] = role
    proc = subprocess.run([sys.executable, "-c", _FAILING_SCRIPT], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines.count("user sitecustomize") == 2         # this process and its child
    assert "child status 5" in lines and "atexit ran" in lines
    assert ("freed at teardown" in lines) == (role is None)


@pytest.mark.parametrize("fail, status", [("sys.exit(3)", 3), ("raise RuntimeError('x')", 1)])
def test_a_failed_worker_whose_exit_functions_wait_for_ever_still_exits_with_its_status(
        tmp_path, fail, status):
    """NOTE [a failed worker's bounded exit]: an ``atexit`` function that never returns (as
    MXNet's ``waitall`` waiting for a push its peers never answer did, under load) is cut short
    after the wait (1 s here); the status is the script's, announced on standard error first."""
    script = ("import atexit, sys, time\natexit.register(lambda: time.sleep(600))\n"
              "print('failing', flush=True)\n%s\n" % fail)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "GLUON_CF_"))}
    env.update(PYTHONPATH=job.EXIT_REPORT_DIR, DMLC_ROLE="worker",
               GLUON_CF_LAUNCH_FAILED_EXIT_WAIT="1")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == status, proc.stderr
    assert time.monotonic() - start < 60
    assert proc.stdout == "failing\n"
    assert "%s%d>" % (SCRIPT_FAILED_MARKER, status) in proc.stderr.splitlines()


@pytest.mark.parametrize("kvstore", ["dist_sync", "dist_async"])
def test_the_demo_trains_data_parallel_to_the_end_and_rank_0_saves_once(tmp_path, marker,
                                                                         kvstore):
    """Every worker ends at the same epoch with the same best epoch (early stopping decided
    alike, dist_async too); one report, one saved file."""
    save = tmp_path / "best.params"
    proc, _ = _launch(marker, ["-n", "2", "-s", "1", "--", sys.executable, "-m",
                               "gluon_cf.demo", "--kvstore", kvstore, "--trees", "30",
                               "--epochs", "3", "--patience", "1", "--save", str(save)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    finals = [line for line in lines if "] best epoch" in line]
    assert len(finals) == 1 and finals[0].startswith("[worker "), proc.stdout
    ends = sorted(line.split("] ", 1)[1] for line in lines if "] rank " in line)
    assert len(ends) == 2 and ends[0].startswith("rank 0 of 2: best epoch ")
    assert ends[0].split(":")[1] == ends[1].split(":")[1], ends
    assert HEARTBEAT_MARKER not in proc.stdout + proc.stderr
    net = TreeLSTM(len(demo_splits(30)[1]), embed_size=48, hidden_size=48, num_classes=5)
    net.load_parameters(str(save))
    assert _leftovers(marker) == []


# ------------------------------------------------------------------ the supervisor alone

def _python_worker(code, index=0):
    return ProcessSpec("worker", index, "127.0.0.1", [sys.executable, "-c", code],
                       {HEARTBEAT_ENV: "1"})


# The grace period between SIGTERM and SIGKILL of a stopped job's processes (the CLI's is
# 3 s): these workers die at SIGTERM; a failed worker's exit is awaited for twice it.
GRACE = 0.5


def _supervise(specs, progress_timeout):
    out, err = io.StringIO(), io.StringIO()
    outcome = Supervisor(specs, progress_timeout, grace=GRACE, stdout=out, stderr=err).run()
    return outcome, out.getvalue(), err.getvalue()


def _beating(seconds, then=""):
    """A worker's code: heartbeats every 0.2 s for ``seconds``, then ``then``."""
    return ("import sys, time\nfor _ in range(%d):\n    sys.stderr.write(%r + '\\n')\n"
            "    sys.stderr.flush(); time.sleep(0.2)\n%s" % (seconds * 5, HEARTBEAT_MARKER, then))


def test_a_silent_worker_is_stopped_after_the_progress_timeout():
    start = time.monotonic()
    outcome, out, err = _supervise([_python_worker("import time; time.sleep(60)"),
                                    _python_worker("print('started', flush=True)\n"
                                                   + _beating(60), 1)], 1.0)
    seconds = time.monotonic() - start
    assert outcome.status == 1
    assert outcome.report.startswith("gluon_cf.launch: worker 0 (pid ")
    assert "made no progress (no output, no heartbeat) for 1 s (--progress-timeout); " \
           "stopped the job's other processes; last output: (none)" in outcome.report
    assert seconds < 40       # the other one was stopped too (it would beat for 60 s)
    assert out == "[worker 1] started\n" and err == ""     # heartbeats are not forwarded


def test_workers_that_all_ended_their_scripts_but_never_exit_are_stopped():
    """Every worker ended its script (the exit report's marker) and hangs in ps-lite's
    shutdown: the ended workers are not blamed while a peer still trains, but once all have
    ended, the stalled shutdown is named."""
    ended = "import sys, time\nsys.stderr.write(%r + '\\n'); sys.stderr.flush()\n" \
        "time.sleep(60)\n" % SCRIPT_ENDED_MARKER
    start = time.monotonic()
    outcome, out, err = _supervise([_python_worker(ended),
                                    _python_worker(_beating(2, ended), 1)], 1.0)
    assert time.monotonic() - start > 2                  # not while worker 1 still beat
    assert outcome.status == 1
    assert outcome.report.startswith("gluon_cf.launch: worker 0 (pid ")
    assert re.search(r"ended its script but has not exited for \d+ s \(--progress-timeout\): "
                     r"ps-lite's shutdown did not finish; stopped", outcome.report)
    assert out == "" and err == ""                      # markers are not forwarded


def test_a_failed_worker_is_the_one_blamed_while_its_exit_is_awaited(monkeypatch):
    """Worker 1 announced its script's failure (status 3) and then does not exit; worker 0 is
    silent past the progress timeout, as a peer of a failed worker is: the job waits for worker
    1's exit (NOTE [a failed worker's bounded exit]; 0.5 s here, plus twice the grace), then
    reports worker 1 with its status, not worker 0's silence."""
    monkeypatch.setattr(supervisor, "FAILED_EXIT_WAIT", 0.5)
    failed = "import sys, time\nprint('failing', flush=True)\n" \
        "sys.stderr.write(%r + '3>\\n'); sys.stderr.flush()\ntime.sleep(60)\n" \
        % SCRIPT_FAILED_MARKER
    start = time.monotonic()
    outcome, out, err = _supervise([_python_worker("import time; time.sleep(60)"),
                                    _python_worker(failed, 1)], 1.0)
    assert 0.5 + 2 * GRACE < time.monotonic() - start < 30
    assert outcome.status == 3, outcome.report
    assert outcome.report.startswith("gluon_cf.launch: worker 1 (pid ")
    assert re.search(r"ended its script with status 3 but had not exited \d+ s later; "
                     r"stopped the job's other processes; last output: failing$",
                     outcome.report), outcome.report
    assert out == "[worker 1] failing\n" and err == ""   # the marker is not forwarded


def test_heartbeats_keep_a_worker_alive_and_a_failure_quotes_its_last_lines():
    code = _beating(2, "print('one'); print('two'); print('three'); print('four')\n"
                       "sys.exit(3)\n")
    outcome, out, err = _supervise([_python_worker(code)], 1.0)   # 2 s of heartbeats only
    assert outcome.status == 3, outcome.report
    pid = outcome.report.split("(pid ")[1].split(")")[0]
    assert outcome.report == ("gluon_cf.launch: worker 0 (pid %s) exited with status 3; "
                              "stopped the job's other processes; last output: two | three | "
                              "four" % pid)
    assert out == "".join("[worker 0] %s\n" % w for w in ("one", "two", "three", "four"))
    assert err == ""


def test_sigterm_to_the_launcher_stops_the_whole_job(marker):
    code = ("import sys\nfrom gluon_cf.launch.job import ProcessSpec\n"
            "from gluon_cf.launch.supervisor import Supervisor\n"
            "spec = ProcessSpec('worker', 0, '127.0.0.1', [sys.executable, '-c', "
            "'import subprocess, time; subprocess.Popen([\"sleep\", \"60\"]); "
            "print(\"ready\", flush=True); time.sleep(60)'])\n"
            "outcome = Supervisor([spec], None, grace=1.0).run()\n"
            "print(outcome.report, file=sys.stderr); sys.exit(outcome.status)\n")
    env = dict(os.environ, GLUON_CF_TEST_JOB=marker)
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert launcher.stdout.readline() == "[worker 0] ready\n"
        launcher.send_signal(signal.SIGTERM)
        _, err = launcher.communicate(timeout=30)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signal.SIGTERM
    assert err.strip() == "gluon_cf.launch: interrupted by SIGTERM: stopped the job's 1 " \
                          "processes"
    assert _leftovers(marker) == []


def test_heartbeat_writes_a_marker_line_under_the_launcher_only(monkeypatch, capsys):
    monkeypatch.delenv(HEARTBEAT_ENV, raising=False)
    heartbeat()
    monkeypatch.setenv(HEARTBEAT_ENV, "1")
    monkeypatch.setattr("gluon_cf.launch.worker._last_beat", [float("-inf")])
    heartbeat()
    heartbeat()                                   # within a second: not written again
    assert capsys.readouterr() == ("", HEARTBEAT_MARKER + "\n")


# ------------------------------------------------------------ the command line, ssh mode

def _error_of(argv, capsys):
    try:
        status = cli.main(argv)
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return status, err.strip()


def test_bad_command_lines_say_what_is_wrong_in_one_line(tmp_path, capsys):
    assert _error_of(["-n", "0", "--", "true"], capsys) == (
        2, "python -m gluon_cf.launch: error: argument -n/--num-workers: expected a positive "
           "integer, got '0' (see --help)")
    assert _error_of(["-n", "2"], capsys) == (
        2, "python -m gluon_cf.launch: error: no command to run: give it after '--', e.g. -- "
           "python train.py (see --help)")
    missing = str(tmp_path / "hosts.txt")
    assert _error_of(["-n", "2", "--hosts", missing, "--", "true"], capsys) == (
        2, "python -m gluon_cf.launch: cannot read the hosts file %s: No such file or "
           "directory" % missing)
    (tmp_path / "hosts.txt").write_text("localhost\nno-such-host.invalid:22\n")
    status, err = _error_of(["-n", "2", "--hosts", missing, "--", "true"], capsys)
    assert status == 2 and err.startswith(
        "python -m gluon_cf.launch: host 'no-such-host.invalid' of %s cannot be resolved: "
        % missing)
    (tmp_path / "hosts.txt").write_text("localhost:ssh\n")
    assert _error_of(["-n", "2", "--hosts", missing, "--", "true"], capsys) == (
        2, "python -m gluon_cf.launch: %s:1: expected 'host' or 'host:ssh_port', got "
           "'localhost:ssh'" % missing)


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, err = _error_of(["-n", "1", "--port", str(port), "--", "true"], capsys)
    assert status == 2
    assert err == ("python -m gluon_cf.launch: port %d on 127.0.0.1 is not free (Address "
                   "already in use): choose another with --port, or leave --port out for a "
                   "free one" % port)


def test_ssh_mode_places_servers_then_workers_round_robin_with_the_dmlc_environment():
    specs = job.ssh_job(["python", "train.py", "--tag", "a b"], num_workers=3, num_servers=1,
                        port=9091, hosts=[("node-a", 22), ("node-b", 2222)],
                        root_uri="10.0.0.5", workdir="/data/run 1",
                        environ={"DMLC_INTERFACE": "eth1", "HOME": "/root",
                                 "PYTHONPATH": "/opt/lib"})
    assert [(s.name, s.host) for s in specs] == [
        ("scheduler", "10.0.0.5"), ("server 0", "node-a"), ("worker 0", "node-b"),
        ("worker 1", "node-a"), ("worker 2", "node-b")]
    scheduler = specs[0]
    assert scheduler.argv == [sys.executable, "-c", "import mxnet"]
    assert scheduler.env == {"DMLC_PS_ROOT_URI": "10.0.0.5", "DMLC_PS_ROOT_PORT": "9091",
                             "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "3",
                             "DMLC_ROLE": "scheduler", "DMLC_TASK_ID": "0"}
    worker = specs[4]
    assert worker.argv[:8] == ["ssh", "-tt", "-o", "StrictHostKeyChecking=no", "-o",
                               "BatchMode=yes", "-p", "2222"]
    assert worker.argv[8] == "node-b"
    assert worker.argv[9] == (
        "export DMLC_INTERFACE=eth1; export PYTHONPATH=%s:/opt/lib; "
        "export DMLC_PS_ROOT_URI=10.0.0.5; "
        "export DMLC_PS_ROOT_PORT=9091; export DMLC_NUM_SERVER=1; export DMLC_NUM_WORKER=3; "
        "export DMLC_NODE_HOST=node-b; export DMLC_ROLE=worker; export DMLC_TASK_ID=2; "
        "export %s=1; cd '/data/run 1'; python train.py --tag 'a b'"
        % (job.EXIT_REPORT_DIR, HEARTBEAT_ENV))
    assert "DMLC_ROLE=server" in specs[1].argv[9] and HEARTBEAT_ENV not in specs[1].argv[9]
    assert "PYTHONPATH=/opt/lib;" in specs[1].argv[9]   # no exit report: not a worker


_STAND_IN_SSH = """#!%s
# Runs an ssh command line's remote command here: what the launcher asks of ssh, minus the
# network (no sshd on the test machine).
import os, sys
args = sys.argv[1:]
while args[0].startswith("-"):
    args = args[2:] if args[0] in ("-o", "-p") else args[1:]
os.execvp("bash", ["bash", "-c", args[1]])
"""


@pytest.mark.parametrize("fail", [False, True])
def test_ssh_mode_trains_through_ssh_and_stops_a_failed_job(tmp_path, marker, fail):
    """The hosts-file mode end to end, each remote command run by a stand-in ``ssh`` on this
    machine's loopback: the exported DMLC environment, ``cd`` and quoting reach the workers,
    which train to the end; a worker that fails stops the job with its status."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(_STAND_IN_SSH % sys.executable)
    (bin_dir / "ssh").chmod(0o755)
    (tmp_path / "hosts.txt").write_text("127.0.0.1\nlocalhost:2222  # a second host\n")
    out = tmp_path / "out dir"
    out.mkdir()
    env = dict(os.environ, GLUON_CF_TEST_JOB=marker,
               PATH=str(bin_dir) + os.pathsep + os.environ["PATH"],
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    args = ["-n", "2", "-s", "1", "--hosts", str(tmp_path / "hosts.txt"), "--host-ip",
            "127.0.0.1", "--workdir", str(out), "--progress-timeout", "60"] + \
        _worker_command("--kvstore", "dist_sync", "--out", ".", "--models", "lstm",
                        *(["--fail-at", "1"] if fail else []))
    proc = subprocess.run([sys.executable, "-m", "gluon_cf.launch"] + args, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=JOB_TIMEOUT)
    if fail:
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "gluon_cf.launch: worker 1 (pid " in proc.stderr
        assert ", ssh to 127.0.0.1) exited with status 3" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert sorted(os.listdir(out)) == ["lstm-rank0.npz", "lstm-rank1.npz"]
        reference = dist_training.train(["lstm"], None)["lstm"]
        for rank in (0, 1):
            for want, got in zip(reference, _saved(out, "lstm", rank)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert _leftovers(marker) == []


def test_dry_run_prints_the_local_job(capsys, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    port = job.free_port("127.0.0.1")
    assert cli.main(["-n", "2", "-s", "1", "--port", str(port), "--dry-run", "--", "python",
                     "t.py", "a b"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["scheduler", "server 0", "worker 0",
                                                    "worker 1"]
    assert out[2] == (
        "worker 0: DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=%d DMLC_NUM_SERVER=1 "
        "DMLC_NUM_WORKER=2 DMLC_NODE_HOST=127.0.0.1 DMLC_ROLE=worker DMLC_TASK_ID=0 %s=1 "
        "PYTHONPATH=%s python t.py 'a b'" % (port, HEARTBEAT_ENV, job.EXIT_REPORT_DIR))


# ------------------------------------------------------------------------- balanced shards

@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=40), st.integers(1, 6))
def test_balanced_shards_partition_the_batch_and_bound_the_largest(sizes, num_shards):
    if len(sizes) < num_shards:
        with pytest.raises(ValueError, match="cannot give each of %d shards" % num_shards):
            balanced_shards(sizes, num_shards)
        return
    shards = balanced_shards(sizes, num_shards)
    assert sorted(i for shard in shards for i in shard) == list(range(len(sizes)))
    assert all(shard and shard == sorted(shard) for shard in shards)
    totals = shard_sizes(sizes, shards)
    assert max(totals) <= sum(sizes) / num_shards + max(sizes)      # LPT's bound
    counts = [len(s) for s in count_shards(len(sizes), num_shards)]
    assert max(counts) - min(counts) <= 1
    assert balanced_shards(sizes, num_shards) == shards              # the same everywhere


@pytest.mark.parametrize("sizes, num_shards", [([0, 0], 2), ([0, 0, 0], 3), ([5, 0, 0], 3),
                                               ([7, 0, 0, 0, 3], 4)])
def test_balanced_shards_give_every_shard_an_item_of_size_zero_too(sizes, num_shards):
    # Once gave [[0, 1], []] for sizes [0, 0]: equal totals went to the lowest shard.
    shards = balanced_shards(sizes, num_shards)
    assert all(shards), shards
    assert sorted(i for shard in shards for i in shard) == list(range(len(sizes)))


def test_the_gradient_does_not_depend_on_the_split():
    trees = synthetic_treebank(9, shape="sst", seed=2)
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab) for t in trees]
    net = TreeLSTM(len(vocab), embed_size=5, hidden_size=5, num_classes=5)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def gradients(shards):
        total = None
        for shard in shards:
            forest = batchify_forest([encoded[i] for i in shard])
            inputs = [mx.nd.array(a) for a in (forest.tokens, forest.left, forest.right,
                                               forest.roots)]
            with autograd.record():
                loss = loss_fn(net(*inputs), mx.nd.array(forest.root_labels)).sum() \
                    * shard_loss_scale(len(encoded))
            loss.backward()
            grads = [p.grad().asnumpy() for p in net.collect_params().values()]
            total = grads if total is None else [a + b for a, b in zip(total, grads)]
        return total

    whole = gradients([list(range(9))])
    sizes = [t.num_nodes for t in encoded]
    for shards in (count_shards(9, 3), balanced_shards(sizes, 3)):
        for want, got in zip(whole, gradients(shards)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert shard_sizes(sizes, balanced_shards(sizes, 3)) != shard_sizes(sizes,
                                                                       count_shards(9, 3))


# ------------------------------------------------------------ several devices, one process

def test_device_kvstore_over_two_cpu_contexts_equals_one_context():
    """Each context its node-balanced shard, kvstore='device' sums the gradients."""
    def train(contexts):
        gluon_cf.set_executor("batched")
        net, inputs_of, sizes = dist_training._model("treelstm")
        net.initialize(mx.init.Xavier(), ctx=contexts)
        net.hybridize()
        rng = np.random.RandomState(11)
        net(*[a.as_in_context(contexts[0]) for a in inputs_of([0, 1])[0]])
        for param in net.collect_params().values():
            param.set_data(mx.nd.array(rng.uniform(-0.4, 0.4, param.shape)))
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5},
                                kvstore="device")
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        for step in range(dist_training.STEPS):
            batch = list(range(step * 4, step * 4 + 4))
            shards = balanced_shards([sizes[i] for i in batch], len(contexts))
            with autograd.record():
                losses = []
                for ctx, shard in zip(contexts, shards):
                    inputs, labels = inputs_of([batch[i] for i in shard])
                    out = net(*[a.as_in_context(ctx) for a in inputs])
                    losses.append(loss_fn(out, labels.as_in_context(ctx)).sum()
                                  * shard_loss_scale(len(batch)))
            autograd.backward(losses)
            trainer.step(1)
        return [p.data(contexts[0]).asnumpy() for p in net.collect_params().values()]

    one = train([mx.cpu(0)])
    for want, got in zip(one, train([mx.cpu(0), mx.cpu(1)])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

