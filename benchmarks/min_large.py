"""LDP_MIN over a 10^8-row parquet column, unknown-α schedule, exact-aggregate path (target: under 20 s).

    python benchmarks/min_large.py [--rows 100000000] [--path /tmp/min_large.parquet] [--epsilon 1] [--max]

At N = 10^8 the unknown-α schedule has L = 36 rounds. One DuckDB filter-count scan of the file takes about
0.65 s on this machine (printed below for scale), so one scan per round would take over 20 s. The exact path
of LDP_MIN counts users on the search's lattice instead (ldpql.planner.minimum.SearchEncoding.count_cells):
the first grid (2^12 blocks = the first 12 rounds) is one GROUP BY scan; the next grid lies inside one
block, so one scan with a plain range filter returns the few users left (their lattice indices) and every
later round is answered from them in memory. The counts are exact (the binomial draws are those of spec
§2.7), so the answer has the distribution of the per-user simulation.

Prints the wall time of the statement, the number of DuckDB queries it issued and the answer next to
DuckDB's exact MIN. Not part of the test suite; the machine's other load shows in the wall time.
"""

from __future__ import annotations

import argparse
import os
import time

import duckdb

import ldpql
from ldpql.mechanisms.minimum import schedule


def make(path: str, rows: int) -> None:
    """x = -0.66 + 0.3·u² (u uniform): a Beta(1/2, 1)-shaped lower tail on [-0.66, -0.36], inside [-1, 1]."""
    print(f"writing {rows:,} rows to {path} ...", flush=True)
    duckdb.sql(f"COPY (SELECT -0.66 + 0.3 * pow(random(), 2) AS x FROM range({rows})) TO '{path}' (FORMAT parquet)")


class Counting:
    """A DuckDB connection proxy that counts and times the queries the executor sends."""

    def __init__(self, duck):
        self.duck, self.queries = duck, []

    def execute(self, q, *args):
        started = time.perf_counter()
        out = self.duck.execute(q, *args)
        self.queries.append((time.perf_counter() - started, q))
        return out

    def __getattr__(self, name):
        return getattr(self.duck, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--path", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "ldpql_min_large.parquet"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--max", action="store_true", help="LDP_MAX instead of LDP_MIN")
    args = ap.parse_args()
    if not os.path.exists(args.path) or duckdb.sql(f"SELECT count(*) FROM '{args.path}'").fetchall()[0][0] != args.rows:
        make(args.path, args.rows)
    duckdb.sql("SET enable_progress_bar = false")
    started = time.perf_counter()
    (count,), = duckdb.sql(f"SELECT count(*) FILTER (x <= 0) FROM '{args.path}'").fetchall()
    print(f"one DuckDB filter-count scan: {time.perf_counter() - started:.2f} s ({count:,} rows)")
    s = schedule(args.rows, args.epsilon)
    print(f"unknown-α schedule at n = {args.rows:,}, ε = {args.epsilon:g}: L = {s.depth} rounds, γ = {s.gamma:.4g}")

    con = ldpql.connect(seed=1, evaluation=True)
    con.duck.execute("SET enable_progress_bar = false")
    con.sql(f"CREATE TABLE big FROM '{args.path}' (x PRIVATE BETWEEN -1 AND 1) BUDGET EPSILON 100")
    con.duck = Counting(con.duck)
    fn = "LDP_MAX" if args.max else "LDP_MIN"
    started, cpu = time.perf_counter(), time.process_time()
    res = con.sql(f"SELECT {fn}(x) EPSILON {args.epsilon:g} FROM big")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    (value,), = res.fetchall()
    low, high, conf = res.intervals()[0][0]
    (exact,), = duckdb.sql(f"SELECT {'max' if args.max else 'min'}(x) FROM '{args.path}'").fetchall()
    print(f"{fn}(x) over {args.rows:,} rows: {value:.6g} (interval [{low:.6g}, {high:.6g}] at {conf:.6f}); "
          f"DuckDB's exact {fn[4:].lower()}: {exact:.6g}")
    print(f"wall {wall:.2f} s (target < 20 s), CPU {cpu:.2f} s, {len(con.duck.queries)} DuckDB queries:")
    for t, q in con.duck.queries:
        print(f"  {t:6.2f} s  {' '.join(q.split())[:110]}")


if __name__ == "__main__":
    main()
