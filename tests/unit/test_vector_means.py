"""VectorMeans: d bounded values per user rounded to signs and sent as one Collision or CoCo report (Wang, Li, Li,
Li, Yang, Yan). The estimator and its closed-form variance, the two simulation paths, the audits of the
composition, and the NULL-skipping (conditional mean) path the planner takes where a column skips NULLs."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

import ldpql
from ldpql.audit import audit
from ldpql.catalog import NumericDomain
from ldpql.mechanisms import REGISTRY
from ldpql.mechanisms.vector import VectorMeans, second_moment


def _data(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d)) * np.linspace(1, 0.2, d)
    x[:, 0] = 0.7   # one column constant: its rounding still varies, its mean is far from 0
    return x


@pytest.mark.parametrize("kind, eps", [("coco", 0.5), ("coco", 2.0), ("collision", 1.0)])
def test_estimates_are_unbiased_with_the_closed_form_variance(kind, eps):
    """1,500 runs of the fast path: bias within 4 standard errors, the variance (A − mean v²)/n within 15%
    (the sd of a variance from 1,500 runs is ~3.7%); the interval's bound (A − x̄²)/n is never below it."""
    n, d = 3000, 4
    x = _data(n, d, 1)
    r, rng = VectorMeans(eps, d, kind), np.random.default_rng(2)
    est = np.array([r.estimate(r.simulate(x, rng), n) for _ in range(1500)])
    truth = x.mean(axis=0)
    exact = (second_moment(kind, eps, d, r.t) - (x ** 2).mean(axis=0)) / n
    assert np.all(np.abs(est.mean(axis=0) - truth) < 4 * np.sqrt(exact / len(est)))
    assert np.all(np.abs(est.var(axis=0) / exact - 1) < 0.15)
    assert np.all(r.variance(truth, n) >= exact * (1 - 1e-12))   # (equal where the column is constant)


@pytest.mark.parametrize("kind", ["coco", "collision"])
def test_fast_path_and_per_user_hashing_agree_in_distribution(kind):
    """KS test of one coordinate's estimate: 300 runs of each path (the deployment-faithful path hashes every
    element at the server). A fixed seed; p > 0.001."""
    n, d = 1000, 3
    x = _data(n, d, 3)
    r, rng = VectorMeans(1.0, d, kind), np.random.default_rng(4)
    fast = [r.estimate(r.simulate(x, rng), n)[1] for _ in range(300)]
    full = [r.estimate(r.aggregate(r.randomize(x, rng)), n)[1] for _ in range(300)]
    assert stats.ks_2samp(fast, full).pvalue > 1e-3


def test_the_composition_is_audited_tight_and_a_nan_is_no_element():
    assert "vector_means" in REGISTRY
    for r in VectorMeans.audit_cases():
        assert r.epsilon - 1e-3 * max(1, r.epsilon) < audit(r).max_log_ratio <= r.epsilon + 1e-9
    r = VectorMeans(2.0, 2, "collision", 3)
    assert any(np.isnan(x).any() for x in r.audit_inputs())   # NULL (skipped) inputs are audited too
    rows = r.elements(np.array([[np.nan, 1.0], [-1.0, np.nan]]), np.random.default_rng(0))
    assert rows.tolist() == [[-1, 1], [2, -1]]
    with pytest.raises(ValueError, match="Collision"):
        VectorMeans(1.0, 2, "coco").elements(np.array([[np.nan, 0.0]]), np.random.default_rng(0))


# ---- a column whose NULLs are skipped (the property another branch adds to NumericDomain) ---------------------

@pytest.fixture
def skipping(monkeypatch):
    """Every numeric domain skips NULLs (SQL's AVG over the users with a value)."""
    monkeypatch.setattr(NumericDomain, "skips_nulls", property(lambda self: True), raising=False)


def _nullable(n: int = 8000, seed: int = 5) -> tuple[pa.Table, np.ndarray]:
    """Three columns on [0, 100]; x1 is 44% NULL, and its users with a value are low earners (mean ~25), so
    NULL-as-midpoint (50) would move its mean a lot."""
    rng = np.random.default_rng(seed)
    x0, x2 = rng.uniform(20, 80, n), rng.uniform(0, 100, n)
    x1 = rng.uniform(0, 50, n)
    null = rng.random(n) < 0.44
    return pa.table({"x0": x0, "x1": pa.array(x1, mask=null), "x2": x2}), x1[~null]


def test_a_skipped_column_gets_collision_s_conditional_mean(skipping):
    data, present = _nullable()
    con = ldpql.connect(seed=9, evaluation=True)
    con.register("t", data, private={c: (0, 100) for c in ("x0", "x1", "x2")}, budget=1e9)
    q = "SELECT LDP_AVG(x0), LDP_AVG(x1), LDP_AVG(x2) FROM t EPSILON 2 OPTIONS (mechanism = 'collision')"
    text = str(con.sql("EXPLAIN " + q))
    assert "mechanism * collision" in text and "conditional x0, x1, x2: NULLs skipped" in text
    exact = con.sql(q.replace("EPSILON 2", "EPSILON INF")).fetchone()
    assert exact[1] == pytest.approx(present.mean(), rel=1e-9)        # SQL's AVG, NULLs left out
    res = con.sql(q)
    low, high, _ = res.intervals()[0][1]
    assert low <= present.mean() <= high and high - low < 20
    with pytest.raises(ldpql.PlanError, match="CoCo gives unconditional means only"):
        con.sql(q.replace("'collision'", "'coco'"))


def test_the_planner_never_offers_coco_for_a_skipped_column(skipping):
    data, _ = _nullable(4000)
    con = ldpql.connect(seed=9, evaluation=True)
    con.register("t", data, private={c: (0, 100) for c in ("x0", "x1", "x2")}, budget=1e9)
    text = str(con.sql("EXPLAIN SELECT LDP_AVG(x0), LDP_AVG(x1), LDP_AVG(x2) FROM t EPSILON 1 "
                       "OPTIONS (split = 'epsilon')"))
    assert re.search(r"one collision \(t = \d+\) report per user", text) and "coco" not in text


def test_conditional_coverage_over_runs(skipping):
    """EVALUATE REPEAT 120 on the 44%-NULL column: the conditional mean's interval covers its truth (the mean over
    the users with a value) in at least 88% of runs (nominal 95%; 3 binomial sd below it)."""
    data, present = _nullable(6000, 6)
    con = ldpql.connect(seed=10, evaluation=True)
    con.register("t", data, private={c: (0, 100) for c in ("x0", "x1", "x2")}, budget=1e9)
    rows = con.sql("EVALUATE SELECT LDP_AVG(x0), LDP_AVG(x1), LDP_AVG(x2) FROM t EPSILON 2 "
                   "OPTIONS (mechanism = 'collision') REPEAT 120").fetchall()
    assert rows[1][3] == pytest.approx(present.mean())
    assert all(row[7] >= 0.88 for row in rows), rows
    assert not math.isnan(rows[1][6])


def test_coco_t_search_ends_at_every_epsilon_up_to_the_cap_and_keeps_the_paper_s_optimum():
    """The even-t scan refines around its best instead of scanning ±one coarse step at stride 2 (at ε = 30 that
    range held ~10^10 values: an ACCURACY search over ε hung there). Fig. 5's setting keeps its minimum t = 22."""
    from ldpql.mechanisms import coco

    assert coco.optimal_t(0.5, 128, 8) == 22
    for eps in (8.0, 20.0, 30.0):
        t = coco.optimal_t(eps, 8, 8)
        assert t % 2 == 0 and all(coco.mean_mse(eps, 8, 8, t) <= coco.mean_mse(eps, 8, 8, t + k) for k in (-2, 2))
