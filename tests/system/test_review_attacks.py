"""Attacks of the second adversarial review of the privacy boundary (DESIGN §4.5). Each test PASSES when the engine
holds and FAILS while the attack works. The analyst is ``ldpql.connect(ledger=..., role="analyst")`` or the REPL
of ``ldpql --analyst``; the owner declares."""

from __future__ import annotations

import io

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql
from ldpql import repl

PEOPLE = ("age PRIVATE INTEGER BETWEEN 0 AND 120, income PRIVATE BETWEEN 0 AND 250000, region PUBLIC")


def _people(path, n: int = 2000) -> pa.Table:
    rng = np.random.default_rng(1)
    t = pa.table({"person_id": np.arange(n), "age": rng.integers(0, 100, n),
                  "income": np.round(rng.gamma(2.0, 20000.0, n), 2),
                  "region": rng.choice(["north", "south", "east"], n)})
    pq.write_table(t, path)
    return t


@pytest.fixture
def owned(tmp_path):
    """(ledger path, data path, table): the owner declared `people` (budget 4) in a ledger file."""
    data, ledger = str(tmp_path / "people.parquet"), str(tmp_path / "budget.ldpql")
    table = _people(data)
    with ldpql.connect(ledger=ledger) as owner:
        owner.sql(f"CREATE TABLE people FROM '{data}' ({PEOPLE}) PRIVACY UNIT person_id BUDGET EPSILON 4")
    return ledger, data, table


# ---- 1. the analyst's database= decides what a declared query source reads ----------------------------------------

def test_an_analysts_database_cannot_redirect_a_declared_query_source(owned, tmp_path):
    """The owner declared a query over a stored table of its database. The catalog row of a query source names no
    database, so an analyst connecting with ``database=`` its own DuckDB file, in which that name is a view that
    renames the private `income` to the public `region`, gets the query rebuilt over its view; the view reads the
    declared parquet file, so its identity is `people`'s and the budget check passes: GROUP BY region prints every
    user's income."""
    ledger, data, table = owned
    mine = str(tmp_path / "owner.duckdb")
    with duckdb.connect(mine) as d:
        d.execute(f"CREATE TABLE visits AS SELECT person_id, region, age FROM '{data}'")
    with ldpql.connect(ledger=ledger, database=mine) as owner:
        owner.sql("CREATE TABLE v FROM (SELECT person_id, region, age FROM visits) "
                  "(age PRIVATE INTEGER BETWEEN 0 AND 120, region PUBLIC) PRIVACY UNIT person_id BUDGET EPSILON 1")
    evil = str(tmp_path / "analyst.duckdb")
    with duckdb.connect(evil) as d:
        d.execute(f"CREATE VIEW visits AS SELECT person_id, CAST(income AS VARCHAR) AS region, age FROM '{data}'")
    incomes = {str(v) for v in table.column("income").to_pylist()}
    with ldpql.connect(ledger=ledger, role="analyst", database=evil) as an:
        try:
            rows = an.sql("SELECT region, LDP_COUNT(age > 0) FROM v GROUP BY region EPSILON 0.1").fetchall()
        except ldpql.Error:
            return   # refused: the engine holds
    leaked = {r[0] for r in rows} & incomes
    assert not leaked, f"{len(leaked)} raw incomes printed as GROUP BY keys"


# ---- 2. the REPL's .output overwrites the ledger ----------------------------------------------------------------

def test_the_repl_output_command_cannot_truncate_the_ledger(owned):
    """`ldpql --ledger :memory:` (or any session), then `.output <ledger path>` and `.output`: the ledger file (its
    path is printed in every footer) is truncated to 0 bytes; SQLite reads that as an empty ledger: every spend and
    the catalog are gone, and the owner's next CREATE TABLE starts the budget again."""
    ledger, data, _ = owned
    with ldpql.connect(ledger=ledger, role="analyst") as an:
        an.sql("SELECT LDP_MEAN(income) FROM people EPSILON 4")
        assert an.remaining_budget("people") == 0
    with ldpql.connect() as scratch:
        state = repl.ReplState(scratch, repl.TextSink(io.StringIO()))
        repl._dot_command(state, f".output {ledger}")
        repl._dot_command(state, ".output")
    with ldpql.connect(ledger=ledger) as owner:
        owner.sql(f"CREATE TABLE people FROM '{data}' ({PEOPLE}) PRIVACY UNIT person_id BUDGET EPSILON 4")
        assert owner.remaining_budget("people") == 0, "the spent budget was reset"


def test_the_analysts_repl_output_command_cannot_corrupt_the_ledger(owned):
    ledger, _, _ = owned
    with ldpql.connect(ledger=ledger, role="analyst") as an:
        state = repl.ReplState(an, repl.TextSink(io.StringIO()))
        repl._dot_command(state, f".output {ledger}")
        repl.run_statements(state, "SHOW TABLES")
        repl._dot_command(state, ".output")
    with ldpql.connect(ledger=ledger, role="analyst") as again:   # raises 'file is not a database' while it works
        assert again.tables() == ["people"]


# ---- 3. the REPL's .read echoes a line of any file -----------------------------------------------------------------

def test_the_repl_read_command_does_not_print_a_data_file(owned, tmp_path):
    """`.read <data file>` fails to parse and the parse error quotes the file's line under a caret."""
    ledger, _, _ = owned
    secret = tmp_path / "raw.csv"
    secret.write_text("4711,SECRET_DIAGNOSIS,98000.5\n4712,other,1.0\n")
    buf = io.StringIO()
    with ldpql.connect(ledger=ledger, role="analyst") as an:
        state = repl.ReplState(an, repl.TextSink(buf))
        repl._dot_command(state, f".read {secret}")
    assert "SECRET_DIAGNOSIS" not in buf.getvalue()


# ---- 4. a malformed value in a CSV makes statements fail for everyone ------------------------------------------

def test_a_malformed_private_value_is_not_revealed_by_a_failure(tmp_path):
    """DuckDB's CSV sniffer types `income` BIGINT from the first rows; a later row holds text. Every statement that
    reads `income` then fails, whatever its WHERE: `WHERE person_id = 0` charges user 0 only, yet the failure tells
    the analyst, without noise, that some *other* user's income is not a number (that user is never charged)."""
    path, ledger = tmp_path / "p.csv", str(tmp_path / "l.ldpql")
    n = 30_000
    path.write_text("person_id,region,income\n" + "".join(
        f"{i},{'north' if i % 2 else 'south'},{'n/a' if i == n - 5 else 1000 + i}\n" for i in range(n)))
    with ldpql.connect(ledger=ledger) as owner:
        owner.sql(f"CREATE TABLE t FROM '{path}' (income PRIVATE BETWEEN 0 AND 100000, region PUBLIC) "
                  "PRIVACY UNIT person_id BUDGET EPSILON 4")
    with ldpql.connect(ledger=ledger, role="analyst") as an:
        an.sql("SELECT LDP_MEAN(income) FROM t WHERE person_id = 0 EPSILON 0.5")   # raises ExecuteError now


def test_a_malformed_json_value_far_down_a_file_does_not_fail_the_statement(tmp_path):
    """DuckDB types JSON fields from a sample: one user's string in a numeric field past it made every read of
    the column fail, after the charge (a noiseless bit: does any user hold such a value?). JSON is read as text
    and TRY_CAST, like CSV: the value counts as NULL (skipped by the mean of the nullable column), and the
    statement answers."""
    import json

    import ldpql

    lines = [json.dumps({"id": k, "x": k % 10, "g": "ab"[k % 2]}) for k in range(30_000)]
    lines[25_000] = json.dumps({"id": 25_000, "x": "abc", "g": "a"})
    path = tmp_path / "late.json"
    path.write_text("\n".join(lines) + "\n")
    con = ldpql.connect(evaluation=True, seed=1)
    con.sql(f"CREATE TABLE t FROM '{path}' (x PRIVATE INTEGER BETWEEN 0 AND 10, g PUBLIC, id PUBLIC)")
    want = (sum(k % 10 for k in range(30_000)) - 25_000 % 10) / 29_999
    assert con.sql("SELECT LDP_MEAN(x) FROM t EPSILON INF").fetchall() == [(pytest.approx(want),)]
    assert len(con.sql("SELECT g, LDP_MEAN(x) FROM t GROUP BY g EPSILON 1").fetchall()) == 2
