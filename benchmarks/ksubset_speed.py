"""Speed of the k-subset mechanism's per-user path: d = 100, ε = 1 (k = 27 items per report), 10^7 users.

    python benchmarks/ksubset_speed.py [--users 10000000] [--sql]

1. Mechanism: every user's report drawn by ``KSubset.randomize`` (Floyd's algorithm, vectorised) and summed
   by ``aggregate``, in the chunks the executor uses (REPORT_CELLS / d users at a time). Wall and CPU time
   are printed, with GRR and OUE on the same data for scale, and the target (10^7 users in under 10 s).
2. With --sql, the same through the engine: SELECT LDP_HISTOGRAM(c) ... OPTIONS (mechanism = 'ksubset_l2',
   simulation = 'per_user') over a parquet file of the users (DuckDB streaming included).

Not part of the test suite. The machine's other load shows in the wall time; the CPU time is the fairer figure.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from ldpql.executor import REPORT_CELLS
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.ksubset import KSubset, subset_size
from ldpql.mechanisms.oue import OUE

D, EPSILON = 100, 1.0


def timed_run(r, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float, np.ndarray]:
    """(wall s, CPU s, summary) of randomize + aggregate over x in executor-sized chunks."""
    step = max(1024, REPORT_CELLS // r.report_width)
    wall, cpu = time.perf_counter(), time.process_time()
    total = np.zeros(D, dtype=np.int64)
    for i in range(0, len(x), step):
        total += r.aggregate(r.randomize(x[i:i + step], rng))[:D]
    return time.perf_counter() - wall, time.process_time() - cpu, total


def mechanism_benchmark(users: int) -> None:
    k = subset_size(D, EPSILON, "l2")
    rng = np.random.default_rng(7)
    x = rng.integers(0, D, users)
    truth = np.bincount(x, minlength=D) / users
    print(f"d = {D}, ε = {EPSILON:g}, k = {k}, {users:,} users (per-user path, executor-sized chunks)")
    for r in (KSubset(EPSILON, D, k), GRR(EPSILON, D), OUE(EPSILON, D)):
        wall, cpu, summary = timed_run(r, x, rng)
        err = np.max(np.abs(r.estimate(summary, users) - truth) / np.sqrt(r.variance(truth, users)))
        print(f"  {r.name:<8} wall {wall:6.2f} s   CPU {cpu:6.2f} s   {users / wall / 1e6:5.2f} M users/s   "
              f"max |z| of the estimate {err:.2f}")


def sql_benchmark(users: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import ldpql

    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "users.parquet"
        pq.write_table(pa.table({"c": rng.integers(0, D, users)}), path)
        con = ldpql.connect(seed=1, evaluation=True)
        con.sql(f"CREATE TABLE u FROM '{path}' (c PRIVATE INTEGER BETWEEN 0 AND {D - 1}) BUDGET EPSILON 10")
        wall, cpu = time.perf_counter(), time.process_time()
        res = con.sql(f"SELECT LDP_HISTOGRAM(c) FROM u EPSILON {EPSILON} "
                      "OPTIONS (mechanism = 'ksubset_l2', simulation = 'per_user')")
        print(f"  SQL end to end (DuckDB streaming + ksubset_l2 per user): wall {time.perf_counter() - wall:.2f} s, "
              f"CPU {time.process_time() - cpu:.2f} s, {len(res.fetchall())} bins")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=10_000_000)
    ap.add_argument("--sql", action="store_true", help="also time the statement through the engine")
    args = ap.parse_args()
    mechanism_benchmark(args.users)
    if args.sql:
        sql_benchmark(args.users)
    print("target: 10^7 users in under 10 s for k-subset (d = 100, ε = 1)")


if __name__ == "__main__":
    main()
