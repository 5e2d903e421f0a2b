"""SQL's NULL semantics for LDP_MEAN / LDP_AVG / LDP_SUM / LDP_COUNT(x) on a nullable private column, estimated
privately (Collision with d = 1, s = 1), and the declarations that decide it (NOT NULL, DEFAULT, nulls => ...)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql.catalog import NumericDomain
from ldpql.mechanisms.conditional import MISSING, CollisionMean, answer, predicted_variance

HIGH = 200_000


def wages(n: int, null_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Lognormal wages (median ~30,000, mean ~35,000) and a mask of the NULL ones."""
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal(10.3, 0.6, n)), rng.random(n) < null_fraction


def wage_table(n: int, null_fraction: float, seed: int, **domain) -> tuple[ldpql.Connection, np.ndarray]:
    w, null = wages(n, null_fraction, seed)
    con = ldpql.connect(seed=seed, evaluation=True)
    con.register("jobs", pa.table({"wage": pa.array(w, mask=null)}),
                 private={"wage": {"between": (0, HIGH), **domain}}, budget=1e9)
    return con, np.clip(w[~null], 0, HIGH)   # (values are clamped to the declared range, as the domain says)


def evaluate(con, sql: str) -> list[dict]:
    r = con.sql(sql)
    return [dict(zip(r.columns, row)) for row in r.fetchall()]


# ---- the regression: 44% NULL wages, where the midpoint default reversed a conclusion --------------------------

def test_avg_over_a_column_44_percent_null_covers_the_non_null_mean_and_the_midpoint_form_does_not():
    con, present = wage_table(40_000, 0.44, seed=13)
    true_mean = present.mean()
    skip = evaluate(con, "EVALUATE SELECT LDP_AVG(wage) FROM jobs EPSILON 1 REPEAT 20")[0]
    assert skip["truth"] == pytest.approx(true_mean, rel=1e-9)     # EVALUATE scores it against plain SQL AVG
    assert skip["coverage"] >= 0.75                               # P(<= 14 of 20 | 0.95) ≈ 0.003
    mid = con.sql("SELECT LDP_AVG(wage, nulls => 'midpoint') FROM jobs EPSILON 1")
    mid_value, (mid_low, mid_high, _) = mid.fetchone()[0], mid.intervals()[0][0]
    assert not mid_low <= true_mean <= mid_high
    assert mid_value - true_mean > 10 * (mid_high - mid_low) / 2    # 44% at 100,000 pulls it up by ~28,000
    got = con.sql("SELECT LDP_AVG(wage) FROM jobs EPSILON 1").fetchone()
    assert abs(got[0] - true_mean) < 0.2 * (mid_value - true_mean)


@pytest.mark.parametrize("n, eps, null_fraction", [(8_000, 2.0, 0.2), (30_000, 0.7, 0.6), (60_000, 3.0, 0.85)])
def test_coverage_of_the_mean_over_users_with_a_value_at_cells_not_tuned_on(n, eps, null_fraction):
    con, present = wage_table(n, null_fraction, seed=n % 97)
    row = evaluate(con, f"EVALUATE SELECT LDP_AVG(wage) FROM jobs EPSILON {eps} REPEAT 30")[0]
    assert row["truth"] == pytest.approx(present.mean(), rel=1e-9)
    assert row["coverage"] >= 0.8                                  # P(<= 23 of 30 | 0.95) ≈ 0.002
    assert abs(row["bias"]) < 3 * row["rmse"] / np.sqrt(30) + 1e-9


def test_sum_and_count_are_over_the_users_with_a_value():
    con, present = wage_table(30_000, 0.3, seed=5)
    rows = evaluate(con, "EVALUATE SELECT LDP_SUM(wage), LDP_COUNT(wage) FROM jobs EPSILON 2 REPEAT 10")
    total, count = rows
    assert total["truth"] == pytest.approx(present.sum(), rel=1e-9)
    assert count["truth"] == len(present)
    assert total["coverage"] >= 0.7 and count["coverage"] >= 0.7
    assert abs(total["mean_estimate"] - present.sum()) < 3 * total["rmse"]


def test_a_sum_over_users_with_a_value_is_not_clipped_to_n_times_the_lower_bound():
    """Audit 18 H1: the shown sum was clipped to n·[lo, hi] with n counting every user, but with NULLs skipped the
    true sum lies anywhere in n·[min(lo, 0), max(hi, 0)]: half of 2,000 users NULL, the rest on [10, 20], truth
    14,817 was shown as 20000 ± 0, and EVALUATE (scoring the shown interval) covered 0.000 of 300 runs."""
    rng = np.random.default_rng(1)
    x = rng.uniform(10, 20, 2000)
    x[rng.random(2000) < 0.5] = np.nan
    con = ldpql.connect(evaluation=True, seed=3)
    con.register("t", pa.table({"x": x}), private={"x": (10, 20)}, budget=1e9)
    df = con.sql("SELECT LDP_SUM(x) FROM t EPSILON 4 OPTIONS (seed = 1)").df()
    assert df["ldp_sum_x_low"][0] < df["ldp_sum_x"][0] < 20_000 and df["ldp_sum_x_high"][0] > df["ldp_sum_x_low"][0]
    row = evaluate(con, "EVALUATE SELECT LDP_SUM(x) FROM t EPSILON 4 REPEAT 100")[0]
    assert row["truth"] == pytest.approx(np.nansum(x)) and row["coverage"] >= 0.88   # (0.99 here)


# ---- which semantics applies: declared, never read from data -------------------------------------------------

def _chosen(con, sql: str) -> str:
    return con.sql(f"EXPLAIN {sql}").plan.aggregates[0].chosen.mechanism


def test_nullable_not_null_and_default_columns_pick_their_semantics_and_say_so():
    w, _ = wages(20_000, 0.0, seed=1)
    con = ldpql.connect(seed=1, evaluation=True)
    con.register("t", pa.table({"a": w, "b": w, "c": w}), budget=1e9,
                 private={"a": (0, HIGH), "b": {"between": (0, HIGH), "not_null": True},
                          "c": {"between": (0, HIGH), "default": 0}})
    assert _chosen(con, "SELECT LDP_AVG(a) FROM t EPSILON 1") == "collision"
    assert _chosen(con, "SELECT LDP_AVG(b) FROM t EPSILON 1") in ("duchi", "piecewise", "hybrid")
    assert _chosen(con, "SELECT LDP_AVG(c) FROM t EPSILON 1") in ("duchi", "piecewise", "hybrid")
    assert _chosen(con, "SELECT LDP_AVG(a, nulls => 'midpoint') FROM t EPSILON 1") in ("duchi", "piecewise", "hybrid")
    assert _chosen(con, "SELECT LDP_AVG(b, nulls => 'skip') FROM t EPSILON 1") == "collision"
    text = str(con.sql("EXPLAIN SELECT LDP_AVG(a), LDP_AVG(b) FROM t EPSILON 1").plan)
    assert "a: nullable" in text and "over the users with a value" in text and "1/share" in text
    assert "b: NULL or unreadable values count as 100000 (declared NOT NULL" in text
    assert "rejected    duchi" in text and "nulls => 'midpoint' asks for that" in text
    described = {row[0]: row[3] for row in con.sql("DESCRIBE t").fetchall()}
    assert "nullable" in described["a"] and "NOT NULL" in described["b"] and "NULL -> 0" in described["c"]


def test_not_null_in_the_language_and_in_register():
    con = ldpql.connect()
    con.duck.execute("CREATE TABLE raw AS SELECT 1.0 AS x, 2.0 AS y, 3.0 AS z")
    con.sql("CREATE TABLE t FROM raw (x PRIVATE BETWEEN 0 AND 10 NOT NULL, y PRIVATE BETWEEN 0 AND 10 DEFAULT 1 "
            "NOT NULL, z PRIVATE BETWEEN 0 AND 10 NOT NULL DEFAULT 2)")
    doms = {c.name: c.domain for c in con.catalog.get("t").columns.values()}
    assert doms["x"] == NumericDomain(0, 10, not_null=True) and not doms["x"].skips_nulls
    assert doms["y"].not_null and doms["y"].default == 1 and doms["z"].not_null and doms["z"].default == 2
    with pytest.raises(ldpql.CatalogError, match="NOT NULL"):
        con.sql("CREATE TABLE u FROM raw (x PRIVATE IN (1, 2) NOT NULL)")


def test_a_bad_nulls_value_is_refused_with_a_caret_and_spends_nothing():
    con, _ = wage_table(1_000, 0.1, seed=2)
    with pytest.raises(ldpql.PlanError, match="nulls => takes 'skip', 'midpoint' or 'default'") as e:
        con.sql("SELECT LDP_AVG(wage, nulls => 'zero') FROM jobs EPSILON 1")
    assert "^" in str(e.value)
    with pytest.raises(ldpql.PlanError, match="has no argument `nulls`"):
        con.sql("SELECT LDP_MEDIAN(wage, nulls => 'skip') FROM jobs EPSILON 1")
    assert con.remaining_budget("jobs") == 1e9


def test_gaussian_protocols_are_rejected_on_a_nullable_column_and_run_when_declared_not_null():
    rng = np.random.default_rng(5)
    x = rng.normal(123.4, 1, 60_000)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": x, "y": x}), budget=1e9,
                 private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1},
                          "y": {"between": (-1000, 1000), "gaussian_sigma": 1, "not_null": True}})
    plan = con.sql("EXPLAIN SELECT LDP_MEAN(x) FROM h EPSILON 2").plan.aggregates[0]
    gauss = next(c for c in plan.candidates if c.mechanism == "gaussian")
    assert "may hold NULLs" in gauss.rejected and plan.chosen.mechanism == "collision"
    assert _chosen(con, "SELECT LDP_MEAN(y) FROM h EPSILON 2") == "gaussian"
    with pytest.raises(ldpql.PlanError, match="may hold NULLs"):
        con.sql("SELECT LDP_MEAN(x, mechanism => 'gaussian') FROM h EPSILON 2")


def test_the_planner_reads_no_private_value_to_pick_the_semantics():
    """Two tables that differ only in which users are NULL get the same plan text."""
    plans = []
    for frac in (0.0, 0.9):
        con, _ = wage_table(10_000, frac, seed=3)
        plans.append(str(con.sql("EXPLAIN SELECT LDP_AVG(wage), LDP_SUM(wage) FROM jobs EPSILON 1").plan))
    assert plans[0] == plans[1]


# ---- the estimator (mechanism level) ------------------------------------------------------------------------

def test_collision_mean_standard_error_matches_the_spread_of_its_estimates():
    rng = np.random.default_rng(21)
    n, reps = 4_000, 300
    x = np.where(rng.random(n) < 0.4, MISSING, rng.uniform(-1, 0.5, n))
    truth = x[x < 1.5].mean()
    r = CollisionMean(1.0)
    got = [answer(r, r.aggregate(r.randomize(x, rng)), n, "mean", -1, 1) for _ in range(reps)]
    values = np.array([g.values[0] for g in got])
    ses = np.array([g.stderr[0] for g in got])
    assert abs(values.mean() - truth) < 4 * values.std() / np.sqrt(reps)      # (nearly) unbiased
    assert 0.85 < ses.mean() / values.std() < 1.25                               # honest, not much wider
    # the prediction at a share of 1 is below the error at a share of 0.6 (it grows about as 1/share)
    assert np.sqrt(predicted_variance(1.0, "mean", -1, 1) / n) < values.std()


def test_few_users_with_a_value_flag_the_answer_as_low_confidence():
    rng = np.random.default_rng(4)
    n = 2_000
    x = np.where(rng.random(n) < 0.995, MISSING, 0.5)
    r = CollisionMean(0.5)
    est = answer(r, r.aggregate(r.randomize(x, rng)), n, "mean", -1, 1)
    assert "low confidence" in est.note and -1 <= est.values[0] <= 1
    full = answer(r, r.aggregate(r.randomize(np.full(n, 0.5), rng)), n, "mean", -1, 1)
    assert full.note == ""


# ---- the split candidate: a mean report and a presence bit --------------------------------------------------

def test_at_a_large_epsilon_the_split_candidate_wins_covers_and_spends_exactly_epsilon():
    con, present = wage_table(30_000, 0.35, seed=17)
    plan = con.sql("EXPLAIN SELECT LDP_AVG(wage) FROM jobs EPSILON 6").plan.aggregates[0]
    assert plan.chosen.mechanism == "split"
    assert [c.mechanism for c in plan.candidates][:2] == ["collision", "split"]
    assert plan.chosen.predicted_se < next(c for c in plan.candidates if c.mechanism == "collision").predicted_se
    row = evaluate(con, "EVALUATE SELECT LDP_AVG(wage) FROM jobs EPSILON 6 REPEAT 30")[0]
    assert row["truth"] == pytest.approx(present.mean(), rel=1e-9)
    assert row["coverage"] >= 0.8
    before = con.remaining_budget("jobs")
    con.sql("SELECT LDP_AVG(wage) FROM jobs EPSILON 6")
    assert before - con.remaining_budget("jobs") == pytest.approx(6)
    assert _chosen(con, "SELECT LDP_AVG(wage) FROM jobs EPSILON 1") == "collision"
