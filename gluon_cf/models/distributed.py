"""Data-parallel training of tree models on MXNet's kvstore (used by the demo's ``--kvstore``).

Under ``python -m gluon_cf.launch`` each worker process trains on its shard of every
mini-batch (`Workers.shard`, node-balanced by default: ``gluon_cf.data.split``) and the
kvstore's servers hold the parameters. Decisions taken from the parameters (early stopping,
which epoch is best) must come out the same on every worker, or workers would leave the job at
different steps: NOTE [same decision on every worker].
"""
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import mxnet as mx

from ..data.split import balanced_shards, count_shards

__all__ = ["Workers", "workers_of"]


@dataclass
class Workers:
    """Where this process stands in a data-parallel job: ``rank`` of ``num_workers``."""
    kvstore: Optional[Any]          # an mx.kv.KVStore, or None for one process
    rank: int = 0
    num_workers: int = 1
    balance: str = "nodes"          # "nodes": node-balanced shards; "count": by tree count

    @property
    def distributed(self) -> bool:
        return self.kvstore is not None and "dist" in self.kvstore.type

    def shard(self, batch: Sequence[Any]) -> List[Any]:
        """This worker's part of a mini-batch of encoded trees (all of it in one process)."""
        if not self.distributed:
            return list(batch)
        if self.balance == "count":
            shards = count_shards(len(batch), self.num_workers)
        else:
            shards = balanced_shards([t.num_nodes for t in batch], self.num_workers)
        return [batch[i] for i in shards[self.rank]]

    def synchronize(self, trainer: mx.gluon.Trainer) -> None:
        """Give every worker the servers' current parameters, the same on all of them.

        NOTE [same decision on every worker]: with ``dist_sync`` every worker already holds
        the same parameters after a step; with ``dist_async`` each holds what it last pulled,
        so evaluations (dev accuracy, the best epoch, early stopping) would differ and a worker
        could stop while the others go on. At the end of an epoch all workers wait for each
        other (a kvstore barrier, after their last pushes are done), pull every parameter, and
        wait again, so that nobody pushes before everybody has pulled. Evaluating the whole
        dev set on each worker then gives the same numbers everywhere: each decision is taken
        by every worker, identically, with no message.
        """
        kv: Any = self.kvstore
        if not self.distributed:
            return
        mx.nd.waitall()
        kv._barrier()
        # The Trainer's kvstore keys are the parameters' places in its list (Trainer._params).
        for index, param in enumerate(trainer._params):
            kv.pull(index, out=param.list_data(), priority=-index)
        mx.nd.waitall()
        kv._barrier()


def workers_of(kvstore: Any, balance: str = "nodes") -> Workers:
    """`Workers` for a kvstore name (``"dist_sync"``, ``"dist_async"``, ``"device"``...) or
    object; a distributed one is created here (it joins the job of ``gluon_cf.launch``)."""
    if balance not in ("nodes", "count"):
        raise ValueError("balance must be 'nodes' or 'count', got %r" % (balance,))
    if kvstore is None:
        return Workers(None, balance=balance)
    if isinstance(kvstore, str):
        if "dist" not in kvstore:
            return Workers(None, balance=balance)
        kvstore = mx.kv.create(kvstore)
    return Workers(kvstore, kvstore.rank, kvstore.num_workers, balance)
