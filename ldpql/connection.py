"""The Python API (DESIGN §3): ``connect()`` and ``Connection``, and the pipeline that runs one statement.

    text --parse--> AST --plan(catalog, public facts, ledger)--> Plan --reserve--> execute --> Result

:meth:`Connection._select` is that pipeline; each stage is logged at DEBUG.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Any, Callable

import duckdb
import numpy as np

from ldpql import catalog as cat
from ldpql.errors import CatalogError, PlanError
from ldpql.executor import Cell, Executor, max_spend, public_cells
from ldpql.grammar import ast, parse
from ldpql.ledger import Ledger
from ldpql.planner import Plan, PublicFacts, check_option, check_public, plan
from ldpql.reporting import evaluation_result, select_result
from ldpql.result import Result

log = logging.getLogger("ldpql")
Progress = Callable[[float, str], None]


def connect(ledger: str | None = None, seed: int | None = None, evaluation: bool = False,
            database: str | None = None, progress: Progress | None = None) -> "Connection":
    """Open a connection.

    Args:
        ledger: path of a persistent budget ledger (SQLite; created if missing). None keeps it in memory.
        seed: makes every statement's noise reproducible (statement i draws from a stream derived from it).
        evaluation: allow EPSILON INF (noise off) and EVALUATE, which report true answers: never for releases.
        database: a DuckDB database file whose tables CREATE TABLE ... FROM may name.
        progress: called as progress(fraction, message) while a statement runs.

    >>> import ldpql
    >>> con = ldpql.connect(seed=7)
    >>> con.sql("SHOW TABLES").fetchall()
    []
    """
    return Connection(ledger, seed, evaluation, database, progress)


class Connection:
    """A session: DuckDB for data, a catalog of declared tables, a budget ledger and session settings."""

    def __init__(self, ledger: str | None = None, seed: int | None = None, evaluation: bool = False,
                 database: str | None = None, progress: Progress | None = None):
        try:
            self.duck = duckdb.connect(database or ":memory:")
            self.duck.execute("SET enable_progress_bar = false")  # ldpql reports progress itself
            # scans keep the source's row order, so a row's position is the same user in every round
            self.duck.execute("SET preserve_insertion_order = true")
        except duckdb.Error as e:
            raise CatalogError(f"cannot open the DuckDB database {database!r}: {str(e).splitlines()[0]}") from None
        self.catalog = cat.Catalog()
        self.ledger = Ledger(ledger)
        self.seed = seed
        self.evaluation = evaluation
        self.progress = progress
        self.session: dict[str, Any] = {}
        self._statements = 0

    # -- the public verbs --------------------------------------------------------------------------------------
    def sql(self, text: str) -> Result:
        """Run one or more ';'-separated statements; returns the result of the last one."""
        statements = parse(text)
        if not statements:
            raise PlanError("there is no statement to run", hint="write a statement, e.g. SHOW TABLES")
        result = None
        for stmt in statements:
            result = self.run(stmt, text)
        return result

    def run(self, stmt: ast.Statement, text: str = "") -> Result:
        """Run one parsed statement; ``text`` is the script it came from (for carets and the ledger)."""
        handler = getattr(self, "_" + _snake(type(stmt).__name__))
        self._statements += 1
        return handler(stmt, text or stmt.sql())

    def explain(self, text: str) -> str:
        """The plan of a SELECT (what EXPLAIN prints); reads no private value, spends nothing."""
        stmt = parse(text)[0]
        select = stmt.select if isinstance(stmt, (ast.Explain, ast.Evaluate)) else stmt
        if not isinstance(select, ast.Select):
            raise PlanError("EXPLAIN takes a SELECT statement")
        return str(self._plan(select, text)[0])

    def register(self, name: str, data: Any, private: dict[str, Any] | None = None, public: list[str] | None = None,
                 budget: float | None = None, delta: float = 0.0, privacy_unit: str | None = None,
                 rounds: int | None = None) -> None:
        """Declare a pandas DataFrame or Arrow table as table ``name``.

        ``private`` maps column -> domain: ``(lo, hi)`` for a numeric range, a list of categories, ``bool``,
        or a dict ``{"between": (lo, hi), "integer": True, "default": v}``. Columns not named stay private
        without a domain (unusable in aggregates); ``public`` lists the public ones.
        """
        view = f"__ldpql_frame_{name}"
        try:
            self.duck.register(view, data)
        except Exception as e:  # DuckDB raises several types for unsupported objects
            raise CatalogError(f"cannot register {type(data).__name__} as a table: {str(e).splitlines()[0]}",
                               hint="pass a pandas DataFrame or a pyarrow Table") from None
        defs = tuple(_column_def(c, d) for c, d in (private or {}).items()) + \
            tuple(ast.ColumnDef(c, True, True) for c in (public or []))
        stmt = ast.CreateTable(name, ast.Source("table", view), defs, privacy_unit, budget, delta or None, rounds)
        schema = cat.describe_source(ast.quote_name(view), None, self.duck)
        table = cat.make_table(name, "frame", f"<{type(data).__name__}>", ast.quote_name(view), f"frame:{name}",
                               schema, stmt, self.duck)
        self._declare(table, stmt, f"register {name}")

    def tables(self) -> list[str]:
        """The names of the declared tables."""
        return [t.name for t in self.catalog.tables.values()]

    def columns(self, table: str) -> list[tuple[str, str, bool, str | None]]:
        """(name, DuckDB type, public?, declared domain or None) of every column of ``table``."""
        t = self.catalog.get(table)
        return [(c.name, c.dtype, c.public, c.domain.describe() if c.domain else None) for c in t.columns.values()]

    def remaining_budget(self, table: str) -> float:
        """The ε that remains for the most-charged user of ``table``."""
        t = self.catalog.get(table)
        return self.ledger.remaining(t.source_id, None, self._max_spend(t))

    def close(self) -> None:
        """Close DuckDB and the ledger."""
        self.duck.close()
        self.ledger.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- statements --------------------------------------------------------------------------------------------
    def _create_table(self, stmt: ast.CreateTable, text: str) -> Result:
        table = cat.build_table(stmt, self.duck, text)
        self._declare(table, stmt, _span(text, stmt))
        private = sum(1 for c in table.columns.values() if not c.public)
        return Result([], [], message=f"created table {table.name}: {len(table.columns)} columns ({private} private), "
                                      f"budget ε = {table.budget_epsilon:g} per user")

    def _declare(self, table: cat.Table, stmt: ast.CreateTable, text: str) -> None:
        held = self.ledger.budget(table.source_id)
        if stmt.budget_epsilon is None and held is not None:  # keep the ledger's budget when none is declared
            table.budget_epsilon, table.budget_delta = held
        self.ledger.declare(table.source_id, table.name, table.budget_epsilon, table.budget_delta, text)
        self.catalog.add(table)

    def _select(self, stmt: ast.Select, text: str) -> Result:
        started = time.monotonic()
        log.debug("ast: %r", stmt)
        p, cells = self._plan(stmt, text)
        log.debug("plan:\n%s", p)
        ex = Executor(self.duck, self.progress)
        tasks = ex.start(p, cells) if p.n else []   # a protocol that refuses its group raises here: nothing spent
        if p.n == 0 or math.isinf(p.epsilon):
            return self._execute(p, cells, ex, tasks, None, started)
        charge = self.ledger.reserve(p.table.source_id, p.table.name, _span(text, stmt), p.where_sql, p.epsilon,
                                     self._max_spend(p.table), users=p.n, epsilon0=p.epsilon0,
                                     delta=p.shuffle_delta)
        log.debug("reserved charge %d: ε = %g", charge, p.epsilon)
        try:
            result = self._execute(p, cells, ex, tasks, charge, started)
        except BaseException:  # KeyboardInterrupt too: nothing was released, so nothing is spent
            self.ledger.refund(charge)
            raise
        self.ledger.commit(charge)
        return result

    def _plan(self, stmt: ast.Select, text: str) -> tuple[Plan, list[Cell]]:
        table = self.catalog.get(stmt.table, stmt.pos, text)
        group = [table.column(c.name, c.pos, text).name for c in stmt.group_by]
        where = stmt.where.sql() if stmt.where is not None else None
        check_public(stmt, table, text)  # before DuckDB ever evaluates the clauses
        cells = public_cells(self.duck, table, where, group)
        remaining = self.ledger.remaining(table.source_id, where, self._max_spend(table))
        facts = PublicFacts(sum(c.n for c in cells), len(cells), remaining,
                            self.ledger.remaining_delta(table.source_id))
        return plan(stmt, table, facts, self.session, text, self.evaluation), cells

    def _execute(self, p: Plan, cells: list[Cell], ex: Executor, tasks: list, charge: int | None,
                 started: float) -> Result:
        estimates = ex.finish(tasks, self._entropy(p, charge=charge)) if p.n else {}
        spent = 0.0 if (p.n == 0 or math.isinf(p.epsilon)) else p.epsilon
        left = None if charge is None else self.ledger.remaining(p.table.source_id, None, self._max_spend(p.table))
        return select_result(p, cells, estimates, spent, left, time.monotonic() - started)

    def _entropy(self, p: Plan, offset: int = 0, charge: int | None = None) -> int:
        """The statement's randomness. A seed makes it reproducible, but two charged statements never share
        noise: their ledger charge ids (unique in the ledger, persistent or not) are mixed in, since summing
        their ε assumes independent randomness."""
        if p.seed is None and self.seed is None:
            return int(np.random.SeedSequence().entropy) + offset
        key = (offset,) if charge is None else (offset, charge)
        if p.seed is not None:
            return p.seed + offset if charge is None else \
                int(np.random.SeedSequence(p.seed, spawn_key=key).generate_state(1)[0])
        return int(np.random.SeedSequence(self.seed, spawn_key=(self._statements, *key)).generate_state(1)[0])

    def _explain(self, stmt: ast.Explain, text: str) -> Result:
        p, _ = self._plan(stmt.select, text)
        return Result(["plan"], [(line,) for line in str(p).splitlines()], plan=p,
                      footer="nothing was run and no budget was spent")

    def _evaluate(self, stmt: ast.Evaluate, text: str) -> Result:
        if not self.evaluation:
            raise PlanError("EVALUATE reveals true answers and is only allowed in evaluation mode",
                            hint="open the connection with ldpql.connect(evaluation=True), or run ldpql --evaluate")
        if stmt.repeat < 1:
            raise PlanError("REPEAT must be at least 1")
        p, cells = self._plan(stmt.select, text)
        ex = Executor(self.duck, self.progress)
        ex.cache = {}
        exact_plan = dataclasses.replace(p, aggregates=[dataclasses.replace(a, epsilon=math.inf, users=(0.0, 1.0))
                                                        for a in p.aggregates], epsilon=math.inf)
        truth = ex.run(exact_plan, cells, 0) if p.n else {}
        runs = [ex.run(p, cells, self._entropy(p, r)) if p.n else {} for r in range(stmt.repeat)]
        return evaluation_result(p, cells, truth, runs)

    def _show_tables(self, stmt: ast.ShowTables, text: str) -> Result:
        rows = [(t.name, t.source_kind, t.source_text, t.budget_epsilon, t.budget_delta)
                for t in self.catalog.tables.values()]
        return Result(["name", "kind", "source", "budget_epsilon", "budget_delta"], rows)

    def _describe(self, stmt: ast.Describe, text: str) -> Result:
        t = self.catalog.get(stmt.table, stmt.pos, text)
        rows = [(c.name, c.dtype, "public" if c.public else "private",
                 c.domain.describe() if c.domain else ("privacy unit" if c.name == t.privacy_unit else
                                                       ("-" if c.public else "no domain: not usable in aggregates")))
                for c in t.columns.values()]
        note = (f"source {t.source_id}; privacy unit {t.privacy_unit or 'one row per user'}; budget ε = "
                f"{t.budget_epsilon:g}" + (f", δ = {t.budget_delta:g}" if t.budget_delta else "") +
                (f"; at most {t.rounds} round(s)" if t.rounds else ""))
        return Result(["column", "type", "visibility", "domain"], rows, notes=[note])

    def _show_budget(self, stmt: ast.ShowBudget, text: str) -> Result:
        tables = [self.catalog.get(stmt.table, stmt.pos, text)] if stmt.table else list(self.catalog.tables.values())
        rows = []
        for t in tables:
            spent = self._max_spend(t)(self.ledger.active(t.source_id), None)
            queries = sum(1 for c in self.ledger.charges(t.source_id) if c.kind == "query" and c.status == "committed")
            rows.append((t.name, t.budget_epsilon, spent, t.budget_epsilon - spent, t.budget_delta, queries))
        return Result(["table", "budget_epsilon", "spent_epsilon", "remaining_epsilon", "budget_delta", "statements"],
                      rows, notes=["spent = the most-charged user's total"])

    def _show_ledger(self, stmt: ast.ShowLedger, text: str) -> Result:
        source = self.catalog.get(stmt.table, stmt.pos, text).source_id if stmt.table else None
        rows = [(c.id, c.time, c.kind, c.table_name, c.statement, c.predicate or "all users", c.epsilon, c.epsilon0,
                 c.delta, c.status) for c in self.ledger.charges(source)]
        return Result(["id", "time", "kind", "table", "statement", "users", "epsilon", "epsilon0", "delta", "status"],
                      rows, notes=[f"ledger: {self.ledger.path}"])

    def _use(self, stmt: ast.Use, text: str) -> Result:
        self.catalog.use(stmt.table)
        return Result([], [], message=f"using {stmt.table}")

    def _set_option(self, stmt: ast.SetOption, text: str) -> Result:
        check_option(stmt.name, stmt.value.value, stmt, text)
        self.session[stmt.name] = stmt.value.value
        return Result([], [], message=f"{stmt.name} = {stmt.value.sql()}")

    def _alter_budget(self, stmt: ast.AlterBudget, text: str) -> Result:
        t = self.catalog.get(stmt.table, stmt.pos, text)
        cat.check_budget(stmt.epsilon, stmt.delta or 0.0)
        self.ledger.alter(t.source_id, t.name, float(stmt.epsilon), float(stmt.delta or 0.0), _span(text, stmt))
        t.budget_epsilon, t.budget_delta = float(stmt.epsilon), float(stmt.delta or 0.0)
        return Result([], [], message=f"budget of {t.name} set to ε = {stmt.epsilon:g} per user (logged)")

    def _drop_table(self, stmt: ast.DropTable, text: str) -> Result:
        t = self.catalog.drop(stmt.table)
        return Result([], [], message=f"dropped {t.name} (its spend stays in the ledger)")

    def _max_spend(self, table: cat.Table):
        return lambda charges, predicate: max_spend(self.duck, table, charges, predicate)


def _column_def(name: str, spec: Any) -> ast.ColumnDef:
    if spec is bool:
        return ast.ColumnDef(name, False, True, ast.BooleanDomain())
    if isinstance(spec, dict):
        lo, hi = spec["between"]
        default = ast.Literal(spec["default"]) if "default" in spec else None
        return ast.ColumnDef(name, False, True, ast.RangeDomain(lo, hi, bool(spec.get("integer"))), default)
    if isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(v, (int, float)) for v in spec):
        return ast.ColumnDef(name, False, True, ast.RangeDomain(spec[0], spec[1]))
    if isinstance(spec, (list, set, tuple)):
        return ast.ColumnDef(name, False, True, ast.SetDomain(tuple(ast.Literal(v) for v in spec)))
    if spec is None:
        return ast.ColumnDef(name, False, True)
    raise CatalogError(f"cannot read the domain of `{name}`: {spec!r}",
                       hint="use (lo, hi), a list of categories, bool, or {'between': (lo, hi), 'integer': True}")


def _snake(name: str) -> str:
    return "".join("_" + ch.lower() if ch.isupper() else ch for ch in name).lstrip("_")


def _span(text: str, stmt: ast.Statement) -> str:
    pos = stmt.pos
    return text[pos.start:pos.end] if pos.end > pos.start else stmt.sql()
