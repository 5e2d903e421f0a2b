"""ACCURACY ±a and EXPLAIN ... EPSILON IN (...) end to end: what runs is charged exactly, refusals and sweeps
spend nothing and write no ledger row, and the realised error of an ACCURACY statement is the target."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

import ldpql
from ldpql.planner.accuracy import predicted_error

COUNT = "SELECT LDP_COUNT(age > 65) FROM people ACCURACY ±{}"


def _state(con):
    """What a refused or non-spending statement must leave unchanged: the budget left and every ledger row."""
    return con.remaining_budget("people"), con.sql("SHOW LEDGER").fetchall()


def test_a_select_by_accuracy_charges_exactly_the_epsilon_explain_shows(private_people):
    sql = "SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people ACCURACY ±8000"
    planned = private_people.sql("EXPLAIN " + sql).plan.epsilon
    res = private_people.sql(sql)
    assert res.epsilon_spent == res.plan.epsilon == res.plan.accuracy.epsilon == planned
    assert private_people.remaining_budget("people") == pytest.approx(4.0 - planned)
    last = private_people.sql("SHOW LEDGER").fetchall()[-1]
    assert last[2] == "query" and last[4] == sql and last[6] == pytest.approx(planned)
    assert any(f"ran at ε = {planned:.4g}, the smallest ε" in note for note in res.notes)
    for a in res.plan.aggregates:       # every interval shown is within ±a
        assert predicted_error(a, res.plan) <= 8000


def test_over_budget_is_refused_and_spends_nothing(private_people):
    before = _state(private_people)
    with pytest.raises(ldpql.BudgetExceededError) as info:
        private_people.sql(COUNT.format(10))
    assert "No budget was spent" in str(info.value)
    assert "over budget: the ε = 4 left would give ldp_count_condition ±" in info.value.hint
    assert _state(private_people) == before
    assert "would be refused" in private_people.explain(COUNT.format(10))


def test_an_unreachable_accuracy_is_refused_before_anything_runs(private_people):
    before = _state(private_people)
    with pytest.raises(ldpql.PlanError, match="cannot be reached") as info:
        private_people.sql("SELECT LDP_MEAN(income) FROM people ACCURACY ±0.01")
    assert "^" in str(info.value)
    assert _state(private_people) == before


def test_the_sweep_runs_nothing_and_writes_no_ledger_row(private_people):
    before = _state(private_people)
    sql = "EXPLAIN SELECT LDP_MEAN(income), LDP_COUNT(age > 65) FROM people EPSILON IN (0.5, 1, 2, 8)"
    res = private_people.sql(sql)
    assert res.columns == ["aggregate", "ε = 0.5", "ε = 1", "ε = 2", "ε = 8"] and res.epsilon_spent == 0
    rows = {r[0]: r[1:] for r in res.fetchall()}
    assert rows["budget (4 left)"] == ("ok", "ok", "ok", "would be refused")
    one = private_people.sql("EXPLAIN SELECT LDP_MEAN(income), LDP_COUNT(age > 65) FROM people EPSILON 1").plan
    for a in one.aggregates:            # the sweep's column is EXPLAIN at that ε
        assert rows[a.output][1] == f"±{predicted_error(a, one):.3g} {a.chosen.mechanism}"
    assert "predicted error by ε" in private_people.explain(sql[len("EXPLAIN "):])
    assert _state(private_people) == before
    with pytest.raises(ldpql.PlanError, match="needs EXPLAIN"):
        private_people.sql(sql[len("EXPLAIN "):])
    assert _state(private_people) == before


def test_explain_by_accuracy_spends_nothing(private_people):
    before = _state(private_people)
    text = private_people.explain("SELECT region, LDP_MEAN(age) FROM people GROUP BY region ACCURACY ±2")
    assert "├─ accuracy    ε = " in text and "in every group" in text
    assert _state(private_people) == before


@pytest.mark.slow
def test_the_realised_error_of_an_accuracy_statement_is_the_target(people):
    """EVALUATE (fresh noise per run, nothing spent) of a count asked to be within ±a: the half-width the runs
    realise, z·RMSE, is a. Randomized response's variance barely depends on the true count, so its prediction
    is tight; 300 runs give the RMSE to about ±4% (1 sd), so 0.85–1.15 cannot flake, and a planner that held
    se rather than z·se to a (1.96x) or a wrong ε fails it."""
    z = NormalDist().inv_cdf(0.975)
    for a in (150, 400):
        res = people.sql(f"EVALUATE {COUNT.format(a)} REPEAT 300")
        row = dict(zip(res.columns, res.fetchall()[0]))
        assert 0.85 <= z * row["rmse"] / a <= 1.15, (a, row)
        assert 0.90 <= row["coverage"] <= 0.99      # (±4 sd of a 95% coverage over 300 runs)
        low, high, _ = people.sql(COUNT.format(a)).intervals()[0][0]   # the interval a release shows: ±a
        assert 0.9 <= (high - low) / 2 / a <= 1.05


@pytest.mark.slow
def test_a_histogram_by_accuracy_realises_the_target_per_bin(people):
    """A histogram held to ±a per bin: the root mean square over its bins of the realised half-widths z·RMSE is
    a (4 bins × 300 runs: about ±2.5%, 1 sd); had the ℓ2 norm over the bins been held to a, it would be a/2."""
    z = NormalDist().inv_cdf(0.975)
    res = people.sql("EVALUATE SELECT LDP_HISTOGRAM(city) FROM people ACCURACY ±0.03 REPEAT 300")
    rmse = [dict(zip(res.columns, r))["rmse"] for r in res.fetchall()]
    assert len(rmse) == 4 and 0.85 <= z * math.sqrt(sum(r * r for r in rmse) / 4) / 0.03 <= 1.15


@pytest.mark.slow
def test_a_count_beside_a_mean_by_accuracy_realises_its_target(people):
    """A count on half the users (a users split) stands for all of them: its prediction must scale the noise
    of the users asked to the population, plus the sampling error (z·RMSE was 1.6 a before that was fixed)."""
    z = NormalDist().inv_cdf(0.975)
    res = people.sql("EVALUATE SELECT LDP_MEAN(income, accuracy => 20000), LDP_COUNT(age > 65) FROM people "
                     "ACCURACY ±200 OPTIONS (split = 'users') REPEAT 200")
    row = dict(zip(res.columns, res.fetchall()[1]))
    assert row["output"] == "ldp_count_condition" and 0.85 <= z * row["rmse"] / 200 <= 1.15, row


def test_help_documents_the_clauses():
    from ldpql import repl
    text = "".join(t for _, t in repl.help_fragments("ACCURACY"))
    assert "smallest ε whose predicted error" in text and "per bin" in text and "rank error" in text
    assert "EPSILON IN" in "".join(t for _, t in repl.help_fragments("EXPLAIN"))
    assert ("accuracy", "with ACCURACY: this aggregate's own ±a in its own unit, e.g. accuracy => 50") in \
        ldpql.function_arguments("LDP_MEAN")
