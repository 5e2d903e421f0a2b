"""Key-value statements at scale: wall time of SELECT key, LDP_COUNT(*), LDP_AVG(v), LDP_SUM(v) ... GROUP BY key over
n users (1 to 2s keys each, so some are subsampled), DuckDB backend, unseeded (batches of whole units streamed) and
seeded (every row read, then sorted), and the numpy part alone (assembly and one Collision report per user).

    nice python benchmarks/kv_scale.py [--n 1000000] [--d 20] [--s 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.mechanisms.kv import KVCollision, assemble


def rows(n: int, d: int, s: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 2 * s + 1, n)
    users = np.repeat(np.arange(n), counts)
    return pa.table({"uid": users, "key": rng.integers(0, d, len(users)), "v": rng.uniform(1, 5, len(users))})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--s", type=int, default=3)
    a = ap.parse_args()
    data = rows(a.n, a.d, a.s)
    print(f"{a.n:,} users, {data.num_rows:,} rows, d = {a.d}, s = {a.s}")
    sql = "SELECT key, LDP_COUNT(*), LDP_AVG(v), LDP_SUM(v) FROM kv GROUP BY key EPSILON 1"
    for label, con in (("unseeded", ldpql.connect()), ("seeded", ldpql.connect(evaluation=True, seed=1))):
        con.register("kv", data, private={"key": {"between": (0, a.d - 1), "integer": True}, "v": (1, 5)},
                     public=["uid"], privacy_unit="uid", sparsity=a.s, budget=10)
        t = time.perf_counter()
        con.sql(sql)
        print(f"statement ({label}): {time.perf_counter() - t:.2f} s")
    users = data.column("uid").to_numpy().astype(np.uint64)
    keys, values = data.column("key").to_numpy(), (data.column("v").to_numpy() - 3) / 2
    rng = np.random.default_rng(1)
    t = time.perf_counter()
    _, k, v = assemble(users, keys, values, a.s, rng)
    t1 = time.perf_counter()
    KVCollision(1.0, a.d, a.s, 2).summary(k, v, rng)
    print(f"numpy: assembly {t1 - t:.2f} s, randomize + server counts {time.perf_counter() - t1:.2f} s")


if __name__ == "__main__":
    main()
