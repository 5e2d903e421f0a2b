"""The catalog: declarations checked against the column types, total encodings, the privacy unit, declarations
that may only tighten, and the owner's ALTER TABLE ... SET COLUMN / SET PRIVACY UNIT."""

from __future__ import annotations

import duckdb
import pytest

from ldpql.backends.sql import render

import ldpql
from ldpql import catalog as cat
from ldpql.grammar import parse_one

# Values a private column may hold that an encoding must survive: NULL, NaN, ±inf, huge, fractional, negative
HOSTILE_DOUBLES = "(VALUES (NULL::DOUBLE), ('nan'::DOUBLE), ('inf'::DOUBLE), ('-inf'::DOUBLE), (1e308), (-1e308), " \
                  "(52.7), (53.5), (-1.5), (0.0), (7.0))"


@pytest.fixture
def duck():
    d = duckdb.connect()
    d.execute(f"CREATE TABLE dbl AS SELECT col0 AS x FROM {HOSTILE_DOUBLES}")
    d.execute("CREATE TABLE txt AS SELECT * FROM (VALUES ('note-0-8405'), ('Lyon'), (NULL), ('5'), ('true')) t(x)")
    d.execute("CREATE TABLE ints AS SELECT * FROM (VALUES (0), (1), (2), (-1), (NULL), (2147483647)) t(x)")
    d.execute("CREATE TABLE people AS SELECT range AS id, range % 90 AS age, 'c' || (range % 4) AS city, "
              "range % 2 = 0 AS smoker, range * 10.5 AS income FROM range(40)")
    yield d
    d.close()


def declare(duck, sql: str) -> cat.Table:
    return cat.build_table(parse_one(sql), duck, sql)


def values(duck, expr: str, table: str) -> list:
    return [r[0] for r in duck.execute(f"SELECT {expr} FROM {table}").fetchall()]


# ---- domains that do not fit the column are refused at declaration ------------------------------------------

@pytest.mark.parametrize("decl, words", [
    ("x PRIVATE INTEGER BETWEEN -1 AND 52.5", "whole-number bounds"),      # a fractional bound: an index oracle
    ("x PRIVATE IN ('a', 'b')", "strings"),                                # strings on a DOUBLE column
    ("x PRIVATE BOOLEAN", "BOOLEAN"),                                      # BOOLEAN on a DOUBLE column
    ("x PRIVATE BETWEEN 0 AND 10 DEFAULT TRUE", "DEFAULT must be a number"),
    ("x PRIVATE DEFAULT 3", "no domain"),
])
def test_domains_that_do_not_fit_a_double_column_are_refused(duck, decl, words):
    with pytest.raises(ldpql.CatalogError) as info:
        declare(duck, f"CREATE TABLE t FROM dbl ({decl})")
    assert words in str(info.value)


def test_a_bound_beyond_float_range_is_refused(duck):
    with pytest.raises(ldpql.ParseError, match="out of range"):   # 1e400 would be an infinite bound
        declare(duck, "CREATE TABLE t FROM dbl (x PRIVATE BETWEEN 0 AND 1e400)")


@pytest.mark.parametrize("decl, words", [
    ("x PRIVATE BOOLEAN", "BOOLEAN"),        # used to fail at query time: Could not convert string 'note-0-8405'
    ("x PRIVATE BETWEEN 0 AND 10", "numeric range"),
    ("x PRIVATE IN (1, 2)", "numbers"),
    ("x PRIVATE IN ('a', 'b') DEFAULT 3", "DEFAULT must be a string"),
])
def test_domains_that_do_not_fit_a_text_column_are_refused(duck, decl, words):
    with pytest.raises(ldpql.CatalogError) as info:
        declare(duck, f"CREATE TABLE t FROM txt ({decl})")
    assert words in str(info.value) and "note-" not in str(info.value)


def test_a_boolean_domain_on_an_integer_column_reads_non_zero_as_true(duck):
    t = declare(duck, "CREATE TABLE t FROM ints (x PRIVATE BOOLEAN DEFAULT TRUE)")
    assert values(duck, render(t.columns["x"].domain.index("x")), "ints") == [0, 1, 1, 1, 1, 1]


def test_a_column_declared_twice_is_refused(duck):
    with pytest.raises(ldpql.CatalogError, match="declared twice"):
        declare(duck, "CREATE TABLE t FROM people (income PRIVATE BETWEEN 0 AND 500, income PUBLIC)")


# ---- every encoding is total: in range, whatever the value, and never raises ---------------------------------

@pytest.mark.parametrize("domain", [cat.NumericDomain(-1, 52, True), cat.NumericDomain(0, 1), cat.NumericDomain(-5, 5, True, 2)])
def test_numeric_encodings_stay_in_the_domain(duck, domain):
    clamped = values(duck, render(domain.clamped("x")), "dbl")
    assert all(domain.low <= v <= domain.high for v in clamped)
    if domain.integer:
        assert set(values(duck, render(domain.index("x")), "dbl")) <= set(range(domain.size))


@pytest.mark.parametrize("domain, table", [
    (cat.CategoricalDomain(("Lyon", "5")), "txt"), (cat.CategoricalDomain((7.0, 0.0, 1e308)), "dbl"),
    (cat.CategoricalDomain((1, 2), default=2), "ints"), (cat.BooleanDomain(), "ints"), (cat.BooleanDomain(True), "dbl"),
])
def test_index_encodings_stay_in_the_domain(duck, domain, table):
    assert set(values(duck, render(domain.index("x")), table)) <= set(range(domain.size))


@pytest.mark.parametrize("domain", [cat.NumericDomain(0, 10), cat.CategoricalDomain((1, 2)), cat.BooleanDomain()])
def test_encodings_of_a_text_column_never_raise(duck, domain):
    """Defence in depth: even a domain that slipped past the declaration check cannot raise on a value (a DuckDB
    conversion error would quote the private value)."""
    sql = render(domain.clamped("x")) if isinstance(domain, cat.NumericDomain) else render(domain.index("x"))
    assert len(values(duck, sql, "txt")) == 5


def test_categorical_numbers_match_whatever_the_numeric_type(duck):
    t = declare(duck, "CREATE TABLE t FROM ints (x PRIVATE IN (1, 2, -1))")
    assert values(duck, render(t.columns["x"].domain.index("x")), "ints") == [3, 0, 1, 2, 3, 3]


# ---- the privacy unit is a public identifier ---------------------------------------------------------------

@pytest.mark.parametrize("decl", ["id PRIVATE", "id PRIVATE BETWEEN 0 AND 100", "id BETWEEN 0 AND 100", "id"])
def test_a_private_privacy_unit_is_refused(duck, decl):
    with pytest.raises(ldpql.CatalogError, match="privacy unit `id` .* is declared private"):
        declare(duck, f"CREATE TABLE t FROM people ({decl}, age PRIVATE BETWEEN 0 AND 100) PRIVACY UNIT id")


def test_an_undeclared_or_public_unit_is_public(duck):
    for decl in ("", "id PUBLIC, "):
        t = declare(duck, f"CREATE TABLE t FROM people ({decl}age PRIVATE BETWEEN 0 AND 100) PRIVACY UNIT id")
        assert t.privacy_unit == "id" and t.columns["id"].public


def test_duplicate_units_are_refused_without_a_count(duck):
    duck.execute("CREATE TABLE dup AS SELECT range % 7 AS uid, range AS x FROM range(40)")
    with pytest.raises(ldpql.CatalogError) as info:
        declare(duck, "CREATE TABLE t FROM dup (x PRIVATE BETWEEN 0 AND 50) PRIVACY UNIT uid")
    assert "more than one row" in info.value.message
    assert not any(ch.isdigit() for ch in info.value.message + info.value.hint)


# ---- declarations may only tighten -------------------------------------------------------------------------

PEOPLE = "CREATE TABLE people_t FROM people ({}) {}"


def decl(duck, columns: str, tail: str = "") -> dict:
    return cat.declaration(declare(duck, PEOPLE.format(columns, tail)))


def test_the_declaration_is_json_and_canonical(duck):
    import json
    a = decl(duck, "age PRIVATE BETWEEN 0 AND 100, city PUBLIC")
    b = decl(duck, "age PRIVATE BETWEEN 0.0 AND 100 DEFAULT 50, city PUBLIC")
    assert json.loads(json.dumps(a)) == a
    # the NULL semantics is written as declared (nullable: none); both release the same (NULL skipped or as 50)
    assert a["columns"]["age"] == {"public": False, "domain": "BETWEEN 0 AND 100",
                                   "effective": "BETWEEN 0 AND 100 DEFAULT 50"}
    assert b["columns"]["age"]["domain"] == "BETWEEN 0 AND 100 DEFAULT 50"
    cat.check_tightens(a, b, "people_t"), cat.check_tightens(b, a, "people_t")
    assert a["columns"]["city"] == {"public": True, "domain": None}


@pytest.mark.parametrize("before, after", [
    ("age PRIVATE BETWEEN 0 AND 100, city PUBLIC", "age PRIVATE BETWEEN 0 AND 100, city PUBLIC"),   # the same
    ("age PRIVATE BETWEEN 0 AND 100, city PUBLIC", "age PRIVATE BETWEEN 0 AND 100"),                # public -> private
    ("age PRIVATE", "age PRIVATE BETWEEN 0 AND 100"),                                               # a domain added
    ("age PUBLIC", "age PRIVATE INTEGER BETWEEN 0 AND 100"),
    ("age PRIVATE BETWEEN 0 AND 100", "age PRIVATE"),   # a domain left out: the column becomes unusable
])
def test_keeping_or_tightening_is_allowed(duck, before, after):
    cat.check_tightens(decl(duck, before), decl(duck, after), "people_t")


@pytest.mark.parametrize("before, after, alter", [
    ("income PRIVATE", "income PUBLIC", "SET COLUMN income PUBLIC"),                    # the attack of issue #10
    ("income PRIVATE BETWEEN 0 AND 500", "income PUBLIC", "SET COLUMN income PUBLIC"),
    ("age PRIVATE BETWEEN 0 AND 100", "age PRIVATE BETWEEN 0 AND 90", "SET COLUMN age PRIVATE <domain>"),
    ("age PRIVATE BETWEEN 0 AND 100", "age PRIVATE BETWEEN 0 AND 100 DEFAULT 3", "SET COLUMN age PRIVATE <domain>"),
    ("city PRIVATE IN ('c0', 'c1')", "city PRIVATE IN ('c1', 'c0')", "SET COLUMN city PRIVATE <domain>"),
])
def test_loosening_a_column_is_refused_and_names_the_alter(duck, before, after, alter):
    with pytest.raises(ldpql.CatalogError) as info:
        cat.check_tightens(decl(duck, before), decl(duck, after), "people_t")
    assert f"ALTER TABLE people_t {alter}" in info.value.hint


@pytest.mark.parametrize("before, after", [("", "PRIVACY UNIT id"), ("PRIVACY UNIT id", ""),
                                           ("PRIVACY UNIT id", "PRIVACY UNIT age")])
def test_changing_the_unit_is_refused(duck, before, after):
    with pytest.raises(ldpql.CatalogError, match="PRIVACY UNIT"):
        cols = "id PUBLIC, age PUBLIC, income PRIVATE"
        cat.check_tightens(decl(duck, cols, before), decl(duck, cols, after), "people_t")


# ---- the owner's ALTER TABLE ... SET COLUMN / SET PRIVACY UNIT -------------------------------------------------

def test_alter_column_returns_a_new_table_checked_like_a_declaration(duck):
    t = declare(duck, PEOPLE.format("income PRIVATE BETWEEN 0 AND 500, city PUBLIC", ""))
    public = cat.apply_alter(t, parse_one("ALTER TABLE people_t SET COLUMN income PUBLIC"))
    assert public.columns["income"].public and not t.columns["income"].public
    narrowed = cat.apply_alter(t, parse_one("ALTER TABLE people_t SET COLUMN income PRIVATE BETWEEN 0 AND 100"))
    assert narrowed.columns["income"].domain == cat.NumericDomain(0, 100)
    city = cat.apply_alter(t, parse_one("ALTER TABLE people_t SET COLUMN city PRIVATE IN ('c0', 'c1')"))
    assert not city.columns["city"].public
    cat.check_tightens(cat.declaration(t), cat.declaration(city), "people_t")
    for bad, words in [("SET COLUMN city PRIVATE BETWEEN 0 AND 1", "numeric range"),
                       ("SET COLUMN income PUBLIC BETWEEN 0 AND 1", "only declared for private"),
                       ("SET COLUMN nope PUBLIC", "does not exist")]:
        with pytest.raises(ldpql.CatalogError, match=words):
            cat.apply_alter(t, parse_one(f"ALTER TABLE people_t {bad}"))


def test_alter_unit(duck):
    t = declare(duck, PEOPLE.format("id PUBLIC, income PRIVATE BETWEEN 0 AND 500", ""))
    assert cat.apply_alter(t, parse_one("ALTER TABLE people_t SET PRIVACY UNIT id"), duck=duck).privacy_unit == "id"
    with pytest.raises(ldpql.CatalogError) as info:
        cat.apply_alter(t, parse_one("ALTER TABLE people_t SET PRIVACY UNIT income"))
    assert "SET COLUMN income PUBLIC" in info.value.hint
    unit = cat.apply_alter(t, parse_one("ALTER TABLE people_t SET PRIVACY UNIT id"))
    with pytest.raises(ldpql.CatalogError, match="privacy unit"):
        cat.apply_alter(unit, parse_one("ALTER TABLE people_t SET COLUMN id PRIVATE"))
    duck.execute("CREATE TABLE dup AS SELECT range % 7 AS uid, range AS x FROM range(40)")
    d = declare(duck, "CREATE TABLE d FROM dup (uid PUBLIC, x PRIVATE BETWEEN 0 AND 50)")
    with pytest.raises(ldpql.CatalogError, match="more than one row"):
        cat.apply_alter(d, parse_one("ALTER TABLE d SET PRIVACY UNIT uid"), duck=duck)
