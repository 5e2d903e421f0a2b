"""Audit 16, part 2 (d): a tree at 2^22 coins through SQL (DuckDB), 7 q's, with and without GROUP BY (4 groups): wall
time of the statement, and how much of it is the new floor (consistent_variance, one O(nodes) fit per q per group),
timed by wrapping it; peak RSS. Also odd input through SQL: resolution 2^22 + 1 (refused?), q = 0 and q = 1, a group
of 1 user, an all-NULL column.      PYTHONPATH=/tmp/ldpql_068a6e2 nice python big16.py -> big16.txt"""
from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.mechanisms import hierarchical as H

HERE = Path(__file__).parent
lines = []
spent = {"t": 0.0, "calls": 0}
_cv = H.consistent_variance


def timed(*a, **k):
    t = time.perf_counter()
    try:
        return _cv(*a, **k)
    finally:
        spent["t"] += time.perf_counter() - t
        spent["calls"] += 1


H.consistent_variance = timed


def say(s):
    print(s, flush=True)
    lines.append(s)


def main():
    r = np.random.default_rng([1616, 123])
    n = 100000
    x = r.lognormal(0, 1, n)
    g = np.repeat(["a", "b", "c", "d"], n // 4)
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"g": g, "x": x}), private={"x": {"between": (0.0, 50.0)}}, public=["g"], budget=1e9)
    taus = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
    q = ", ".join(f"LDP_QUANTILE(x, {t}, resolution => 4194304, mechanism => 'hierarchical')" for t in taus)
    for label, sql in (("no GROUP BY", f"SELECT {q} FROM t EPSILON 4"),
                       ("GROUP BY g (4 groups)", f"SELECT g, {q} FROM t GROUP BY g EPSILON 4")):
        spent["t"], spent["calls"] = 0.0, 0
        t = time.time()
        res = con.sql(f"{sql} OPTIONS (seed = 1616)")
        wall = time.time() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        say(f"2^22 coins, {len(taus)} q, {label}: {wall:.1f} s wall, of which consistent_variance {spent['t']:.1f} s "
            f"({spent['calls']} calls); peak RSS {rss:.0f} MB; first row {res.fetchall()[0]}")
    # odd input
    odd = [("resolution 2^22 + 1 with the tree", "SELECT LDP_QUANTILE(x, 0.5, resolution => 4194305, mechanism => "
            "'hierarchical') FROM t EPSILON 4"),
           ("q = 0 and q = 1", "SELECT LDP_QUANTILE(x, 0, resolution => 64, mechanism => 'hierarchical'), "
            "LDP_QUANTILE(x, 1, resolution => 64, mechanism => 'hierarchical') FROM t EPSILON 4"),
           ("q = 0 and q = 1, histogram", "SELECT LDP_QUANTILE(x, 0, mechanism => 'histogram'), "
            "LDP_QUANTILE(x, 1, mechanism => 'histogram') FROM t EPSILON 8")]
    for label, sql in odd:
        try:
            res = con.sql(f"{sql} OPTIONS (seed = 1)")
            say(f"{label}: {res.fetchall()} notes: " + " | ".join(nn for nn in res.notes if "rank error" in nn))
        except Exception as e:  # noqa: BLE001
            say(f"{label}: {type(e).__name__}: {str(e).splitlines()[0]}")
    con2 = ldpql.connect(evaluation=True)
    g2 = np.array(["one"] + ["many"] * 3000)
    x2 = np.concatenate([[0.5], r.random(3000)])
    con2.register("t", pa.table({"g": g2, "x": x2}), private={"x": {"between": (0.0, 1.0)}}, public=["g"], budget=1e9)
    for label, sql in (("GROUP BY with a group of 1 user, tree", "SELECT g, LDP_MEDIAN(x, resolution => 1024, mechanism "
                        "=> 'hierarchical') FROM t GROUP BY g EPSILON 4"),
                       ("GROUP BY with a group of 1 user, histogram", "SELECT g, LDP_MEDIAN(x, mechanism => "
                        "'histogram') FROM t GROUP BY g EPSILON 8"),
                       ("GROUP BY with a group of 1 user, planner", "SELECT g, LDP_QUANTILE(x, 0.1, resolution => 64), "
                        "LDP_QUANTILE(x, 0.9, resolution => 64) FROM t GROUP BY g EPSILON 3")):
        try:
            res = con2.sql(f"{sql} OPTIONS (seed = 2)")
            say(f"{label}: {res.fetchall()} notes: " + " | ".join(nn for nn in res.notes if "rank error" in nn))
        except Exception as e:  # noqa: BLE001
            say(f"{label}: {type(e).__name__}: {str(e).splitlines()[0]}")
    con3 = ldpql.connect(evaluation=True)
    con3.register("t", pa.table({"x": pa.array([None] * 500, type=pa.float64())}),
                  private={"x": {"between": (0.0, 1.0)}}, budget=1e9)
    try:
        res = con3.sql("SELECT LDP_MEDIAN(x, resolution => 64, mechanism => 'hierarchical') FROM t EPSILON 4 "
                       "OPTIONS (seed = 3)")
        say(f"all-NULL column, tree: {res.fetchall()} notes: " + " | ".join(nn for nn in res.notes if "rank error" in nn))
    except Exception as e:  # noqa: BLE001
        say(f"all-NULL column, tree: {type(e).__name__}: {str(e).splitlines()[0]}")
    (HERE / "big16.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
