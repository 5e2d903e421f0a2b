"""audit3: attacks on the claims merged with the quantile ('bound' answers that ask nobody, the one-round histogram,
calibrated intervals) and extremes (the one-round bucket search for LDP_MIN/LDP_MAX) branches.

Each test states a claim of docs/quantiles.md, docs/extremes.md or EXPLAIN and checks it. Tests marked
``xfail(strict=True)`` show a real defect (the measured numbers are in the reason); the others are claims that
held under attack and stay as regression tests."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql.errors import InternalError, PlanError

AGE = {"between": (0, 120), "integer": True}


def connect(columns: dict, private: dict, public: tuple = (), budget: float = 100.0,
            seed: int = 7) -> ldpql.Connection:
    con = ldpql.connect(seed=seed, evaluation=True)
    con.register("t", pa.table(columns), private=private, public=list(public), budget=budget)
    return con


def ages(n: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"age": rng.integers(0, 100, n), "region": rng.choice(["a", "b"], n)}


def aggregate(res, output: str):
    return next(a for a in res.plan.aggregates if a.output == output)


# ---- 1. a 'bound' answer asks nobody: it should take neither users nor ε from the others ------------------------

def test_a_bound_answer_takes_no_users_from_a_mean():
    con = connect(ages(3000), {"age": AGE}, ("region",))
    alone = con.sql("EXPLAIN SELECT LDP_MEAN(age) FROM t EPSILON 0.2").plan.aggregates[0].chosen.predicted_se
    res = con.sql("EXPLAIN SELECT LDP_QUANTILE(age, 0.002), LDP_MEAN(age) FROM t EPSILON 0.2")
    assert aggregate(res, "ldp_quantile_age").chosen.mechanism == "bound"
    mean = aggregate(res, "ldp_mean_age")
    assert mean.users == (0.0, 1.0)
    assert mean.chosen.predicted_se == pytest.approx(alone, rel=1e-6)


def test_a_bound_answer_takes_no_epsilon_from_a_mean():
    con = connect(ages(3000), {"age": AGE}, ("region",))
    res = con.sql("SELECT LDP_QUANTILE(age, 0.002), LDP_MEAN(age) FROM t EPSILON 0.2 OPTIONS (split = 'epsilon')")
    assert aggregate(res, "ldp_quantile_age").chosen.mechanism == "bound"
    assert res.epsilon_spent == pytest.approx(0.2)             # the statement pays its ε ...
    assert aggregate(res, "ldp_mean_age").epsilon == pytest.approx(0.2)   # ... and the one that asks should get it


def test_a_bound_only_statement_is_refunded_also_under_group_by():
    """Held: the refund depends on public facts only (every cell's n picks the bound); SHOW LEDGER says refunded
    and the budget is unchanged, per group too."""
    con = connect(ages(3000), {"age": AGE}, ("region",))
    res = con.sql("SELECT region, LDP_QUANTILE(age, 0.001) FROM t GROUP BY region EPSILON 0.2")
    assert {a.chosen.mechanism for a in res.plan.aggregates} == {"bound"}
    assert res.epsilon_spent == 0 and con.remaining_budget("t") == 100.0
    assert con.sql("SHOW LEDGER t").fetchall()[-1][-1] == "refunded"


# ---- 3. LDP_MIN / LDP_MAX ---------------------------------------------------------------------------------------

def test_min_on_a_two_value_domain_is_not_an_internal_error():
    rng = np.random.default_rng(2)
    con = connect({"b": rng.integers(0, 2, 3000)}, {"b": {"between": (0, 1), "integer": True}})
    try:
        con.sql("SELECT LDP_MIN(b) FROM t EPSILON 4")
    except InternalError as e:
        pytest.fail(f"internal error instead of an answer or a clear refusal: {e}")
    except PlanError:
        pass   # a clear refusal is acceptable
    assert con.remaining_budget("t") >= 96.0


def test_min_refusal_at_tiny_n_is_a_plan_error():
    rng = np.random.default_rng(2)
    con = connect({"age": rng.integers(0, 100, 3)}, {"age": AGE})
    with pytest.raises(PlanError):
        con.sql("EXPLAIN SELECT LDP_MIN(age) FROM t EPSILON 1")


def test_min_refusal_names_the_first_n_and_epsilon_that_work():
    """Held: at n = 200, ε = 0.25 the refusal names n ≥ 3,440 and ε ≥ 0.878 (buckets_grr), and those are exact."""
    rng = np.random.default_rng(2)

    def explain(n: int, eps: float) -> str | None:
        con = connect({"age": rng.integers(0, 121, n)}, {"age": AGE})
        try:
            return con.sql(f"EXPLAIN SELECT LDP_MIN(age) FROM t EPSILON {eps}").plan.aggregates[0].chosen.mechanism
        except PlanError as e:
            return str(e) + (e.hint or "")
    refusal = explain(200, 0.25)
    assert "needs n ≥ 3,440 at ε = 0.25, or ε ≥ 0.878 at n = 200" in refusal
    assert explain(3440, 0.25) == "buckets_grr" and "too few users" in explain(3439, 0.25)
    assert explain(200, 0.878) == "buckets_grr" and "too few users" in explain(200, 0.87)


def test_set_confidence_moves_the_extremes_interval_like_options():
    """audit3 reported SET confidence ignored ([0, 15] with OPTIONS, [0, 30] with SET, both labelled 50%). The
    target does read SET (the planner merges it under OPTIONS): the two runs drew different noise, because an
    evaluation seed's stream is keyed by the session's statement count and SET is a statement. The audit's
    comparison is kept with every session running one SET before the query (OPTIONS overrides a SET 0.95), so
    the noise is the same; over 8 seeds, and with a control at 95% that shows the interval does move with the
    level on this data (it is [0, 30] at both levels for most seeds)."""
    x = np.random.default_rng(2).integers(0, 121, 3000)
    moved = False
    for seed in range(1, 9):
        got = {}
        for how, level, options in (("set", 0.5, ""), ("options", 0.95, " OPTIONS (confidence = 0.5)"),
                                    ("control", 0.95, "")):
            con = connect({"age": x}, {"age": AGE}, seed=seed)
            con.sql(f"SET confidence = {level}")
            res = con.sql(f"SELECT LDP_MIN(age) FROM t EPSILON 1{options}")
            got[how] = (res.fetchone(), res.intervals())
        assert got["options"][1][0][0][2] == got["set"][1][0][0][2] == 0.5
        assert got["options"] == got["set"], seed
        moved |= got["control"][1][0][0][:2] != got["set"][1][0][0][:2]
    assert moved


def two_groups(small: int, seed: int = 1) -> tuple[ldpql.Connection, np.ndarray]:
    """Group 'a' of 3,000 users (ages uniform on 0..99) and group 'b' of ``small`` users."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 100, 3000 + small)
    con = connect({"age": age, "region": np.array(["a"] * 3000 + ["b"] * small)}, {"age": AGE}, ("region",))
    return con, age[:3000]


def test_a_tiny_group_does_not_switch_every_group_to_the_bisection():
    con, a = two_groups(3)
    try:
        res = con.sql("SELECT region, LDP_MIN(age) FROM t GROUP BY region EPSILON 1")
    except PlanError:
        return   # refusing the tiny group, as with 30 users, is what the docs promise
    answer = dict(res.fetchall())["a"]
    alone = con.sql("SELECT region, LDP_MIN(age) FROM t WHERE region = 'a' GROUP BY region EPSILON 1")
    gamma = 0.15   # the bucket search's γ at n = 3,000, ε = 1 (EXPLAIN)
    assert alone.plan.aggregates[0].chosen.mechanism.startswith("buckets")
    assert np.mean(a < answer) <= 2 * gamma, (res.plan.aggregates[0].chosen.mechanism, answer)


def rank_error(x: np.ndarray, v: float, tau: float) -> float:
    return max(0.0, np.mean(x <= v - 1) - tau, tau - np.mean(x <= v))


def test_a_tiny_group_does_not_make_every_group_a_bound_answer():
    con, a = two_groups(3)
    res = con.sql("SELECT region, LDP_QUANTILE(age, 0.05) FROM t GROUP BY region EPSILON 1")
    answer = dict(res.fetchall())["a"]
    assert rank_error(a, answer, 0.05) <= 0.03, (res.plan.aggregates[0].chosen.mechanism, answer)


# ---- 2. the calibrated (default) quantile interval on data it was not calibrated on ------------------------------

def lognormal_prices(n: int = 20000, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.round(np.exp(rng.normal(7.8, 1.0, n))), 326, 18823).astype(int)


@pytest.mark.slow
def test_calibrated_interval_covers_on_skewed_data_at_high_epsilon():
    con = connect({"x": lognormal_prices()}, {"x": {"between": (0, 20000), "integer": True}}, budget=1e9, seed=5)
    res = con.sql("EVALUATE SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON 8 REPEAT 200")
    row = dict(zip(res.columns, res.fetchone()))
    assert row["coverage"] >= 0.95 - 3 * (0.95 * 0.05 / 200) ** 0.5, row   # 0.904: three binomial standard errors


# ---- held under attack: one-round candidates spend ε once per user; bad input changes nothing --------------------

def test_one_round_candidates_spend_the_statement_epsilon_once_under_group_by_and_a_split():
    """The histogram read-out, the bucket search and a mean in one GROUP BY statement on disjoint user shares:
    the executor's per-user checks pass and every user pays the statement's ε exactly once."""
    con = connect(ages(4000), {"age": AGE}, ("region",))
    res = con.sql("SELECT region, LDP_MEDIAN(age, mechanism => 'histogram'), LDP_QUANTILE(age, 0.9, mechanism => "
                  "'histogram'), LDP_MIN(age, mechanism => 'buckets'), LDP_MEAN(age) FROM t GROUP BY region EPSILON 2")
    own = [a for a in res.plan.aggregates if a.source is None]   # the 0.9-quantile reads the median's release
    assert [a.chosen.mechanism for a in own][:2] == ["histogram", "buckets_grr"] and len(own) == 3
    assert sorted(a.users for a in own) == [(0.0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.0)]
    assert res.epsilon_spent == 2 and con.remaining_budget("t") == pytest.approx(98.0)
    assert con.sql("SHOW LEDGER t").fetchall()[-1][-1] == "committed"


@pytest.mark.parametrize("sql, error, text", [
    ("SELECT LDP_MEDIAN(age, interval => 'Certified') FROM t EPSILON 1", PlanError, "'certified' or 'calibrated'"),
    ("SELECT LDP_MEDIAN(age, interval => 1) FROM t EPSILON 1", PlanError, "'certified' or 'calibrated'"),
    ("SELECT LDP_MIN(age, interval => 'certified') FROM t EPSILON 1", PlanError, "no argument `interval`"),
    ("SELECT LDP_MAX(age, mechanism => 'bucket') FROM t EPSILON 1", PlanError, "cannot answer LDP_MAX"),
    ("SELECT LDP_MEDIAN(age) FROM t EPSILON 1 OPTIONS (mechanism = 'buckets_oue')", PlanError, "cannot answer"),
])
def test_bad_arguments_are_clear_errors_that_spend_nothing(sql, error, text):
    con = connect(ages(1000), {"age": AGE}, ("region",))
    before = con.sql("SHOW LEDGER t").fetchall()
    with pytest.raises(error, match=text):
        con.sql(sql)
    assert con.remaining_budget("t") == 100.0 and con.sql("SHOW LEDGER t").fetchall() == before


@pytest.mark.slow
def test_calibrated_interval_covers_at_a_low_quantile():
    con = connect({"x": lognormal_prices(5000)}, {"x": {"between": (0, 20000), "integer": True}}, budget=1e9, seed=5)
    res = con.sql("EVALUATE SELECT LDP_QUANTILE(x, 0.05) FROM t EPSILON 1 REPEAT 80")
    assert res.plan.aggregates[0].chosen.mechanism == "bayess"
    row = dict(zip(res.columns, res.fetchone()))
    assert row["coverage"] >= 0.95 - 3 * (0.95 * 0.05 / 80) ** 0.5, row   # 0.877


def test_shown_rank_error_covers_on_zipf_data():
    """A Zipf-like integer column (zipf(1.3) - 1 capped at 1000, INTEGER 0..1000, n = 5,000, ε = 1, τ = 0.5, the
    planner's BayeSS): the calibrated ±1.96σ = ±0.0451 held in 73.5% of 200 runs. Cause (measured,
    examples/audit8_accuracy/quantile_discrete.py): the values near the median hold 2-3% of the users each and
    BayeSS's last stage (NaiveNBS over its kept coins with ~10% of the users) lands a few values off, which on
    smooth data costs little rank and here costs several values' share. The result now shows ±1.96σ plus 3 times
    the share per value near the answer that the release itself estimates (0.95 at 300 runs; smooth and
    continuous columns 0-4 points wider, in quantile_discrete.csv)."""
    from ldpql.mechanisms.quantile import CoinSpace, bayess_protocol
    from ldpql.planner.quantile import BAYESS_ROUNDS, Z95, shown_rank_error, sigma_bayess
    from ldpql.simulation import simulate

    x = np.minimum(np.random.default_rng(11).zipf(1.3, 5000) - 1, 1000)
    sigma = sigma_bayess(1.0, 5000, 1001, 0.5)
    alone = shown = 0
    for i in range(200):
        answer = simulate(bayess_protocol(CoinSpace(1001), 1.0, 0.5, max_rounds=BAYESS_ROUNDS)(5000),
                          np.random.default_rng([3, i]), coins=x)
        error = rank_error(x, int(answer.extra["coin"]), 0.5)
        alone += error <= Z95 * sigma
        shown += error <= shown_rank_error(answer, 0.5, sigma, Z95)
    assert alone / 200 <= 0.85, alone                                        # the cause: ±1.96σ alone (0.735)
    assert shown / 200 >= 0.95 - 3 * (0.95 * 0.05 / 200) ** 0.5, shown      # 0.904


def test_a_result_shows_the_widened_rank_error_and_explain_says_what_the_prediction_assumes():
    x = np.minimum(np.random.default_rng(11).zipf(1.3, 5000) - 1, 1000)
    con = connect({"x": x}, {"x": {"between": (0, 1000), "integer": True}}, budget=10, seed=3)
    explain = con.sql("EXPLAIN SELECT LDP_MEDIAN(x) FROM t EPSILON 1").render()
    assert "predicted rank error (fraction of users) ±0.0451 (95%, calibrated); it assumes no value near q" in explain
    res = con.sql("SELECT LDP_MEDIAN(x) FROM t EPSILON 1")
    value = res.fetchone()[0]
    note = next(n for n in res.notes if n.startswith(f"the 0.5-quantile of x ({value:g}): rank error ±"))
    alpha = float(note.split("±")[1].split()[0])
    assert 0.0451 * 1.05 < alpha <= 0.5, note


def test_explain_of_a_bound_only_statement_says_nothing_will_be_spent():
    con = connect(ages(3000), {"age": AGE}, ("region",))
    text = con.sql("EXPLAIN SELECT LDP_QUANTILE(age, 0.002) FROM t EPSILON 0.2").render()
    assert "-> 99.8 after this statement" not in text


def test_a_bound_only_statement_runs_whatever_budget_remains():
    con = connect(ages(3000), {"age": AGE}, ("region",), budget=0.1)
    assert con.sql("SELECT LDP_QUANTILE(age, 0.002) FROM t EPSILON 0.2").fetchone() == (0.0,)
    assert con.remaining_budget("t") == pytest.approx(0.1)


def test_a_group_too_small_for_the_bucket_search_is_refused_before_anything_is_spent():
    """Held (with 30 users in the small group; with 3 see the bisection finding above)."""
    con, _ = two_groups(30)
    before = con.sql("SHOW LEDGER t").fetchall()
    with pytest.raises(PlanError, match="a group of 30 users is too small at ε = 1"):
        con.sql("SELECT region, LDP_MIN(age) FROM t GROUP BY region EPSILON 1")
    assert con.remaining_budget("t") == 100.0 and con.sql("SHOW LEDGER t").fetchall() == before
