"""Data hygiene: every kind of bad or awkward data gets a documented treatment that leaks nothing, or a clear
error that changes nothing (DESIGN §2.1, §4.6)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import ldpql


@pytest.fixture
def dirty(eval_con):
    """Income with NULL, NaN and values outside [0, 100]; city with NULL and undeclared values."""
    data = pa.table({
        "income": pa.array([None, float("nan"), -50.0, 500.0, 40.0, 60.0], pa.float64()),
        "city": pa.array([None, "Lyon", "Rome", "Nice", "Lyon", "Lyon"]),
        "flag": pa.array([True, None, False, True, True, False]),
        "region": ["a", "a", "b", "b", "b", "b"],
    })
    eval_con.register("d", data, private={"income": {"between": (0, 100), "default": 10}, "city": ["Lyon", "Nice"],
                                          "flag": bool}, public=["region"], budget=4)
    return eval_con


def test_null_and_nan_take_the_declared_default_and_values_are_clamped(dirty):
    (mean,), = dirty.sql("SELECT LDP_MEAN(income) FROM d EPSILON INF").fetchall()
    assert mean == pytest.approx((10 + 10 + 0 + 100 + 40 + 60) / 6)


def test_null_is_skipped_by_a_mean_on_a_nullable_column_and_counts_as_the_midpoint_when_asked(eval_con):
    eval_con.register("m", pa.table({"x": pa.array([None, 10.0, 20.0], pa.float64())}), private={"x": (0, 100)})
    assert eval_con.sql("SELECT LDP_MEAN(x) FROM m EPSILON INF").fetchall() == [(15.0,)]          # SQL's AVG
    assert eval_con.sql("SELECT LDP_MEAN(x, nulls => 'midpoint') FROM m EPSILON INF").fetchall() == [(80 / 3,)]
    assert eval_con.sql("SELECT LDP_SUM(x), LDP_COUNT(x) FROM m EPSILON INF").fetchall() == [(30.0, 2.0)]
    assert "nullable" in eval_con.sql("DESCRIBE m").fetchall()[0][3]
    eval_con.register("k", pa.table({"x": pa.array([None, 10.0], pa.float64())}),
                      private={"x": {"between": (0, 100), "not_null": True}})
    assert eval_con.sql("SELECT LDP_MEAN(x) FROM k EPSILON INF").fetchall() == [(30.0,)]   # the promise, unchecked


def test_undeclared_and_null_categories_go_to_other(dirty):
    hist = dict(dirty.sql("SELECT LDP_HISTOGRAM(city) FROM d EPSILON INF").fetchall())
    assert hist == pytest.approx({"Lyon": 3 / 6, "Nice": 1 / 6, "OTHER": 2 / 6})


def test_null_condition_counts_as_false(dirty):
    assert dirty.sql("SELECT LDP_COUNT(flag) FROM d EPSILON INF").fetchall() == [(3.0,)]


def test_empty_group_and_empty_table_answer_null_and_spend_nothing(con):
    con.register("e", pa.table({"x": pa.array([], pa.float64()), "g": pa.array([], pa.string())}),
                 private={"x": (0, 1)}, public=["g"], budget=1)
    res = con.sql("SELECT LDP_MEAN(x) FROM e EPSILON 1")
    assert res.fetchall() == [(None,)] and res.epsilon_spent == 0
    assert "no users" in " ".join(res.notes)
    con.register("f", pa.table({"x": [0.5, 0.7], "g": ["a", "b"]}), private={"x": (0, 1)}, public=["g"], budget=1)
    res = con.sql("SELECT LDP_MEAN(x) FROM f WHERE g = 'zzz' EPSILON 1")
    assert res.fetchall() == [(None,)]
    assert con.remaining_budget("f") == pytest.approx(1.0)
    assert con.sql("SELECT g, LDP_MEAN(x) FROM f WHERE g = 'zzz' GROUP BY g EPSILON 1").fetchall() == []


def test_duplicate_privacy_units_are_refused(con, tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("uid,x\n1,0.5\n2,0.1\n2,0.3\n3,0.9\n3,0.2\n")
    with pytest.raises(ldpql.CatalogError) as info:
        con.sql(f"CREATE TABLE t FROM '{path}' (x PRIVATE BETWEEN 0 AND 1) PRIVACY UNIT uid")
    # the refusal says that units repeat, never how many (a number computed from the data)
    assert "more than one row" in str(info.value) and "GROUP BY uid" in info.value.hint
    assert not any(ch.isdigit() for ch in info.value.message)
    assert con.tables() == [] and con.ledger.charges() == []
    con.sql(f"CREATE TABLE t FROM (SELECT uid, avg(x) AS x FROM '{path}' GROUP BY uid) (x PRIVATE BETWEEN 0 AND 1) "
            "PRIVACY UNIT uid")
    assert con.tables() == ["t"]


@pytest.mark.parametrize("source, fragment", [
    ("'/no/such/dir/people.csv'", "cannot read the source"),
    ("'/no/such/dir/*.parquet'", "cannot read the source"),
    ("no_such_table", "cannot read the source"),
    ("(SELECT * FROM no_such_table)", "cannot read the source"),
])
def test_missing_sources_are_clear_errors(con, source, fragment):
    with pytest.raises(ldpql.CatalogError) as info:
        con.sql(f"CREATE TABLE t FROM {source}")
    assert fragment in str(info.value)
    assert con.tables() == []


def test_unparsable_file(con, tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"this is not parquet")
    with pytest.raises(ldpql.CatalogError) as info:
        con.sql(f"CREATE TABLE t FROM '{bad}'")
    assert "format" in info.value.hint


@pytest.mark.parametrize("decl, fragment", [
    ("city PRIVATE BETWEEN 0 AND 10", "numeric range"),
    ("age PRIVATE IN ('a', 'b')", "categories are strings"),
    ("city PRIVATE IN (1, 2)", "categories are numbers"),
    ("age PRIVATE BETWEEN 10 AND 1", "empty"),
    ("city PRIVATE IN ('a', 'a')", "twice"),
    ("city PRIVATE IN ('OTHER')", "OTHER"),
    ("agee PRIVATE BETWEEN 0 AND 1", "no such column"),
    ("region PUBLIC BETWEEN 0 AND 1", "PUBLIC"),
])
def test_declarations_that_do_not_match_the_data(con, people_csv, decl, fragment):
    with pytest.raises(ldpql.CatalogError) as info:
        con.sql(f"CREATE TABLE t FROM '{people_csv}' ({decl})")
    assert fragment in str(info.value)
    assert con.tables() == []


def test_budget_declaration_is_validated(con, people_csv):
    with pytest.raises(ldpql.CatalogError):
        con.sql(f"CREATE TABLE t FROM '{people_csv}' BUDGET EPSILON -1")
    with pytest.raises(ldpql.CatalogError):
        con.sql(f"CREATE TABLE t FROM '{people_csv}' BUDGET EPSILON 1 DELTA 2")


def test_csv_parquet_json_and_glob_sources(con, tmp_path):
    rng = np.random.default_rng(1)
    table = pa.table({"x": rng.uniform(0, 1, 300)})
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    for i in range(3):
        pq.write_table(table, tmp_path / f"part{i}.parquet")
    pcsv.write_csv(table, tmp_path / "one.csv")
    (tmp_path / "one.json").write_text("\n".join(f'{{"x": {v}}}' for v in table.column("x").to_pylist()))
    for name, src in (("p", "part*.parquet"), ("c", "one.csv"), ("j", "one.json")):
        con.sql(f"CREATE TABLE {name} FROM '{tmp_path / src}' (x PRIVATE BETWEEN 0 AND 1) BUDGET EPSILON 2")
    con.sql("SELECT LDP_MEAN(x) FROM p EPSILON 1")
    assert con.sql("SELECT LDP_MEAN(x) FROM p EPSILON 1").plan.n == 900
    assert con.sql("SELECT LDP_MEAN(x) FROM c EPSILON 1").plan.n == 300
    assert con.sql("SELECT LDP_MEAN(x) FROM j EPSILON 1").plan.n == 300


def test_duckdb_table_of_an_attached_database(tmp_path):
    import duckdb

    db = tmp_path / "data.duckdb"
    with duckdb.connect(str(db)) as d:
        d.execute("CREATE TABLE events AS SELECT range AS id, (range % 7) AS k FROM range(1000)")
    with ldpql.connect(database=str(db), evaluation=True) as con:
        con.sql("CREATE TABLE e FROM events (k PRIVATE INTEGER BETWEEN 0 AND 6)")
        hist = con.sql("SELECT LDP_HISTOGRAM(k) FROM e EPSILON INF").fetchall()
        assert hist[0] == (0, pytest.approx(143 / 1000))


def test_where_with_a_wrong_type_is_a_clear_error_and_spends_nothing(people):
    with pytest.raises(ldpql.ExecuteError):
        people.sql("SELECT LDP_MEAN(income) FROM people WHERE region > 3 EPSILON 1")
    assert people.remaining_budget("people") == pytest.approx(4.0)


def test_out_of_domain_integer_histogram_values_are_clamped(eval_con):
    eval_con.register("i", pa.table({"k": [-3, 0, 1, 2, 9]}), private={"k": {"between": (0, 2), "integer": True}})
    assert eval_con.sql("SELECT LDP_HISTOGRAM(k) FROM i EPSILON INF").fetchall() == \
        [(0, 0.4), (1, 0.2), (2, 0.4)]
    assert math.isclose(sum(v for _, v in eval_con.sql("SELECT LDP_HISTOGRAM(k) FROM i EPSILON INF").fetchall()), 1)
