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
    for x, law in laws.items():
        assert law[0] in (0.0, 1.0)                      # NULL: always or never
        assert law[0] == 1.0 or law[1] in (0.0, 1.0)     # a value: a corner of [-1, 1] here


@pytest.mark.xfail(strict=True, reason="LOW: CollisionMean treats any input > 1.5 (so +inf, or an unclamped 1.6) "
                   "as NULL, but -inf and -7 as the lower bound, while VectorMeans treats +inf as +1 (only NaN is "
                   "NULL). The SQL encodings clamp first, so no statement reaches it today; a direct caller or a "
                   "future encoding that forgets the clamp gets an asymmetric, silent NULL.")
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
    "SELECT LDP_AVG(x) FROM t EPSILON 1 OPTIONS (mechanism = 'collision')",
    "SELECT LDP_AVG(x), LDP_AVG(y) FROM t EPSILON 1 OPTIONS (mechanism = 'collision', split = 'users')",
    "SELECT LDP_AVG(x), LDP_COUNT(x) FROM t EPSILON 1 OPTIONS (mechanism = 'collision')",
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


@pytest.mark.xfail(strict=True, reason="LOW: the in-memory evaluator converts text with Python's float(), which reads "
                   "Unicode digits ('١' -> 1.0); DuckDB's TRY_CAST returns NULL. The same row is a value in memory and "
                   "a NULL on DuckDB (scaled 1 -> -0.8 vs MISSING; LDP_COUNT(x) counts it in memory only).")
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
