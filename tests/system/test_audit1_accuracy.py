"""A hostile review of ACCURACY ±a, EXPLAIN ... EPSILON IN (...) and the users-split predictions (issue 11).

Each ``xfail(strict=True)`` test shows a claim that does not hold on main; it passes (and so fails as an xfail)
once the defect is fixed, and should then be unmarked. The plain tests are attacks that did not break the claim.
Statistics use fixed seeds, repetition counts that keep each test within seconds, and tolerances far from what
was measured (the measured values are in each reason)."""

from __future__ import annotations

import math
import re
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql
from ldpql.grammar import parse_one
from ldpql.planner import PublicFacts, plan
from tests.conftest import declare_people, people_table
from tests.unit.test_planner import _table


def _connect(tmp_path, n: int = 20_000, data_seed: int = 11, seed: int = 5, budget: float = 1e6):
    """An evaluation connection with ``people`` (n users) declared with a large budget, and the sorted incomes."""
    path = tmp_path / f"people_{n}_{data_seed}.parquet"
    table = people_table(n, data_seed)
    pq.write_table(table, path)
    con = ldpql.connect(seed=seed, evaluation=True)
    declare_people(con, str(path), budget=budget)
    return con, np.sort(table.column("income").to_numpy())


def _rank_error(sorted_values: np.ndarray, answer: float, q: float) -> float:
    """How far (as a fraction of the users) ``answer`` is from being a q-quantile of the data."""
    lo = np.searchsorted(sorted_values, answer, side="left") / len(sorted_values)
    hi = np.searchsorted(sorted_values, answer, side="right") / len(sorted_values)
    return 0.0 if lo <= q <= hi else min(abs(lo - q), abs(hi - q))


def _state(con):
    return con.remaining_budget("people"), con.sql("SHOW LEDGER").fetchall()


# ---- 1. realised error of ACCURACY ±a ---------------------------------------------------------------------------

def test_a_quantile_answered_by_the_domain_bound_is_within_its_accuracy_at_90_percent(tmp_path):
    """audit1 found ACCURACY ±0.009 (90%) answered by the domain's minimum, whose rank error is 0.01 with certainty
    (the bound candidate predicted σ = 0.01/z95, shown as ±0.0084 at 90%). The audit's first assertion pinned
    that defect (``mechanism == "bound"``): once the bound predicts exactly ±0.01 at every confidence, ACCURACY
    ±0.009 must ask users instead, so the assertion is now that it does not answer by the bound. Its second
    assertion checked one run against a 90% claim, which fails one run in ten by design (seed 5's first run: rank
    error 0.0116); the claim is checked as the next test checks it, over 30 runs at the ε ACCURACY picked
    (measured: within ±0.009 in 96 of 100 runs)."""
    con, incomes = _connect(tmp_path)
    sql = "SELECT LDP_QUANTILE(income, 0.01) FROM people ACCURACY ±0.009 OPTIONS (confidence = 0.9)"
    p = con.sql("EXPLAIN " + sql).plan
    assert p.aggregates[0].chosen.mechanism != "bound"        # its rank error would be 0.01 > 0.009
    fixed = sql.replace("ACCURACY ±0.009", f"EPSILON {p.epsilon!r}")
    errors = [_rank_error(incomes, con.sql(fixed).fetchall()[0][0], 0.01) for _ in range(30)]
    assert np.mean(np.array(errors) <= 0.009) >= 0.7          # 90% claimed; binomial(30, 0.9) ≥ 0.7


def test_a_median_at_the_floor_epsilon_covers_its_90_percent_prediction(tmp_path):
    con, incomes = _connect(tmp_path, n=2_000, data_seed=7)
    sql = "SELECT LDP_MEDIAN(income) FROM people ACCURACY ±0.45 OPTIONS (confidence = 0.9)"
    p = con.sql("EXPLAIN " + sql).plan
    claimed = p.z * p.aggregates[0].chosen.predicted_se
    fixed = sql.replace("ACCURACY ±0.45", f"EPSILON {p.epsilon!r}")
    errors = [_rank_error(incomes, con.sql(fixed).fetchall()[0][0], 0.5) for _ in range(30)]
    assert claimed <= 0.45 and np.mean(np.array(errors) <= claimed) >= 0.7   # 90% claimed; binomial(30, 0.9) ≥ 0.7


def test_a_median_by_accuracy_at_2000_users_is_within_its_accuracy(tmp_path):
    con, incomes = _connect(tmp_path, n=2_000, data_seed=7)
    sql = "SELECT LDP_MEDIAN(income) FROM people ACCURACY ±0.02"
    p = con.sql("EXPLAIN " + sql).plan
    fixed = sql.replace("ACCURACY ±0.02", f"EPSILON {p.epsilon!r}")
    errors = np.array([_rank_error(incomes, con.sql(fixed).fetchall()[0][0], 0.5) for _ in range(60)])
    assert p.z * np.sqrt(np.mean(errors ** 2)) <= 0.02 * 1.4                # measured: 2.6 a


@pytest.mark.xfail(strict=True, reason="audit1: LDP_MAX's E|error| bound assumes users as dense near the extreme as an "
                   "even spread, which a skewed column breaks: ACCURACY ±60000 on income (gamma, max 245,508) now runs "
                   "the bucket search (buckets_oue, 8 buckets) at ε = 0.3275 and the mean estimate over 30 runs is "
                   "88,542 (bias -157,000, 2.6 a; it was ε = 13.78 by the bisection). Left: no bound on the distance to "
                   "the true extreme holds whatever the data short of an ε at which one user alone stands out (never "
                   "with OUE, whose lone bit survives with probability 1/2; about ε ≥ 13 with GRR at n = 20,000); "
                   "ACCURACY now says what its bound assumes")
def test_a_maximum_by_accuracy_is_within_its_error_bound(tmp_path):
    con, _ = _connect(tmp_path)
    rows = con.sql("EVALUATE SELECT LDP_MAX(income) FROM people ACCURACY ±60000 REPEAT 30").fetchall()
    truth, mean = rows[0][3], rows[0][4]
    assert abs(mean - truth) <= 60_000          # E|error| ≥ |E error|: the bias alone already breaks the bound


def test_counts_in_groups_of_very_different_sizes_meet_their_per_group_predictions(tmp_path):
    """Attack that failed: GROUP BY with groups of 20,000, 2,000 and 200 users; every group's realised z·RMSE is
    within 0.75-1.25 of the prediction EXPLAIN shows for it (measured 0.93-1.02, 200 runs), and none above ±a."""
    rng = np.random.default_rng(5)
    sizes = {"big": 20_000, "mid": 2_000, "tiny": 200}
    grp = np.concatenate([[k] * v for k, v in sizes.items()])
    n = len(grp)
    pq.write_table(pa.table({"person_id": np.arange(n), "grp": grp, "age": rng.integers(0, 100, n)}),
                   tmp_path / "groups.parquet")
    con = ldpql.connect(seed=3, evaluation=True)
    con.sql(f"CREATE TABLE people FROM '{tmp_path / 'groups.parquet'}' (age PRIVATE INTEGER BETWEEN 0 AND 120, "
            "grp PUBLIC) PRIVACY UNIT person_id BUDGET EPSILON 1000")
    res = con.sql("EVALUATE SELECT grp, LDP_COUNT(age > 65) FROM people GROUP BY grp ACCURACY ±100 REPEAT 200")
    p = res.plan
    c = p.aggregates[0].chosen
    predicted = {key[0]: p.z * c.expected_se(p.aggregates[0].epsilon, m) for key, m in p.groups}
    for _, group, _, _, _, _, rmse, _ in res.fetchall():
        assert predicted[group] <= 100 * (1 + 1e-9)
        assert 0.75 <= p.z * rmse / predicted[group] <= 1.25, group


# ---- 2. the text: which group binds --------------------------------------------------------------------------

GROUPS = ((("a",), 1_000), (("b",), 5_000), (("c",), 4_000))


def _plan(sql: str, n: int = 10_000, groups=GROUPS):
    facts = PublicFacts(n, max(len(groups), 1), 4.0, groups=groups)
    return plan(parse_one(sql), _table(), facts, {}, sql)


def test_the_accuracy_line_names_the_group_that_binds():
    """audit1 M1: a count's error grows with its group, so the largest group binds (EXPLAIN said 'the smallest')."""
    p = _plan("SELECT region, LDP_COUNT(income > 1000) FROM people GROUP BY region ACCURACY ±100")
    a = p.aggregates[0]
    line = next(line for line in str(p).splitlines() if "in the group where it is largest" in line and "predicted" in line)
    shown = float(re.search(r"predicted ±([0-9.e+-]+)", line).group(1))
    largest = max(p.z * a.chosen.expected_se(a.epsilon, n) for _, n in p.groups)
    assert shown == pytest.approx(largest, rel=1e-3) and "smallest group" not in str(p)


# ---- 3. users split: sampling error and predicted vs realised ---------------------------------------------------

def test_a_quantiles_prediction_under_a_users_split_includes_the_sampling_error():
    p = _plan("SELECT LDP_MEAN(income), LDP_MEDIAN(income) FROM people EPSILON 20 OPTIONS (split = 'users')",
              n=2_000, groups=())
    a = p.aggregates[1]
    assert p.split == "users" and "sampling error included" in str(p)
    half = math.sqrt(0.25 * 0.5 / 1_000)                         # a half sample's median: its rank error alone
    assert a.chosen.expected_se(a.epsilon, 2_000, 0.5) >= half


def test_predictions_under_a_users_split_match_the_realised_error(tmp_path):
    """audit1 M3: a count's prediction is within 0.6-1.4x of its realised RMSE; a mean's is labelled a worst case
    over the domain (its sampling part too: no data-free rule knows the spread), so it may only overstate. 120 runs
    (the RMSE's relative sd ~6.5%, the band ±40%): count 0.97 (200 runs: 0.94), mean 0.28."""
    con, _ = _connect(tmp_path)
    sql = "SELECT LDP_MEAN(income), LDP_COUNT(age > 65) FROM people EPSILON 8 OPTIONS (split = 'users')"
    res = con.sql(f"EVALUATE {sql} REPEAT 120")
    p = res.plan
    rmse = {row[0]: row[6] for row in res.fetchall()}
    mean, count = p.aggregates
    assert 0.6 <= rmse[count.output] / count.chosen.predicted_se <= 1.4
    assert rmse[mean.output] / mean.chosen.predicted_se <= 1.4 and "worst case" in mean.chosen.note


# ---- 1'. "the smallest ε" ----------------------------------------------------------------------------------

def test_accuracy_picks_no_more_epsilon_than_a_plan_with_shares_that_meets_every_target():
    acc = _plan("SELECT LDP_MEAN(income), LDP_COUNT(income > 1000, accuracy => 300) FROM people ACCURACY ±2000",
                n=20_000, groups=())
    mean = _plan("SELECT LDP_MEAN(income) FROM people ACCURACY ±2000", n=20_000, groups=()).epsilon
    count = _plan("SELECT LDP_COUNT(income > 1000) FROM people ACCURACY ±300", n=20_000, groups=()).epsilon
    shares = _plan(f"SELECT LDP_MEAN(income, epsilon => {mean}), LDP_COUNT(income > 1000, epsilon => {count}) "
                   f"FROM people EPSILON {mean + count}", n=20_000, groups=())
    z = NormalDist().inv_cdf(0.975)
    errors = [z * a.chosen.predicted_se for a in shares.aggregates]
    assert errors[0] <= 2000 * 1.001 and errors[1] <= 300 * 1.001        # the shares plan meets both targets ...
    assert acc.epsilon <= shares.epsilon * 1.001                         # ... with less ε than ACCURACY picked


# ---- 4. bad input ----------------------------------------------------------------------------------------------

def test_an_epsilon_option_beside_accuracy_is_refused_and_spends_nothing(tmp_path):
    con, _ = _connect(tmp_path, budget=4.0)
    before = _state(con)
    with pytest.raises(ldpql.PlanError, match="(?i)epsilon"):
        con.sql("SELECT LDP_MEAN(income) FROM people ACCURACY ±2000 OPTIONS (epsilon = 1)")
    assert _state(con) == before


def test_an_accuracy_argument_given_twice_is_refused(tmp_path):
    con, _ = _connect(tmp_path, budget=4.0)
    before = _state(con)
    with pytest.raises(ldpql.Error, match="twice|more than once"):
        con.sql("SELECT LDP_MEAN(income, accuracy => 3000, accuracy => 200) FROM people ACCURACY ±2000")
    assert _state(con) == before


def test_a_nan_accuracy_gets_a_useful_hint(tmp_path):
    con, _ = _connect(tmp_path, budget=4.0)
    with pytest.raises(ldpql.ParseError) as info:
        con.sql("SELECT LDP_MEAN(income) FROM people ACCURACY ±nan")
    assert "AND" not in (info.value.hint or "")


BAD = [
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±0", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ± -5", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±inf", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±1e999", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±'5'", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) EPSILON 1 FROM people ACCURACY ±5", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±1e-300", ldpql.PlanError),
    ("SELECT LDP_MEAN(income, epsilon => 0.5) FROM people ACCURACY ±2000", ldpql.PlanError),
    ("SELECT LDP_MEAN(income, accuracy => true) FROM people ACCURACY ±2000", ldpql.PlanError),
    ("SELECT LDP_MEAN(income, accuracy => 100) FROM people EPSILON 1", ldpql.PlanError),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±2000 OPTIONS (confidence = 1)", ldpql.PlanError),
    ("EXPLAIN SELECT LDP_MEAN(income) FROM people EPSILON IN (0, 2)", ldpql.PlanError),
    ("EXPLAIN SELECT LDP_MEAN(income) FROM people EPSILON IN (1) ACCURACY ±4", ldpql.ParseError),
    ("SELECT LDP_MEAN(income) FROM people EPSILON IN (1, 2)", ldpql.PlanError),
]


@pytest.mark.parametrize("sql, kind", BAD)
def test_bad_accuracy_input_is_a_clear_error_with_a_caret_and_changes_nothing(tmp_path, sql, kind):
    """Attack that failed: every malformed or contradictory clause is an ldpql.Error with a caret and a hint, and
    leaves the budget and the ledger as they were."""
    con, _ = _connect(tmp_path, budget=4.0)
    before = _state(con)
    with pytest.raises(kind) as info:
        con.sql(sql)
    assert "^" in str(info.value) and (info.value.hint or kind is ldpql.ParseError)
    assert _state(con) == before


def test_accuracy_over_budget_is_refused_with_what_the_budget_left_buys(tmp_path):
    """Attack that failed: over budget, nothing is spent and the hint says what the ε left would give (no caret:
    budget errors have none, for EPSILON too)."""
    con, _ = _connect(tmp_path, budget=4.0)
    before = _state(con)
    with pytest.raises(ldpql.BudgetExceededError) as info:
        con.sql("SELECT LDP_COUNT(age > 65) FROM people ACCURACY ±10")
    assert "the ε = 4 left would give ldp_count_condition ±" in info.value.hint
    assert _state(con) == before


# ---- 2'. privacy ---------------------------------------------------------------------------------------------

def test_accuracy_and_the_sweep_do_not_depend_on_private_values(tmp_path):
    """Attack that failed: two tables with the same public column (so the same n and group counts) and different
    private values give the same ACCURACY ε, the same EXPLAIN and the same sweep, under GROUP BY and WHERE too."""
    texts = []
    for seed, scale in ((1, 1.0), (2, 9.0)):
        t = people_table(3_000, seed)
        private = t.set_column(t.schema.get_field_index("income"), "income",
                               pa.array(np.minimum(t.column("income").to_numpy() * scale, 250_000)))
        private = private.set_column(private.schema.get_field_index("region"), "region",
                                     people_table(3_000, 1).column("region"))
        path = tmp_path / f"p{seed}.parquet"
        pq.write_table(private, path)
        con = ldpql.connect()
        declare_people(con, str(path))
        out = []
        for sql in ["SELECT region, LDP_MEAN(income), LDP_MEDIAN(income) FROM people GROUP BY region ACCURACY ±20000",
                    ("SELECT LDP_COUNT(income > 50000), LDP_MAX(income) FROM people WHERE region = 'north' "
                     "ACCURACY ±200000"),
                    "SELECT LDP_HISTOGRAM(city), LDP_SUM(income) FROM people EPSILON IN (0.1, 1, 3)"]:
            out.append([line for line in str(con.explain(sql)).splitlines()
                        if not line.startswith(("├─ table", "├─ ledger"))])
        texts.append(out)
        con.close()
    assert texts[0] == texts[1]


def test_an_analyst_plans_by_accuracy_and_is_charged_exactly_what_explain_shows(tmp_path, people_parquet):
    """Attack that failed: role='analyst' may EXPLAIN a sweep (nothing spent, no ledger row) and run ACCURACY, which
    is charged the ε its EXPLAIN showed."""
    ledger = str(tmp_path / "budget.ldpql")
    owner = ldpql.connect(ledger=ledger)
    declare_people(owner, people_parquet)
    owner.close()
    analyst = ldpql.connect(ledger=ledger, role="analyst")
    rows = analyst.sql("SHOW LEDGER").fetchall()
    analyst.sql("EXPLAIN SELECT LDP_COUNT(age > 65) FROM people EPSILON IN (0.5, 1)")
    assert analyst.sql("SHOW LEDGER").fetchall() == rows and analyst.remaining_budget("people") == 4.0
    planned = analyst.sql("EXPLAIN SELECT LDP_COUNT(age > 65) FROM people ACCURACY ±300").plan.epsilon
    res = analyst.sql("SELECT LDP_COUNT(age > 65) FROM people ACCURACY ±300")
    assert res.epsilon_spent == planned and analyst.remaining_budget("people") == pytest.approx(4.0 - planned)
    with pytest.raises(ldpql.PrivacyError):
        analyst.sql("EVALUATE SELECT LDP_COUNT(age > 65) FROM people ACCURACY ±300 REPEAT 2")
    analyst.close()


def test_a_users_split_never_leaves_an_aggregate_without_users(tmp_path):
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"person_id": np.arange(3), "grp": ["one", "two", "two"], "age": [70, 20, 30],
                             "income": [5e4, 6e4, 7e4]}), path)
    con = ldpql.connect(seed=3, evaluation=True)
    con.sql(f"CREATE TABLE people FROM '{path}' (age PRIVATE INTEGER BETWEEN 0 AND 120, income PRIVATE BETWEEN 0 "
            "AND 250000 NOT NULL, grp PUBLIC) PRIVACY UNIT person_id BUDGET EPSILON 100")
    res = con.sql("SELECT LDP_MEAN(income), LDP_COUNT(age > 65) FROM people WHERE grp = 'one' ACCURACY ±200000")
    assert res.epsilon_spent > 0
    assert all(v is not None for v in res.fetchall()[0])
