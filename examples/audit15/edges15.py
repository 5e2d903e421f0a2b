"""Audit 15: edge cases of today's changes through SQL and the functions themselves (seconds)."""
from __future__ import annotations

import math
import traceback

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.mechanisms.quantile import Question, bracket_bound, release_bound


def sql(x, decl, q, extra=""):
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"x": pa.array(x, type=pa.float64() if not decl.get("integer") else pa.int64())}),
                 private={"x": decl}, budget=1e9)
    try:
        r = con.sql(q + extra)
        return f"{r.fetchall()} iv={r.intervals()} notes={[n for n in r.notes if 'rank error' in n][:2]}"
    except Exception as e:  # noqa: BLE001
        return f"ERROR {type(e).__name__}: {e}"


I = {"between": (0, 1000), "integer": True}
D = {"between": (0.0, 10.0)}
cases = [
    ("empty, padding", [], I, "SELECT LDP_QUANTILE(x, 0.1, mechanism => 'bayess', quantile_mode => 'padding') FROM t EPSILON 1"),
    ("one user, padding 0.1", [7], I, "SELECT LDP_QUANTILE(x, 0.1, mechanism => 'bayess', quantile_mode => 'padding') FROM t EPSILON 1"),
    ("one user, padding 0.9", [7], I, "SELECT LDP_QUANTILE(x, 0.9, mechanism => 'bayess', quantile_mode => 'padding') FROM t EPSILON 1"),
    ("two users, padding 0.98 eps 10", [7, 9], I, "SELECT LDP_QUANTILE(x, 0.98, mechanism => 'bayess', quantile_mode => 'padding') FROM t EPSILON 10"),
    ("empty, bucketed dbl", [], D, "SELECT LDP_QUANTILE(x, 0.5, resolution => 64) FROM t EPSILON 1"),
    ("one user, bucketed dbl nbs", [3.3], D, "SELECT LDP_QUANTILE(x, 0.5, resolution => 64, mechanism => 'naive_nbs') FROM t EPSILON 1"),
    ("EPSILON INF, padding", list(range(0, 1000, 7)), I, "SELECT LDP_QUANTILE(x, 0.1, mechanism => 'bayess', quantile_mode => 'padding') FROM t EPSILON INF"),
    ("EPSILON INF, bucketed dbl", list(np.linspace(0, 10, 300)), D, "SELECT LDP_QUANTILE(x, 0.3, resolution => 64) FROM t EPSILON INF"),
    ("all at top, dbl 0.99 hist", [10.0] * 3000, D, "SELECT LDP_QUANTILE(x, 0.99, resolution => 64) FROM t EPSILON 8"),
    ("all at low bound, int bucketed bound ans", [0] * 2000, {"between": (0, 100000), "integer": True},
     "SELECT LDP_QUANTILE(x, 0.05, resolution => 1000) FROM t EPSILON 0.1"),
    ("partial last int bucket 0..1002 res 100, all at 1002", [1002] * 3000, {"between": (0, 1002), "integer": True},
     "SELECT LDP_QUANTILE(x, 0.5, resolution => 100) FROM t EPSILON 4"),
]
for name, x, decl, q in cases:
    print(f"{name}: {sql(x, decl, q)}", flush=True)
    if "INF" not in q:
        print(f"   conf .8: {sql(x, decl, q, ' OPTIONS (confidence = 0.8, seed = 3)')}", flush=True)

# bracket_bound / release_bound corner cases (bucketed)
t = [Question(5, 0.4, 100, 0.01), Question(9, 0.6, 100, 0.01)]
for coin in (0, 5, 6, 9, 10, 15):
    print("bracket_bound coin", coin, "plain", round(bracket_bound(t, coin, 0.5, 1.96, 0.0), 4),
          "bucketed", round(bracket_bound(t, coin, 0.5, 1.96, 0.0, True), 4))
print("no questions:", bracket_bound([], 3, 0.2, 1.96, math.inf, True))
exact = [Question(5, 0.4, 100, 0.0), Question(6, 0.55, 100, 0.0)]
print("noise-free bucketed coin 6:", bracket_bound(exact, 6, 0.5, 1.96, math.inf, True), "(true midpoint bound 0.05)")
pts = (np.arange(4), np.array([0.1, 0.3, 0.7, 1.0]))
var = np.full(4, 1e-4)
for coin in range(4):
    print("release_bound", coin, round(release_bound(pts, var, coin, 0.5, 2.0), 4), round(release_bound(pts, var, coin, 0.5, 2.0, True), 4))
try:
    print("release_bound coin beyond points:", release_bound(pts, var, 7, 0.5, 2.0, True))
except Exception:
    traceback.print_exc(limit=1)
