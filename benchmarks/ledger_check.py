"""The per-user budget check at scale (issue 10): one statement's check over 10^7 users, with an empty ledger and
with 10^4 earlier charges.

The ledger keeps one spend vector per source (DESIGN §4.5), so a statement's check is one pass over its users
(the ids its public WHERE covers) plus one read of that vector, whatever the number of earlier charges. This
script builds a parquet file of N users, fills a ledger with K committed charges whose users are random public
groups (the spend vector written through ``Ledger.reserve``/``commit`` as statements write it; see :func:`fill`), then times
EXPLAIN (the check without running) and a whole LDP_MEAN statement with a WHERE.

    python benchmarks/ledger_check.py            # N = 10^7 users, K = 10^4 charges
    python benchmarks/ledger_check.py --users 1000000 --charges 1000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import ldpql
from ldpql import expr as E
from ldpql.backends.base import Population

GROUPS = 100


def make_data(path: Path, n: int) -> None:
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"x": rng.random(n), "g": rng.integers(0, GROUPS, n)}), path, row_group_size=1 << 20)


def fill(con: ldpql.Connection, k: int) -> float:
    """K committed charges of ε = 1e-4 over random single groups (10^5 users each at N = 10^7). The spend
    vector is written once per group with the group's total (the state K one-by-one charges leave: charges add
    up), and all K rows are written to the ledger, so the check below sees a ledger K statements long."""
    t = con.catalog.get("t")
    groups = np.random.default_rng(1).integers(0, GROUPS, k)
    start = time.perf_counter()
    for g, times in zip(*np.unique(groups, return_counts=True)):
        ids = con.backend.covered_users(Population(t, E.op("=", E.Column("g"), g)))
        con.ledger.commit(con.ledger.reserve(t.ledger_key, "t", f"bench g = {g}", ids, 1e-4 * times, f"g = {g}",
                                             len(ids)))
    with con.ledger.transaction():
        for i in range(k - len(np.unique(groups))):
            con.ledger.log("query", t.ledger_key, "t", f"bench {i}")
    return time.perf_counter() - start


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=10_000_000)
    ap.add_argument("--charges", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, ledger = Path(tmp) / "t.parquet", str(Path(tmp) / "budget.ldpql")
        make_data(data, args.users)
        con = ldpql.connect(ledger=ledger)
        con.sql(f"CREATE TABLE t FROM '{data}' (x PRIVATE BETWEEN 0 AND 1 NOT NULL, g PUBLIC) BUDGET EPSILON 1000")
        q = "SELECT LDP_MEAN(x) FROM t WHERE g < 50 EPSILON 0.001"
        rows = [("empty ledger", 0, timed(lambda: con.explain(q)), timed(lambda: con.sql(q), 1))]
        fill_s = fill(con, args.charges)
        rows.append((f"{args.charges:,} earlier charges", args.charges, timed(lambda: con.explain(q)),
                     timed(lambda: con.sql(q), 1)))
        print(f"{args.users:,} users; the WHERE covers half of them; filling the ledger took {fill_s:.1f} s")
        print(f"{'ledger':<24} {'EXPLAIN (check) s':>18} {'statement s':>12}")
        for name, _, explain_s, run_s in rows:
            print(f"{name:<24} {explain_s:>18.3f} {run_s:>12.3f}")
        print(f"ratio with/without earlier charges: EXPLAIN {rows[1][2] / rows[0][2]:.2f}x, "
              f"statement {rows[1][3] / rows[0][3]:.2f}x")


if __name__ == "__main__":
    main()
