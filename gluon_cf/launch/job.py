"""The processes of a parameter-server job: who runs what, where, with which environment.

A job is one scheduler, ``num_servers`` servers and ``num_workers`` workers (ps-lite's roles,
chosen by ``DMLC_ROLE``). As MXNet 1.9.1's ``tools/launch.py`` (dmlc-core's tracker) does:

* local mode: every process runs on this machine; here on loopback (``DMLC_PS_ROOT_URI`` and
  ``DMLC_NODE_HOST`` are 127.0.0.1), so a job needs no network and opens no port to it;
* ssh mode (``--hosts FILE``): the scheduler runs on this machine, servers then workers are
  placed round-robin on the hosts of the file (``host`` or ``host:ssh_port`` per line, ``#``
  comments), each started as ``ssh host 'export DMLC_...; cd DIR; COMMAND'``.

Servers and the scheduler run the user's command too when started over ssh (as MXNet's
launcher does: ``import mxnet`` starts them and exits, so the rest of the script never runs);
locally they run ``python -c "import mxnet"`` with this interpreter, which is all they need.

NOTE [ranks of a job]: ps-lite's scheduler numbers the workers (``kv.rank``) once all have
registered, in an order of their addresses, not in the order they were started; no
environment variable chooses it in MXNet 1.9.1. So the launcher names a worker by its place
in the job (``worker 0``, ``worker 1``: ``DMLC_TASK_ID``, as dmlc-core's local tracker sets
it), and a training script shards its data by ``kv.rank`` and ``kv.num_workers``.
"""
import os
import shlex
import socket
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .worker import HEARTBEAT_ENV

__all__ = ["LaunchError", "ProcessSpec", "read_hosts", "check_port", "free_port",
           "local_job", "ssh_job", "resolve_hosts", "FORWARDED_ENV"]

LOOPBACK = "127.0.0.1"
#: Variables passed to remote processes when set here (dmlc-core's ssh tracker passes these).
FORWARDED_ENV = ("OMP_NUM_THREADS", "LD_LIBRARY_PATH", "DMLC_INTERFACE", "PS_VERBOSE",
                 "MXNET_KVSTORE_BIGARRAY_BOUND", "PYTHONPATH")


class LaunchError(Exception):
    """A job that cannot start: the one line the launcher prints before exiting non-zero."""


@dataclass
class ProcessSpec:
    """One process of a job: ``argv`` run with this machine's environment plus ``env``."""
    role: str                   # "scheduler", "server" or "worker"
    index: int                  # place among the processes of its role
    host: str                   # where it runs (LOOPBACK in local mode)
    argv: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    remote: bool = False        # started over ssh on ``host``

    @property
    def name(self) -> str:
        return self.role if self.role == "scheduler" else "%s %d" % (self.role, self.index)


def _dmlc_env(root_uri: str, port: int, num_servers: int, num_workers: int) -> Dict[str, str]:
    return {"DMLC_PS_ROOT_URI": root_uri, "DMLC_PS_ROOT_PORT": str(port),
            "DMLC_NUM_SERVER": str(num_servers), "DMLC_NUM_WORKER": str(num_workers)}


#: Put first on every worker's ``PYTHONPATH``: NOTE [a failed worker exits at once].
EXIT_REPORT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exit_report")


def _role_env(role: str, index: int, pythonpath: Optional[str]) -> Dict[str, str]:
    env = {"DMLC_ROLE": role, "DMLC_TASK_ID": str(index)}
    if role == "worker":
        env[HEARTBEAT_ENV] = "1"
        env["PYTHONPATH"] = os.pathsep.join([EXIT_REPORT_DIR] + ([pythonpath] if pythonpath
                                                                 else []))
    return env


_SERVER_ARGV = [sys.executable, "-c", "import mxnet"]


def local_job(command: Sequence[str], num_workers: int, num_servers: int,
              port: int) -> List[ProcessSpec]:
    """The processes of a job on this machine, on loopback (see the module's docstring)."""
    base = _dmlc_env(LOOPBACK, port, num_servers, num_workers)
    base["DMLC_NODE_HOST"] = LOOPBACK        # servers and workers bind and advertise loopback
    pythonpath = os.environ.get("PYTHONPATH")
    specs = [ProcessSpec(role, i, LOOPBACK, list(command if role == "worker" else _SERVER_ARGV),
                         dict(base, **_role_env(role, i, pythonpath)))
             for role, count in (("scheduler", 1), ("server", num_servers),
                                 ("worker", num_workers)) for i in range(count)]
    return specs


def read_hosts(path: str) -> List[Tuple[str, int]]:
    """``(host, ssh_port)`` per line of a hosts file (``host`` or ``host:port``; blank lines and
    ``#`` comments skipped); `LaunchError` for a missing or empty file or a bad line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise LaunchError("cannot read the hosts file %s: %s" % (path, e.strerror or e)) from e
    hosts = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        host, _, port = text.partition(":")
        if not host or " " in text or (port and not port.isdigit()):
            raise LaunchError("%s:%d: expected 'host' or 'host:ssh_port', got %r"
                              % (path, number, line.strip()))
        hosts.append((host, int(port) if port else 22))
    if not hosts:
        raise LaunchError("the hosts file %s names no host" % path)
    return hosts


def resolve_hosts(hosts: Sequence[Tuple[str, int]], path: str) -> Dict[str, str]:
    """``{host: IPv4 address}`` for the hosts of a hosts file; `LaunchError` naming the first
    that does not resolve.

    NOTE [a node's address]: ps-lite binds each process's ZeroMQ socket to
    ``tcp://DMLC_NODE_HOST:port``, and ZeroMQ binds only to an address or an interface name,
    never a host name (``localhost`` included: ``Check failed: my_node_.port != -1 : bind
    failed``). MXNet's launcher passes the hosts file's names through, so its hosts files hold
    addresses; this launcher resolves a name here and passes the address, which is the remote
    host's own unless a NAT lies between (then write the address in the hosts file)."""
    addresses = {}
    for host, _ in hosts:
        try:
            addresses[host] = str(socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0])
        except OSError as e:
            raise LaunchError("host %r of %s cannot be resolved: %s" % (host, path, e)) from e
    return addresses


def this_host_address() -> str:
    """This machine's address as other hosts reach it (the route to a public address; no
    packet is sent), for ``DMLC_PS_ROOT_URI`` in ssh mode."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def _remote_command(env: Dict[str, str], workdir: str, command: Sequence[str]) -> str:
    exports = "".join("export %s=%s; " % (k, shlex.quote(v)) for k, v in env.items())
    return "%scd %s; %s" % (exports, shlex.quote(workdir), " ".join(map(shlex.quote, command)))


def ssh_job(command: Sequence[str], num_workers: int, num_servers: int, port: int,
            hosts: Sequence[Tuple[str, int]], root_uri: str, workdir: str,
            environ: Optional[Dict[str, str]] = None,
            addresses: Optional[Dict[str, str]] = None) -> List[ProcessSpec]:
    """The processes of a job over ssh (see the module's docstring). ``ssh -tt`` gives each
    remote process a terminal, so that closing the connection (the launcher stopping the job)
    hangs it up on the remote host too; ``BatchMode`` makes a host that asks for a password
    fail at once instead of waiting for one. ``addresses`` maps a host to the address its
    processes bind (NOTE [a node's address]; default: the host as written)."""
    environ = dict(os.environ if environ is None else environ)
    base = _dmlc_env(root_uri, port, num_servers, num_workers)
    passed = {k: environ[k] for k in FORWARDED_ENV if k in environ}
    specs = [ProcessSpec("scheduler", 0, root_uri, list(_SERVER_ARGV),
                         dict(base, **_role_env("scheduler", 0, None)))]
    roles = [("server", i) for i in range(num_servers)] + \
            [("worker", i) for i in range(num_workers)]
    for slot, (role, index) in enumerate(roles):
        host, ssh_port = hosts[slot % len(hosts)]
        env = dict(passed, **base, DMLC_NODE_HOST=(addresses or {}).get(host, host),
                   **_role_env(role, index, passed.get("PYTHONPATH")))
        argv = ["ssh", "-tt", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes",
                "-p", str(ssh_port), host, _remote_command(env, workdir, command)]
        specs.append(ProcessSpec(role, index, host, argv, {}, remote=True))
    return specs


def check_port(address: str, port: int) -> None:
    """`LaunchError` unless ``port`` can be bound on ``address`` (the scheduler's port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, port))
        except OSError as e:
            raise LaunchError("port %d on %s is not free (%s): choose another with --port, or "
                              "leave --port out for a free one" % (port, address, e.strerror)
                              ) from e


def free_port(address: str) -> int:
    """A port free on ``address`` now (the system's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]
