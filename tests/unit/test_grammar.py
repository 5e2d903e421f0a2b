"""The language: golden fixtures drive the round trip (parse -> unparse) and the expected errors."""

from __future__ import annotations

import math

import pytest

import ldpql
from ldpql.grammar import ast, parse, parse_one
from tests.helpers import load_error_cases, load_sql_lines

IDENTITY = load_sql_lines("identity.sql")
ERRORS = load_error_cases("parse_errors.sql")


def test_fixtures_are_not_empty():
    assert len(IDENTITY) >= 30 and len(ERRORS) >= 10


@pytest.mark.parametrize("sql", IDENTITY)
def test_identity_round_trip(sql):
    stmt = parse_one(sql)
    assert stmt.sql() == sql
    assert parse_one(stmt.sql()) == stmt


@pytest.mark.parametrize("sql, cls, line, column", ERRORS)
def test_expected_errors(sql, cls, line, column):
    with pytest.raises(getattr(ldpql, cls)) as info:
        parse(sql)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    caret_line = str(err).splitlines()[2]
    assert caret_line.index("^") - 2 == column - 1  # the caret sits under the column


def test_keywords_are_case_insensitive():
    assert parse_one("select ldp_min(age) epsilon 1 from people") == parse_one("SELECT LDP_MIN(age) EPSILON 1 FROM people")


def test_epsilon_after_select_list_or_at_the_end():
    early = parse_one("SELECT LDP_MIN(age) EPSILON 1 FROM people")
    late = parse_one("SELECT LDP_MIN(age) FROM people EPSILON 1")
    assert early == late and early.epsilon.value == 1


def test_epsilon_inf_and_delta():
    stmt = parse_one("SELECT LDP_MEAN(x) FROM t EPSILON INF DELTA 1e-9")
    assert math.isinf(stmt.epsilon.value) and stmt.delta.value == 1e-9


def test_reserved_words_can_be_quoted():
    stmt = parse_one('SELECT LDP_MEAN("epsilon") FROM t EPSILON 1')
    assert stmt.items[0].expr.args[0] == ast.ColumnRef("epsilon")


def test_script_with_several_statements_and_comments():
    script = """
    -- declare
    CREATE TABLE t FROM 'x.csv' (a PRIVATE BETWEEN 0 AND 1);
    /* a block
       comment */
    SELECT LDP_MEAN(a) FROM t EPSILON 1;;
    SHOW BUDGET;
    """
    kinds = [type(s).__name__ for s in parse(script)]
    assert kinds == ["CreateTable", "Select", "ShowBudget"]


def test_positions_are_kept_on_nodes():
    stmt = parse_one("SELECT region,\n  LDP_MEAN(income)\nFROM people EPSILON 1")
    call = stmt.items[1].expr
    assert (call.pos.line, call.pos.column) == (2, 3)


def test_subquery_source_keeps_duckdb_text():
    stmt = parse_one("CREATE TABLE t FROM (SELECT a, count(*) AS n FROM read_csv('x.csv') WHERE b IN (1, (2)) GROUP BY a)")
    assert stmt.source.kind == "query" and "read_csv('x.csv')" in stmt.source.text


def test_error_suggests_the_near_keyword():
    with pytest.raises(ldpql.ParseError) as info:
        parse("SELECT LDP_MEAN(age) FROM people EPSILN 1")
    assert "EPSILON" in info.value.hint


def test_parse_one_rejects_scripts():
    with pytest.raises(ldpql.ParseError):
        parse_one("SHOW TABLES; SHOW BUDGET")


def test_grammar_is_packaged_and_parser_is_built_once():
    from ldpql.grammar import parser

    assert parser._parser() is parser._parser()
