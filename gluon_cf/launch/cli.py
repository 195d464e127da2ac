"""The command line of ``python -m gluon_cf.launch`` (the README's "Training on several processes").

    python -m gluon_cf.launch -n 2 -s 1 -- python -m gluon_cf.demo --kvstore dist_sync
    python -m gluon_cf.launch -n 4 --hosts hosts.txt -- python train.py

Exit status: 0 when every worker succeeded; otherwise the first failed worker's status (128 + N
for a signal N), 1 for a worker that made no progress, 128 + N when the launcher got signal N,
2 for a command line or job that cannot start (one line saying why).
"""
import argparse
import os
import shlex
import sys
from typing import List, NoReturn, Optional, Sequence

from .job import (LOOPBACK, LaunchError, ProcessSpec, check_port, free_port, local_job,
                  read_hosts, resolve_hosts, ssh_job, this_host_address)
from .supervisor import Supervisor

__all__ = ["main", "build_job", "parse_args"]

_PROG = "python -m gluon_cf.launch"


class _Parser(argparse.ArgumentParser):
    """An argument error is one line (the usage is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, "%s: error: %s (see --help)\n" % (_PROG, message))


def _positive(text: str) -> int:
    value = int(text) if text.lstrip("-").isdigit() else None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError("expected a positive integer, got %r" % text)
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError("expected seconds >= 0, got %r" % text)
    return value


def _port(text: str) -> int:
    value = int(text) if text.isdigit() else -1
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError("expected a port number 1-65535, got %r" % text)
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=_PROG,
        description="Run COMMAND as the workers of a parameter-server job (MXNet's "
                    "kvstore='dist_sync', 'dist_async', ...), with a scheduler and servers "
                    "started for it: on this machine over loopback, or over ssh on the hosts "
                    "of a hosts file. Stops the whole job when a process fails.",
        epilog="Example: %s -n 2 -s 1 -- python -m gluon_cf.demo --kvstore dist_sync" % _PROG)
    parser.add_argument("-n", "--num-workers", type=_positive, required=True, metavar="WORKERS",
                        help="number of worker processes (each runs COMMAND)")
    parser.add_argument("-s", "--num-servers", type=_positive, metavar="SERVERS",
                        help="number of server processes (default: as many as workers, like "
                             "MXNet's launcher)")
    parser.add_argument("--hosts", metavar="FILE",
                        help="run servers and workers over ssh on these hosts, one 'host' or "
                             "'host:ssh_port' per line (default: all on this machine, loopback)")
    parser.add_argument("--port", type=_port,
                        help="the scheduler's port (DMLC_PS_ROOT_PORT; default: a free one)")
    parser.add_argument("--host-ip", metavar="ADDRESS",
                        help="with --hosts: this machine's address as the hosts reach it "
                             "(DMLC_PS_ROOT_URI; default: the address of the default route)")
    parser.add_argument("--workdir", metavar="DIR",
                        help="with --hosts: the directory the remote commands run in "
                             "(default: the current directory)")
    parser.add_argument("--progress-timeout", type=_seconds, default=300.0, metavar="SECONDS",
                        help="stop the job when a worker prints nothing and sends no heartbeat "
                             "(gluon_cf.launch.heartbeat) for this long; 0: never "
                             "(default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print each process's environment and command, start nothing")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the worker's command, after '--'")
    return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("no command to run: give it after '--', e.g. -- python train.py")
    args.command = command
    if args.num_servers is None:
        args.num_servers = args.num_workers
    if args.hosts is None and (args.host_ip or args.workdir):
        parser.error("--host-ip and --workdir need --hosts")
    return args


def build_job(args: argparse.Namespace) -> List[ProcessSpec]:
    """The processes of the job ``args`` describes; `LaunchError` when it cannot start."""
    if args.hosts is None:
        port = args.port or free_port(LOOPBACK)
        check_port(LOOPBACK, port)
        return local_job(args.command, args.num_workers, args.num_servers, port)
    hosts = read_hosts(args.hosts)
    addresses = resolve_hosts(hosts, args.hosts)
    root_uri = args.host_ip or this_host_address()
    port = args.port or free_port("")
    check_port("", port)
    return ssh_job(args.command, args.num_workers, args.num_servers, port, hosts, root_uri,
                   args.workdir or os.getcwd(), addresses=addresses)


def _print_job(specs: List[ProcessSpec]) -> None:
    """One line per process: its name, then a shell command that would start it."""
    for spec in specs:
        env = ["%s=%s" % (k, shlex.quote(v)) for k, v in spec.env.items()]
        print("%s: %s" % (spec.name, " ".join(env + [shlex.join(spec.argv)])), flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        specs = build_job(args)
    except LaunchError as e:
        print("%s: %s" % (_PROG, e), file=sys.stderr, flush=True)
        return 2
    if args.dry_run:
        _print_job(specs)
        return 0
    outcome = Supervisor(specs, args.progress_timeout or None).run()
    if outcome.report:
        print(outcome.report, file=sys.stderr, flush=True)
    return outcome.status
