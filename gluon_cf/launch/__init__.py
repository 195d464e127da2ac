"""Launching data-parallel training on MXNet's parameter server (ps-lite):
``python -m gluon_cf.launch -n WORKERS [-s SERVERS] [--hosts FILE] -- python train.py ...``.

`cli` parses the command line, `job` describes the scheduler, servers and workers of a job
(local on loopback, or over ssh), `supervisor` runs them and stops the whole job when one
fails (NOTE [stopping a job]); `worker` is what a training loop calls (`heartbeat`,
NOTE [progress of a worker]). None of these modules imports MXNet (a contract in setup.cfg);
the launcher still loads it with the package ``gluon_cf``, which ``python -m`` imports first.
"""
from .worker import HEARTBEAT_MARKER, heartbeat

__all__ = ["heartbeat", "HEARTBEAT_MARKER"]
