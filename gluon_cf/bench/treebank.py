"""How fast ``synthetic_treebank`` makes trees, per shape (trees/second).

    python -m gluon_cf.bench.treebank [--trees 10000] [--repeats 3]

The benchmark of ``python -m gluon_cf.bench`` draws fresh forests for every mini-batch it times
(``FRESH_TREES_PER_SECOND`` trees per second of budget), so making them must stay well above
that rate. This prints the best of ``--repeats`` runs for each shape; it asserts nothing (the
tests check the trees, not the clock).
"""
import argparse
import time

from gluon_cf.data.trees import SHAPES, synthetic_treebank

__all__ = ["measure", "main"]


def measure(num_trees=10_000, repeats=3, seed=1):
    """``{shape: trees per second}``, best of ``repeats`` runs of ``num_trees`` trees."""
    rates = {}
    for shape in SHAPES:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            synthetic_treebank(num_trees, shape=shape, seed=seed)
            best = min(best, time.perf_counter() - start)
        rates[shape] = num_trees / best if best > 0 else float("inf")
    return rates


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gluon_cf.bench.treebank",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for shape, rate in measure(args.trees, args.repeats).items():
        print(f"{shape:>10}: {rate:,.0f} trees/s")


if __name__ == "__main__":
    main()
