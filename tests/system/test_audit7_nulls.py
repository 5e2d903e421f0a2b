"""Audit 7 (hostile review) of two merges: SQL NULL semantics for means/sums/counts (CollisionMean, the split
candidate, nulls =>) and the joint release of several LDP_AVG columns (VectorMeans over Collision/CoCo).

Passing tests record what held; a finding that breaks is ``xfail(strict=True)`` with the measured numbers in its
reason. Every experiment here is bounded (seconds) and seeded; the larger grids behind the numbers quoted in the
reasons were run once outside the suite (R = 200-400 runs per cell) and are summarised in the reasons.
"""

from __future__ import annotations

import math
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import beta

import ldpql
from ldpql.audit import EPSILON_GRID, audit, realised_audit
from ldpql.backends.memory import evaluate
from ldpql.backends.sql import render
from ldpql.catalog import NumericDomain
from ldpql.mechanisms.base import UNIFORM_BITS, log_exact
from ldpql.mechanisms.collision import Collision
from ldpql.mechanisms.conditional import MISSING, CollisionMean, answer
from ldpql.mechanisms.vector import VectorMeans, optimal_t

Z = 1.959964


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """Exact binomial 95% range of a coverage k/n."""
    return (beta.ppf(0.025, k, n - k + 1) if k else 0.0, beta.ppf(0.975, k + 1, n - k) if k < n else 1.0)


def table(con, name: str, columns: dict, private: dict, budget: float = 1e12) -> None:
    con.register(name, pa.table(columns), private=private, public=[c for c in columns if c not in private],
                 budget=budget)


# ==== privacy: the samplers that run, audited at the t they run with ==========================================

def collision_realised_epsilon(c: Collision) -> float:
    """The realised worst log ratio of a Collision instance at *its own* t, without enumerating hash tables: given
    H, every output's probability is one of inside_m = (1 - r'_m)/m (z in the m distinct cells of the input) or
    outside_m = r'_m/(t - m) (z elsewhere), r'_m the sampler's rounded-up free rate; a rounding or a NULL only
    mixes these laws (CollisionMean, VectorMeans), so the worst ratio over every input is max/min of that set,
    attained by a corner input whose cell holds z against one with m = s distinct cells missing it."""
    probs = []
    for m in range(c.s + 1):
        r = Fraction(c.free_counts[m], 1 << UNIFORM_BITS)
        if m:
            probs.append((1 - r) / m)
        probs.append(r / (c.t - m))
    return log_exact(max(probs) / min(probs))


@pytest.mark.parametrize("eps", [e for e in EPSILON_GRID][::3] + [EPSILON_GRID[-1]])
def test_collision_mean_realised_epsilon_at_its_running_t_is_tight_from_both_sides(eps):
    r = CollisionMean(eps)
    got = collision_realised_epsilon(r.inner)
    assert got <= eps * (1 + 1e-12)
    assert got > eps - 1e-3 * max(1.0, eps)


@pytest.mark.parametrize("d", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 10.0])
def test_vector_means_collision_realised_epsilon_at_its_running_t(d, eps):
    r = VectorMeans(eps, d, "collision")
    got = collision_realised_epsilon(r.inner)
    assert r.t == optimal_t("collision", eps, d)
    assert got <= eps * (1 + 1e-12) and got > eps - 1e-3 * max(1.0, eps)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_collision_mean_full_enumeration_at_the_running_t(eps):
    """Every (H(1+), H(1-), z) at the t the planner uses, every audited input (rounding included, NULL included)."""
    r = CollisionMean(eps)
    exact, real = audit(r), realised_audit(r)
    assert exact.passed and real.passed
    assert real.max_log_ratio > eps - 1e-3 and exact.max_log_ratio > eps - 1e-9


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_vector_means_coco_full_enumeration_at_the_running_t(eps):
    r = VectorMeans(eps, 2, "coco", optimal_t("coco", eps, 2), grid=(-1.0, 0.3, 1.0))
    exact, real = audit(r), realised_audit(r)
    assert exact.passed and real.passed and real.max_log_ratio > eps - 1e-3


def _element_laws(r, xs):
    rng = np.random.default_rng(0)
    return {float(x): np.bincount(r.elements(np.full(20_000, x), rng).ravel() + 1, minlength=3) / 20_000 for x in xs}


def test_odd_inputs_reach_only_audited_laws():
    """NaN, ±inf, values beyond [-1, 1] and the MISSING sentinel each become an element law the audit covers
    (+ with prob. (1 + clip(x))/2, or no element): privacy holds whatever reaches the sampler."""
    odd = [math.nan, math.inf, -math.inf, 7.0, -7.0, 1.2, 1.6, MISSING]
    laws = _element_laws(CollisionMean(1.0), odd)
    for law in laws.values():
        assert law[0] in (0.0, 1.0)                      # NULL: always or never
        assert law[0] == 1.0 or law[1] in (0.0, 1.0)     # a value: a corner of [-1, 1] here


# fixed (was a strict xfail): LOW, CollisionMean treated +inf (any input > 1.5) as NULL, VectorMeans as +1;
# both now read inputs with conditional.as_values: only NaN (and MISSING) is NULL, the rest is clamped
def test_collision_mean_and_vector_means_agree_on_plus_infinity():
    cm = _element_laws(CollisionMean(1.0), [math.inf])[math.inf]
    vm = VectorMeans(1.0, 1, "collision").elements(np.array([[math.inf]]), np.random.default_rng(0))
    assert cm[0] == 0.0 and vm[0, 0] == 0   # both: the element 1+ (the value, clamped), not "no element"


# ==== privacy: what the planner and the ledger see ===========================================================

def _explain(null_fraction: float) -> str:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, 3000)
    con = ldpql.connect(seed=1, evaluation=True)
    table(con, "t", {"x": pa.array(x, mask=rng.random(3000) < null_fraction), "g": np.arange(3000) % 2},
          {"x": {"between": (0, 10)}})
    out = []
    for eps in (0.5, 4, 16):
        for q in (f"SELECT LDP_AVG(x) FROM t EPSILON {eps}", f"SELECT LDP_SUM(x), LDP_COUNT(x) FROM t EPSILON {eps}",
                  f"SELECT g, LDP_AVG(x) FROM t GROUP BY g EPSILON {eps}"):
            out.append(str(con.sql("EXPLAIN " + q)))
    return "\n".join(out)


def test_explain_text_and_plan_do_not_depend_on_how_many_values_are_null():
    assert _explain(0.0) == _explain(0.9) == _explain(1.0)


def test_all_null_column_runs_spends_exactly_epsilon_and_flags():
    con = ldpql.connect(seed=2, evaluation=True)
    table(con, "t", {"x": pa.array([None] * 4000, type=pa.float64()), "y": np.full(4000, 3.0)},
          {"x": {"between": (0, 10)}, "y": {"between": (0, 10)}}, budget=10)
    r = con.sql("SELECT LDP_AVG(x) FROM t EPSILON 1")
    assert con.remaining_budget("t") == pytest.approx(9.0)
    assert any("low confidence" in n for n in r.notes)
    con.sql("SELECT LDP_AVG(y) FROM t EPSILON 1")   # same path, a column with values: same charge
    assert con.remaining_budget("t") == pytest.approx(8.0)


def test_split_candidate_two_reports_are_charged_epsilon_in_total():
    rng = np.random.default_rng(3)
    con = ldpql.connect(seed=3, evaluation=True)
    table(con, "t", {"x": pa.array(rng.uniform(0, 10, 3000), mask=rng.random(3000) < 0.3)},
          {"x": {"between": (0, 10)}}, budget=40)
    q = "SELECT LDP_AVG(x) FROM t EPSILON 16"
    chosen = con.sql("EXPLAIN " + q).plan.aggregates[0].chosen
    assert chosen.mechanism == "split" and chosen.rounds == 2
    con.sql(q)
    assert con.remaining_budget("t") == pytest.approx(24.0)


def test_redeclaring_not_null_on_charged_data_keeps_the_ledger():
    """Flipping a column's NULL semantics by declaring the same frame again (NOT NULL, DEFAULT, nullable) gives two
    different releases of the same users, and both are charged to the same ledger row."""
    rng = np.random.default_rng(4)
    data = {"x": pa.array(rng.uniform(0, 10, 2000), mask=rng.random(2000) < 0.4)}
    con = ldpql.connect(seed=4, evaluation=True)
    table(con, "t", data, {"x": {"between": (0, 10)}}, budget=2)
    con.sql("SELECT LDP_AVG(x) FROM t EPSILON 1")
    for redeclared in ({"between": (0, 10), "not_null": True}, {"between": (0, 10), "default": 5}):
        table(con, "t", data, {"x": redeclared}, budget=2)
        assert con.remaining_budget("t") == pytest.approx(1.0)
    con.sql("SELECT LDP_AVG(x) FROM t EPSILON 1")
    with pytest.raises(ldpql.Error):
        con.sql("SELECT LDP_AVG(x, nulls => 'skip') FROM t EPSILON 0.5")
    assert con.remaining_budget("t") == pytest.approx(0.0)


REFUSALS = [
    "SELECT LDP_AVG(x, nulls => 'zero') FROM t EPSILON 1",
    "SELECT LDP_AVG(x, nulls => 1) FROM t EPSILON 1",
    "SELECT LDP_AVG(x, nulls => NULL) FROM t EPSILON 1",
    "SELECT LDP_AVG(x, nulls => 'skip', nulls => 'midpoint') FROM t EPSILON 1",
    "SELECT LDP_COUNT(x > 3, nulls => 'skip') FROM t EPSILON 1",
    "SELECT LDP_HISTOGRAM(c, nulls => 'skip') FROM t EPSILON 1",
    "SELECT LDP_AVG(x), LDP_AVG(y) FROM t EPSILON 1 OPTIONS (mechanism = 'coco')",
    "SELECT LDP_AVG(x), LDP_AVG(y) FROM t EPSILON 1 OPTIONS (mechanism = 'collision', split = 'users')",
    "SELECT LDP_AVG(x), LDP_COUNT(x > 3) FROM t EPSILON 1 OPTIONS (mechanism = 'collision')",   # (LDP_COUNT(x) joins the release: test_joint_counts.py)
    "SELECT LDP_MEAN(x, mechanism => 'gaussian') FROM t EPSILON 1",
]


@pytest.mark.parametrize("sql", REFUSALS)
def test_refusals_spend_nothing_and_quote_no_private_value(sql):
    secret = 7.123456789
    con = ldpql.connect(seed=5, evaluation=True)
    x = np.full(1000, secret)
    x[::3] = np.nan
    table(con, "t", {"x": x, "y": np.full(1000, 2.0), "c": np.array(["a", "b"] * 500)},
          {"x": {"between": (0, 10)}, "y": {"between": (0, 10), "not_null": True}, "c": ["a", "b"]},
          budget=5)
    with pytest.raises(ldpql.Error) as e:
        con.sql(sql)
    assert "7.12" not in str(e.value)
    assert con.remaining_budget("t") == pytest.approx(5.0)


def test_not_null_on_a_categorical_column_is_refused():
    con = ldpql.connect(seed=6, evaluation=True)
    with pytest.raises(ldpql.Error):
        con.sql("CREATE TABLE t (c VARCHAR PRIVATE IN ('a', 'b') NOT NULL) FROM (SELECT 'a' AS c)")


def test_seed_outside_evaluation_mode_is_refused():
    with pytest.raises(ldpql.Error):
        ldpql.connect(seed=1)


# ==== NaN, ±inf and unreadable values: DuckDB and the in-memory backend =====================================

ODD_TEXT = ["3", " 5 ", "1_000", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "abc", "", None,
            "0x10", "+7", "7.", ".5", "1e-400"]


def _both(values: list, e) -> tuple[list, list]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (i INTEGER, x VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    duck = [r[0] for r in con.execute(f"SELECT {render(e)} FROM t ORDER BY i").fetchall()]
    mem, null = evaluate(e, {"x": np.array(values, dtype=object)}, len(values))
    return duck, [None if nl else float(v) for v, nl in zip(mem, null)]


def _same(a, b) -> bool:
    return (a is None and b is None) or (None not in (a, b) and (a == b or (math.isnan(a) and math.isnan(b))))


@pytest.mark.parametrize("what", ["scaled_or", "present"])
def test_null_nan_inf_and_unreadable_text_encode_alike_on_duckdb_and_in_memory(what):
    from ldpql import expr as E
    dom = NumericDomain(0.0, 10.0)
    x = E.number("x")
    e = dom.scaled_or("x", MISSING) if what == "scaled_or" else \
        E.indicator(E.Not(E.Logic("OR", (E.IsNull(x), E.call("isnan", x)))))
    duck, mem = _both(ODD_TEXT, e)
    assert all(_same(a, b) for a, b in zip(duck, mem)), list(zip(ODD_TEXT, duck, mem))


# fixed (was a strict xfail): LOW, the in-memory evaluator read Unicode digits with float() ('١' -> 1.0)
# where DuckDB's TRY_CAST gives NULL
def test_unicode_digits_are_unreadable_on_both_backends():
    dom = NumericDomain(0.0, 10.0)
    duck, mem = _both(["١", "٣"], dom.scaled_or("x", MISSING))
    assert all(_same(a, b) for a, b in zip(duck, mem)), (duck, mem)


def test_epsilon_inf_equals_plain_sql_over_non_null_values_with_group_by_and_where():
    """DuckDB as the oracle: AVG/SUM/COUNT over the non-NULL, non-NaN values, clamped to the declared range
    (+inf -> hi, -inf -> lo), per group with different NULL rates (0 to 99.9%), under a WHERE on a public column."""
    rng = np.random.default_rng(7)
    n = 3000
    x = rng.uniform(-2, 12, n)
    x[rng.random(n) < 0.05] = np.inf
    x[rng.random(n) < 0.05] = -np.inf
    x[rng.random(n) < 0.1] = np.nan
    g = rng.integers(0, 4, n)
    null = rng.random(n) < np.array([0.0, 0.3, 0.9, 0.999])[g]
    w = rng.integers(0, 10, n)
    frame = pa.table({"x": pa.array(x, mask=null), "g": g, "w": w})
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("t", frame, private={"x": {"between": (0, 10)}}, public=["g", "w"], budget=1e12)
    got = con.sql("SELECT g, LDP_AVG(x), LDP_SUM(x), LDP_COUNT(x) FROM t WHERE w < 7 GROUP BY g EPSILON INF").fetchall()
    got = sorted(got)
    duck = duckdb.connect()
    duck.register("o", frame)
    want = duck.execute("SELECT g, AVG(v), SUM(v), COUNT(v) FROM (SELECT g, w, CASE WHEN x IS NULL OR isnan(x) THEN NULL "
                        "ELSE least(greatest(x, 0), 10) END AS v FROM o) WHERE w < 7 GROUP BY g ORDER BY g").fetchall()
    assert len(got) == len(want) == 4
    for a, b in zip(got, want):
        assert a[0] == b[0]
        assert (a[1] is None and b[1] is None) or a[1] == pytest.approx(b[1], rel=1e-12, abs=1e-12)
        assert a[2] == pytest.approx(b[2] or 0.0, rel=1e-12, abs=1e-9) and a[3] == pytest.approx(b[3], rel=1e-12)


# ==== accuracy and honesty of the conditional mean (CollisionMean, the split) ================================

def _run_mechanism(n: int, null_fraction: float, eps: float, values, runs: int, seed: int):
    """(values, standard errors, low-confidence flags, truth, 95% intervals) of ``runs`` releases of CollisionMean
    over [0, 10]."""
    rng = np.random.default_rng(seed)
    x = values(rng, n)
    null = rng.random(n) < null_fraction
    xs = np.where(null, MISSING, (x - 5) / 5)
    r = CollisionMean(eps)
    out = [answer(r, r.aggregate(r.randomize(xs, rng)), n, "mean", 0.0, 10.0) for _ in range(runs)]
    return (np.array([e.values[0] for e in out]), np.array([e.stderr[0] for e in out]),
            np.array([bool(e.note) for e in out]), x[~null].mean(),
            np.array([(e.interval[0][0], e.interval[1][0]) for e in out]))


AT_HIGH = lambda rng, n: np.full(n, 10.0)   # every value at the upper bound


# fixed (was a strict xfail): MEDIUM (M1), both f̂± clipping to 0 gave a delta-method standard error of exactly 0
# (102/400 releases at n = 500, 95% NULL, ε = 0.5; this test: 60/200). The interval is now Fieller's
def test_conditional_mean_never_claims_a_zero_width_interval():
    _, se, _, _, iv = _run_mechanism(500, 0.95, 0.5, AT_HIGH, 200, seed=11)
    assert (se > 0).all(), f"{int((se == 0).sum())} of 200 releases have standard error 0"
    assert (iv[:, 1] > iv[:, 0]).all(), f"{int((iv[:, 1] <= iv[:, 0]).sum())} of 200 intervals have width 0"


# fixed (was a strict xfail): MEDIUM (M2), the standard error capped at half the range reached only 98% of the way to
# the other bound (SQL coverage 0.70-0.80 in the 'all at the bound' cells). Fieller's interval is the whole declared
# range where the share with a value is not significantly above 0
def test_a_capped_interval_covers_the_whole_domain():
    """The releases whose interval says nothing (the share with a value not significantly above 0) carry the whole
    declared range [0, 10], flagged; and the cell's intervals cover (the capped ones missed: 0.70 at 95%)."""
    v, _, flag, truth, iv = _run_mechanism(500, 0.95, 0.5, AT_HIGH, 200, seed=12)
    whole = (iv[:, 0] == 0.0) & (iv[:, 1] == 10.0)
    assert whole.any() and flag[whole].all()
    assert ((iv[:, 0] <= v) & (v <= iv[:, 1])).all()   # every point inside its interval
    hit = (iv[:, 0] <= truth) & (truth <= iv[:, 1])
    assert clopper_pearson(int(hit.sum()), len(hit))[1] >= 0.95, f"coverage {int(hit.sum())}/200"


# fixed (was a strict xfail): HIGH (H2), unflagged answers under-covered near the flag's threshold (delta method on a
# ratio with a noisy denominator: 0.72-0.88 at 95%; this cell 68/84 = 0.81; now 76/84 = 0.905, exact upper bound
# 0.958). The audit's five cells, 400 new releases each (examples/fieller/audit_cells.txt), unflagged: Fieller
# 0.925-0.966, every exact upper bound >= 0.95 (delta method on the same releases 0.81-0.89). Not fixed everywhere:
# with the values at a bound and the true share just below the flag, the unflagged releases are selected on a high
# estimated share, which selects the numerator's noise too (0.79 over 223 unflagged of 2,000 releases at n = 500,
# 50% NULL, ε = 0.5; delta 0.65; examples/fieller/unflagged.txt). Over all releases coverage holds.
def test_unflagged_conditional_means_cover():
    _, _, flag, truth, iv = _run_mechanism(5000, 0.8, 0.5, AT_HIGH, 300, seed=13)
    hit = (iv[:, 0] <= truth) & (truth <= iv[:, 1])
    k, m = int(hit[~flag].sum()), int((~flag).sum())
    assert m >= 30
    assert clopper_pearson(k, m)[1] >= 0.95, f"unflagged coverage {k}/{m}"


def _evaluate(con, sql: str, runs: int = 200) -> list[dict]:
    r = con.sql(f"EVALUATE {sql} REPEAT {runs}")
    return [dict(zip(r.columns, row)) for row in r.fetchall()]


@pytest.mark.parametrize("n, null_fraction, eps, shape", [
    (20_000, 0.5, 0.5, "unif"), (5_000, 0.0, 2, "skew"), (5_000, 0.5, 2, "skew"), (2_000, 0.5, 16, "skew"),
    (5_000, 0.8, 16, "bound"), (500, 0.0, 16, "unif")])
def test_conditional_mean_coverage_away_from_the_flag(n, null_fraction, eps, shape):
    """Coverage of LDP_AVG over a nullable column as the planner runs it (Collision, or the split at ε = 16):
    measured 0.945-0.985 on these cells (R = 200); a broken interval (say 1.3x too narrow, 0.88) fails."""
    rng = np.random.default_rng(n + int(100 * null_fraction) + int(eps))
    x = {"unif": rng.uniform(0, 10, n), "skew": np.clip(np.exp(rng.normal(0, 1, n)), 0, 10),
         "bound": np.full(n, 10.0)}[shape]
    con = ldpql.connect(seed=n + int(eps), evaluation=True)
    table(con, "t", {"x": pa.array(x, mask=rng.random(n) < null_fraction)}, {"x": {"between": (0, 10)}})
    row = _evaluate(con, f"SELECT LDP_AVG(x) FROM t EPSILON {eps}")[0]
    assert row["coverage"] >= 0.905   # P(coverage <= 0.90 | 0.95, 200 runs) < 0.003


def test_sum_and_count_of_a_nullable_column_cover():
    """Measured (R = 200, n = 2,000, 90% NULL, ε = 1): LDP_SUM 0.970 (Duchi with NULL as 0), LDP_COUNT(x) 0.940
    (randomized response); at 50% NULL, ε = 16: 0.975 (PM) and 0.955."""
    rng = np.random.default_rng(21)
    n = 2000
    x = np.clip(np.exp(rng.normal(1, 0.8, n)), 0, 10)
    con = ldpql.connect(seed=21, evaluation=True)
    table(con, "t", {"x": pa.array(x, mask=rng.random(n) < 0.9)}, {"x": {"between": (0, 10)}})
    total, count = _evaluate(con, "SELECT LDP_SUM(x), LDP_COUNT(x) FROM t EPSILON 1")
    assert total["coverage"] >= 0.905 and count["coverage"] >= 0.905


def test_explain_prediction_bounds_the_realised_error_at_a_share_of_one_and_scales_with_the_share():
    """EXPLAIN predicts at a reference share of 1 with a value; realised 1.96·RMSE (R = 200, n = 2,000, ε = 1):
    at no NULL within the prediction, at a share p within about the prediction/p (the note's claim)."""
    rng = np.random.default_rng(22)
    n = 2000
    x = np.clip(np.exp(rng.normal(1, 0.8, n)), 0, 10)
    for share in (1.0, 0.5, 0.1):
        con = ldpql.connect(seed=22, evaluation=True)
        table(con, "t", {"x": pa.array(x, mask=rng.random(n) >= share)}, {"x": {"between": (0, 10)}})
        q = "SELECT LDP_AVG(x) FROM t EPSILON 1"
        predicted = con.sql("EXPLAIN " + q).plan.aggregates[0].chosen.predict(1.0, n) * Z
        realised = Z * _evaluate(con, q)[0]["rmse"]
        assert realised <= 1.15 * predicted / share


# ==== the joint release ======================================================================================

def _two_forms():
    rng = np.random.default_rng(31)
    n = 20_000
    x = rng.uniform(8, 10, n)
    null = rng.random(n) < 0.5
    con = ldpql.connect(seed=31, evaluation=True)
    table(con, "t", {"x": pa.array(x, mask=null)}, {"x": {"between": (0, 10)}})
    return con, (x[~null].mean(), np.where(null, 5.0, x).mean())


# fixed (was a strict xfail, HIGH): the joint release keyed its coordinates by column name only
def test_joint_release_keeps_each_aggregates_null_semantics():
    con, (skip, midpoint) = _two_forms()
    a, b = con.sql("SELECT LDP_AVG(x), LDP_AVG(x, nulls => 'midpoint') FROM t EPSILON 4").fetchone()
    assert abs(a - skip) < 0.3 and abs(b - midpoint) < 0.3
    a, b = con.sql("SELECT LDP_AVG(x), LDP_AVG(x, nulls => 'midpoint') FROM t EPSILON INF "
                   "OPTIONS (mechanism = 'collision')").fetchone()
    assert a == pytest.approx(skip) and b == pytest.approx(midpoint)


@pytest.mark.parametrize("d, nullable, mech", [(4, True, "collision"), (8, False, "coco"), (16, True, "collision")])
def test_joint_release_coverage(d, nullable, mech):
    """Per-column coverage of the joint release (n = 5,000, ε = 1, R = 200). Outside the suite, 180 (d, column) cells
    (d = 2, 4, 8, 16; NULL shares 0, 0.3, 0.5, 0.8; ε = 1, 4; CoCo and Collision) gave min 0.910 and 2 cells with
    an exact upper bound below 0.95, the chance count: the rounding term VectorMeans.conditional adds makes up for
    Collision.conditional_variance treating f̂₊, f̂₋ as uncorrelated."""
    rng = np.random.default_rng(d * 7 + nullable)
    n = 5000
    cols, private = {}, {}
    for j in range(d):
        v = rng.beta(0.5, 3, n) * 10 if j % 2 else rng.uniform(6, 10, n)
        share = (0.0, 0.5, 0.8, 0.3)[j % 4] if nullable else 0.0
        cols[f"x{j}"] = pa.array(v, mask=rng.random(n) < share)
        private[f"x{j}"] = {"between": (0, 10)} if share else {"between": (0, 10), "not_null": True}
    con = ldpql.connect(seed=d, evaluation=True)
    table(con, "t", cols, private)
    sel = ", ".join(f"LDP_AVG(x{j})" for j in range(d))
    rows = _evaluate(con, f"SELECT {sel} FROM t EPSILON 1 OPTIONS (mechanism = '{mech}')")
    covs = [r["coverage"] for r in rows]
    assert min(covs) >= 0.89 and np.mean(covs) >= 0.93, covs


def test_joint_release_choice_matches_the_realised_errors():
    """At ε = 1 (d = 4, n = 5,000, NOT NULL columns) the planner predicts a users split better than one CoCo report
    (relative variance 17.5 vs 36.4: ratio 2.08) and chooses it; realised total MSE (R = 100, outside the suite)
    0.088 (users) vs 0.163 (CoCo) vs 0.251 (Collision) vs 0.304 (ε split): ratio 1.85, the predicted side. With
    d = 2 and 8: predicted ratios 1.83 and 2.23, realised 2.40 and 2.41."""
    rng = np.random.default_rng(41)
    n = 5000
    cols = {f"x{j}": rng.uniform(0, 10, n) for j in range(4)}
    con = ldpql.connect(seed=41, evaluation=True)
    table(con, "t", cols, {c: {"between": (0, 10), "not_null": True} for c in cols})
    q = "SELECT LDP_AVG(x0), LDP_AVG(x1), LDP_AVG(x2), LDP_AVG(x3) FROM t EPSILON 1"
    assert "users: 4 disjoint groups" in str(con.sql("EXPLAIN " + q))
    mse = {opt: np.mean([r["rmse"] ** 2 for r in _evaluate(con, q + opt, 60)])
           for opt in ("", " OPTIONS (mechanism = 'coco')")}
    assert mse[" OPTIONS (mechanism = 'coco')"] > 1.2 * mse[""]


# ==== declarations ==========================================================================================

def _declare_twice(first: dict, second: dict) -> str | None:
    data = pa.table({"x": pa.array(np.arange(100.0) % 10, mask=np.arange(100) % 3 == 0)})
    con = ldpql.connect(seed=1, evaluation=True)
    con.register("t", data, private={"x": first}, budget=5)
    con.sql("SELECT LDP_AVG(x) FROM t EPSILON 1")
    try:
        con.register("t", data, private={"x": second}, budget=5)
    except ldpql.Error as e:
        assert con.remaining_budget("t") == pytest.approx(4.0)
        return str(e)
    assert con.remaining_budget("t") == pytest.approx(4.0)
    return None


# fixed (was a strict xfail): LOW, the canonical domain wrote a nullable range as 'DEFAULT <midpoint>'. It now
# writes the NULL semantics as declared; re-declarations compare what statements can release (the range and the
# value a NULL may stand for: NumericDomain.effective), so DEFAULT 3 -> nullable is still refused, named honestly
def test_redeclaration_messages_name_the_null_semantics():
    message = _declare_twice({"between": (0, 10), "default": 3}, {"between": (0, 10)})
    assert message is not None and "DEFAULT 5" not in message


# fixed (was a strict xfail): LOW, register(private={'c': {'in': [...]}}) raised an internal KeyError
def test_register_with_an_unknown_domain_key_is_a_clear_error():
    con = ldpql.connect(seed=1, evaluation=True)
    with pytest.raises(ldpql.Error) as e:
        con.register("t", pa.table({"c": ["a", "b"]}), private={"c": {"in": ["a", "b"]}})
    assert not isinstance(e.value, ldpql.errors.InternalError)
    assert "'in'" in str(e.value) and "'between'" in e.value.hint and "list" in e.value.hint
