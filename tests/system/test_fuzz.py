"""Fuzzing the public API (issue #10, class 13): for any input, only ``ldpql.Error`` escapes, and a statement
that raised spent nothing. Generators and properties live in ``tests/fuzzing.py``; ``scripts/fuzz.py`` runs
the same properties 10^5 times. Every example here is derandomized, so a failure reproduces exactly.

The second half names each escape found in issue #10 in a plain test, so a regression says which one.
"""

from __future__ import annotations

import signal
import sqlite3

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ldpql
from ldpql import cli
from ldpql.grammar import ast, parse
from tests import fuzzing as fz

FUZZ = settings(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
SESSION = fz.Session()


def run(text: str) -> ldpql.Error | None:
    return fz.check_statement(SESSION.get(), fz.clamp_repeat(text))


# ---- statements -----------------------------------------------------------------------------------------------
@settings(FUZZ, max_examples=200)
@given(fz.statement())
def test_generated_statements_raise_only_ldpql_errors_and_spend_nothing_when_they_do(text):
    run(text)


@settings(FUZZ, max_examples=170)
@given(fz.mutated(fz.statement()))
def test_mutated_statements_raise_only_ldpql_errors(text):
    run(text)


@settings(FUZZ, max_examples=400)
@given(fz.any_text())
def test_arbitrary_text_raises_only_ldpql_errors(text):
    run(text)


@settings(FUZZ, max_examples=60)
@given(fz.bool_expr())
def test_where_trees_long_chains_and_deep_nesting(where):
    error = run(f"SELECT LDP_MEAN(x) EPSILON 1 FROM t WHERE {where}")
    if error is None:  # the round trip holds for whatever parses, however long
        stmt = parse(f"SELECT LDP_MEAN(x) EPSILON 1 FROM t WHERE {where}")[0]
        assert parse(stmt.sql())[0] == stmt


@settings(FUZZ, max_examples=150)
@given(fz.aggregate_call(), st.sampled_from(fz.EPSILONS), st.sampled_from(["", " OPTIONS (simulation = 'per_user')"]))
def test_any_epsilon_on_any_aggregate(call, eps, opts):
    run(f"SELECT {call} EPSILON {eps} FROM t{opts}")


@settings(FUZZ, max_examples=60)
@given(fz.aggregate_call(), st.sampled_from(fz.EPSILONS + ["±1", "+/-0.01", "1e-9", "5e5"]),
       st.sampled_from(["", " OPTIONS (confidence = 0.5)", " EXPLAIN"]))
def test_any_accuracy_on_any_aggregate(call, accuracy, mode):
    """ACCURACY ±a plans at trial ε from the floor to the cap: for any a, only ldpql.Error escapes, and a
    refusal spends nothing (over budget, or a target no ε reaches); EPSILON IN (...) runs nothing."""
    explain = "EXPLAIN " if mode == " EXPLAIN" else ""
    run(f"{explain}SELECT {call} FROM t ACCURACY {accuracy}{'' if explain else mode}")
    run(f"EXPLAIN SELECT {call} FROM t EPSILON IN ({accuracy.lstrip('±+/-')}, 1)")


# ---- API arguments --------------------------------------------------------------------------------------------
@settings(FUZZ, max_examples=30)
@given(fz.odd())
def test_sql_with_a_non_str_argument_is_an_ldpql_error(value):
    error = fz.check_statement(SESSION.get(), value)
    assert isinstance(value, str) or error is not None


@settings(FUZZ, max_examples=120)
@given(fz.register_kwargs(), st.sampled_from(["r", "", "t", "select", '"q"']), fz.odd(fz.TABLE, fz.TABLE, fz.TABLE))
def test_register_arguments(kwargs, name, data):
    con = SESSION.get()
    before, tables = fz.Snapshot.of(con), con.tables()
    _, error = fz.call(lambda: con.register(name, data, **kwargs))
    if error is not None:  # a refused declaration declares nothing and writes no ledger row
        assert con.tables() == tables and con.ledger.charges() == before.charges, error
    fz.check_ledger(con, before, altered=False)
    if name != "t" and name in con.tables():
        fz.call(lambda: con.sql(f"DROP TABLE {ast.quote_name(name)}"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory with a non-SQLite file (as ledger or database)."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / "notsqlite.ldpql").write_text("this is not a database\n" * 50)
    return str(d)


@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_connect_arguments(scratch, data):
    kwargs = data.draw(fz.connect_kwargs(scratch))
    con, error = fz.call(lambda: ldpql.connect(**kwargs))
    if con is not None:  # a connection that opened must run statements within the contract too
        fz.call(lambda: con.register("t", fz.TABLE, private=fz.PRIVATE, public=fz.PUBLIC, budget=4.0))
        for text in ("SELECT LDP_MEAN(x) EPSILON 1 FROM t", "SELECT LDP_HISTOGRAM(c) EPSILON INF FROM t",
                     "EVALUATE SELECT LDP_MEAN(x) EPSILON 1 FROM t REPEAT 1"):
            fz.check_statement(con, text)
        fz.call(con.close)


@settings(FUZZ, max_examples=80)
@given(st.one_of(fz.statement(), fz.any_text(), fz.odd()), fz.odd("t", "nope"), fz.odd("table", "csv", "json"))
def test_explain_remaining_budget_and_result_accessors(text, table, fmt):
    con = SESSION.get()
    before = fz.Snapshot.of(con)
    fz.call(lambda: con.explain(fz.clamp_repeat(text) if isinstance(text, str) else text))
    fz.call(lambda: con.remaining_budget(table))
    assert fz.Snapshot.of(con).charges == before.charges  # explain and remaining_budget never write
    result, _ = fz.call(lambda: con.sql("SELECT g, LDP_HISTOGRAM(c) EPSILON INF FROM t GROUP BY g"))
    fz.call(lambda: (result.render(fmt), result.fetchone(), result.arrow(), result.intervals(), len(result)))


# ---- issue #10, class 13: one named test per escape -------------------------------------------------------------
@pytest.fixture
def fuzz_con():
    con = fz.fresh_connection()
    yield con
    con.close()


def assert_refused_and_unspent(con: ldpql.Connection, action) -> ldpql.Error:
    """``action`` raises an ldpql.Error (nothing else) and leaves the ledger as it was."""
    before = fz.Snapshot.of(con)
    with pytest.raises(ldpql.Error) as info:
        action()
    after = fz.Snapshot.of(con)
    assert after.charges == before.charges and after.remaining == before.remaining
    return info.value


@pytest.mark.parametrize("eps", ["400", "710", "800", "1e308", "1e999"])
@pytest.mark.parametrize("call", ["LDP_MEAN(x)", "LDP_MIN(x)", "LDP_HISTOGRAM(c)", "LDP_MEDIAN(x)"])
def test_huge_epsilon_is_not_an_overflow_error(fuzz_con, call, eps):
    """OverflowError (math.exp(ε)) was raised for ε ≥ ~710, before the budget check (the table's budget is
    1000, so ε = 800 passes the budget check and reaches the mechanism)."""
    text = f"SELECT {call} EPSILON {eps} FROM t"
    try:
        result = fuzz_con.sql(text)
    except ldpql.Error:
        return
    except OverflowError as e:  # the escape: fail with the statement named
        pytest.fail(f"{text}: OverflowError escaped ({e})")
    assert result.fetchall()


def test_where_with_600_ors_runs(fuzz_con):
    """RecursionError in the parser's transformer for a WHERE of ≥ 500 ORs."""
    where = " OR ".join(f"g = 'v{i}'" for i in range(600)) + " OR g = 'n'"
    result = fuzz_con.sql(f"SELECT LDP_MEAN(x) EPSILON INF FROM t WHERE {where}")
    assert 0 <= result.fetchone()[0] <= 10


def test_a_where_of_5000_ands_unparses_without_recursion():
    stmt = parse("SELECT LDP_MEAN(x) EPSILON 1 FROM t WHERE " + " AND ".join(["h = 1"] * 5000))[0]
    assert stmt.sql().count(" AND ") == 4999 and len(ast.columns_of(stmt.where)) == 5000


def test_too_deep_nesting_is_a_parse_error_with_the_limit(fuzz_con):
    text = "SELECT LDP_MEAN(x) EPSILON 1 FROM t WHERE " + "NOT (" * 600 + "g = 'n'" + ")" * 600
    err = assert_refused_and_unspent(fuzz_con, lambda: fuzz_con.sql(text))
    assert isinstance(err, ldpql.ParseError) and f"at most {ast.MAX_NESTING}" in err.message and err.column == 43
    assert "^" in str(err) and len(str(err).splitlines()[1]) < 120  # the caret line is windowed, not 4,000 wide


def test_nesting_at_the_limit_parses():
    text = "SELECT LDP_MEAN(x) EPSILON 1 WHERE " + "NOT " * (ast.MAX_NESTING - 2) + "a = 1"
    assert ast.nesting(parse(text)[0].where) == ast.MAX_NESTING


@pytest.mark.parametrize("number", ["9" * 5000, "9" * 400, "1e999", "-1e400"])
@pytest.mark.parametrize("template", ["SELECT LDP_MEAN(x) EPSILON {}", "SELECT LDP_MEAN(x) EPSILON 1 OPTIONS (delta = {})",
                                      "SELECT LDP_MEAN(x, epsilon => {}) EPSILON 1",
                                      "CREATE TABLE u FROM 'f.csv' (x BETWEEN 0 AND {})",
                                      "ALTER TABLE t SET BUDGET EPSILON {}"])
def test_a_number_beyond_float_range_is_a_parse_error(template, number):
    """OverflowError (int too large to convert to float) in the planner, catalog and ALTER for 400 digits;
    ValueError (int string conversion limit) for 5,000; 1e999 silently meaning INF."""
    text = template.format(number)
    with pytest.raises(ldpql.ParseError, match="out of range") as info:
        parse(text)
    assert info.value.column == text.index(number) + 1


def test_the_largest_finite_numbers_still_parse():
    stmt = parse(f"SELECT LDP_MEAN(x) EPSILON 1e308 OPTIONS (seed = {2**64 - 1}, delta = {2**1023})")[0]
    assert stmt.epsilon.value == 1e308 and stmt.option("seed").value == 2**64 - 1


@pytest.mark.parametrize("value", [None, b"SHOW TABLES", 5, ["SHOW TABLES"]], ids=repr)
def test_sql_of_a_non_str_is_an_ldpql_error(fuzz_con, value):
    """TypeError from lark for con.sql(None) and con.sql(b'...')."""
    err = assert_refused_and_unspent(fuzz_con, lambda: fuzz_con.sql(value))
    assert type(value).__name__ in err.message


def test_register_with_a_str_budget_is_an_ldpql_error(fuzz_con):
    """TypeError ('<' not supported between int and str) for register(budget='big')."""
    assert_refused_and_unspent(fuzz_con, lambda: fuzz_con.register("u", fz.TABLE, private={"x": (0, 1)},
                                                                   budget="big"))
    assert fuzz_con.tables() == ["t"]


def test_connect_with_a_str_seed_is_an_ldpql_error():
    """TypeError for connect(seed='abc'): refused when connecting, or at the latest by the first statement."""
    with pytest.raises(ldpql.Error):
        con = ldpql.connect(seed="abc", evaluation=True)
        con.register("t", fz.TABLE, private=fz.PRIVATE, budget=4.0)
        con.sql("SELECT LDP_MEAN(x) EPSILON 1 FROM t")


@pytest.mark.parametrize("where", ["connect", "options"])
def test_a_negative_seed_is_an_ldpql_error(where):
    """ValueError (numpy: expected non-negative integer) for a negative seed."""
    with pytest.raises(ldpql.Error):
        con = ldpql.connect(seed=-1 if where == "connect" else 1, evaluation=True)
        con.register("t", fz.TABLE, private=fz.PRIVATE, budget=4.0)
        con.sql("SELECT LDP_MEAN(x) EPSILON 1 FROM t" + (" OPTIONS (seed = -5)" if where == "options" else ""))


def test_an_unwritable_ledger_is_an_ldpql_error(tmp_path):
    """sqlite3.OperationalError when the ledger cannot be written (read-only). Root ignores file modes, so
    the ledger is made unwritable by a directory where SQLite must create its rollback journal."""
    path = tmp_path / "l.ldpql"
    con = ldpql.connect(ledger=str(path))
    con.register("t", fz.TABLE, private=fz.PRIVATE, budget=4.0)
    (tmp_path / "l.ldpql-journal").mkdir()
    for action in (lambda: con.sql("SELECT LDP_MEAN(x) EPSILON 1 FROM t"), lambda: con.remaining_budget("t")):
        try:
            action()
        except ldpql.Error:
            continue
        except sqlite3.Error as e:
            pytest.fail(f"sqlite3.{type(e).__name__} escaped: {e}")


def test_explain_of_nothing_is_an_ldpql_error(fuzz_con):
    """IndexError (parse('')[0]) for con.explain('') or a script of only comments."""
    for text in ("", "  ", "-- nothing", ";"):
        with pytest.raises(ldpql.Error):
            fuzz_con.explain(text)


# ---- Ctrl-C in a CLI script -----------------------------------------------------------------------------------
class _Interrupting:
    """A connection stand-in whose statement is interrupted by a real SIGINT, then behaves as DuckDB may:
    re-raise KeyboardInterrupt, turn it into RuntimeError('Query interrupted'), or finish anyway."""

    def __init__(self, outcome: str):
        self.outcome, self.ran = outcome, 0

    def run(self, stmt, text):
        self.ran += 1
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            if self.outcome == "keyboard":
                raise
            if self.outcome == "runtime":
                raise RuntimeError("Query interrupted") from None
        return ldpql.Result(["a"], [(1,)])


@pytest.mark.parametrize("outcome", ["keyboard", "runtime", "swallowed"])
def test_ctrl_c_in_a_cli_script_exits_130_with_a_message(outcome, capsys):
    con, before = _Interrupting(outcome), signal.getsignal(signal.SIGINT)   # (ignored when run in the background)
    status = cli.run_script(con, "SHOW TABLES; SHOW TABLES; SHOW TABLES", "table", cli.ProgressBar())
    err = capsys.readouterr().err
    assert status == 130 and con.ran == 1, err
    assert "interrupted (Ctrl-C): statement 1 of 3" in err and "Traceback" not in err and "RuntimeError" not in err
    assert signal.getsignal(signal.SIGINT) is before  # the CLI's handler is uninstalled


def test_a_non_ldpql_exception_in_a_cli_script_is_reported_without_traceback(capsys):
    class Broken:
        def run(self, stmt, text):
            raise sqlite3.OperationalError("attempt to write a readonly database")

    assert cli.run_script(Broken(), "SHOW TABLES", "table", cli.ProgressBar()) == 1
    err = capsys.readouterr().err
    assert "Internal Error" in err and "OperationalError" in err and "Traceback" not in err


def test_cli_with_an_unopenable_ledger_exits_1_without_traceback(tmp_path, capsys):
    assert cli.main(["--ledger", str(tmp_path), "-c", "SHOW TABLES"]) == 1
    err = capsys.readouterr().err
    assert "cannot open the ledger" in err and "Traceback" not in err


def test_the_fuzz_table_really_is_declared():
    """Guard against a harness that fuzzes nothing: the table exists and a statement spends."""
    con = fz.fresh_connection()
    assert con.tables() == ["t"]
    res = con.sql("SELECT LDP_MEAN(x) EPSILON 1 FROM t")
    assert res.epsilon_spent == 1 and con.remaining_budget("t") == pytest.approx(fz.BUDGET - 1)
    assert isinstance(fz.TABLE, pa.Table) and fz.TABLE.num_rows == fz.ROWS
