"""LDP_MIN and LDP_MAX end to end (issue #3, seed 000): the statements of the issue, EXPLAIN, the degenerate
γ ≥ 1 refusal and force, the Laplace baseline on request, noise off against DuckDB, the exact path's counts
against brute force, exact against per-user simulation, interval coverage in EVALUATE, and a plan that does
not depend on private values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

import ldpql
from ldpql.backends.sql import render
from ldpql.catalog import Column, NumericDomain
from ldpql.mechanisms.minimum import Grid, Lattice, schedule
from ldpql.planner import minimum as planner_min
from tests.conftest import declare_people, people_table


def _beta_table(n=4000, a=1.0, b=1.0, delta=0.3, xmin=-0.66, seed=0, setting="fixed"):
    if setting == "fixed":
        x = xmin + delta * stats.beta.ppf(np.linspace(0, 1, n), a, b)
    else:
        x = xmin + delta * np.random.default_rng(seed).beta(a, b, n)
    return pa.table({"x": np.random.default_rng(seed + 1).permutation(x)})


# ---- the statements of the issue ---------------------------------------------------------------------------

@pytest.fixture
def people(con, people_parquet):
    """The conftest people table (20,000 users), with budget for several statements."""
    declare_people(con, people_parquet, budget=40)
    return con


def test_the_issues_statements_run(people):
    (low,), = people.sql("SELECT LDP_MIN(age) EPSILON 1 FROM people OPTIONS (mechanism = 'bisect')").fetchall()
    assert 0 <= low <= 120
    # against the data (ages uniform on 0..99): the search stops where at most about γ of the users are below
    # (Algorithm 2), so the answer lies between the true minimum and the (γ + 0.1)-quantile
    ages = np.sort(people_table()["age"].to_numpy())
    for eps in (1, 4):
        (low,), = people.sql(f"SELECT LDP_MIN(age) FROM people EPSILON {eps} OPTIONS (mechanism = 'bisect')").fetchall()
        assert ages[0] <= low <= ages[int((schedule(20_000, eps).gamma + 0.1) * len(ages))], eps
    res = people.sql("SELECT LDP_MAX(income) FROM people EPSILON 4 OPTIONS (mechanism = 'bisect')")
    (high,), = res.fetchall()
    lo, hi, conf = res.intervals()[0][0]
    assert lo <= high <= hi == 250000 and conf > 0.99 and res.columns == ["ldp_max_income"]
    res = people.sql("SELECT region, LDP_MIN(age), LDP_MAX(age) FROM people GROUP BY region EPSILON 2 OPTIONS (mechanism = 'bisect')")
    assert [r[0] for r in res.fetchall()] == ["east", "north", "south"]
    assert all(r[1] is not None and r[2] is not None for r in res.fetchall())
    assert people.sql("SELECT LDP_MIN(age, alpha => 1) EPSILON 1 FROM people OPTIONS (mechanism = 'bisect')").plan.aggregates[0].chosen.rounds == 8
    assert people.remaining_budget("people") == pytest.approx(40 - 1 - (1 + 4) - 4 - 2 - 1)


def test_explain_shows_schedule_rounds_bound_and_interval(people):
    text = people.explain("EXPLAIN SELECT LDP_MIN(age) EPSILON 1 FROM people OPTIONS (mechanism = 'bisect')")
    s = schedule(20_000, 1.0)
    assert f"bisect_min: local, {s.depth} round(s), ε = 1" in text
    assert f"unknown α (Corollary 2): L = {s.depth}, h_N = {s.h:.4g}, γ = {s.gamma:.4g}" in text
    assert f"ε/L = {s.round_epsilon:.4g}" in text and f"{s.depth} × {s.round_epsilon:.4g} = ε 1 per user" in text
    assert "Theorem 4" in text and "α = 1" in text and "Corollary 2" in text
    assert "one-sided: minimum ≤ top of the final interval" in text
    assert "laplace_min" in text
    assert "only when asked for" in people.explain("SELECT LDP_MIN(age) EPSILON 1 FROM people")
    lower = people.explain("SELECT LDP_MAX(age, alpha => 2) EPSILON 4 FROM people OPTIONS (mechanism = 'bisect')")
    assert "lower α, α ≥ α₀ = 2 (Corollary 1)" in lower and "maximum ≥ bottom" in lower
    assert "E|error| ≤" in lower and "±" not in lower.split("predicted")[1].split("\n")[0]


def test_min_and_max_together_split_users_and_each_plans_on_its_own_users(people):
    res = people.sql("SELECT LDP_MIN(age), LDP_MAX(age) FROM people EPSILON 2 OPTIONS (mechanism = 'bisect')")
    agg = res.plan.aggregates[0]
    assert res.plan.split == "users" and agg.users == (0.0, 0.5)
    first = next(agg.protocol(20_000))
    assert first.randomizer.epsilon == pytest.approx(2.0 / schedule(10_000, 2.0).depth)
    assert "(at n = 10,000)" in str(res.plan)


# ---- γ ≥ 1: refused with the n or ε that would work, unless force ---------------------------------------------

@pytest.fixture
def small(con):
    con.register("small", _beta_table(1000), private={"x": (-1, 1)}, budget=30)
    return con


def test_degenerate_search_is_refused_with_the_fix_and_spends_nothing(small):
    with pytest.raises(ldpql.PlanError) as err:
        small.sql("SELECT LDP_MIN(x, alpha => 0.5) EPSILON 2 FROM small OPTIONS (mechanism = 'bisect')")
    text = str(err.value)
    assert "γ = 1.24 ≥ 1 at n = 1,000" in text and "needs n ≥ 2,446 at ε = 2" in text
    assert "or ε ≥ 2.51 at n = 1,000" in text and "force = true" in text
    with pytest.raises(ldpql.PlanError):
        small.explain("SELECT LDP_MIN(x, alpha => 0.5) EPSILON 2 FROM small OPTIONS (mechanism = 'bisect')")
    assert small.remaining_budget("small") == 30


def test_force_runs_the_degenerate_search_and_says_so(small):
    stmt = "SELECT LDP_MIN(x, alpha => 0.5) EPSILON 2 FROM small OPTIONS (force = true, mechanism = 'bisect')"
    assert "WARNING     γ = 1.24 ≥ 1" in small.explain(stmt)
    res = small.sql(stmt)
    assert "γ = 1.24 ≥ 1 (too few users for this ε)" in " ".join(res.notes)
    assert small.remaining_budget("small") == 28


def test_a_group_too_small_is_refused_at_plan_time_and_nothing_is_spent(con):
    """Every mechanism's check runs at the smallest group's size (audit6 F1), so the planner refuses, EXPLAIN too,
    naming the group and what would work."""
    data = pa.table({"x": np.linspace(0, 1, 3000), "g": ["big"] * 2800 + ["tiny"] * 200})
    con.register("t", data, private={"x": (0, 1)}, public=["g"], budget=5)
    stmt = "SELECT g, LDP_MIN(x, alpha => 0.5, mechanism => 'bisect') EPSILON 3 FROM t GROUP BY g"
    with pytest.raises(ldpql.PlanError, match="γ < 1 needs n ≥"):
        con.explain(stmt)
    with pytest.raises(ldpql.PlanError, match="a group of 200 users is too small"):
        con.sql(stmt)
    assert con.remaining_budget("t") == 5
    assert len(con.sql(stmt + " OPTIONS (force = true)").fetchall()) == 2


# ---- the Laplace baseline ----------------------------------------------------------------------------------

def test_laplace_baseline_on_request_only(small):
    res = small.sql("SELECT LDP_MIN(x) EPSILON 4 FROM small OPTIONS (mechanism = 'laplace_min')")
    assert res.plan.aggregates[0].chosen.mechanism == "laplace_min" and res.intervals()[0][0] is None
    (value,), = res.fetchall()
    assert value < -1.5   # far below the domain: why the bisection exists
    res = small.sql("SELECT LDP_MAX(x, mechanism => 'laplace_max') EPSILON 4 FROM small")
    assert res.fetchall()[0][0] > 1
    with pytest.raises(ldpql.PlanError, match="cannot answer LDP_MAX"):
        small.sql("SELECT LDP_MAX(x) EPSILON 1 FROM small OPTIONS (mechanism = 'laplace_min')")
    assert small.sql("SELECT LDP_MIN(x) EPSILON 4 FROM small").plan.aggregates[0].chosen.mechanism.startswith("buckets_")


def test_laplace_baseline_per_user_over_several_batches(eval_con, monkeypatch):
    from ldpql.backends import duckdb as duckdb_backend
    monkeypatch.setattr(duckdb_backend, "BATCH_ROWS", 256)
    eval_con.register("b", _beta_table(3000), private={"x": (-1, 1)})
    (v,), = eval_con.sql("SELECT LDP_MIN(x) EPSILON INF FROM b OPTIONS (mechanism = 'laplace_min')").fetchall()
    assert v == pytest.approx(-0.66)


# ---- noise off against DuckDB -----------------------------------------------------------------------------------

def test_noise_off_equals_duckdb_min_and_max_of_the_clamped_values(eval_con):
    rng = np.random.default_rng(2)
    n = 5000
    x = rng.normal(40, 30, n)
    x[:7], x[7:12] = np.nan, 1e9
    data = pa.table({"x": pa.array(x, mask=np.arange(n) % 101 == 0), "age": rng.normal(50, 40, n),
                     "g": rng.choice(["a", "b", "c", "d"], n)})
    eval_con.register("d", data, private={"x": {"between": (0, 100), "default": 55},
                                          "age": {"between": (0, 120), "integer": True}}, public=["g"])
    q = ("SELECT g, LDP_MIN(x), LDP_MAX(x), LDP_MIN(age), LDP_MAX(age) FROM d WHERE g <> 'd' GROUP BY g "
         "EPSILON INF")
    for sim in ("auto", "per_user"):
        got = eval_con.sql(f"{q} OPTIONS (simulation = '{sim}')").fetchall()
        want = eval_con.duck.execute(
            "SELECT g, min(cx), max(cx), min(ca), max(ca) FROM (SELECT g, "
            "least(greatest(CASE WHEN x IS NULL OR isnan(x) THEN 55 ELSE x END, 0), 100) AS cx, "
            "least(greatest(round(age), 0), 120) AS ca FROM __ldpql_frame_d WHERE g <> 'd') GROUP BY g ORDER BY g"
        ).fetchall()
        for row, ref in zip(got, want):
            assert row[0] == ref[0]
            assert row[1:] == pytest.approx(ref[1:], abs=120 * 2.0 ** -40)


# ---- the exact path's counts against brute force -------------------------------------------------------------

@pytest.mark.parametrize("fetch_limit", [1 << 20, 5])
def test_exact_path_counts_equal_brute_force_along_searches(eval_con, monkeypatch, fetch_limit):
    """SearchEncoding.histograms, grid after grid (first grid, then nested ones either held in memory or counted by block),
    per group, against numpy on the clamped values: NULL, NaN, ±inf, values outside the domain, ties on
    thresholds, an INTEGER domain over a float column, the maximum's negated values."""
    monkeypatch.setattr(planner_min, "FETCH_LIMIT", fetch_limit)
    rng = np.random.default_rng(9)
    n = 4000
    x = np.round(rng.uniform(-20, 140, n) * 4) / 4            # many ties on dyadic thresholds
    x[:30] = 60.0
    x[30:35], x[35:38], x[38:40] = np.nan, np.inf, -np.inf
    cells = rng.integers(0, 3, n)
    data = pa.table({"x": pa.array(x, mask=np.arange(n) % 211 == 0), "cell": cells})
    eval_con.duck.register("raw", data)
    for integer in (False, True):
        dom = NumericDomain(0.0, 120.0, integer=integer)
        rounded = np.sign(x) * np.floor(np.abs(x) + 0.5)    # DuckDB's round(): halves away from zero
        clamped = np.where(np.isnan(x) | (np.arange(n) % 211 == 0), dom.null_value,
                           np.clip(rounded if integer else x, 0, 120))
        for negate in (False, True):
            col = Column("x", "DOUBLE", False, dom)
            v = -clamped if negate else clamped
            lat = Lattice(-120.0, 0.0) if negate else Lattice(0.0, 120.0)
            g = lat.index(v)
            encode = planner_min._encoder(planner_min.ExtremeTarget(None, None, "", kind="max" if negate else "min",
                                                                    column_def=col, domain=dom))
            def counts(x, where=None):   # the backend's value counts per cell, straight from DuckDB
                cond = f" WHERE {render(where)}" if where is not None else ""
                found = {}
                for c, v, k in eval_con.duck.execute(f"SELECT cell, {render(x)} AS v, count(*) FROM raw{cond} "
                                                     "GROUP BY ALL ORDER BY ALL").fetchall():
                    found.setdefault(c, ([], []))
                    found[c][0].append(v)
                    found[c][1].append(k)
                return {c: (np.array(v), np.array(k)) for c, (v, k) in found.items()}
            counts.memo = {}

            j_lo, j_hi = 0, lat.top
            for depth in (3, 4, 5, 2):
                grid = Grid(lat, j_lo, j_hi, depth)
                enc = encode(grid)
                got = enc.histograms(counts, [0, 1, 2])
                per_user = dict(eval_con.duck.execute(
                    f"SELECT cell, list({render(enc.expr)}) FROM raw GROUP BY cell").fetchall())
                for c in range(3):
                    want = np.bincount(grid.cell(g[cells == c]), minlength=grid.size)
                    assert np.array_equal(got[c], want), (integer, negate, depth, c)
                    assert np.array_equal(np.bincount(per_user[c], minlength=grid.size), want)
                k = int(np.argmax(got[0][1:-1])) + 1 if grid.size > 2 else 0
                j_lo, j_hi = j_lo + k * grid.step, j_lo + (k + 1) * grid.step


# ---- exact against per-user through SQL ------------------------------------------------------------------------

def test_exact_and_per_user_paths_agree_in_distribution_through_sql(eval_con):
    eval_con.register("b", _beta_table(1500, a=2.0, b=1.0), private={"x": (-1, 1)}, budget=1000)
    runs = 60
    out = {}
    for sim in ("exact", "per_user"):
        out[sim] = [eval_con.sql(f"SELECT LDP_MIN(x) EPSILON 2 FROM b OPTIONS (simulation = '{sim}', seed = {i})"
                                 ).fetchall()[0][0] for i in range(runs)]
    assert stats.ks_2samp(out["exact"], out["per_user"]).pvalue > 1e-3
    assert np.mean(out["exact"]) == pytest.approx(np.mean(out["per_user"]), abs=0.1)


# ---- EVALUATE: the intervals hold on the spec's synthetic distributions ------------------------------------------

@pytest.mark.parametrize("setting, a, b", [("fixed", 1.0, 1.0), ("iid", 0.5, 2.0), ("iid", 4.0, 1.0)])
def test_evaluate_coverage_of_the_one_sided_interval(eval_con, setting, a, b):
    eval_con.register("beta_table", _beta_table(2048, a, b, setting=setting, seed=4), private={"x": (-1, 1)})
    for stmt in ("SELECT LDP_MIN(x) EPSILON 1 FROM beta_table OPTIONS (mechanism = 'bisect')",
                 "SELECT LDP_MAX(x, alpha => 1) EPSILON 1 FROM beta_table OPTIONS (mechanism = 'bisect')"):
        res = eval_con.sql(f"EVALUATE {stmt} REPEAT 80")
        (*_, bias, _, coverage), = res.fetchall()
        assert coverage == 1.0
        assert (bias >= -1e-9) if "MIN" in stmt else (bias <= 1e-9)   # the γ-quantile lies inside the data


# ---- the plan depends on public facts only -----------------------------------------------------------------------

def test_plan_is_identical_for_tables_that_differ_in_one_private_value():
    base = np.linspace(-0.66, -0.36, 3000)
    other = base.copy()
    other[17] = 0.99   # one user's private value
    plans = []
    for values in (base, other):
        con = ldpql.connect(seed=1, evaluation=True)
        con.register("t", pa.table({"x": values, "g": ["a", "b", "c"] * 1000}), private={"x": (-1, 1)},
                     public=["g"], budget=3)
        for stmt in ("SELECT LDP_MIN(x) EPSILON 1 FROM t", "SELECT g, LDP_MIN(x), LDP_MAX(x) FROM t GROUP BY g EPSILON 2",
                     "SELECT LDP_MAX(x, alpha => 1) EPSILON 4 FROM t"):
            p = con.sql(f"EXPLAIN {stmt}").plan
            plans.append((str(p), [(a.chosen.mechanism, a.chosen.rounds, a.epsilon, a.users) for a in p.aggregates]))
    assert plans[:3] == plans[3:]


def test_bad_arguments_get_clear_errors(people):
    with pytest.raises(ldpql.PlanError, match="alpha must be a positive number"):
        people.sql("SELECT LDP_MIN(age, alpha => 0) EPSILON 1 FROM people")
    with pytest.raises(ldpql.PlanError, match="needs a numeric column"):
        people.sql("SELECT LDP_MIN(city) EPSILON 1 FROM people")
    with pytest.raises(ldpql.PlanError, match="has no argument `beta`"):
        people.sql("SELECT LDP_MAX(age, beta => 1) EPSILON 1 FROM people")
    assert people.sql("SELECT LDP_MIN(age, alpha => 'unknown') EPSILON 1 FROM people").fetchall()[0][0] is not None


def test_users_and_rounds_as_the_executor_counts_them(people, monkeypatch):
    """Every user takes part in all L rounds at ε/L (the executor's per-user check adds them up)."""
    from ldpql import executor
    seen = []
    original = executor.Executor._check_spend

    def spy(self, plan, pending):
        seen.extend((t.round.users, t.round.randomizer.epsilon) for t in pending)
        return original(self, plan, pending)

    monkeypatch.setattr(executor.Executor, "_check_spend", spy)
    people.sql("SELECT LDP_MIN(age) EPSILON 1 FROM people OPTIONS (mechanism = 'bisect')")
    s = schedule(20_000, 1.0)
    assert len(seen) == s.depth and all(u == (0.0, 1.0) for u, _ in seen)
    assert sum(e for _, e in seen) == pytest.approx(1.0)
