"""Seeded key-value answers on DuckDB and Spark: junk keys and values on an INTEGER key domain (1.5, 2.5, 0.5, 5.5,
NaN, ±inf, 1e300) and a public WHERE on a parquet source of 3,000 users with 1-5 rows each. Prints both answers and
whether they are equal. Needs pyspark (pip install -e '.[spark]')."""

from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np
import pandas as pd

import ldpql

JUNK = "SELECT k, LDP_COUNT(*), LDP_AVG(r), LDP_SUM(r) FROM t GROUP BY k EPSILON INF"
RATINGS = ("SELECT movie, LDP_COUNT(*), LDP_AVG(rating), LDP_SUM(rating) FROM r WHERE uid >= 100 GROUP BY movie "
           "SPARSITY 2 EPSILON 1")


def sources(folder: str) -> tuple[str, str]:
    junk = pd.DataFrame({"uid": list("aabbccdefghi"),
                         "k": [1.5, 2.5, 0.5, 5.5, 5.49, np.nan, 1e300, -np.inf, 3.0, 2.0, 4.5, np.inf],
                         "r": [np.nan, np.inf, -np.inf, 7.0, 3.0, 2.0, np.nan, 1.0, -1e308, 5.0, np.nan, 2.0]})
    rng = np.random.default_rng(3)
    uid = np.repeat(np.arange(3000), rng.integers(1, 6, 3000))
    ratings = pd.DataFrame({"uid": uid, "movie": rng.choice(["a", "b", "c", "z"], len(uid)),
                            "rating": np.where(rng.random(len(uid)) < 0.3, np.nan,
                                               rng.integers(1, 6, len(uid)).astype(float))})
    paths = os.path.join(folder, "t.parquet"), os.path.join(folder, "r.parquet")
    junk.to_parquet(paths[0])
    ratings.to_parquet(paths[1])
    return paths


def main() -> None:
    warnings.simplefilter("ignore")
    junk, ratings = sources(tempfile.mkdtemp())
    got = {}
    for backend in ("duckdb", "spark"):
        con = ldpql.connect(seed=7, evaluation=True, backend=backend)
        con.sql(f"CREATE TABLE t FROM '{junk}' (k PRIVATE INTEGER BETWEEN 1 AND 5, r PRIVATE BETWEEN 1 AND 5, "
                "uid PUBLIC) PRIVACY UNIT uid SPARSITY 3")
        con.sql(f"CREATE TABLE r FROM '{ratings}' (movie PRIVATE IN ('a', 'b', 'c'), rating PRIVATE BETWEEN 1 AND 5, "
                "uid PUBLIC) PRIVACY UNIT uid SPARSITY 3 BUDGET EPSILON 5")
        res = con.sql(RATINGS)
        got[backend] = (con.sql(JUNK).fetchall(), res.fetchall())
        print(backend, got[backend], res.footer, sep="\n")
        con.close()
    print("same junk answer:", got["duckdb"][0] == got["spark"][0])
    print("same seeded ratings answer:", got["duckdb"][1] == got["spark"][1])


if __name__ == "__main__":
    main()
