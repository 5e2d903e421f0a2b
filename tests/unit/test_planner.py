"""The planner: its rules, its choices, and the proof that it reads only public facts."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql.catalog import Column, NumericDomain, CategoricalDomain, Table
from ldpql.grammar import parse_one
from ldpql.planner import RULES, PublicFacts, plan


def _table(**over) -> Table:
    cols = {"income": Column("income", "DOUBLE", False, NumericDomain(0, 250000)),
            "city": Column("city", "VARCHAR", False, CategoricalDomain(("Lyon", "Nice", "Paris"))),
            "zip": Column("zip", "VARCHAR", False, CategoricalDomain(tuple(f"z{i}" for i in range(200)))),
            "notes": Column("notes", "VARCHAR", False, None),
            "region": Column("region", "VARCHAR", True, None)}
    # the source does not exist: planning must never need the data
    base = dict(name="people", source_kind="file", source_text="/nonexistent/people.parquet",
                from_sql="'/nonexistent/people.parquet'", source_id="file:/nonexistent/people.parquet", columns=cols,
                budget_epsilon=4.0)
    base.update(over)
    return Table(**base)


def _plan(sql: str, n: int = 10_000, evaluation: bool = False, **table):
    return plan(parse_one(sql), _table(**table), PublicFacts(n, 1, 4.0), {}, sql, evaluation)


def test_the_planner_is_a_list_of_small_named_rules():
    names = [r.__name__ for r in RULES]
    assert names[0] == "check_public_clauses" and "split_budget" in names and names[-2:] == ["choose_mechanisms", "note_predictions"]


def test_planning_never_touches_the_data():
    p = _plan("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1")
    assert [a.chosen.mechanism for a in p.aggregates] == ["duchi", "grr"]


def test_plan_is_identical_for_tables_that_differ_in_one_private_value():
    rng = np.random.default_rng(0)
    income = rng.uniform(0, 100_000, 5000)
    plans = []
    for change in (False, True):
        data = income.copy()
        if change:
            data[17] = 249_999.0
        con = ldpql.connect(seed=3, evaluation=True)
        con.register("t", pa.table({"income": data, "city": rng.choice(["Lyon", "Nice"], 5000)}),
                     private={"income": (0, 250000), "city": ["Lyon", "Nice"]}, budget=4)
        plans.append(con.explain("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city), LDP_SUM(income) FROM t EPSILON 1"))
    assert plans[0] == plans[1]


def test_histogram_oracle_choice_follows_domain_size():
    assert _plan("SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1").aggregates[0].chosen.mechanism == "grr"
    assert _plan("SELECT LDP_HISTOGRAM(zip) FROM people EPSILON 1").aggregates[0].chosen.mechanism != "grr"


def test_mean_mechanism_choice_follows_epsilon():
    assert _plan("SELECT LDP_MEAN(income) FROM people EPSILON 0.5").aggregates[0].chosen.mechanism == "duchi"
    assert _plan("SELECT LDP_MEAN(income) FROM people EPSILON 4").aggregates[0].chosen.mechanism == "piecewise"


def test_predicted_error_matches_the_closed_form():
    p = _plan("SELECT LDP_MEAN(income) FROM people EPSILON 1", n=10_000)
    c = (math.e + 1) / (math.e - 1)
    assert p.aggregates[0].chosen.predicted_se == pytest.approx(125_000 * c / math.sqrt(10_000))


def test_several_aggregates_split_users_when_that_predicts_less_error():
    p = _plan("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1")
    assert p.split == "users"
    assert [a.users for a in p.aggregates] == [(0.0, 0.5), (0.5, 1.0)]
    assert all(a.epsilon == 1 for a in p.aggregates)
    assert "users: 2 disjoint groups" in str(p)


def test_fixed_shares_split_epsilon():
    p = _plan("SELECT LDP_MEAN(income, epsilon => 0.25), LDP_HISTOGRAM(city) FROM people EPSILON 1")
    assert p.split == "epsilon" and [a.epsilon for a in p.aggregates] == [0.25, 0.75]
    assert all(a.users == (0.0, 1.0) for a in p.aggregates)


def test_shares_alone_define_the_statement_epsilon():
    p = _plan("SELECT LDP_MEAN(income, epsilon => 0.5), LDP_HISTOGRAM(city, epsilon => 0.25) FROM people")
    assert p.epsilon == 0.75


def test_mechanism_override_keeps_only_the_named_mechanism():
    p = _plan("SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1 OPTIONS (mechanism = 'oue')")
    agg = p.aggregates[0]
    assert agg.chosen.mechanism == "oue"
    assert any(c.mechanism == "grr" and "asked for" in c.rejected for c in agg.candidates)
    p2 = _plan("SELECT LDP_HISTOGRAM(city, mechanism => 'oue'), LDP_MEAN(income) FROM people EPSILON 1")
    assert p2.aggregates[0].chosen.mechanism == "oue"


def test_explain_lists_the_rejected_candidates_with_their_error():
    text = str(_plan("SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1"))
    assert "mechanism * grr" in text and "rejected    oue: ±" in text and "larger predicted error" in text


@pytest.mark.parametrize("sql, cls, fragment", [
    ("SELECT LDP_MEAN(income) FROM people WHERE income > 3 EPSILON 1", ldpql.PrivacyError, "WHERE may only use public"),
    ("SELECT city, LDP_MEAN(income) FROM people GROUP BY city EPSILON 1", ldpql.PrivacyError, "GROUP BY may only"),
    ("SELECT LDP_MEAN(notes) FROM people EPSILON 1", ldpql.PrivacyError, "needs a declared domain"),
    ("SELECT LDP_MEDIANN(income) FROM people EPSILON 1", ldpql.PlanError, "unknown aggregate"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (mechanizm = 'grr')", ldpql.PlanError, "unknown option"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (mechanism = 'grr')", ldpql.PlanError, "cannot answer"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (model = 'shuffle')", ldpql.PlanError, "DELTA budget"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (confidence = 1.5)", ldpql.PlanError, "confidence"),
    ("SELECT LDP_MEAN(income) FROM people", ldpql.PlanError, "how much ε"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 0", ldpql.PlanError, "finite and positive"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON INF", ldpql.PlanError, "finite and positive"),
    ("SELECT LDP_MEAN(income, epsilon => 2), LDP_HISTOGRAM(city) FROM people EPSILON 1", ldpql.PlanError, "add up"),
    ("SELECT region FROM people GROUP BY region EPSILON 1", ldpql.PlanError, "no LDP aggregate"),
    ("SELECT region, LDP_MEAN(income) FROM people EPSILON 1", ldpql.PlanError, "must appear in GROUP BY"),
    ("SELECT LDP_MEAN(region) FROM people EPSILON 1", ldpql.PlanError, "public column"),
    ("SELECT LDP_MEAN(city) FROM people EPSILON 1", ldpql.PlanError, "numeric"),
    ("SELECT LDP_HISTOGRAM(income) FROM people EPSILON 1", ldpql.PlanError, "continuous"),
    ("SELECT LDP_MEAN(incme) FROM people EPSILON 1", ldpql.CatalogError, "does not exist"),
    ("SELECT LDP_MEAN(income, bounds => 3) FROM people EPSILON 1", ldpql.PlanError, "no argument"),
    ("SELECT LDP_COUNT(*) FROM people EPSILON 1", ldpql.PlanError, "LDP_COUNT takes one condition"),
])
def test_errors_say_what_and_where(sql, cls, fragment):
    with pytest.raises(cls) as info:
        _plan(sql)
    assert fragment in str(info.value)
    assert info.value.hint, "every error says what to do"


def test_errors_point_at_the_offending_node():
    with pytest.raises(ldpql.PrivacyError) as info:
        _plan("SELECT LDP_MEAN(income) FROM people WHERE income > 3 EPSILON 1")
    assert (info.value.line, info.value.column) == (1, 43)


def test_unknown_aggregate_lists_the_available_ones():
    with pytest.raises(ldpql.PlanError) as info:
        _plan("SELECT LDP_MEDIANN(income) FROM people EPSILON 1")
    assert "LDP_MEAN(column)" in info.value.hint and "LDP_HISTOGRAM(column [, column ...])" in info.value.hint


def test_epsilon_inf_is_allowed_in_evaluation_mode():
    p = _plan("SELECT LDP_MEAN(income) FROM people EPSILON INF", evaluation=True)
    assert math.isinf(p.epsilon) and "noise off" in str(p)


def test_rounds_limit_rejects_multi_round_candidates_only():
    p = _plan("SELECT LDP_MEAN(income) FROM people EPSILON 1", rounds=1)
    assert p.aggregates[0].chosen.rounds == 1
    median = _plan("SELECT LDP_MEDIAN(income) FROM people EPSILON 1", rounds=1).aggregates[0]
    assert median.chosen.mechanism in ("hierarchical", "histogram") and median.chosen.rounds == 1
    rejected = {c.mechanism: c.rejected for c in median.candidates}
    assert "at most 1 allowed" in rejected["bayess"] and "at most 1 allowed" in rejected["naive_nbs"]


def test_session_settings_apply_and_options_win():
    sql = "SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1 OPTIONS (confidence = 0.8)"
    p = plan(parse_one(sql), _table(), PublicFacts(1000), {"confidence": 0.9, "mechanism": "oue"}, sql)
    assert p.confidence == 0.8 and p.aggregates[0].chosen.mechanism == "oue"


def test_output_names_default_and_alias():
    p = _plan("SELECT LDP_MEAN(income), LDP_MEAN(income) AS m, LDP_MEAN(income) FROM people EPSILON 1")
    assert [name for name, _ in p.items] == ["ldp_mean_income", "m", "ldp_mean_income_2"]


@pytest.mark.parametrize("sql, message", [
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (force = 'yes')", "force must be bool"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (seed = 1.5)", "seed must be int"),
    ("SELECT LDP_MEAN(income) FROM people EPSILON 1 OPTIONS (rounds = true)", "rounds must be int"),
    ("SELECT LDP_MEAN(income, epsilon => 2) FROM people EPSILON 1", "more than the statement's EPSILON 1"),
])
def test_option_types_and_shares_are_checked(people, sql, message):
    with pytest.raises(ldpql.PlanError, match=message):
        people.sql(sql)
    assert people.remaining_budget("people") == pytest.approx(4.0)


def test_a_shuffle_model_that_cannot_apply_says_why(people):
    people.sql("ALTER TABLE people SET BUDGET EPSILON 4 DELTA 1e-6")
    res = people.sql("SELECT LDP_MEDIAN(age) FROM people EPSILON 2 DELTA 1e-6 OPTIONS (model = 'shuffle')")
    assert res.plan.aggregates[0].chosen.model == "local"
    assert any("model = 'shuffle' was asked for, but runs in the local model (shuffle_nbs: " in n for n in res.notes)


def test_results_and_explain_say_how_nulls_are_treated():
    con = ldpql.connect()
    con.register("t", pa.table({"x": [1.0, None] * 50, "c": ["a", None] * 50, "b": [True, None] * 50}),
                 private={"x": (0, 2), "c": ["a", "b"], "b": bool}, budget=9)
    notes = con.sql("SELECT LDP_MEAN(x), LDP_HISTOGRAM(c) FROM t EPSILON 1").notes
    assert "x: NULL or unreadable values count as 1 (the midpoint of its domain; DEFAULT v sets it)" in notes
    assert "c: NULL and undeclared values count as OTHER" in notes
    assert "b: NULL counts as FALSE" in con.explain("SELECT LDP_MEDIAN(x), LDP_HISTOGRAM(b) FROM t EPSILON 1")


def test_a_prediction_wider_than_the_domain_is_said():
    con = ldpql.connect()
    con.register("t", pa.table({"x": np.linspace(0, 20_000, 300)}), private={"x": (0, 20_000)}, budget=9)
    plan = con.explain("SELECT LDP_MEAN(x) FROM t EPSILON 0.01")
    assert "is wider than every possible answer (a range of 2e+04)" in plan
    assert "wider than every possible answer" not in con.explain("SELECT LDP_MEAN(x) FROM t EPSILON 8")
