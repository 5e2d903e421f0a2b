"""Fieller's interval for the conditional mean (ldpql.mechanisms.conditional.ratio_interval / with_interval), the
path every SQL AVG over a nullable column takes (CollisionMean, the split, a joint release's nullable column), and
the declared NULL semantics the ledger binds. Coverage over a grid is measured in examples/fieller/ (coverage.csv)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql
from ldpql.mechanisms.base import Estimate
from ldpql.mechanisms.conditional import (LOW_CONFIDENCE, ratio_interval, ratio_parts, selected_ratio_interval,
                                          with_interval)

Z95 = 1.959964


def brute_force(num, den, vn, vd, cv, z, extra=0.0):
    """The r on a fine grid of [-1, 1] with (num - r den)^2 <= (z^2 + extra) Var(num - r den)."""
    r = np.linspace(-1, 1, 400_001)
    inside = (num - r * den) ** 2 <= (z * z + extra) * (vn - 2 * r * cv + r * r * vd)
    return r[inside].min(), r[inside].max()


@pytest.mark.parametrize("num, den, vn, vd, cv", [
    (0.2, 0.5, 0.004, 0.003, 0.001), (-0.3, 0.4, 0.01, 0.01, -0.004), (0.05, 0.1, 0.0004, 0.0009, 0.0)])
def test_the_interval_is_fiellers_set(num, den, vn, vd, cv):
    lo, hi = ratio_interval(num, den, vn, vd, cv, Z95)
    want = brute_force(num, den, vn, vd, cv, Z95)
    assert lo == pytest.approx(want[0], abs=1e-4) and hi == pytest.approx(want[1], abs=1e-4)
    assert lo < num / den < hi


def test_a_denominator_not_significantly_above_zero_gives_the_whole_range():
    assert ratio_interval(0.1, 0.05, 0.001, 0.001, 0.0, Z95) == (-1.0, 1.0)    # 0.05 < 1.96 * 0.0316
    assert ratio_interval(0.1, -0.2, 0.001, 0.001, 0.0, Z95) == (-1.0, 1.0)    # significantly negative: no share
    assert ratio_interval(0.1, 0.07, 0.001, 0.001, 0.0, Z95) != (-1.0, 1.0)    # 0.07 > 1.96 * 0.0316


def test_a_ratio_beyond_a_bound_gives_a_nonempty_interval_ending_at_it():
    """num/den = 1.4: no r in [-1, 1] fits at z, so the set is T(r) <= z^2 + min T on [-1, 1]: it ends at 1, has
    positive width, and is Fieller's set with that larger threshold."""
    num, den, vn, vd, cv = 0.7, 0.5, 0.001, 0.001, 0.0005
    lo, hi = ratio_interval(num, den, vn, vd, cv, Z95)
    t1 = (num - den) ** 2 / (vn - 2 * cv + vd)
    assert hi == 1.0 and lo < 1.0 and lo == pytest.approx(brute_force(num, den, vn, vd, cv, Z95, t1)[0], abs=1e-4)


def test_far_from_zero_it_is_the_delta_method_interval():
    num, den, vn, vd, cv = 0.3, 0.8, 1e-6, 1e-6, 2e-7
    lo, hi = ratio_interval(num, den, vn, vd, cv, Z95)
    r = num / den
    se = math.sqrt(vn - 2 * r * cv + r * r * vd) / den
    assert (hi - lo) / 2 == pytest.approx(Z95 * se, rel=1e-3) and (lo + hi) / 2 == pytest.approx(r, abs=1e-5)


def test_unflagged_intervals_cover_given_the_flags_selection_where_fiellers_do_not():
    """Jointly normal (num, den), Var num = Var den, uncorrelated (as a key whose values all sit at the upper
    bound), the truth at r = 1 and E den = 2 sd: the flag (den < 3 sd) keeps the 16% of releases with the highest
    denominator noise, and Cov(num − den, den) = −Var den drags the pivot with it. Over the unflagged releases of
    6,000 draws (~950): Fieller's set covers 0.87-0.89, the selection-aware interval 0.94-0.95 (3 seeds; the hybrid's
    band at β = α/10 leaks up to β/P(unflagged) below 0.95). Bands: >= 0.915 and <= 0.91, each > 2.5 sd away."""
    rng = np.random.default_rng(11)
    vn = vd = 1e-4
    sd = math.sqrt(vd)
    hits = {"fieller": 0, "selected": 0}
    kept = 0
    for num, den in 2 * sd + sd * rng.standard_normal((6000, 2)):
        if den < LOW_CONFIDENCE * sd:
            continue
        kept += 1
        for name, (lo, hi) in (("fieller", ratio_interval(num, den, vn, vd, 0.0, Z95)),
                               ("selected", selected_ratio_interval(num, den, vn, vd, 0.0, 0.95, LOW_CONFIDENCE * sd))):
            hits[name] += lo <= 1.0 <= hi
    assert kept > 800
    assert hits["selected"] / kept >= 0.915 and hits["fieller"] / kept <= 0.91, (kept, hits)


def test_far_above_the_flag_the_selection_aware_interval_is_fiellers():
    num, den, vn, vd, cv = 0.3, 0.8, 1e-4, 1e-4, 2e-5   # den = 80 sd: the selection cannot matter
    assert selected_ratio_interval(num, den, vn, vd, cv, 0.95, 0.03) == pytest.approx(
        ratio_interval(num, den, vn, vd, cv, Z95), abs=1e-8)
    e = with_interval(_estimate(num, den, vn, vd, cv), 0.95)
    lo, hi = ratio_interval(num, den, vn, vd, cv, Z95)
    assert e.interval[0][0] == pytest.approx(5 + 5 * lo) and e.interval[1][0] == pytest.approx(5 + 5 * hi)


def _estimate(num, den, vn, vd, cv, n=1000):
    return Estimate(np.zeros(1), np.zeros(1), extra={"ratio": ratio_parts(num, den, np.array([[vn, cv], [cv, vd]])),
                                                     "scale": (0.0, 10.0, n)})


def test_with_interval_in_declared_units_flags_the_whole_range_and_follows_the_confidence():
    wide, narrow = with_interval(_estimate(0.2, 0.5, 0.004, 0.003, 0.001), 0.95), \
        with_interval(_estimate(0.2, 0.5, 0.004, 0.003, 0.001), 0.9)
    assert wide.values[0] == pytest.approx(5 + 5 * 0.4) and not wide.note
    assert wide.interval[0][0] < narrow.interval[0][0] <= wide.values[0] <= narrow.interval[1][0] < wide.interval[1][0]
    assert wide.stderr[0] == pytest.approx(5 * (wide.interval[1][0] - wide.interval[0][0]) / 10 / Z95)
    whole = with_interval(_estimate(0.1, 0.05, 0.001, 0.001, 0.0), 0.95)
    assert (whole.interval[0][0], whole.interval[1][0]) == (0.0, 10.0) and "whole declared range" in whole.note
    assert with_interval(Estimate(np.ones(1), np.ones(1)), 0.9).interval is None   # no ratio parts: unchanged


def _nullable(con, n=4000, share=0.6, seed=1):
    rng = np.random.default_rng(seed)
    x = pa.array(rng.uniform(2, 9, n), mask=rng.random(n) >= share)
    con.register("t", pa.table({"x": x, "y": pa.array(rng.uniform(0, 10, n), mask=rng.random(n) < 0.3)}),
                 private={"x": {"between": (0, 10)}, "y": {"between": (0, 10)}}, budget=1e9)


@pytest.mark.parametrize("sql", ["SELECT LDP_AVG(x) FROM t EPSILON 2",
                                 "SELECT LDP_AVG(x) FROM t EPSILON 2 OPTIONS (split = 'users')",
                                 "SELECT LDP_AVG(x), LDP_AVG(y) FROM t EPSILON 2 OPTIONS (mechanism = 'collision')"])
def test_every_sql_path_carries_fiellers_interval_at_the_statements_confidence(sql):
    """CollisionMean, under a users split, and a joint Collision release: the interval follows OPTIONS (confidence)
    (the derive step recomputes it from the release's ratio parts), and holds the answer."""
    widths = {}
    for conf in (0.95, 0.8):
        con = ldpql.connect(seed=2, evaluation=True)
        _nullable(con)
        asked = sql if conf == 0.95 else sql.replace("OPTIONS (", "OPTIONS (confidence = 0.8, ") \
            if "OPTIONS" in sql else sql + " OPTIONS (confidence = 0.8)"
        res = con.sql(asked)
        for (low, high, c), value in zip(res.intervals()[0], res.fetchone()):
            assert c == conf and low < value < high
        widths[conf] = res.intervals()[0][0][1] - res.intervals()[0][0][0]
    assert widths[0.8] < 0.8 * widths[0.95]   # a normal-approximation ratio: 1.28/1.96 = 0.65


def test_the_split_candidate_carries_fiellers_interval():
    con = ldpql.connect(seed=3, evaluation=True)
    _nullable(con)
    q = "SELECT LDP_AVG(x) FROM t EPSILON 16"
    assert con.sql("EXPLAIN " + q).plan.aggregates[0].chosen.mechanism == "split"
    res = con.sql(q)
    (low, high, conf), value = res.intervals()[0][0], res.fetchone()[0]
    assert conf == 0.95 and low < value < high and high - low < 2


@pytest.mark.parametrize("text, mean", [("BETWEEN 0 AND 10", 1.5), ("BETWEEN 0 AND 10 NOT NULL", 8 / 3),
                                        ("BETWEEN 0 AND 10 DEFAULT 3", 2.0)])
def test_a_reopened_ledger_keeps_the_declared_null_semantics(tmp_path, text, mean):
    """The ledger rebuilds a declared table from its canonical domain, which wrote a nullable (and a NOT NULL) range
    as 'DEFAULT <midpoint>': a reopened connection counted NULL as 5 instead of skipping it."""
    path, ledger = tmp_path / "t.parquet", str(tmp_path / "l.ldpql")
    pq.write_table(pa.table({"x": pa.array([1.0, None, 2.0])}), path)
    con = ldpql.connect(ledger=ledger)
    con.sql(f"CREATE TABLE t FROM '{path}' (x PRIVATE {text}) BUDGET EPSILON 5")
    con.close()
    again = ldpql.connect(ledger=ledger, evaluation=True)
    assert again.catalog.get("t").columns["x"].domain.canonical() == text
    assert again.sql("SELECT LDP_AVG(x) FROM t EPSILON INF").fetchone()[0] == pytest.approx(mean)
    again.close()


def test_a_nullable_mean_over_one_user_runs():
    """A WHERE that keeps one user leaves some of the executor's chunks empty; Collision's randomizer could not
    reshape an empty element array (reached once a reopened ledger kept the column nullable)."""
    con = ldpql.connect(seed=4, evaluation=True)
    con.register("t", pa.table({"id": np.arange(3000), "x": pa.array(np.arange(3000.0) % 10, mask=np.arange(3000) % 3 == 0)}),
                 private={"x": {"between": (0, 10)}}, public=["id"], budget=10)
    value = con.sql("SELECT LDP_AVG(x) FROM t WHERE id = 1 EPSILON 1").fetchone()[0]
    assert 0 <= value <= 10 and con.remaining_budget("t") == pytest.approx(9.0)
