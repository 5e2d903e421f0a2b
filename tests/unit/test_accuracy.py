"""Accuracy-first planning: ACCURACY ±a picks the smallest ε whose predicted error is within ±a, found over the
planner itself (data-free), and EXPLAIN ... EPSILON IN (...) shows the predictions side by side.

These tests plan against a table whose source does not exist: planning by accuracy never needs the data."""

from __future__ import annotations

import math
import re
from itertools import pairwise

import pytest

import ldpql
from ldpql.grammar import parse_one
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.planner import PublicFacts, plan, sweep
from ldpql.planner.accuracy import predicted_error, round_up, smallest_group
from tests.unit.test_planner import _table

GROUPS = ((("a",), 1_000), (("b",), 5_000), (("c",), 4_000))


def _plan(sql: str, n: int = 10_000, remaining: float = 4.0, groups=()):
    facts = PublicFacts(n, max(len(groups), 1), remaining, groups=groups)
    return plan(parse_one(sql), _table(), facts, {}, sql)


def _at(sql: str, eps: float, n: int = 10_000, groups=()):
    """The same statement with EPSILON eps in place of its ACCURACY clause (and no accuracy => targets)."""
    head, _, tail = re.sub(r", accuracy => [0-9.e+-]+", "", sql).partition(" ACCURACY ")
    rest = tail.split(" ", 1)[1] if " " in tail else ""
    return _plan(f"{head} EPSILON {eps!r} {rest}".strip(), n, groups=groups)


def _errors(p) -> dict[str, float]:
    """EXPLAIN's predicted error of each aggregate (±z·se, or E|error| for a candidate that predicts that),
    computed here from the plan, not by the module under test; a histogram's ℓ2 over its d bins is taken per
    bin (ℓ2/√d, the root mean square)."""
    return {a.output: (p.z if a.chosen.predicts == "stderr" else 1.0) * a.chosen.predicted_se
            / math.sqrt(len(a.target.categories) if a.call.name == "LDP_HISTOGRAM" else 1)
            for a in p.aggregates if a.source is None}


# One statement per aggregate family, with a target its prediction can reach below the cap.
SINGLE = [
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±2000", 2000),
    ("SELECT LDP_SUM(income) FROM people ACCURACY ±5e7", 5e7),
    ("SELECT LDP_COUNT(income > 1000) FROM people ACCURACY ±300", 300),
    ("SELECT LDP_HISTOGRAM(city) FROM people ACCURACY ±0.03", 0.03),
    ("SELECT LDP_MEDIAN(income) FROM people ACCURACY ±0.05", 0.05),
    ("SELECT LDP_MEAN(income) FROM people ACCURACY ±1500 OPTIONS (confidence = 0.9)", 1500),
]


@pytest.mark.parametrize("sql, a", SINGLE)
def test_the_picked_epsilon_is_the_smallest_that_reaches_the_target(sql, a):
    p = _plan(sql)
    eps = p.accuracy.epsilon
    assert p.epsilon == eps and p.accuracy.reached and 0 < eps < EPSILON_CAP
    assert max(_errors(p).values()) <= a                                  # the prediction meets ±a ...
    assert max(_errors(_at(sql, eps * 0.995)).values()) > a              # ... and half a percent less ε does not
    assert _errors(_at(sql, eps)) == _errors(p)                           # the plan is the plan of EPSILON eps
    assert f"ε = {eps:.4g}, the smallest ε whose predicted error" in str(p)
    shown = re.search(r"predicted   ±([0-9.e+-]+)", str(p))                 # what EXPLAIN shows is within ±a
    d = len(p.aggregates[0].target.categories) if "HISTOGRAM" in sql else 1  # (a histogram's: ℓ2 over d bins)
    assert shown and float(shown.group(1)) <= a * math.sqrt(d)


@pytest.mark.parametrize("sql, a", SINGLE)
def test_a_single_aggregates_predicted_error_falls_with_epsilon(sql, a):
    """What the search relies on between grid points: more ε never predicts more error."""
    errors = [max(_errors(_at(sql, eps)).values()) for eps in (0.05, 0.1, 0.2, 0.5, 1, 2, 4, 8, 16, 30)]
    assert all(later <= earlier for earlier, later in pairwise(errors)) and errors[-1] < errors[0]


def test_the_epsilon_falls_as_the_target_widens():
    sql = "SELECT LDP_MEAN(income), LDP_COUNT(income > 1000) FROM people ACCURACY ±{}"
    picked = [_plan(sql.format(a)).accuracy.epsilon for a in (500, 1000, 2000, 4000, 8000)]
    assert all(later <= earlier for earlier, later in pairwise(picked)) and picked[0] > picked[-1]


def test_several_aggregates_all_meet_their_targets_under_the_split_rule():
    sql = "SELECT LDP_MEAN(income), LDP_COUNT(income > 1000, accuracy => 400) FROM people ACCURACY ±3000"
    p = _plan(sql)
    errors, targets = _errors(p), {"ldp_mean_income": 3000, "ldp_count_condition": 400}
    assert all(errors[k] <= targets[k] for k in targets)
    below = _errors(_at(sql, p.epsilon * 0.995))
    assert any(below[k] > targets[k] for k in targets)
    lines = str(p).splitlines()
    binding = [line for line in lines if "(the binding one)" in line]
    ratio = {k: errors[k] / targets[k] for k in targets}   # each at the ε it needs: both sit at their targets
    assert len(binding) == 1 and ratio[binding[0].split()[2].rstrip(":")] > 0.99


def test_a_shared_release_is_held_to_the_tightest_target_of_its_readers():
    sql = "SELECT LDP_MEDIAN(income), LDP_QUANTILE(income, 0.9, accuracy => 0.03) FROM people ACCURACY ±0.1"
    p = _plan(sql)
    assert predicted_error(p.aggregates[0], p) <= 0.03 < predicted_error(_at(sql, p.epsilon * 0.995).aggregates[0],
                                                                          _at(sql, p.epsilon * 0.995))


def test_under_group_by_the_target_holds_in_the_smallest_group():
    sql = "SELECT region, LDP_MEAN(income) FROM people GROUP BY region ACCURACY ±3000"
    p = _plan(sql, n=10_000, groups=GROUPS)
    a = p.aggregates[0]
    z, c = p.z, a.chosen
    assert smallest_group(p) == 1_000
    assert z * c.expected_se(p.epsilon, 1_000, 1.0) <= 3000 < z * c.expected_se(p.epsilon * 0.995, 1_000, 1.0)
    assert "in every group (each on its own users; the group where it is largest binds)" in str(p)


def test_an_unreachable_target_is_refused_with_the_best_accuracy():
    p = _plan("SELECT LDP_MEAN(income) FROM people ACCURACY ±0.01")
    assert not p.accuracy.reached and p.epsilon == EPSILON_CAP
    assert "would be refused" in str(p)
    err = p.accuracy.refusal
    assert isinstance(err, ldpql.PlanError) and "cannot be reached" in err.message
    best = predicted_error(p.aggregates[0], p)
    assert f"ask for ±{round_up(best, 2):g} or more" in err.hint and round_up(best, 2) >= best
    assert err.column == len("SELECT LDP_MEAN(income) FROM people ACCURACY ±") + 1   # the caret is under a


def test_over_budget_explain_says_refused_and_what_the_budget_left_gives():
    sql = "SELECT LDP_MEAN(income) FROM people ACCURACY ±100"
    p = _plan(sql, remaining=1.0)
    assert p.accuracy.reached and p.epsilon > 1.0
    text = str(p)
    assert "this statement would be refused" in text
    left = predicted_error(_at(sql, 1.0).aggregates[0], _at(sql, 1.0))
    assert f"over budget: the ε = 1 left would give ldp_mean_income ±{left:.4g} (95%)" in text


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT LDP_MEAN(income, epsilon => 0.5) FROM people ACCURACY ±100", "epsilon => share cannot be fixed"),
    ("SELECT LDP_MEAN(income, accuracy => 100) FROM people EPSILON 1", "accuracy => sets this aggregate's own"),
    ("SELECT LDP_MEAN(income, accuracy => -1) FROM people ACCURACY ±100", "accuracy => must be a positive"),
    ("SELECT LDP_MEAN(income, accuracy => 'x') FROM people ACCURACY ±100", "accuracy => must be a positive"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON IN (1, 2)", "needs EXPLAIN"),
    ("SELECT LDP_MEAN(nope) FROM people ACCURACY ±100", "does not exist"),
])
def test_misuse_is_a_clear_error_with_a_caret(sql, fragment):
    with pytest.raises(ldpql.Error) as info:
        _plan(sql)
    assert fragment in str(info.value) and info.value.line == 1 and info.value.column > 1


def test_no_users_picks_no_epsilon():
    p = _plan("SELECT LDP_MEAN(income) FROM people ACCURACY ±100", n=0)
    assert p.accuracy.reached and "no users match" in str(p)


def test_a_histogram_is_held_to_a_per_bin():
    p = _plan("SELECT LDP_HISTOGRAM(city) FROM people ACCURACY ±0.03")
    a = p.aggregates[0]
    assert len(a.target.categories) == 4 and predicted_error(a, p) == pytest.approx(p.z * a.chosen.predicted_se / 2)
    assert "per bin (root mean square over its 4 bins)" in str(p)


def test_the_sweep_shows_each_epsilons_prediction_and_mechanism():
    sql = "SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON IN (0.5, 1, 4, 40)"
    s = sweep(parse_one(sql), _table(), PublicFacts(10_000, 1, 4.0), {}, sql)
    assert s.columns == ["aggregate", "ε = 0.5", "ε = 1", "ε = 4", "ε = 40"]
    rows = {r[0]: r[1:] for r in s.rows}
    assert set(rows) == {"ldp_mean_income", "ldp_histogram_city", "split", "budget (4 left)"}
    for j, eps in enumerate((0.5, 1.0, 4.0)):
        p = _plan(f"SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON {eps}")
        for a in p.aggregates:
            assert rows[a.output][j] == f"±{predicted_error(a, p):.3g} {a.chosen.mechanism}"
        assert rows["split"][j] == p.split
    assert rows["budget (4 left)"] == ("ok", "ok", "ok", "")
    assert rows["ldp_mean_income"][3] == "refused" and "ε = 40: refused: ε = 40 per randomizer is above" in str(s)


def test_the_sweep_under_group_by_predicts_for_the_smallest_group():
    sql = "SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON IN (1, 2)"
    s = sweep(parse_one(sql), _table(), PublicFacts(10_000, 3, 4.0, groups=GROUPS), {}, sql)
    p = _plan("SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON 1", groups=GROUPS)
    c = p.aggregates[0].chosen
    assert s.rows[0][1].startswith(f"±{p.z * c.expected_se(1.0, 1_000, 1.0):.3g} ")
    assert "in the group where it is largest" in str(s) and "the smallest has 1,000 users" in str(s)


def test_the_search_is_over_public_facts_only():
    """Two tables that differ in every private value but have the same public facts get the same ε: the
    table here does not even exist, and the planner is given n and the group counts only."""
    sql = "SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people ACCURACY ±2500"
    assert _plan(sql).epsilon == _plan(sql).epsilon
    assert _plan(sql, n=40_000).epsilon < _plan(sql, n=10_000).epsilon      # more users: less ε


def test_round_up_keeps_four_significant_digits_and_never_rounds_down():
    assert round_up(1.23412) == 1.235 and round_up(0.0012341) == 0.001235 and round_up(2.0) == 2.0
    for x in (0.1234567, 3.3333333, 29.99991, 7e-5):
        assert x <= round_up(x) <= x * 1.001 and math.isclose(round_up(round_up(x)), round_up(x))
