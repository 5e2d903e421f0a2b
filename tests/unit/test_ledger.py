"""The budget ledger: refusal text contract, refunds, parallel composition, spend that belongs to the data,
and two processes racing on one ledger file."""

from __future__ import annotations

import pytest

import ldpql
from ldpql.ledger import Ledger, fits, fitting_epsilon, refusal_hint, refusal_message
from tests.conftest import declare_people


@pytest.mark.parametrize("requested, remaining, budget, text", [
    (1.0, 0.5, 4.0, "this statement needs ε = 1 per user of `people`, but only ε = 0.5 remains for the users it covers "
                    "(budget 4)\n  requested  ε = 1\n  remaining  ε = 0.5\n  short by   ε = 0.5\nNo budget was spent."),
    (2.5, 0.0, 2.0, "this statement needs ε = 2.5 per user of `people`, but only ε = 0 remains for the users it covers "
                    "(budget 2)\n  requested  ε = 2.5\n  remaining  ε = 0\n  short by   ε = 2.5\nNo budget was spent."),
    (0.1, 0.09999, 1.0, "this statement needs ε = 0.1 per user of `people`, but only ε = 0.09999 remains for the users "
                        "it covers (budget 1)\n  requested  ε = 0.1\n  remaining  ε = 0.09999\n  short by   ε = 1e-05\n"
                        "No budget was spent."),
])
def test_refusal_text_is_a_contract(requested, remaining, budget, text):
    assert refusal_message("people", requested, remaining, budget) == text


@pytest.mark.parametrize("remaining, text", [
    (0.5, "EPSILON 0.5 would fit (what remains for the most-charged user it covers); EXPLAIN compares plans at that "
          "ε; only the data owner can raise a budget (ALTER TABLE, logged)"),
    (4 / 3, "EPSILON 1.33 would fit (what remains for the most-charged user it covers); EXPLAIN compares plans at "
            "that ε; only the data owner can raise a budget (ALTER TABLE, logged)"),
    (0.0, "nothing remains for these users; a WHERE over other users may still fit (SHOW BUDGET shows the "
          "most-charged user's)"),
])
def test_refusal_hint_is_a_contract(remaining, text):
    assert refusal_hint(remaining) == text


@pytest.mark.parametrize("remaining", [0.5, 1.0, 4 / 3, 0.499999, 0.5 - 1e-12, 2.2e-7, 3.9999999999, 1234.5678])
def test_the_suggested_epsilon_fits_and_is_close(remaining):
    eps = fitting_epsilon(remaining)
    assert fits(eps, remaining) and eps >= remaining * 0.99 and len(f"{eps:g}".replace("-", "")) <= 9


def test_a_refusal_suggests_an_epsilon_that_then_runs(people):
    people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 2.5")
    with pytest.raises(ldpql.BudgetExceededError) as info:
        people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 2")
    assert info.value.hint.startswith("EPSILON 1.5 would fit") and info.value.context["fits"] == 1.5
    people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1.5")   # the suggestion is accepted
    with pytest.raises(ldpql.BudgetExceededError) as info:
        people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 0.1")
    assert info.value.hint.startswith("nothing remains") and info.value.context["fits"] is None


def test_refusal_spends_nothing_and_writes_no_row(people):
    people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 3")
    rows_before = len(people.ledger.charges())
    with pytest.raises(ldpql.BudgetExceededError) as info:
        people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1.5")
    assert "requested  ε = 1.5" in str(info.value) and "remaining  ε = 1" in str(info.value)
    assert info.value.context["remaining"] == pytest.approx(1.0)
    assert len(people.ledger.charges()) == rows_before
    assert people.remaining_budget("people") == pytest.approx(1.0)


def test_request_equal_to_what_remains_is_allowed(people):
    people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 3")
    people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1")
    assert people.remaining_budget("people") == pytest.approx(0.0)


def test_failure_during_execution_refunds(people, monkeypatch):
    from ldpql import executor

    def boom(self, *args, **kwargs):
        raise ldpql.ExecuteError("disk on fire")

    monkeypatch.setattr(executor.Executor, "finish", boom)
    with pytest.raises(ldpql.ExecuteError):
        people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1")
    assert people.remaining_budget("people") == pytest.approx(4.0)
    assert [c.status for c in people.ledger.charges() if c.kind == "query"] == ["refunded"]


def test_interrupt_during_execution_refunds(people):
    def interrupt(fraction, message):
        raise KeyboardInterrupt

    people.progress = interrupt
    with pytest.raises(KeyboardInterrupt):
        people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1")
    assert people.remaining_budget("people") == pytest.approx(4.0)


def test_parallel_composition_across_disjoint_predicates(people):
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'north' EPSILON 3")
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'south' EPSILON 3")
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'east' EPSILON 4")
    # every user has now spent at most 4 ... the north users 3: one more unit fits for them only
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'north' EPSILON 1")
    with pytest.raises(ldpql.BudgetExceededError):
        people.sql("SELECT LDP_MEAN(income) FROM people WHERE region <> 'east' EPSILON 1")
    assert people.remaining_budget("people") == pytest.approx(0.0)


def test_overlapping_predicates_add_up(people):
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'north' EPSILON 2")
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region IN ('north', 'south') EPSILON 1.5")
    with pytest.raises(ldpql.BudgetExceededError):  # north users are at 3.5
        people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1")
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'east' EPSILON 1")


def test_group_by_charges_each_user_once(people):
    people.sql("SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON 4")
    assert people.remaining_budget("people") == pytest.approx(0.0)


def test_spend_belongs_to_the_data_not_the_declaration(tmp_path, people_parquet):
    path = str(tmp_path / "budget.ldpql")
    with ldpql.connect(ledger=path, seed=1, evaluation=True) as a:
        declare_people(a, people_parquet)
        a.sql("SELECT LDP_MEAN(income) FROM people EPSILON 3")
    with ldpql.connect(ledger=path, seed=2, evaluation=True) as b:
        declare_people(b, people_parquet, name="other_name")
        assert b.remaining_budget("other_name") == pytest.approx(1.0)
        b.sql("DROP TABLE other_name")
        declare_people(b, people_parquet, name="again")
        assert b.remaining_budget("again") == pytest.approx(1.0)


def test_redeclaring_a_larger_budget_is_refused_and_alter_is_logged(tmp_path, people_parquet):
    path = str(tmp_path / "budget.ldpql")
    with ldpql.connect(ledger=path) as a:
        declare_people(a, people_parquet, budget=2)
    with ldpql.connect(ledger=path) as b:
        with pytest.raises(ldpql.CatalogError) as info:
            declare_people(b, people_parquet, budget=5)
        assert "ALTER TABLE" in info.value.hint
        assert b.tables() == ["people"]   # the owner's declaration, loaded from the ledger, is unchanged
        assert b.catalog.get("people").budget_epsilon == 2
        declare_people(b, people_parquet, budget=2)
        b.sql("ALTER TABLE people SET BUDGET EPSILON 5")
        assert b.remaining_budget("people") == pytest.approx(5.0)
        kinds = [c.kind for c in b.ledger.charges()]
        assert kinds.count("alter budget") == 1


def test_declaring_without_budget_keeps_the_ledgers(tmp_path, people_parquet):
    path = str(tmp_path / "budget.ldpql")
    with ldpql.connect(ledger=path) as a:
        declare_people(a, people_parquet, budget=3)
    with ldpql.connect(ledger=path) as b:
        b.sql(f"CREATE TABLE p FROM '{people_parquet}' (income PRIVATE BETWEEN 0 AND 250000) PRIVACY UNIT person_id")
        assert b.remaining_budget("p") == pytest.approx(3.0)


def test_show_budget_and_ledger(people):
    people.sql("SELECT LDP_MEAN(income) FROM people WHERE region = 'north' EPSILON 1")
    budget = people.sql("SHOW BUDGET people").fetchall()
    assert budget == [("people", 4.0, 1.0, 3.0, 0.0, 1)]
    ledger = people.sql("SHOW LEDGER people").fetchall()
    assert ledger[-1][2:7] == ("query", "people", "SELECT LDP_MEAN(income) FROM people WHERE region = 'north' EPSILON 1",
                               "region = 'north'", 1.0)


def test_bad_ledger_path_is_a_clear_error(tmp_path):
    with pytest.raises(ldpql.CatalogError):
        Ledger(str(tmp_path / "missing-dir" / "x" / "ledger.db"))


RACER = """
import sys, time, os, ldpql
ledger, data, go = sys.argv[1:4]
with ldpql.connect(ledger=ledger) as con:
    con.sql(f"CREATE TABLE people FROM '{data}' (income PRIVATE BETWEEN 0 AND 250000, region PUBLIC) "
            "PRIVACY UNIT person_id BUDGET EPSILON 2")
    while not os.path.exists(go):  # all racers start together
        time.sleep(0.01)
    try:
        con.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1")
        print("won")
    except ldpql.BudgetExceededError:
        print("refused")
"""


def test_processes_racing_on_one_ledger_never_overspend(tmp_path, people_parquet):
    """Four processes each try to spend ε = 1 of a budget of 2 at the same moment: exactly two win."""
    import subprocess
    import sys

    path, go = str(tmp_path / "race.ldpql"), tmp_path / "go"
    with ldpql.connect(ledger=path) as con:
        declare_people(con, people_parquet, budget=2)
    racers = [subprocess.Popen([sys.executable, "-c", RACER, path, people_parquet, str(go)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(4)]
    go.touch()
    outcomes = [r.communicate(timeout=180) for r in racers]
    assert all(r.returncode == 0 for r in racers), [err for _, err in outcomes]
    assert sorted(out.strip() for out, _ in outcomes) == ["refused", "refused", "won", "won"]
    with ldpql.connect(ledger=path) as con:
        declare_people(con, people_parquet, budget=2)
        assert con.remaining_budget("people") == pytest.approx(0.0)


# ---- what the review found: δ, fixed shares, refusals before any row, shared noise ------------------------------

def test_delta_composes_and_is_refused_past_the_budget():
    led = Ledger()
    led.declare("src", ["src"], "t", 10.0, 1e-6, "CREATE ...")
    led.reserve("src", "t", "q1", None, 1.0, delta=6e-7)
    assert led.remaining_delta("src") == pytest.approx(4e-7)
    with pytest.raises(ldpql.BudgetExceededError, match="needs δ = 6e-07 of `t`, but only δ = 4e-07 remains"):
        led.reserve("src", "t", "q2", None, 1.0, delta=6e-7)
    assert [c.statement for c in led.charges("src") if c.kind == "query"] == ["q1"]


def test_statement_delta_beyond_the_table_is_refused(people):
    people.sql("ALTER TABLE people SET BUDGET EPSILON 4 DELTA 1e-9")
    for sql, message in (("SELECT LDP_MEDIAN(age) FROM people EPSILON 1 DELTA 0.5", "DELTA 0.5 is more than the δ left"),
                         ("SELECT LDP_MEDIAN(age) FROM people EPSILON 1 DELTA 1.5", r"DELTA must be in \[0, 1\)")):
        with pytest.raises(ldpql.PlanError, match=message):
            people.sql(sql)
    assert people.remaining_budget("people") == pytest.approx(4.0)
    assert [c for c in people.ledger.charges() if c.kind == "query"] == []


def test_fixed_shares_are_what_is_charged_and_are_checked(people):
    res = people.sql("SELECT LDP_COUNT(age > 30, epsilon => 0.2) FROM people EPSILON 1")
    assert res.epsilon_spent == pytest.approx(0.2) and people.remaining_budget("people") == pytest.approx(3.8)
    for share in ("-1", "'a'", "0"):
        with pytest.raises(ldpql.PlanError, match="epsilon => share must be a finite positive number"):
            people.sql(f"SELECT LDP_COUNT(age > 30, epsilon => {share}) FROM people EPSILON 1")
    assert people.remaining_budget("people") == pytest.approx(3.8)


def test_a_group_too_small_for_its_protocol_is_refused_before_any_ledger_row(con):
    import numpy as np
    import pyarrow as pa
    rng = np.random.default_rng(0)
    con.register("g", pa.table({"x": rng.uniform(0, 1, 40_000), "grp": np.where(np.arange(40_000) < 500, "a", "b")}),
                 private={"x": (0, 1)}, public=["grp"], budget=5)
    with pytest.raises(ldpql.PlanError, match="a group of 500 users is too small"):
        con.sql("SELECT grp, LDP_MIN(x, mechanism => 'bisect') FROM g GROUP BY grp EPSILON 0.6")
    assert con.ledger.charges() and [c for c in con.ledger.charges() if c.kind == "query"] == []



def test_an_exhausted_budget_refuses_even_tiny_requests():
    """The old check allowed a request within 1e-9·budget of what remained: with a large budget that let ε = 1e-5
    statements run forever on an exhausted budget. The margin now rounds the request only."""
    led = Ledger()
    led.declare("src", ["src"], "t", 10_000.0, 0.0, "CREATE ...")
    led.commit(led.reserve("src", "t", "all of it", None, 10_000.0))
    for eps in (1e-5, 2e-6, 1e-12):
        with pytest.raises(ldpql.BudgetExceededError):
            led.reserve("src", "t", "a crumb", None, eps)
    led.alter("src", "t", 10_000.5, 0.0, "ALTER ...")
    led.commit(led.reserve("src", "t", "what remains", None, 0.5 * (1 + 1e-12)))   # rounding only: allowed
