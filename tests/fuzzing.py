"""Generators and properties for fuzzing the public API (issue #10, class 13): only ``ldpql.Error`` escapes.

Shared by ``tests/system/test_fuzz.py`` (a few thousand derandomized examples in the suite) and
``scripts/fuzz.py`` (the long run). The statement strategies follow the shapes of ``ldpql/grammar/ldpql.lark``;
the properties are those of DESIGN §3 and §4.5:

- no exception but an ``ldpql.Error`` subclass escapes (KeyboardInterrupt aside);
- a statement that raised spent nothing: the ledger's rows and every table's remaining budget are unchanged;
- the ledger stays consistent: no row is left 'reserved', no remaining budget is negative, and none grows
  except by an owner's ALTER.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

import ldpql
import ldpql.grammar

# ---- the fuzzed table -----------------------------------------------------------------------------------------
ROWS = 300
BUDGET = 1000.0  # large enough that EPSILON 800 passes the budget check and reaches the mechanisms
PRIVATE = {"x": (0, 10), "k": {"between": (0, 20), "integer": True}, "c": ["a", "b", "c"], "b": bool}
PUBLIC = ["g", "h"]
COLUMNS = ["x", "k", "c", "b", "g", "h", "id"]


def fuzz_table(n: int = ROWS) -> pa.Table:
    """A small table: private x (float), k (int), c (category, some outside the domain), b (bool); public g, h."""
    rng = np.random.default_rng(5)
    return pa.table({"x": rng.uniform(0, 10, n), "k": rng.integers(0, 20, n), "c": rng.choice(list("abcz"), n),
                     "b": rng.random(n) < 0.3, "g": rng.choice(["n", "s", "e"], n), "h": rng.integers(0, 5, n),
                     "id": np.arange(n)})


TABLE = fuzz_table()


def fresh_connection(evaluation: bool = True) -> ldpql.Connection:
    """An in-memory connection with table ``t`` declared over :data:`TABLE`."""
    con = ldpql.connect(seed=7, evaluation=True) if evaluation else ldpql.connect()
    con.register("t", TABLE, private=PRIVATE, public=PUBLIC, budget=BUDGET, privacy_unit="id")
    return con


# ---- the properties -------------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """What a failed statement must leave as it was: the ledger's rows and each table's remaining budget."""

    charges: list
    remaining: dict[str, float | None]

    @classmethod
    def of(cls, con: ldpql.Connection) -> "Snapshot":
        return cls(con.ledger.charges(), {t: _remaining(con, t) for t in con.tables()})


def _remaining(con: ldpql.Connection, table: str) -> float | None:
    try:
        return con.remaining_budget(table)
    except ldpql.Error:  # the table's source may be gone; the property then compares None with None
        return None


class Violation(AssertionError):
    """A property did not hold; ``kind`` names which (for the long run's summary)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


def escaped(e: BaseException) -> Violation:
    """The Violation for an exception outside the contract, named by its type and where it was raised."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename.split('site-packages/')[-1]}:{tb.tb_lineno}" if tb else "?"
    return Violation(f"escape {type(e).__name__} at {where.split('/ldpql/')[-1]}", f"{type(e).__name__}: {e}"[:300])


def call(action: Callable[[], Any]) -> tuple[Any, ldpql.Error | None]:
    """Run ``action``: (its value, None), (None, the ldpql.Error it raised), or a Violation for anything else."""
    try:
        return action(), None
    except ldpql.Error as e:
        return None, e
    except (KeyboardInterrupt, Violation):
        raise
    except BaseException as e:  # noqa: BLE001  (the very thing fuzzing looks for)
        raise escaped(e) from e


def check_ledger(con: ldpql.Connection, before: Snapshot, altered: bool) -> None:
    """No 'reserved' row; no remaining budget negative or grown, unless the statement was an owner's ALTER."""
    after = Snapshot.of(con)
    reserved = [c for c in after.charges if c.status == "reserved"]
    if reserved:
        raise Violation("reserved row left", repr(reserved[0]))
    for table, left in after.remaining.items():
        if not altered and left is not None and left < -1e-9:  # an owner may lower a budget below the spend
            raise Violation("negative remaining budget", f"{table}: {left}")
        old = before.remaining.get(table)
        if not altered and left is not None and old is not None and left > old + 1e-9:
            raise Violation("remaining budget grew", f"{table}: {old} -> {left}")


def check_statement(con: ldpql.Connection, text: Any) -> ldpql.Error | None:
    """Run ``con.sql(text)`` under every property; the ldpql.Error it raised, or None."""
    before = Snapshot.of(con)
    result, error = call(lambda: _consume(con.sql(text)))
    if error is not None and _count(text) <= 1:  # in a script, the statements before the failing one ran
        after = Snapshot.of(con)
        if after.charges != before.charges:
            raise Violation("failed statement changed the ledger", f"{error.__class__.__name__}: "
                            f"{len(before.charges)} -> {len(after.charges)} rows, last {after.charges[-1:]}")
        if after.remaining != before.remaining:
            raise Violation("failed statement spent budget", f"{before.remaining} -> {after.remaining}")
    check_ledger(con, before, altered=isinstance(text, str) and "ALTER" in text.upper())
    return error


def _count(text: Any) -> int:
    """How many statements ``text`` holds (0 when it does not parse)."""
    try:
        return len(ldpql.grammar.parse(text))
    except ldpql.Error:
        return 0


def _consume(result: ldpql.Result) -> ldpql.Result:
    """Read a result through every accessor, as a user would (each may raise only ldpql.Error)."""
    if result is not None:
        result.fetchall(), result.intervals(), result.render("table"), result.render("json"), result.render("csv")
        while result.fetchone() is not None:
            pass
    return result


MAX_CHARGES = 8
MAX_PREDICATES = 2000  # characters of WHERE over all charges: each is evaluated per statement


@dataclass
class Session:
    """A connection reused across examples (a fresh one costs ~35 ms), rebuilt when a statement changed what
    the next example may assume (the declared tables, the budget, the session settings), and after
    MAX_CHARGES ledger rows or MAX_PREDICATES characters of their WHERE clauses: every statement recomputes
    each user's spend over all of them."""

    evaluation: bool = True
    con: ldpql.Connection | None = None
    built: int = field(default=0)

    def get(self) -> ldpql.Connection:
        """The shared connection, fresh if the last example left it changed."""
        if self.con is None or _stale(self.con):
            if self.con is not None:
                self.con.close()
            self.con, self.built = fresh_connection(self.evaluation), self.built + 1
        return self.con


def _stale(con: ldpql.Connection) -> bool:
    charges = con.ledger.charges()
    if con.tables() != ["t"] or con.session or len(charges) > MAX_CHARGES or \
            sum(len(c.predicate or "") for c in charges) > MAX_PREDICATES:
        return True
    left = _remaining(con, "t")
    return left is None or left < BUDGET / 2 or con.catalog.get("t").budget_epsilon != BUDGET


# ---- statement strategies -------------------------------------------------------------------------------------
AGGREGATES = sorted({name for name, _, _ in ldpql.functions()} | {"LDP_VARIANCE", "COUNT", "LDP_NOPE"})
NUMBERS = ["0", "1", "-1", "0.5", "2", "3", "1e-300", "1e-5", "1e308", "1e309", "1e999", "-1e999", "400", "500",
           "709", "710", "711", "800", "1000", "1001", "123456789012345678901234567890", "9" * 400, "-0", "1e-320",
           "nan", "NaN", "inf", "+5", ".5", "5."]
STRINGS = ["'a'", "'b'", "'z'", "''", "'n'", "'it''s'", "'local'", "'shuffle'", "'auto'", "'exact'", "'per_user'",
           "'grr'", "'oue'", "'olh'", "'duchi'", "'piecewise'", "'hadamard'", "'simplex'", "'none'", "'padding'",
           "'\u00e9\u4e2d'", "'\ud800'"]
LITERALS = NUMBERS + STRINGS + ["TRUE", "FALSE", "NULL"]
EPSILONS = ["1", "0.5", "2", "0", "-1", "1e-300", "1e-5", "1e308", "1e999", "INF", "inf", "-INF", "NaN", "400",
            "500", "709", "710", "711", "800", "999", "1000", "1001", "123456789012345678901234567890", "9" * 400]
NAMES = COLUMNS + ["nope", '"x"', '"select"', "epsilon", "t", "X", "_"]

literal = st.sampled_from(LITERALS)
column = st.sampled_from(NAMES)
operand = st.one_of(column, literal)


def predicate() -> st.SearchStrategy[str]:
    """One comparison, IN, BETWEEN, IS NULL, or a bare operand."""
    return st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]),
                  operand),
        st.builds(lambda a, n, vs: f"{a} {n}IN ({', '.join(vs)})", operand, st.sampled_from(["", "NOT "]),
                  st.lists(literal, min_size=1, max_size=4)),
        st.builds(lambda a, n, lo, hi: f"{a} {n}BETWEEN {lo} AND {hi}", operand, st.sampled_from(["", "NOT "]),
                  operand, operand),
        st.builds(lambda a, n: f"{a} IS {n}NULL", operand, st.sampled_from(["", "NOT "])),
        operand)


def bool_expr(longest: int = 600) -> st.SearchStrategy[str]:
    """WHERE trees: random AND/OR/NOT/parentheses, chains of up to ``longest`` ORs or ANDs (issue #10 found
    RecursionError from 500), and nesting up to 400 deep (the parser's limit is 100)."""
    tree = st.recursive(predicate(), lambda inner: st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(["AND", "OR", "and", "or"]), inner),
        st.builds(lambda a: f"NOT {a}", inner), st.builds(lambda a: f"({a})", inner)), max_leaves=8)
    chain = st.builds(lambda n, op: f" {op} ".join(f"h = {i % 7}" if i % 2 else f"g = 'v{i}'" for i in range(n)),
                      st.integers(1, longest), st.sampled_from(["OR", "AND"]))
    deep = st.builds(lambda n, wrap, p: wrap[0] * n + p + wrap[1] * n, st.integers(1, 400),
                     st.sampled_from([("NOT ", ""), ("(", ")"), ("NOT (", ")"), ("(g = 'n' OR ", ")")]), predicate())
    return st.one_of(tree, tree, chain, deep)


def named_arg(aggregate: str) -> st.SearchStrategy[str]:
    names = [n for n, _ in ldpql.function_arguments(aggregate)] + ["nope", "epsilon"]
    return st.builds(lambda n, v: f"{n} => {v}", st.sampled_from(names), literal)


VALID_CALLS = ["LDP_MEAN(x)", "LDP_AVG(k)", "LDP_SUM(x)", "LDP_MIN(x)", "LDP_MAX(k)", "LDP_MEDIAN(x)",
               "LDP_QUANTILE(x, 0.9)", "LDP_COUNT(b)", "LDP_COUNT(h > 2 AND b)", "LDP_HISTOGRAM(c)",
               "LDP_FREQUENCY(b)", "LDP_HISTOGRAM(c, b)", "LDP_MODE(c)", "LDP_TOPK(c)", "LDP_COUNT_DISTINCT(c)",
               "LDP_MEAN(x, epsilon => 0.3)", "LDP_HISTOGRAM(c, mechanism => 'oue')", "COUNT(*)"]


def aggregate_call() -> st.SearchStrategy[str]:
    """A call that plans (half the time, so that huge ε reaches the mechanisms) or a random one."""
    return st.one_of(st.sampled_from(VALID_CALLS), random_call())


@st.composite
def random_call(draw) -> str:
    """``NAME(args, name => value)`` or ``NAME(*)``; arguments are columns, literals or expressions."""
    name = draw(st.sampled_from(AGGREGATES))
    if draw(st.integers(0, 19)) == 0:
        return f"{name}(*)"
    args = draw(st.lists(st.one_of(column, column, literal, predicate()), min_size=0, max_size=3))
    named = draw(st.lists(named_arg(name), max_size=3))
    alias = draw(st.sampled_from(["", "", " AS a", ' AS "weird name"', " AS epsilon"]))
    return f"{name}({', '.join(args + named)}){alias}"


def option() -> st.SearchStrategy[str]:
    keys = list(ldpql.options()) + ["nope", "Seed"]
    return st.builds(lambda k, sep, v: f"{k} {sep} {v}", st.sampled_from(keys), st.sampled_from(["=", "=>"]), literal)


@st.composite
def select(draw) -> str:
    """A SELECT in the grammar's shape, every clause optional, EPSILON early, late, twice or missing."""
    items = draw(st.lists(st.one_of(aggregate_call(), aggregate_call(), column), min_size=1, max_size=3))
    eps = draw(st.builds(lambda e, d: f" EPSILON {e}" + (f" DELTA {d}" if d else ""), st.sampled_from(EPSILONS),
                         st.sampled_from(["", "", "0", "1e-8", "-1", "1", "2"])))
    where = draw(st.one_of(st.just(""), bool_expr().map(lambda w: f" WHERE {w}")))
    group = draw(st.sampled_from(["", "", " GROUP BY g", " GROUP BY g, h", " GROUP BY x", " GROUP BY nope"]))
    table = draw(st.sampled_from([" FROM t", " FROM t", " FROM t", "", " FROM nope", ' FROM "t"']))
    opts = draw(st.lists(option(), max_size=3))
    opts_text = f" OPTIONS ({', '.join(opts)})" if opts else ""
    early, late = draw(st.sampled_from([(eps, ""), ("", eps), ("", eps), (eps, eps), ("", "")]))
    return f"SELECT {', '.join(items)}{early}{table}{where}{group}{late}{opts_text}"


def domain() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda i, lo, hi: f"{i}BETWEEN {lo} AND {hi}", st.sampled_from(["", "INTEGER "]),
                  st.sampled_from(NUMBERS), st.sampled_from(NUMBERS)),
        st.builds(lambda vs: f"IN ({', '.join(vs)})", st.lists(literal, min_size=1, max_size=5)),
        st.just("BOOLEAN"), st.just(""))


@st.composite
def create_table(draw, path: str = "'/nonexistent/fuzz.parquet'") -> str:
    """CREATE TABLE over a file, a missing file or a query, with random columns, domains and clauses."""
    source = draw(st.sampled_from([path, path, "'/nonexistent/*.csv'", "(SELECT 1 AS x)", "t", "nope.main.t"]))
    cols = draw(st.lists(st.builds(lambda c, v, d: f"{c} {v} {d}".strip(), st.sampled_from(COLUMNS + ["zz"]),
                                   st.sampled_from(["PRIVATE", "PUBLIC", ""]), domain()), max_size=5))
    clauses = draw(st.lists(st.sampled_from(
        ["PRIVACY UNIT id", "PRIVACY UNIT g", "PRIVACY UNIT nope", "ROUNDS 1", "ROUNDS 0", "ROUNDS " + "9" * 20]
        + [f"BUDGET EPSILON {e}" for e in EPSILONS[:12]] + ["BUDGET EPSILON 4 DELTA 1e-6", "BUDGET EPSILON 4 DELTA 2"]),
        max_size=3))
    name = draw(st.sampled_from(["t2", "t", '"new table"', "epsilon"]))
    return f"CREATE TABLE {name} FROM {source}" + (f" ({', '.join(cols)})" if cols else "") + " " + " ".join(clauses)


def other_statement() -> st.SearchStrategy[str]:
    """SHOW / DESCRIBE / SET / ALTER / DROP / USE / EXPLAIN / EVALUATE."""
    name = st.sampled_from(["t", "nope", '"t"', "epsilon", ""])
    return st.one_of(
        st.sampled_from(["SHOW TABLES", "SHOW BUDGET", "SHOW BUDGET t", "SHOW LEDGER", "SHOW LEDGER t", "SHOW"]),
        st.builds(lambda n: f"DESCRIBE {n}", name), st.builds(lambda n: f"DESC {n}", name),
        st.builds(lambda n: f"USE {n}", name), st.builds(lambda n: f"DROP TABLE {n}", name),
        st.builds(lambda o: f"SET {o.replace('=>', '=')}", option()),
        st.builds(lambda n, e, d: f"ALTER TABLE {n} SET BUDGET EPSILON {e}{d}", name, st.sampled_from(EPSILONS),
                  st.sampled_from(["", " DELTA 0", " DELTA 1e-6", " DELTA -1", " DELTA 5"])),
        st.builds(lambda s: f"EXPLAIN {s}", select()),
        st.builds(lambda s, r: f"EVALUATE {s}{r}", select(), st.sampled_from(["", " REPEAT 1", " REPEAT 2", " REPEAT 0",
                                                                             " REPEAT -1", " REPEAT " + "9" * 30])))


def statement(path: str = "'/nonexistent/fuzz.parquet'") -> st.SearchStrategy[str]:
    """Any statement in the grammar's shapes, sometimes two in one script."""
    one = st.one_of(select(), select(), select(), other_statement(), create_table(path))
    return st.one_of(one, one, one, st.builds(lambda a, b: f"{a}; {b}", one, one))


# REPEAT's count is clamped by the harness: EVALUATE REPEAT 10^30 is a denial of service by design, not an escape.
EDIT_ALPHABET = string.ascii_letters + string.digits + " ();,.'\"=<>!*-+/\n\t_\u00e9\x00"


@st.composite
def mutated(draw, base: st.SearchStrategy[str]) -> str:
    """A valid statement with one to four characters inserted, deleted or replaced."""
    text = draw(base)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op, ch = draw(st.sampled_from(["insert", "delete", "replace"])), draw(st.sampled_from(EDIT_ALPHABET))
        text = text[:i] + ch + text[i:] if op == "insert" else text[:i] + ("" if op == "delete" else ch) + text[i + 1:]
    return text


def any_text() -> st.SearchStrategy[str]:
    """Arbitrary text, including surrogates, NULs and keyword soup."""
    words = st.sampled_from(list(ldpql.keywords()) + AGGREGATES + NAMES + LITERALS + list("(),;=*<>") + ["=>"])
    with_surrogates = st.one_of(st.characters(), st.characters(categories=["Cs"]))
    return st.one_of(st.text(max_size=80), st.text(with_surrogates, max_size=40),
                     st.lists(words, max_size=25).map(" ".join))


def clamp_repeat(text: str) -> str:
    """Cap EVALUATE ... REPEAT n at 3 so that an example stays fast."""
    import re

    return re.sub(r"(?i)(REPEAT\s+)(\d{2,})", r"\g<1>3", text)


# ---- API argument strategies ----------------------------------------------------------------------------------
ODD = [None, True, False, 0, 1, -1, 2**70, -(2**70), 1.5, math.nan, math.inf, -math.inf, "", "abc", "1", b"x",
       [], [1], {}, {"a": 1}, (0,), object(), 1e308, -0.0, "t"]


def odd(*extra: Any) -> st.SearchStrategy[Any]:
    """A value of a wrong type or an edge value, or one of ``extra``."""
    return st.sampled_from(ODD + list(extra))


DOMAINS = [(0, 10), (10, 0), (0, 0), (math.nan, 1), (0, math.inf), (-math.inf, 0), (0, 1e308), (-1e308, 1e308),
           ("a", "b"), (0,), (0, 1, 2), [], ["a"], ["a", "a"], [1, "a"], [None], [math.nan], bool, int, None,
           {"between": (0, 20), "integer": True}, {"between": 5}, {"between": (0, 1), "integer": "x"}, {},
           {"between": (0, 1), "default": "x"}, {"between": (0, 1), "default": 2}, "x", 5, b"ab"]


def private_spec() -> st.SearchStrategy[Any]:
    cols = st.sampled_from(COLUMNS + ["nope", "", "X"])
    return st.one_of(st.dictionaries(cols, st.sampled_from(DOMAINS), max_size=4), odd())


def register_kwargs() -> st.SearchStrategy[dict]:
    """Keyword arguments of ``Connection.register``: right and wrong types, edge values."""
    return st.fixed_dictionaries({}, optional={
        "private": private_spec(),
        "public": st.one_of(st.lists(st.sampled_from(COLUMNS + ["nope", ""]), max_size=3), odd("g")),
        "budget": odd(4.0, 1e-9, 1e9, -4.0, 800.0),
        "delta": odd(0.0, 1e-6, 0.5, 2.0, -1e-6),
        "privacy_unit": odd("id", "g", "x", "nope"),
        "rounds": odd(1, 2, 0, -3, 10**30),
    })


def connect_kwargs(tmp: str) -> st.SearchStrategy[dict]:
    """Keyword arguments of ``ldpql.connect``; ``tmp`` is a writable directory."""
    ledgers = [f"{tmp}/l.ldpql", ":memory:", tmp, "/nonexistent/dir/l.ldpql", f"{tmp}/readonly.ldpql",
               f"{tmp}/notsqlite.ldpql"]
    # paths only under tmp (or absolute and missing): an odd str such as "abc" would create ./abc
    not_text = [v for v in ODD if not isinstance(v, (str, bytes))]
    databases = [f"{tmp}/notsqlite.ldpql", "/nonexistent/x.duckdb", f"{tmp}/d.duckdb", f"{tmp}/"]
    return st.fixed_dictionaries({}, optional={
        "ledger": st.sampled_from(not_text + ledgers), "seed": odd(7, 2**64 - 1, 2**64, -5),
        "evaluation": odd(), "database": st.sampled_from(not_text + databases), "progress": odd(print)})
