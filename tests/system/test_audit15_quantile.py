"""Audit 15 (hostile review of session 11's quantile changes: NaiveNBS's union bound, a bucketed answer's own rank
error, padding read in real ranks; examples/audit15/README.md). Findings fixed here are plain tests with the numbers
before; the ones left open are strict xfails with their measured numbers."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.mechanisms.quantile import CoinSpace, release_bound


def _one(values, domain: dict, sql: str, seed: int = 1):
    con = ldpql.connect(evaluation=True, seed=seed)
    con.register("t", pa.table({"x": values}), private={"x": domain}, budget=100)
    res = con.sql(sql)
    (low, high, _), = res.intervals()[0]
    return res.fetchall()[0][0], low, high


def test_a_bound_answer_on_a_bucketed_column_is_the_domains_own_end():
    """Was HIGH: the planner's bound answer (no user asked) reported the end bucket's midpoint with the coin's rank
    error ±min(q, 1 - q): all 500 users at 10.0 on DOUBLE 0..10 in 4 buckets, q = 0.99, ε = 0.1 returned 8.75 with
    ±0.01 (its rank error 0.99) and the interval [1.25, 8.75]. The domain's own end has rank error <= 1 - q."""
    sql = "SELECT LDP_QUANTILE(x, {q}, resolution => 4) FROM t EPSILON 0.1"
    assert _one([10.0] * 500, {"between": (0.0, 10.0)}, sql.format(q=0.99)) == (10.0, 0.0, 10.0)
    assert _one([0.0] * 500, {"between": (0.0, 10.0)}, sql.format(q=0.01)) == (0.0, 0.0, 10.0)
    value, low, high = _one([0] * 500, {"between": (0, 100_000), "integer": True},
                            sql.replace("4", "1000").format(q=0.05))
    assert (value, low, high) == (0, 0, 100_000)


def test_intervals_on_bucketed_columns_end_at_bucket_edges_inside_the_domain():
    """Was MEDIUM: intervals ended at bucket midpoints, so a quantile in the outer half of an end bucket was outside
    (NaiveNBS, 20% at 0 on INTEGER 0..100000 in 1,000 buckets: held 0 of 200), and a partial last bucket's midpoint
    (1006) was past the declared maximum 1002 (INTEGER 0..1002, resolution 100: held 0.495). Now 30 of 30 each."""
    x = np.arange(2000) % 1003
    truth = float(np.quantile(x, 0.9, method="inverted_cdf"))
    runs = [_one(x, {"between": (0, 1002), "integer": True},
                 "SELECT LDP_QUANTILE(x, 0.9, resolution => 100) FROM t EPSILON 1", seed=t) for t in range(30)]
    assert all(v <= 1002 and high <= 1002 for v, _, high in runs)
    assert sum(low <= truth <= high for _, low, high in runs) >= 28
    rng = np.random.default_rng(15)
    x = np.where(rng.random(500) < 0.2, 0, rng.integers(0, 100_001, 500))
    runs = [_one(x, {"between": (0, 100_000), "integer": True},
                 "SELECT LDP_QUANTILE(x, 0.1, resolution => 1000, mechanism => 'naive_nbs') FROM t EPSILON 2",
                 seed=t) for t in range(30)]
    assert sum(low <= 0 for _, low, _ in runs) >= 28


def test_coin_space_edges():
    doubles = CoinSpace(4, low=0.0, step=2.5, integer=False, offset=1.25, high=10.0)
    assert (doubles.value(3), doubles.lower_edge(3), doubles.upper_edge(3), doubles.end(True)) == (8.75, 7.5, 10, 10)
    ints = CoinSpace(101, low=0.0, step=10.0, integer=True, offset=4.5, high=1002.0)   # last bucket 1000..1002
    assert (ints.value(100), ints.upper_edge(100), ints.upper_edge(99), ints.end(False)) == (1002.0, 1002, 999, 0)
    exact = CoinSpace(11)
    assert not exact.bucketed and [exact.lower_edge(4), exact.upper_edge(4), exact.value(4)] == [4, 4, 4]


def test_release_bound_past_the_last_point_is_the_last_points():
    """Was LOW: ``release_bound(..., bucketed=True)`` raised IndexError for a coin past its last point."""
    points, var = (np.arange(3), np.array([0.2, 0.6, 1.0])), np.zeros(3)
    assert release_bound(points, var, 5, 0.5, 2.0, bucketed=True) == release_bound(points, var, 2, 0.5, 2.0, True)


_CELL = re.compile(r"^the 0\.9-quantile of x \([^)]*\) in the group g = (?P<group>\w+): "
                   r"rank error ±(?P<error>[\d.e+-]+)")


def test_a_small_groups_tree_answer_covers_its_shown_rank_error():
    """Was MEDIUM (#4): GROUP BY g on Beta(20, 60) in DOUBLE 0..1 (64 buckets), ε = 2, three q's in one tree; group b
    (1,700 users) at q = 0.9 held its shown rank error in 0.880 of 200 runs at 95% (0.88 of these 100). The tree's
    read-out took the middle of every coin whose [F̂(v-1), F̂(v)] held τ, and the noisy F̂ crosses 0.9 again and again
    over the empty buckets past the data: answers 20-40 buckets too high, at the largest rank error 1 - q. Now the
    split with the fewest coins on the wrong side (0.955 of 200, 1.0 of these 100)."""
    rng = np.random.default_rng([1517, 5])
    g = np.repeat(["a", "b"], [300, 1700])
    x = np.concatenate([rng.beta(50, 50, 300), rng.beta(20, 60, 1700)])
    truth = np.sort(x[g == "b"])
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"g": g, "x": x}), private={"x": {"between": (0.0, 1.0)}}, public=["g"], budget=1e9)
    sql = ("SELECT g, " + ", ".join(f"LDP_QUANTILE(x, {q}, resolution => 64) AS q{i}" for i, q in
                                    enumerate((0.1, 0.5, 0.9))) + " FROM t GROUP BY g EPSILON 2")
    held = []
    for seed in range(1517000, 1517100):
        res = con.sql(f"{sql} OPTIONS (seed = {seed}, confidence = 0.95)")
        value = dict((row[0], row[3]) for row in res.fetchall())["b"]
        shown = [float(m["error"]) for m in map(_CELL.match, res.notes) if m and m["group"] == "b"]
        below, upto = np.searchsorted(truth, value, "left") / 1700, np.searchsorted(truth, value, "right") / 1700
        held.append(max(below - 0.9, 0.9 - upto, 0.0) <= shown[0] + 1e-12)
    assert np.mean(held) >= 0.95, np.mean(held)
