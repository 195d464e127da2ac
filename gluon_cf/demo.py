"""The main demo: ``python -m gluon_cf.demo``.

1. A small hybridized model that uses cond, foreach and while_loop, run eagerly and hybridized.
2. A binary TreeLSTM (recursive, hybridized) trained on the embedded SST-like synthetic treebank
   with early stopping: it keeps the parameters of the best dev epoch, reports that model's test
   accuracy and saves it. Progress bars on a terminal, one line per epoch otherwise.

Data-parallel on MXNet's parameter server, every worker its shard of each mini-batch::

    python -m gluon_cf.launch -n 2 -s 1 -- python -m gluon_cf.demo --kvstore dist_sync
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import gluon, nd

import gluon_cf


class ControlFlowDemo(gluon.HybridBlock):
    """Scan an RNN over the sequence, refine its state while the norm is large, gate by sign."""

    def __init__(self, hidden=8, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.step = gluon.nn.Dense(hidden, in_units=2 * hidden, flatten=False)
            self.proj = gluon.nn.Dense(hidden, in_units=4, flatten=False)

    def hybrid_forward(self, F, seq, h0):
        def body(x_t, states):
            h = F.tanh(self.step(F.concat(self.proj(x_t), states[0], dim=-1)))
            return h, [h]

        outputs, (h,) = gluon_cf.foreach(body, seq, [h0])
        steps, (h, n) = gluon_cf.while_loop(
            lambda h, n: F.norm(h) > 1.0,
            lambda h, n: (F.norm(h), [h * 0.5, n + 1]),
            [h, F.zeros((1,))], max_iterations=10)
        gated = gluon_cf.cond(h.sum() > 0, lambda: h * 2, lambda: F.relu(-h))
        return F.mean(outputs, axis=0), gated, n


def control_flow_demo():
    net = ControlFlowDemo()
    net.initialize(mx.init.Xavier(), force_reinit=True)
    seq = nd.random.uniform(-1, 1, shape=(12, 3, 4))
    h0 = nd.random.uniform(-2, 2, shape=(3, 8))
    eager = [o.asnumpy() for o in net(seq, h0)]
    net.hybridize()
    hybrid = [o.asnumpy() for o in net(seq, h0)]
    print("== cond / foreach / while_loop in one hybridized block ==", flush=True)
    print("mean RNN output (first row):", np.round(hybrid[0][0], 4))
    print("gated state (first row):    ", np.round(hybrid[1][0], 4))
    print("while_loop halvings:        ", int(hybrid[2][0]))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(eager, hybrid))
    print("max |eager - hybridized|:    %.2e" % diff, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="gluon_cf's main demo: control flow in one hybridized block, then a "
                    "recursive TreeLSTM trained with early stopping.")
    parser.add_argument("--epochs", type=int, default=20,
                        help="at most this many epochs (default: %(default)s)")
    parser.add_argument("--patience", type=int, default=3,
                        help="stop after this many epochs without a better dev accuracy "
                             "(default: %(default)s)")
    parser.add_argument("--trees", type=int, default=2000,
                        help="training trees; dev and test get a quarter as many each "
                             "(default: %(default)s)")
    parser.add_argument("--save", default="treelstm-best.params", metavar="PATH",
                        help="where the best epoch's parameters are saved "
                             "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--kvstore", default="device",
                        help="the Trainer's kvstore; dist_sync or dist_async train "
                             "data-parallel under python -m gluon_cf.launch "
                             "(default: %(default)s)")
    parser.add_argument("--balance", choices=("nodes", "count"), default="nodes",
                        help="with a dist kvstore: split each mini-batch between the workers "
                             "by tree nodes or by tree count (default: %(default)s)")
    args = parser.parse_args(argv)
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    from gluon_cf.launch import heartbeat
    from gluon_cf.models.train import train_demo
    kvstore = mx.kv.create(args.kvstore) if "dist" in args.kvstore else args.kvstore
    if getattr(kvstore, "rank", 0) == 0:     # one report for a job of several workers
        control_flow_demo()
    return train_demo(epochs=args.epochs, num_trees=args.trees, patience=args.patience,
                      save_path=args.save, seed=args.seed, kvstore=kvstore,
                      balance=args.balance, on_batch=heartbeat)


if __name__ == "__main__":
    main()
