"""The Python API contract of DESIGN §3: names that tests outside the project rely on."""

from __future__ import annotations

import io
import contextlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import ldpql
from tests.conftest import declare_people, people_table


def test_public_names():
    for name in ("connect", "Connection", "Result", "Error", "ParseError", "CatalogError", "PrivacyError",
                 "BudgetExceededError", "PlanError"):
        assert hasattr(ldpql, name)
    for cls in (ldpql.ParseError, ldpql.CatalogError, ldpql.PrivacyError, ldpql.BudgetExceededError, ldpql.PlanError):
        assert issubclass(cls, ldpql.Error)


def test_the_contract_end_to_end(people):
    explained = people.explain("SELECT LDP_MEAN(income) EPSILON 1 FROM people")
    res = people.sql("SELECT LDP_MEAN(income) EPSILON 1 FROM people")
    rows = res.fetchall()
    assert isinstance(rows, list) and isinstance(rows[0], tuple) and len(rows) == 1
    assert res.columns == ["ldp_mean_income"]
    assert res.fetchone() == rows[0] and res.fetchone() is None
    (low, high, conf), = res.intervals()[0]
    assert low < rows[0][0] < high and conf == 0.95
    truth = float(people_table()["income"].to_numpy().clip(0, 250_000).mean())
    assert abs(rows[0][0] - truth) < 4 * res.plan.aggregates[0].chosen.predicted_se   # an answer, not a guess
    assert str(res.plan) == explained  # what EXPLAIN showed is what ran
    assert res.epsilon_spent == 1.0
    assert list(res.df().columns) == ["ldp_mean_income", "ldp_mean_income_low", "ldp_mean_income_high"]
    assert res.arrow().num_rows == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        res.show()
    assert "±" in out.getvalue() and "ε spent 1" in out.getvalue()
    assert people.remaining_budget("people") == pytest.approx(3.0)


def test_alias_names_the_column(people):
    res = people.sql("SELECT LDP_MEAN(income) AS avg_income FROM people EPSILON 1")
    assert res.columns == ["avg_income"]


def test_reading_a_result_twice_never_charges_twice(people):
    res = people.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1")
    first = res.fetchall()
    assert res.fetchall() == first and res.df().shape == (1, 3)
    assert people.remaining_budget("people") == pytest.approx(3.0)
    assert len([c for c in people.ledger.charges() if c.kind == "query"]) == 1


def test_seed_makes_a_script_reproducible(people_parquet):

    answers = []
    for _ in range(2):
        with ldpql.connect(seed=7, evaluation=True) as con:
            declare_people(con, people_parquet)
            answers.append([con.sql(q).fetchall() for q in (
                "SELECT LDP_MEAN(income) FROM people EPSILON 1",
                "SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1")])
    assert answers[0] == answers[1]
    with ldpql.connect(seed=8, evaluation=True) as con:
        declare_people(con, people_parquet)
        assert con.sql("SELECT LDP_MEAN(income) FROM people EPSILON 1").fetchall() != answers[0][0]


def test_statement_seed_option_fixes_the_noise(people, people_parquet):
    """The same seed replays the same noise on the same ledger state (a fresh connection), but two charged
    statements never share noise: summing their ε assumes independent randomness."""
    q = "SELECT LDP_MEAN(income) FROM people EPSILON 0.5 OPTIONS (seed = 99)"
    first = people.sql(q).fetchall()
    with ldpql.connect(evaluation=True) as again:
        declare_people(again, people_parquet)
        assert again.sql(q).fetchall() == first
    assert people.sql(q).fetchall() != first


def test_register_pandas_and_arrow():
    pytest.importorskip("pandas")
    con = ldpql.connect(seed=5, evaluation=True)
    df = people_table(5000).to_pandas()
    con.register("p", df, private={"income": (0, 250000), "city": ["Lyon", "Nice", "Paris"], "smoker": bool},
                 public=["region"], budget=3.0)
    con.register("a", pa.Table.from_pandas(df), private={"age": {"between": (0, 120), "integer": True}})
    assert sorted(con.tables()) == ["a", "p"]
    res = con.sql("SELECT region, LDP_MEAN(income), LDP_COUNT(smoker) FROM p GROUP BY region EPSILON 1")
    assert [r[0] for r in res.fetchall()] == sorted(df.region.unique())
    hist = con.sql("SELECT LDP_HISTOGRAM(age) FROM a EPSILON 1").fetchall()
    assert len(hist) == 121 and hist[0][0] == 0
    assert con.remaining_budget("p") == pytest.approx(1.0)   # `a` holds the same rows as `p`: spend is shared
    with pytest.raises(ldpql.CatalogError):
        con.register("bad", object())


def test_columns_and_tables_introspection(people):
    cols = {c[0]: c for c in people.columns("people")}
    assert cols["region"][2] is True and cols["income"][2] is False and "BETWEEN 0 AND 250000" in cols["income"][3]


def test_several_statements_return_the_last_result(con, people_parquet):
    res = con.sql(f"CREATE TABLE t FROM '{people_parquet}' (income PRIVATE BETWEEN 0 AND 250000); "
                  "SELECT LDP_MEAN(income) FROM t EPSILON 0.5")
    assert res.columns == ["ldp_mean_income"]


def test_use_sets_the_default_table(con, people_parquet):

    declare_people(con, people_parquet, name="a")
    declare_people(con, people_parquet, name="b")
    with pytest.raises(ldpql.CatalogError) as info:
        con.sql("SELECT LDP_MEAN(income) EPSILON 1")
    assert "USE" in info.value.hint
    con.sql("USE b")
    con.sql("SELECT LDP_MEAN(income) EPSILON 1")
    assert con.remaining_budget("b") == pytest.approx(3.0)  # a and b are the same data: spend is shared
    assert con.remaining_budget("a") == pytest.approx(3.0)


def test_set_validates_values(con):
    con.sql("SET confidence = 0.9")
    assert con.session["confidence"] == 0.9
    with pytest.raises(ldpql.PlanError):
        con.sql("SET confidence = 2")
    with pytest.raises(ldpql.PlanError):
        con.sql("SET confidance = 0.9")


def test_describe_and_show_tables(people):
    rows = people.sql("DESCRIBE people").fetchall()
    assert ("region", "VARCHAR", "public", "-") in rows
    assert any(r[0] == "person_id" and r[3] == "privacy unit" for r in rows)
    assert people.sql("SHOW TABLES").fetchall()[0][0] == "people"


def test_render_formats(people):
    res = people.sql("SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1")
    import json

    data = json.loads(res.render("json"))
    assert data["rows"][0]["ldp_histogram_city_interval"]["confidence"] == 0.95
    csv_text = [line for line in res.render("csv").splitlines() if not line.startswith("# ")]  # notes come first
    assert csv_text[0] == "city,ldp_histogram_city,ldp_histogram_city_low,ldp_histogram_city_high"
    assert res.render("markdown").splitlines()[1].startswith("|-")


ERRORS = ["SELEC 1", "SELECT LDP_MEAN(income) FROM nowhere EPSILON 1", "SELECT LDP_MEAN(income) FROM people EPSILON -1",
          "SELECT LDP_MEAN(income) FROM people WHERE age > 3 EPSILON 1", "CREATE TABLE x FROM '/no/such/file.csv'",
          "DESCRIBE nowhere", "USE nowhere", "DROP TABLE nowhere", "ALTER TABLE people SET BUDGET EPSILON 0",
          "SELECT LDP_MEAN(income) FROM people EPSILON 100", "SET nothing = 1", "EVALUATE SELECT LDP_MEAN(income) "
          "FROM people EPSILON 1", "SELECT LDP_MEAN(income) FROM people WHERE region = 3 EPSILON 1", "",
          "SELECT LDP_HISTOGRAM(city), LDP_HISTOGRAM(city) FROM people EPSILON 1"]


@pytest.mark.parametrize("sql", ERRORS)
def test_bad_input_raises_ldpql_errors_only_and_changes_nothing(private_people, sql):
    people = private_people
    before = (people.remaining_budget("people"), len(people.ledger.charges()), people.tables())
    with pytest.raises(ldpql.Error) as info:
        people.sql(sql)
    assert str(info.value)
    assert (people.remaining_budget("people"), len(people.ledger.charges()), people.tables()) == before


def test_df_has_each_estimates_interval_and_explain_says_when_it_would_be_refused(people):
    pytest.importorskip("pandas")
    res = people.sql("SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON 1")
    frame = res.df()
    assert list(frame.columns) == ["region", "ldp_mean_income", "ldp_mean_income_low", "ldp_mean_income_high"]
    ivs = res.intervals()
    assert frame["ldp_mean_income_low"].tolist() == [row[1][0] for row in ivs]
    assert (frame["ldp_mean_income_low"] < frame["ldp_mean_income"]).all()
    assert (frame["ldp_mean_income"] < frame["ldp_mean_income_high"]).all()
    text = people.explain("SELECT LDP_MEAN(income) FROM people EPSILON 3.5")
    assert "this statement would be refused: it needs 3.5" in text and "-> 0 after" not in text
    assert "2.5 after this statement" in people.explain("SELECT LDP_MEAN(income) FROM people EPSILON 0.5")


def test_answers_and_intervals_stay_in_the_feasible_range(people):
    """A count in [0, n], a mean in its domain, a frequency in [0, 1], each point inside its own interval."""
    res = people.sql("SELECT region, LDP_COUNT(age > 98), LDP_MEAN(income) FROM people GROUP BY region EPSILON 0.05")
    for row, ivs in zip(res.fetchall(), res.intervals()):
        for value, iv, (lo, hi) in ((row[1], ivs[1], (0, 20_000)), (row[2], ivs[2], (0, 250_000))):  # before: < 0
            assert lo <= iv[0] <= value <= iv[1] <= hi
    hist = people.sql("SELECT LDP_HISTOGRAM(city) FROM people EPSILON 0.1")
    for (_, f), ivs in zip(hist.fetchall(), hist.intervals()):
        assert 0 <= ivs[1][0] <= f <= ivs[1][1] <= 1


def test_an_interval_pushed_past_a_bound_is_not_shown_as_a_point():
    """Audit 18 L1: a count whose whole interval the noise pushed below 0 was clipped to "0 ± 0", a certainty no
    release has (3 users of 1,000 at ε = 1, 80%: 8.7% of runs, each a miss). It is shown as the likelihood-ratio set at
    the bound, [0, x + sqrt(h² + x²)]: never a point, and a superset of the clipped interval; per-bin alike."""
    con = ldpql.connect(evaluation=True)
    con.register("t", pd.DataFrame({"b": np.arange(1000) < 3, "c": np.where(np.arange(1000) < 3, "x", "y")}),
                 private={"b": bool, "c": ["x", "y", "z"]}, budget=1e9)
    collapsed = 0
    for seed in range(40):
        res = con.sql(f"SELECT LDP_COUNT(b), LDP_HISTOGRAM(c) FROM t EPSILON 1 OPTIONS (seed = {seed}, "
                      "confidence = 0.8)")
        for row, ivs in zip(res.fetchall(), res.intervals()):
            for value, iv in ((row[0], ivs[0]), (row[2], ivs[2])):
                assert iv[0] <= value <= iv[1] and iv[1] > iv[0], (seed, row, ivs)
                collapsed += value == iv[0] == 0
    assert collapsed >= 10   # (the clipped count or bin at 0: the case this guards)
