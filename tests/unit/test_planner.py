"""The planner: its rules, its choices, and the proof that it reads only public facts."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql.catalog import Column, NumericDomain, CategoricalDomain, Table
from ldpql.grammar import parse_one
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.laplace import LaplaceMean
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.square_wave import SquareWave
from ldpql.planner import RULES, PublicFacts, plan


def _table(**over) -> Table:
    cols = {"income": Column("income", "DOUBLE", False, NumericDomain(0, 250000, not_null=True)),
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
    assert [a.chosen.mechanism for a in p.aggregates] == ["duchi", "grr"]   # (users split: Duchi's joint worst case)


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
    assert _plan("SELECT LDP_MEAN(income) FROM people EPSILON 1").aggregates[0].chosen.mechanism == "duchi"
    assert _plan("SELECT LDP_MEAN(income) FROM people EPSILON 4").aggregates[0].chosen.mechanism == "piecewise"


@pytest.mark.parametrize("eps", [0.25, 0.5, 1.0, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("agg", ["LDP_MEAN", "LDP_SUM"])
def test_mean_choice_is_near_minimax_over_the_domain(eps, agg):
    """Each candidate's prediction is its largest error over every value in the domain (checked on a grid of
    constant data sets, brute force); the chosen one's is within 10% of the smallest, and of those within 10% it
    has the smallest average variance over data sets whose E[x²] is uniform in [0, 1] (brute force again)."""
    p = _plan(f"SELECT {agg}(income) FROM people EPSILON {eps}", n=10_000)
    a = p.aggregates[0]
    scale = 125_000 * (10_000 if agg == "LDP_SUM" else 1)
    average = {}
    for c in a.candidates:
        r = {"duchi": Duchi, "piecewise": Piecewise, "hybrid": Hybrid, "laplace": LaplaceMean,
             "square_wave": SquareWave}[c.mechanism](eps)
        worst = max(float(r.variance(np.array([x]), 10_000, second_moment=x * x)[0]) for x in np.linspace(-1, 1, 201))
        assert c.predicted_se == pytest.approx(scale * math.sqrt(worst), rel=1e-9)
        average[c.mechanism] = np.mean([r.variance(np.zeros(1), 10_000, second_moment=m2)[0]
                                        for m2 in np.linspace(0, 1, 101)])
    best = min(c.predicted_se for c in a.candidates)
    near = [c.mechanism for c in a.candidates if c.predicted_se <= 1.1 * best and not c.baseline]
    assert {c.mechanism for c in a.candidates if c.baseline} == {"laplace", "square_wave"}
    assert a.chosen.predicted_se <= 1.1 * best
    assert average[a.chosen.mechanism] == pytest.approx(min(average[m] for m in near), rel=1e-9)
    assert "worst case over the domain" in str(p)


def test_predicted_error_matches_the_closed_form():
    p = _plan("SELECT LDP_MEAN(income) FROM people EPSILON 1", n=10_000)
    t, c = math.exp(0.5), (math.e + 1) / (math.e - 1)
    hybrid = (t + 3) / (3 * t * (t - 1)) + c ** 2 / t   # Wang et al. (ICDE 2019): the same for every value
    # the PM branch runs discretized on 2^12 cells: its variance is 1.00003× the continuous one's at ε = 1
    hm = next(c for c in p.aggregates[0].candidates if c.mechanism == "hybrid")
    assert hm.predicted_se == pytest.approx(125_000 * math.sqrt(hybrid / 10_000), rel=1e-4)
    assert hm.predicted_se == pytest.approx(
        125_000 * math.sqrt(Hybrid(1.0).variance(np.zeros(1), 10_000, second_moment=0.0)[0]), rel=1e-9)


def test_several_aggregates_split_users_when_that_predicts_less_error():
    p = _plan("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1")
    assert p.split == "users"
    assert [a.users for a in p.aggregates] == [(0.0, 0.5), (0.5, 1.0)]
    assert all(a.epsilon == 1 for a in p.aggregates)
    assert "users: 2 disjoint groups" in str(p)


def test_a_users_split_predicts_the_sampling_error_too():
    """Under a users split an aggregate's estimate stands for users who did not answer: its prediction adds
    their sampling variance (per-user spread × (1 - n/N) / n), so at a large ε, where the mechanism's noise is
    small, splitting users no longer looks free (the audit: LDP_COUNT beside a mean covered 0% at ε = 8)."""
    sql = "SELECT LDP_COUNT(income > 50000), LDP_MEAN(income) FROM people EPSILON 8"
    p = _plan(sql + " OPTIONS (split = 'users')")
    count, mean = p.aggregates
    noise = count.chosen.predict(8.0, 5_000) * 2   # at the 5,000 users asked, scaled to the 10,000 it stands for
    sampling = 10_000 * math.sqrt(0.25 * 0.5 / 5_000)   # N·sqrt(f(1-f)(1 - n/N)/n) at the worst f = 1/2
    unseen = 10_000 * 0.5 * 3 / 5_000 / 1.959964   # what a share of 3/n could hold (base.unseen), a range of 1
    assert count.chosen.predicted_se == pytest.approx(math.hypot(noise, sampling, unseen))
    assert "split = 'users' was asked for" in str(p) and "sampling error included" in str(p)
    assert _plan(sql).split == "epsilon"   # with the sampling term, splitting ε wins here


def test_the_split_option_is_checked():
    assert _plan("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1 "
                 "OPTIONS (split = 'epsilon')").split == "epsilon"
    with pytest.raises(ldpql.PlanError, match="cannot apply"):
        _plan("SELECT LDP_MEAN(income, epsilon => 0.5), LDP_HISTOGRAM(city) FROM people EPSILON 1 "
              "OPTIONS (split = 'users')")
    with pytest.raises(ldpql.PlanError, match="must be one of"):
        _plan("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1 OPTIONS (split = 'rows')")


def test_grouped_predictions_are_made_per_group_at_its_own_size():
    """The audit: a group of 1,610 users got ±1,020 where EXPLAIN, predicting at the whole table's n, said
    ±183. Group sizes are public counts: each group gets its own prediction, and the choice is made at the
    median group's size."""
    groups = tuple(((name,), size) for name, size in [("Fair", 1_610), ("Good", 4_906), ("Ideal", 21_551),
                                                        ("Premium", 13_791), ("Very Good", 12_082)])
    sql = "SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON 1"
    p = plan(parse_one(sql), _table(), PublicFacts(53_940, 5, 4.0, groups=groups), {}, sql)
    c = p.aggregates[0].chosen
    assert c.predicted_se == pytest.approx(c.predict(1.0, 12_082))   # the median group
    text = str(p)
    for (name,), size in groups:
        line = next(line for line in text.splitlines() if f"region = {name}:" in line)
        assert f"±{p.z * c.predict(1.0, size):.4g} (95%) at n = {size:,}" in line
    many = tuple(((f"g{i}",), 100 + i) for i in range(20))
    text = str(plan(parse_one(sql), _table(), PublicFacts(sum(n for _, n in many), 20, 4.0, groups=many), {}, sql))
    assert "… 12 more groups" in text and text.count("at n = ") == 8


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
    # at ε = 8 the exact clone bound gives 8 batches of ~2,200 users almost nothing (ε₀ = 8.000002): local runs
    people.sql("ALTER TABLE people SET BUDGET EPSILON 10 DELTA 1e-6")
    res = people.sql("SELECT LDP_MEDIAN(age) FROM people EPSILON 8 DELTA 1e-6 OPTIONS (model = 'shuffle')")
    assert res.plan.aggregates[0].chosen.model == "local"
    assert any("model = 'shuffle' was asked for, but runs in the local model (shuffle_nbs: " in n for n in res.notes)


def test_results_and_explain_say_how_nulls_are_treated():
    con = ldpql.connect()
    con.register("t", pa.table({"x": [1.0, None] * 50, "c": ["a", None] * 50, "b": [True, None] * 50}),
                 private={"x": (0, 2), "c": ["a", "b"], "b": bool}, budget=9)
    notes = con.sql("SELECT LDP_MEAN(x), LDP_HISTOGRAM(c) FROM t EPSILON 1").notes
    assert any(n.startswith("x: nullable: neither NOT NULL nor DEFAULT is declared, so means and sums are over the "
                            "users with a value") for n in notes), notes
    assert "c: NULL and undeclared values count as OTHER" in notes
    assert "b: NULL counts as FALSE" in con.explain("SELECT LDP_MEDIAN(x), LDP_HISTOGRAM(b) FROM t EPSILON 1")
    # a quantile still counts NULL as the midpoint, and says so; so does a mean asked for it
    assert "x: NULL or unreadable values count as 1 (the midpoint of its domain; DEFAULT v sets it)" in \
        con.explain("SELECT LDP_MEDIAN(x) FROM t EPSILON 1")
    assert "x: NULL or unreadable values count as 1 (nulls => 'midpoint': the mean is over every user)" in \
        con.explain("SELECT LDP_MEAN(x, nulls => 'midpoint') FROM t EPSILON 1")


def test_a_prediction_wider_than_the_domain_is_said():
    con = ldpql.connect()
    con.register("t", pa.table({"x": np.linspace(0, 20_000, 300)}), private={"x": (0, 20_000)}, budget=9)
    plan = con.explain("SELECT LDP_MEAN(x) FROM t EPSILON 0.01")
    assert "is wider than every possible answer (a range of 2e+04)" in plan
    assert "wider than every possible answer" not in con.explain("SELECT LDP_MEAN(x) FROM t EPSILON 8")


def test_piecewise_is_preferred_for_its_typical_error_even_where_few_reports_leave_the_band():
    """At ε = 16 PM's typical error is the smallest. A report leaves its band with probability ~4.6e-4, so with
    1,000 users fewer than one such report is expected; the planner used to run the minimax choice (HM) there
    because PM's normal interval under-covered (regret 1.43-1.68 on the coverage grid). The interval is now the
    exact law's quantile (ldpql.mechanisms.rare), so PM runs at every n."""
    for n in (1_000, 20_000):
        assert _plan("SELECT LDP_MEAN(income) FROM people EPSILON 16", n=n).aggregates[0].chosen.mechanism == \
            "piecewise"


def test_a_split_means_prediction_includes_what_the_users_asked_cannot_show():
    """Audit 20 L2: a worst-case mean's prediction under a users split (split_se) left out base.unseen, which the
    interval adds; EXPLAIN and ACCURACY now predict what runs."""
    from ldpql.mechanisms.base import unseen
    p = _plan("SELECT LDP_MEAN(income), LDP_COUNT(city = 'Lyon') FROM people EPSILON 4 OPTIONS (split = 'users')")
    mean = p.aggregates[0].chosen
    n, big = 5_000, 10_000
    alone = mean.split_se(4.0, big, n)
    assert mean.expected_se(4.0, big, 0.5) == pytest.approx(math.hypot(alone, math.sqrt(
        unseen(mean.sampling(big), n, 0.5))))
    assert mean.expected_se(4.0, big, 0.5) > alone


def test_hybrid_reads_no_second_moment_from_one_or_two_pm_reports():
    from ldpql.mechanisms.hybrid import FEW_PM, Hybrid
    r = Hybrid(2.0)
    assert r.second_moment(np.array([0.5, 1.2, FEW_PM - 1.0]), 8) is None
    assert r.second_moment(np.array([0.5, 1.2, float(FEW_PM)]), 8) is not None
