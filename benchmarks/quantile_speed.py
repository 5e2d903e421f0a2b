"""Speed of LDP_QUANTILE / LDP_MEDIAN (seed 001): SQL path, numpy driver and the BayesLearn posterior.

Measures, on this machine:
- a shuffled median over 10^7 users through SQL (``OPTIONS (model = 'shuffle', delta = 1e-8)``, exact-aggregate
  path: one DuckDB scan per round, 17 rounds); the target is under 10 s;
- the same statement's local plans (BayeSS, NaiveNBS, hierarchical) at 10^6 users;
- one trial of the reproduction's numpy driver at N = 10^7 (shuffle NBS, Fig. 4) and at N = 2500 (BayeSS, one
  user per round, Fig. 1);
- the BayesLearn posterior (:class:`PosteriorTree`): one round at B = 2^16, 10^6, 2^40.
Not part of the test suite. Run: ``python benchmarks/quantile_speed.py [--users 10000000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.mechanisms.quantile import PosteriorTree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import quantile_paper as qp  # noqa: E402


def timed(label: str, fn, repeat: int = 1):
    best, out = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    print(f"{label:66s} {best:8.3f} s")
    return best, out


def sql_benchmarks(users: int) -> float:
    income = qp.pareto_data(users, 8).astype(np.int64)
    con = ldpql.connect(seed=1, evaluation=True)
    con.register("people", pa.table({"income": income}), private={"income": {"between": (0, 4 ** 8 - 1),
                                                                              "integer": True}},
                 budget=100.0, delta=1e-6)
    q = "SELECT LDP_MEDIAN(income) FROM people EPSILON 0.5 OPTIONS (model = 'shuffle', delta = 1e-8)"
    print(con.explain(q).splitlines()[3])
    secs, res = timed(f"SQL shuffled median, {users:,} users (exact aggregate)", lambda: con.sql(q))
    print(f"{'':66s} -> {res.fetchall()[0][0]} ({res.plan.aggregates[0].chosen.mechanism}, "
          f"ε₀ = {res.plan.epsilon0:.3f}; true median {int(np.sort(income)[(users - 1) // 2])})")
    small = pa.table({"income": income[:1_000_000]})
    con.register("million", small, private={"income": {"between": (0, 4 ** 8 - 1), "integer": True}}, budget=100.0)
    for mech in ("bayess", "naive_nbs", "hierarchical"):
        timed(f"SQL median by {mech}, 1,000,000 users", lambda m=mech: con.sql(
            f"SELECT LDP_MEDIAN(income) FROM million EPSILON 1 OPTIONS (mechanism = '{m}')"))
    return secs


def driver_benchmarks() -> None:
    data = qp.pareto_data(10 ** 7, 8)
    timed("numpy driver: one shuffle-NBS trial, N = 10^7, B = 4^8 (Fig. 4)",
          lambda: qp.run_trials("shuffle_nbs", data, 4 ** 8, 0.5, 1, seed=1))
    small = qp.pareto_data(2500, 9)
    timed("numpy driver: one BayeSS trial, N = 2500, B = 4^9, one user per round (Fig. 1)",
          lambda: qp.run_trials("bayess", small, 4 ** 9, 1.0, 1, seed=1), repeat=3)
    timed("numpy driver: one hierarchical trial, N = 2500, B = 4^9 (Fig. 1)",
          lambda: qp.run_trials("hierarchical", small, 4 ** 9, 1.0, 1, seed=1), repeat=3)


def numpy_bayeslearn(size: int, rounds: int = 2000) -> None:
    """The peer: the authors' O(B) numpy update (DpBayesLearn lines 4 and 9-11) for the same rounds."""
    w = np.full(size, 1 / size)
    for _ in range(rounds):
        j = int(np.searchsorted(np.cumsum(w), 0.5))
        s = 1 if j > size // 3 else -1
        w[:j] *= 1 + 0.08 * s
        w[j + 1:] *= 1 - 0.08 * s
        w[j] = 1 - w[:j].sum() - w[j + 1:].sum()


def tree_benchmarks() -> None:
    for size in (1 << 16, 10 ** 6):
        secs, _ = timed(f"peer: numpy O(B) BayesLearn, 2000 rounds at B = {size:,}", lambda s=size: numpy_bayeslearn(s))
    for size in (1 << 16, 10 ** 6, 1 << 40):
        tree = PosteriorTree(size)

        def rounds(n: int = 2000) -> None:
            for i in range(n):
                j, left, w = tree.locate(0.5)
                s = 1 if j > size // 3 else -1
                tree.update(1 + 0.08 * s, 1 - 0.08 * s, tree.total - (1 + 0.08 * s) * left
                            - (1 - 0.08 * s) * (tree.total - left - w))
        secs, _ = timed(f"BayesLearn posterior: 2000 rounds at B = {size:,}", rounds)
        print(f"{'':66s} -> {secs / 2000 * 1e6:.1f} µs per round, {len(tree.lo):,} nodes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=10 ** 7)
    args = ap.parse_args()
    secs = sql_benchmarks(args.users)
    driver_benchmarks()
    tree_benchmarks()
    print(f"shuffled median over {args.users:,} users: {secs:.2f} s ({'under' if secs < 10 else 'OVER'} the 10 s target)")


if __name__ == "__main__":
    main()
