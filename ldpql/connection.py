"""The Python API (DESIGN §3): ``connect()`` and ``Connection``, and the pipeline that runs one statement.

    text --parse--> AST --plan(catalog, public facts, ledger)--> Plan --reserve--> execute --> Result

:meth:`Connection._select` is that pipeline; each stage is logged at DEBUG.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import sqlite3
import time
from typing import Any, Callable

import duckdb
import numpy as np

from ldpql import catalog as cat
from ldpql import kvrun
from ldpql.errors import (BudgetExceededError, CatalogError, Error, ExecuteError, InternalError, ParseError, PlanError,
                          PrivacyError)
from ldpql.backends.base import Population, where_expr
from ldpql.backends.duckdb import DuckDBBackend
from ldpql.executor import CANONICAL_USERS, Cell, Executor
from ldpql.grammar import ast, parse
from ldpql.ledger import Ledger
from ldpql.planner import Plan, PublicFacts, check_option, check_public, plan, sweep
from ldpql.reporting import NOT_PRIVATE, evaluation_result, select_result
from ldpql.result import Result

log = logging.getLogger("ldpql")
Progress = Callable[[float, str], None]


ROLES = ("owner", "analyst")
# what an analyst session may run (DESIGN §4.5): queries over the owner's tables, nothing that declares, alters,
# seeds or reveals true answers
ANALYST_STATEMENTS = (ast.Select, ast.Explain, ast.ShowTables, ast.ShowBudget, ast.ShowLedger, ast.Describe, ast.Use,
                      ast.SetOption)


def connect(ledger: str | None = None, seed: int | None = None, evaluation: bool = False,
            database: str | None = None, progress: Progress | None = None, role: str = "owner",
            backend: str = "duckdb", spark: Any = None) -> "Connection":
    """Open a connection.

    Args:
        ledger: path of a persistent budget ledger (SQLite; created if missing), which also holds the owner's
            declarations. None keeps both in memory, for this connection only.
        seed: evaluation mode only: makes every statement's noise reproducible (and so not private).
        evaluation: allow seeds, EPSILON INF (noise off) and EVALUATE, which report true answers or predictable
            noise: never for releases. Owner only; each such statement is a logged ledger row.
        database: a DuckDB database file whose tables CREATE TABLE ... FROM may name.
        progress: called as progress(fraction, message) while a statement runs.
        role: 'owner' (declares and queries; the default) or 'analyst' (queries the owner's declared tables
            from the ledger file, nothing else).
        backend: 'duckdb' (embedded, the default) or 'spark' (Apache Spark reads the data: ``pip install
            'ldpql[spark]'`` and Java 17+).
        spark: with backend='spark': an existing SparkSession, or a master URL ('local[4]', 'spark://host:7077');
            None starts a small local[2] session, stopped by :meth:`Connection.close`.

    >>> import ldpql
    >>> con = ldpql.connect()
    >>> con.sql("SHOW TABLES").fetchall()
    []
    """
    return Connection(ledger, seed, evaluation, database, progress, role, backend, spark)


BACKENDS = ("duckdb", "spark")


def _open_backend(name: str, spark: Any, duck: duckdb.DuckDBPyConnection):
    """The backend that reads the data: DuckDB's (sharing the connection's DuckDB), or Spark's."""
    if name == "duckdb":
        if spark is not None:
            raise PlanError("spark= is for backend='spark'", hint="connect(backend='spark', spark=session)")
        return DuckDBBackend(duck)
    from ldpql.backends.spark import SparkBackend, session_for
    if spark is None or isinstance(spark, str):
        session, started = session_for(spark or "local[2]")
        return SparkBackend(session, owns_session=started)
    if not hasattr(spark, "sparkContext"):
        raise PlanError(f"spark= takes a SparkSession or a master URL, not {type(spark).__name__}")
    return SparkBackend(spark)


def _check_arguments(ledger, seed, evaluation, database, role, progress=None) -> None:
    """Argument types and roles, checked before anything is opened."""
    if progress is not None and not callable(progress):
        raise PlanError(f"progress must be a function progress(fraction, message), not {progress!r}")
    for name, value in (("ledger", ledger), ("database", database)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise CatalogError(f"{name} must be a path, not {type(value).__name__}")
    if role not in ROLES:
        raise PrivacyError(f"role must be 'owner' or 'analyst', not {role!r}")
    if not isinstance(evaluation, bool):
        raise PlanError(f"evaluation must be True or False, not {evaluation!r}")
    if evaluation and role == "analyst":
        raise PrivacyError("evaluation mode reveals true answers and is for the data owner only",
                           hint="open the analyst's session without evaluation=True")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise PlanError(f"seed must be a non-negative integer, not {seed!r}")
        if not evaluation:
            raise PrivacyError(SEED_REFUSAL, hint=SEED_HINT)
    if role == "analyst" and ledger is None:
        raise PrivacyError("an analyst session queries the tables the owner declared in a ledger file",
                           hint="connect(ledger='budget.ldpql', role='analyst')")


class Connection:
    """A session: DuckDB for data, a catalog of declared tables, a budget ledger, a role and session settings.

    Every public method lets only :class:`ldpql.Error` escape (:func:`_guarded`)."""

    def __init__(self, ledger: str | None = None, seed: int | None = None, evaluation: bool = False,
                 database: str | None = None, progress: Progress | None = None, role: str = "owner",
                 backend: str = "duckdb", spark: Any = None):
        _check_arguments(ledger, seed, evaluation, database, role, progress)
        if backend not in BACKENDS:
            raise PlanError(f"backend must be 'duckdb' or 'spark', not {backend!r}")
        self.duck = _open_duckdb(None if database is None else str(database))
        self.backend = _open_backend(backend, spark, self.duck)
        self.database = None if database is None else os.path.abspath(str(database))
        self.catalog = cat.Catalog()
        self.ledger = _guard(Ledger, None if ledger is None else str(ledger))
        self.seed, self.evaluation, self.role = seed, evaluation, role
        self.progress = progress
        self.session: dict[str, Any] = {}
        self._statements = 0
        _guard(self._load_catalog)

    # -- the public verbs --------------------------------------------------------------------------------------
    def sql(self, text: str) -> Result:
        """Run one or more ';'-separated statements; returns the result of the last one."""
        if not isinstance(text, str):
            raise ParseError(f"sql() takes the statement text as a str, not {type(text).__name__}",
                             hint='con.sql("SELECT LDP_MEAN(x) FROM t EPSILON 1")')
        statements = _guard(parse, text)
        if not statements:
            raise PlanError("there is no statement to run", hint="write a statement, e.g. SHOW TABLES")
        result = None
        for stmt in statements:
            result = self.run(stmt, text)
        return result

    def run(self, stmt: ast.Statement, text: str = "") -> Result:
        """Run one parsed statement; ``text`` is the script it came from (for carets and the ledger)."""
        if self.role == "analyst" and not isinstance(stmt, ANALYST_STATEMENTS):
            raise PrivacyError(f"an analyst session cannot run {type(stmt).__name__.upper()} statements",
                               hint="declaring, altering, dropping and evaluating are the data owner's: connect "
                                    "without role='analyst'").with_position(text or stmt.sql(), stmt.pos.line or None,
                                                                           stmt.pos.column or None)
        handler = getattr(self, "_" + _snake(type(stmt).__name__))
        self._statements += 1
        return _guard(handler, stmt, text or stmt.sql())

    def explain(self, text: str) -> str:
        """The plan of a SELECT (what EXPLAIN prints); reads no private value, spends nothing."""
        if not isinstance(text, str):
            raise ParseError(f"explain() takes the statement text as a str, not {type(text).__name__}")
        stmt = _guard(parse, text)
        stmt = stmt[0] if stmt else None
        select = stmt.select if isinstance(stmt, (ast.Explain, ast.Evaluate)) else stmt
        if not isinstance(select, ast.Select):
            raise PlanError("EXPLAIN takes a SELECT statement")
        return _guard(self._explain_text, select, text)

    def _explain_text(self, select: ast.Select, text: str) -> str:
        with self._snapshot(self.catalog.get(select.table, select.pos, text)) as table:
            if table.sparsity is not None:   # several rows per unit: key-value statements only
                return str(kvrun.explain(self, select, text, table).plan)
            return str(self._plan(select, text, table, sweep if select.sweep else plan)[0])

    def register(self, name: str, data: Any, private: dict[str, Any] | None = None, public: list[str] | None = None,
                 budget: float | None = None, delta: float = 0.0, privacy_unit: str | None = None,
                 rounds: int | None = None, sparsity: int | None = None) -> None:
        """Declare a pandas DataFrame or Arrow table as table ``name`` (the data owner's act).

        ``private`` maps column -> domain: ``(lo, hi)`` for a numeric range, a list of categories, ``bool``,
        or a dict ``{"between": (lo, hi), "integer": True, "default": v, "not_null": True, "gaussian_sigma": s or
        (a, b)}`` (``not_null`` declares the column has no NULLs, as ``NOT NULL`` does; without it or a default a
        numeric column is nullable and its means skip NULLs; ``gaussian_sigma`` declares the values Gaussian, as
        ``DISTRIBUTION GAUSSIAN (SIGMA ...)`` does). Columns not named stay private
        without a domain (unusable in aggregates); ``public`` lists the public ones.
        """
        self._owner_only("register")
        if hasattr(data, "sparkSession"):   # (audit5 F11) no row order to key users by; re-evaluated at every read
            raise CatalogError("a Spark DataFrame cannot be registered: it has no fixed rows (Spark evaluates it again "
                               "at every read, in no set order), so its users cannot be keyed or its content bound",
                               hint="write it to parquet (df.write.parquet(path)) and CREATE TABLE from that path")
        _check_register(name, private, public, budget, delta, privacy_unit, rounds)
        _guard(self._register, name, data, private, public, budget, delta, privacy_unit, rounds, sparsity)

    def _register(self, name, data, private, public, budget, delta, privacy_unit, rounds, sparsity=None) -> None:
        view = f"__ldpql_frame_{name}"
        try:
            self.duck.register(view, data)
        except Exception as e:  # DuckDB raises several types for unsupported objects
            raise CatalogError(f"cannot register {type(data).__name__} as a table: {str(e).splitlines()[0]}",
                               hint="pass a pandas DataFrame or a pyarrow Table") from None
        defs = tuple(_column_def(c, d) for c, d in (private or {}).items()) + \
            tuple(ast.ColumnDef(c, True, True) for c in (public or []))
        stmt = ast.CreateTable(name, ast.Source("table", view), defs, privacy_unit, budget, delta or None, rounds,
                               sparsity=sparsity)
        schema = cat.describe_source(ast.quote_name(view), None, self.duck)
        identity = cat.identify(stmt.source, ast.quote_name(view), self.duck, frame=data, key=self.ledger.secret())
        table = cat.make_table(name, "frame", f"<{type(data).__name__}>", ast.quote_name(view), f"frame:{name}",
                               schema, stmt, self.duck, identity=identity)
        if hasattr(self.backend, "register"):   # a backend that reads the frame itself (Spark)
            self.backend.register(name, data)
        self._declare(table, None, f"register {name}")

    def tables(self) -> list[str]:
        """The names of the declared tables."""
        return [t.name for t in self.catalog.tables.values()]

    def columns(self, table: str) -> list[tuple[str, str, bool, str | None]]:
        """(name, DuckDB type, public?, declared domain or None) of every column of ``table``."""
        t = self.catalog.get(table)
        return [(c.name, c.dtype, c.public, c.domain.describe() if c.domain else None) for c in t.columns.values()]

    def remaining_budget(self, table: str) -> float:
        """The ε that remains for the most-charged user of ``table``."""
        if not isinstance(table, str):
            raise CatalogError(f"remaining_budget() takes a table name, not {type(table).__name__}")
        return max(_guard(self.ledger.remaining, self.catalog.get(table).ledger_key), 0.0)

    def close(self) -> None:
        """Close DuckDB, the ledger, and a Spark session the connection started."""
        if hasattr(self.backend, "stop"):
            self.backend.stop()
        self.duck.close()
        self.ledger.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read_script(self, path: str) -> str:
        """The text of a script file to run in this session. An analyst may read ``.sql`` files only, never the
        ledger or a declared source: a parse error would quote the file's lines."""
        real = os.path.realpath(os.path.expanduser(str(path)))
        if self.role == "analyst" and (not real.lower().endswith(".sql") or real in self._protected()):
            raise PrivacyError(f"an analyst session reads .sql scripts only, not {path}")
        try:
            with open(real, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
            raise CatalogError(f"cannot read {path}: {reason}") from None

    def check_output(self, path: str) -> None:
        """Refuse writing results to ``path`` when it is the ledger (or its journal) or a declared source: either
        would erase spend or change data. An analyst may only create new files."""
        real = os.path.realpath(os.path.expanduser(str(path)))
        if real in self._protected() or _is_database(real):
            raise PrivacyError(f"{path} is a budget ledger, a database or a declared source; results cannot be "
                               "written there", hint="write results to a new file")
        if self.role == "analyst" and os.path.exists(real):
            raise PrivacyError(f"{path} exists; an analyst session writes results to new files only")

    def _protected(self) -> set[str]:
        ledger = [] if not self.ledger.persistent else [os.path.realpath(self.ledger.path) + s
                                                         for s in ("", "-wal", "-shm", "-journal")]
        files = [key[len("path:"):] for t in self.catalog.tables.values() if t.identity
                 for key in t.identity.keys if key.startswith("path:")]
        return set(ledger + files + ([self.database] if self.database else []))

    def _owner_only(self, what: str) -> None:
        if self.role != "owner":
            raise PrivacyError(f"an analyst session cannot {what}",
                               hint="declaring data is the data owner's act: connect without role='analyst'")

    def _load_catalog(self) -> None:
        """The tables the owner declared in this ledger, rebuilt from their CREATE statements (a frame lives in
        its owner's process only)."""
        for name, source_id, statement, database in self.ledger.tables():
            if database == "frame":
                continue
            try:
                (stmt,) = parse(statement)
                if database != self.database and stmt.source.kind != "file":   # a name resolves in its database;
                    continue                                                   # a file is a file from any
                table = cat.build_table(stmt, self.duck, statement)
            except Error as e:  # the source moved or vanished: the table is unavailable here, not an error
                log.info("table %s is not available here: %s", name, e.message)
                continue
            if table.ledger_key == source_id:   # it reads here exactly what the owner declared, or it is not used
                self.catalog.add(table)

    # -- statements --------------------------------------------------------------------------------------------
    def _create_table(self, stmt: ast.CreateTable, text: str) -> Result:
        table = cat.build_table(stmt, self.duck, text)
        self._declare(table, stmt, _span(text, stmt))
        private = sum(1 for c in table.columns.values() if not c.public)
        return Result([], [], message=f"created table {table.name}: {len(table.columns)} columns ({private} private), "
                                      f"budget ε = {table.budget_epsilon:g} per user")

    def _declare(self, table: cat.Table, stmt: ast.CreateTable | None, text: str) -> None:
        """Bind a declaration to its data in the ledger: a later one of the same (or overlapping) data may keep or
        tighten it, never loosen it (that is an owner's ALTER, logged)."""
        key = table.ledger_key
        held = self.ledger.budget(key)
        if (stmt is None or stmt.budget_epsilon is None) and held is not None:  # keep the ledger's budget
            table.budget_epsilon, table.budget_delta = held
        declaration = cat.declaration(table)
        for bound in self.ledger.bound_declarations(table.identity.keys):
            cat.check_tightens(bound, declaration, table.name)
        with self.ledger.transaction():
            self.ledger.declare(key, sorted(table.identity.keys), table.name, table.budget_epsilon,
                                table.budget_delta, text)
            self.ledger.bind(key, declaration)
            self.ledger.save_table(table.name, key, create_statement(table) if stmt is not None else text,
                                   self._database_of(table))
        self.catalog.add(table)

    def _select(self, stmt: ast.Select, text: str) -> Result:
        started = time.monotonic()
        with self._snapshot(self.catalog.get(stmt.table, stmt.pos, text)) as table:
            if table.sparsity is not None:   # several rows per unit: key-value statements only
                return kvrun.select(self, stmt, text, table, _span(text, stmt))
            p, cells, users = self._plan(stmt, text, table)
            _check_accuracy(p)
            ex = Executor(self.backend, self.progress)
            ex.canonical = self._seeded(p) and p.n <= CANONICAL_USERS   # seeded: the data and the seed decide
            ex.seeded = self._seeded(p)
            tasks = ex.start(p, cells) if p.n else []   # a protocol that refuses its group raises here: nothing spent
            if p.n == 0 or math.isinf(p.epsilon):
                if math.isinf(p.epsilon):
                    self.ledger.log("evaluation", p.table.ledger_key, p.table.name, _span(text, stmt))
                return self._execute(p, cells, ex, tasks, None, started)
            try:   # an answer from the declared domain alone (public facts) reserves nothing: any budget will do
                charge = self.ledger.reserve(p.table.ledger_key, p.table.name, _span(text, stmt), users,
                                             0.0 if p.asks_nobody else p.epsilon, p.where_sql, p.n, p.epsilon0,
                                             p.shuffle_delta)
            except BudgetExceededError as e:
                if p.accuracy is not None and p.accuracy.within_budget:   # ACCURACY: what the budget left buys
                    e.hint = f"{e.hint}; {p.accuracy.within_budget}" if e.hint else p.accuracy.within_budget
                raise
            return self._run_charged(p, cells, ex, tasks, charge, users, started)

    def _run_charged(self, p: Plan, cells: list[Cell], ex: Executor, tasks: list, charge: int, users,
                     started: float) -> Result:
        """Charge on touch: refund only while no private value was read; from the first read on, any error, abort
        or Ctrl-C keeps the charge, and what is raised carries no text derived from the data."""
        try:
            result = self._execute(p, cells, ex, tasks, charge, started, lambda: self.ledger.refund(charge, users))
        except BaseException as e:
            if not ex.touched:
                self.ledger.refund(charge, users)
                raise
            self.ledger.commit(charge)
            log.debug("statement failed after reading private data: %s", type(e).__name__)
            failure = "was interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        else:
            self.ledger.commit(charge)
            return result
        # raised outside the handler, so the error carries no __context__ that could quote the data
        raise ExecuteError(f"the statement {failure} after it had read private data, so its charge of ε = "
                           f"{p.epsilon:g} per user stands (charge on touch)",
                           hint="the details are withheld because they could depend on private values; "
                                "SHOW LEDGER lists the charge", context={"charge_kept": charge})

    @contextlib.contextmanager
    def _snapshot(self, table: cat.Table):
        """A view or query source is read once into a temporary table for the whole statement, so every round,
        the user count and the ledger see the same rows (DuckDB may reorder or re-evaluate a query)."""
        if table.identity.stable_rows:
            yield table
            return
        self.duck.execute(f"CREATE OR REPLACE TEMP TABLE {SNAPSHOT} AS SELECT * FROM {table.from_sql}")
        try:
            yield dataclasses.replace(table, from_sql=SNAPSHOT, source_kind="snapshot")
        finally:
            self.duck.execute(f"DROP TABLE IF EXISTS {SNAPSHOT}")

    def _plan(self, stmt: ast.Select, text: str, table: cat.Table | None = None, planner=plan):
        """(plan, GROUP BY cells, the ids of the users the statement covers or None for every user); ``planner``
        is :func:`~ldpql.planner.sweep` for EXPLAIN ... EPSILON IN (...)."""
        table = table or self.catalog.get(stmt.table, stmt.pos, text)
        group = [table.column(c.name, c.pos, text).name for c in stmt.group_by]
        check_public(stmt, table, text)  # before DuckDB ever evaluates the clauses
        self._check_data(table)
        pop = Population(table, where_expr(stmt.where) if stmt.where is not None else None, tuple(group))
        cells = self.backend.cells(pop)
        users = self.backend.covered_users(pop)
        facts = PublicFacts(sum(c.n for c in cells), len(cells), self.ledger.remaining(table.ledger_key, users),
                            self.ledger.remaining_delta(table.ledger_key), self.ledger.path,
                            tuple((c.key, c.n) for c in cells) if group else ())
        return planner(stmt, table, facts, self.session, text, self.evaluation), cells, users

    def _check_data(self, table: cat.Table) -> None:
        """Before each statement: units are still one row each, the source reads the same relations (a glob may
        have matched a new file), and a change of the data is noted in the ledger."""
        if table.privacy_unit:
            cat.check_unique_units(table.from_sql, table.privacy_unit, self.duck, repeats=table.sparsity is not None)
        fingerprint = table.identity.fingerprint
        if table.source_kind not in ("frame", "snapshot"):   # a frame was fingerprinted when registered
            now = cat.identify(ast.Source(table.source_kind, table.source_text), table.from_sql, self.duck)
            if now.keys != table.identity.keys:
                raise CatalogError(f"`{table.name}` now reads other data than was declared (files added, removed "
                                   "or replaced)", hint=f"the data owner declares it again: CREATE TABLE "
                                                        f"{table.name} FROM ...")
            fingerprint = now.fingerprint
        self.ledger.touch_data(table.ledger_key, table.name, fingerprint, by_position=not table.privacy_unit)

    def _execute(self, p: Plan, cells: list[Cell], ex: Executor, tasks: list, charge: int | None,
                 started: float, refund: Callable[[], None] | None = None) -> Result:
        estimates = ex.finish(tasks, self._entropy(p, charge=charge)) if p.n else {}
        unasked = charge is not None and refund is not None and not ex.touched   # every answer came without a read
        if p.asks_nobody and ex.touched:   # reserved nothing, so it must not have read anything: no answer leaves
            raise InternalError("a statement planned to ask no user read private data; its answers are withheld")
        if unasked:
            refund()   # nobody was asked (a quantile at a domain bound): nothing is spent
        spent = 0.0 if (p.n == 0 or math.isinf(p.epsilon) or unasked) else p.epsilon
        left = None if charge is None else max(self.ledger.remaining(p.table.ledger_key), 0.0)
        result = select_result(p, cells, estimates, spent, left, time.monotonic() - started)
        result.footer += f"; ledger {self.ledger.path}"
        if unasked:
            result.notes.append("no user was asked (every answer came from the declared domain alone): the charge "
                                "was refunded, nothing was spent")
        if self._seeded(p):
            result.notes.append(NOT_PRIVATE + " (a seed makes the noise reproducible)")
        return result

    def _seeded(self, p: Plan) -> bool:
        return self.evaluation and (p.seed is not None or self.seed is not None)

    def _entropy(self, p: Plan, offset: int = 0, charge: int | None = None) -> int:
        """The statement's randomness: 128 bits of OS entropy. In evaluation mode a seed makes it reproducible,
        and two charged statements still never share noise (their ledger charge ids are mixed in)."""
        if not self._seeded(p):
            return int(np.random.SeedSequence().entropy)
        key = (offset,) if charge is None else (offset, charge)
        if p.seed is None:
            key = (self._statements, *key)
        state = np.random.SeedSequence(p.seed if p.seed is not None else self.seed, spawn_key=key).generate_state(4)
        return int.from_bytes(state.astype("<u4").tobytes(), "little")

    def _explain(self, stmt: ast.Explain, text: str) -> Result:
        with self._snapshot(self.catalog.get(stmt.select.table, stmt.select.pos, text)) as table:
            if table.sparsity is not None:
                return kvrun.explain(self, stmt.select, text, table)
            p = self._plan(stmt.select, text, table, sweep if stmt.select.sweep else plan)[0]
        footer = "nothing was run and no budget was spent"
        if stmt.select.sweep:
            return Result(p.columns, p.rows, message="\n".join(p.header()), notes=p.notes, footer=footer)
        return Result(["plan"], [(line,) for line in str(p).splitlines()], plan=p, footer=footer,
                      view=Result([], [], message=str(p), footer=footer))   # the table display: the tree itself

    def _evaluate(self, stmt: ast.Evaluate, text: str) -> Result:
        if not self.evaluation:
            raise PrivacyError("EVALUATE reveals true answers and is only allowed in evaluation mode",
                               hint="open the connection with ldpql.connect(evaluation=True), or run ldpql --evaluate")
        if stmt.repeat < 1:
            raise PlanError("REPEAT must be at least 1")
        with self._snapshot(self.catalog.get(stmt.select.table, stmt.select.pos, text)) as table:
            if table.sparsity is not None:
                return kvrun.evaluate(self, stmt, text, table, _span(text, stmt))
            p, cells, _ = self._plan(stmt.select, text, table)
            _check_accuracy(p)
            self.ledger.log("evaluation", p.table.ledger_key, p.table.name, _span(text, stmt))
            ex = Executor(self.backend, self.progress)
            ex.cache, ex.canonical = {}, self._seeded(p) and p.n <= CANONICAL_USERS
            ex.seeded = self._seeded(p)
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
        note = (f"privacy unit {t.privacy_unit or 'one row per user'}"
                + (f" (several rows each, at most {t.sparsity} keys used: SPARSITY)" if t.sparsity else "") + f"; budget ε = {t.budget_epsilon:g}" +
                (f", δ = {t.budget_delta:g}" if t.budget_delta else "") +
                (f"; at most {t.rounds} round(s)" if t.rounds else ""))
        return Result(["column", "type", "visibility", "domain"], rows, notes=[note])

    def _show_budget(self, stmt: ast.ShowBudget, text: str) -> Result:
        tables = [self.catalog.get(stmt.table, stmt.pos, text)] if stmt.table else list(self.catalog.tables.values())
        rows = []
        for t in tables:
            budget = self.ledger.budget(t.ledger_key) or (t.budget_epsilon, t.budget_delta)
            left = max(self.ledger.remaining(t.ledger_key), 0.0)
            rows.append((t.name, budget[0], budget[0] - left, left, budget[1], self.ledger.statements(t.ledger_key)))
        return Result(["table", "budget_epsilon", "spent_epsilon", "remaining_epsilon", "budget_delta", "statements"],
                      rows, notes=["spent = the most-charged user's total", f"ledger: {self.ledger.path}"])

    def _show_ledger(self, stmt: ast.ShowLedger, text: str) -> Result:
        source = self.catalog.get(stmt.table, stmt.pos, text).ledger_key if stmt.table else None
        rows = [(c.id, c.time, c.kind, c.table_name, c.statement, c.predicate or "all users", c.epsilon, c.epsilon0,
                 c.delta, c.status) for c in self.ledger.charges(source)]
        notes = [f"ledger: {self.ledger.path}"]
        return Result(["id", "time", "kind", "table", "statement", "users", "epsilon", "epsilon0", "delta", "status"],
                      rows, notes=notes, view=_ledger_view(rows, notes))

    def _use(self, stmt: ast.Use, text: str) -> Result:
        self.catalog.use(stmt.table)
        return Result([], [], message=f"using {stmt.table}")

    def _set_option(self, stmt: ast.SetOption, text: str) -> Result:
        if stmt.name.lower() == "seed" and not self.evaluation:
            raise PrivacyError(SEED_REFUSAL, hint=SEED_HINT).with_position(text, stmt.pos.line or None,
                                                                          stmt.pos.column or None)
        check_option(stmt.name, stmt.value.value, stmt, text)
        self.session[stmt.name] = stmt.value.value
        return Result([], [], message=f"{stmt.name} = {stmt.value.sql()}")

    def _alter_budget(self, stmt: ast.AlterBudget, text: str) -> Result:
        t = self.catalog.get(stmt.table, stmt.pos, text)
        delta = t.budget_delta if stmt.delta is None else float(stmt.delta)  # ALTER ... EPSILON e keeps δ
        cat.check_budget(stmt.epsilon, delta)
        self.ledger.alter(t.ledger_key, t.name, float(stmt.epsilon), delta, _span(text, stmt))
        t.budget_epsilon, t.budget_delta = float(stmt.epsilon), delta
        return Result([], [], message=f"budget of {t.name} set to ε = {stmt.epsilon:g} per user (logged)")

    def _alter_column(self, stmt: ast.AlterColumn, text: str) -> Result:
        return self._alter(stmt, text, "alter column", f"column {stmt.column.name}")

    def _alter_unit(self, stmt: ast.AlterUnit, text: str) -> Result:
        return self._alter(stmt, text, "alter unit", f"privacy unit {stmt.unit}")

    def _alter(self, stmt, text: str, kind: str, what: str) -> Result:
        """An owner's change of what is declared about the data (may loosen it): bound anew, and logged."""
        t = self.catalog.get(stmt.table, stmt.pos, text)
        new = cat.apply_alter(t, stmt, text, self.duck)
        with self.ledger.transaction():
            self.ledger.bind(new.ledger_key, cat.declaration(new), replace=True)
            self.ledger.log(kind, new.ledger_key, new.name, _span(text, stmt))
            if isinstance(stmt, ast.AlterUnit):   # users get other ids: no one may be charged less than they spent
                self.ledger.collapse(new.ledger_key, new.name, "the privacy unit changed")
            if new.source_kind != "frame":
                self.ledger.save_table(new.name, new.ledger_key, create_statement(new), self._database_of(new))
        self.catalog.add(new)
        return Result([], [], message=f"{what} of {new.name} altered (logged)")

    def _database_of(self, table: cat.Table) -> str | None:
        return "frame" if table.source_kind == "frame" else (None if table.source_kind == "file" else self.database)

    def _drop_table(self, stmt: ast.DropTable, text: str) -> Result:
        t = self.catalog.drop(stmt.table)
        self.ledger.forget_table(t.name)
        return Result([], [], message=f"dropped {t.name} (its spend stays in the ledger)")


SNAPSHOT = "__ldpql_snapshot"
SEED_REFUSAL = "a seed makes the noise predictable, so it is honoured in evaluation mode only"
SEED_HINT = ("for reproducible research runs open ldpql.connect(evaluation=True, seed=7) or run ldpql --evaluate "
             "--seed 7; the results are then labelled not private")


def _check_accuracy(p: Plan) -> None:
    """An ACCURACY that no ε up to the engine's cap reaches is refused before anything runs (EXPLAIN shows why)."""
    if p.accuracy is not None and p.accuracy.refusal is not None:
        raise p.accuracy.refusal


def _is_database(path: str) -> bool:
    """Whether ``path`` holds an SQLite database (any ldpql ledger is one) or a DuckDB one."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    return head.startswith(b"SQLite format 3") or head[8:12] == b"DUCK"


def create_statement(table: cat.Table) -> str:
    """The CREATE TABLE that declares ``table`` as it stands (after any ALTER), kept in the ledger so that every
    later connection rebuilds the same declaration."""
    decl = cat.declaration(table)
    cols = [f"{ast.quote_name(name)} " + ("PUBLIC" if c["public"] else f"PRIVATE {c['domain'] or ''}".rstrip())
            for name, c in decl["columns"].items() if name != table.privacy_unit]
    source = ast.quote_string(table.source_text) if table.source_kind == "file" else table.source_text  # absolute
    clauses = [f"PRIVACY UNIT {ast.quote_name(table.privacy_unit)}" + (f" SPARSITY {table.sparsity}" if table.sparsity
                                                                       else "")] if table.privacy_unit else []
    clauses.append(f"BUDGET EPSILON {table.budget_epsilon!r}" + (f" DELTA {table.budget_delta!r}"
                                                                 if table.budget_delta else ""))
    if table.rounds:
        clauses.append(f"ROUNDS {table.rounds}")
    return f"CREATE TABLE {ast.quote_name(table.name)} FROM {source} ({', '.join(cols)}) {' '.join(clauses)}"


def _ledger_view(rows: list[tuple], notes: list[str]) -> Result:
    """SHOW LEDGER as the table display shows it, to fit about 100 columns: the time to the minute, the status
    beside the kind only when it is not the usual one, the table only when rows differ in it, ε0 and δ only when
    some row has one, and the statement last, cut to the width (csv and json keep every column in full)."""
    usual = {"query": "committed"}
    tables = {r[3] for r in rows}
    extra = [j for j in (7, 8) if any(r[j] for r in rows)]
    names = ["id", "time", "kind"] + (["table"] if len(tables) > 1 else []) + ["epsilon"] + \
        [("epsilon0", "delta")[j - 7] for j in extra] + ["users", "statement"]
    view = [(r[0], str(r[1])[:16].replace("T", " "),
             r[2] if r[9] == usual.get(r[2], "logged") else f"{r[2]}, {r[9]}",
             *([r[3]] if len(tables) > 1 else []), r[6], *[r[j] for j in extra], r[5], " ".join(str(r[4]).split()))
            for r in rows]
    said = ["times in UTC; text cut with '…' to fit: --format csv or json shows every column whole"] + \
        ([f"table: {tables.pop()}"] if len(tables) == 1 else [])
    return Result(names, view, cut=("statement", "users"), notes=said + notes)


def _guard(fn: Callable, *args, **kwargs):
    """Call ``fn``; only ldpql.Error escapes (DESIGN §3). Anything else is a bug or an environment failure, and is
    reported without its text, which could quote data."""
    try:
        return fn(*args, **kwargs)
    except (Error, KeyboardInterrupt):
        raise
    except sqlite3.Error as e:
        raise CatalogError(f"the ledger could not be written or read ({type(e).__name__})",
                           hint="check that the ledger file is writable and not locked by another program") from None
    except RecursionError:
        raise ParseError("the statement nests too deeply", hint="split long OR/AND chains, or use IN (...)") from None
    except duckdb.Error as e:
        raise ExecuteError(f"DuckDB could not run the statement ({type(e).__name__})",
                           hint="check the data source and the statement") from None
    except Exception as e:  # noqa: BLE001  (the API's contract: only ldpql.Error escapes)
        log.debug("internal error", exc_info=True)
        raise InternalError(f"an unexpected {type(e).__name__} was raised") from None


def _open_duckdb(database: str | None) -> duckdb.DuckDBPyConnection:
    try:
        duck = duckdb.connect(database or ":memory:")
        duck.execute("SET enable_progress_bar = false")  # ldpql reports progress itself
        # scans keep the source's row order, so a row's position is the same user in every round
        duck.execute("SET preserve_insertion_order = true")
        return duck
    except duckdb.Error as e:
        raise CatalogError(f"cannot open the DuckDB database {database!r}: {str(e).splitlines()[0]}") from None


def _check_register(name, private, public, budget, delta, privacy_unit, rounds) -> None:
    """register()'s arguments have the types it documents."""
    def bad(what: str, value, wanted: str):
        return CatalogError(f"register(): {what} must be {wanted}, not {value!r}")
    if not isinstance(name, str) or not name:
        raise bad("name", name, "a table name")
    if private is not None and not isinstance(private, dict):
        raise bad("private", private, "a dict of column -> domain")
    if public is not None and (not isinstance(public, (list, tuple, set)) or not all(isinstance(c, str) for c in public)):
        raise bad("public", public, "a list of column names")
    for what, value in (("budget", budget), ("delta", delta)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise bad(what, value, "a number")
    if privacy_unit is not None and not isinstance(privacy_unit, str):
        raise bad("privacy_unit", privacy_unit, "a column name")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int)):
        raise bad("rounds", rounds, "an integer")


RANGE_KEYS = ("between", "integer", "default", "not_null", "gaussian_sigma")   # a register() range declaration


def _column_def(name: str, spec: Any) -> ast.ColumnDef:
    if spec is bool:
        return ast.ColumnDef(name, False, True, ast.BooleanDomain())
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in RANGE_KEYS]
        if unknown or "between" not in spec:
            what = f"unknown key {unknown[0]!r}" if unknown else "no 'between' key"
            raise CatalogError(f"cannot read the domain of `{name}`: {what} in {spec!r}",
                               hint=f"a dict declares a numeric range, with keys {', '.join(map(repr, RANGE_KEYS))} "
                                    f"(e.g. {{'between': (0, 10), 'not_null': True}}); categories are a list "
                                    f"(e.g. {name!r}: ['a', 'b']), a boolean column is bool")
        lo, hi = spec["between"]
        default = ast.Literal(spec["default"]) if "default" in spec else None
        return ast.ColumnDef(name, False, True, ast.RangeDomain(lo, hi, bool(spec.get("integer")),
                                                                distribution=_gaussian(spec.get("gaussian_sigma"))),
                             default, not_null=bool(spec.get("not_null")))
    if isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(v, (int, float)) for v in spec):
        return ast.ColumnDef(name, False, True, ast.RangeDomain(spec[0], spec[1]))
    if isinstance(spec, (list, set, tuple)):
        return ast.ColumnDef(name, False, True, ast.SetDomain(tuple(ast.Literal(v) for v in spec)))
    if spec is None:
        return ast.ColumnDef(name, False, True)
    raise CatalogError(f"cannot read the domain of `{name}`: {spec!r}",
                       hint="use (lo, hi), a list of categories, bool, or {'between': (lo, hi), 'integer': True}")


def _gaussian(sigma: Any) -> ast.Distribution | None:
    """``gaussian_sigma``: σ (known) or (σ_min, σ_max), as DISTRIBUTION GAUSSIAN (SIGMA ...) declares it."""
    if sigma is None:
        return None
    lo, hi = (sigma, sigma) if not isinstance(sigma, (tuple, list)) else tuple(sigma)
    return ast.Distribution("GAUSSIAN", lo, hi, isinstance(sigma, (tuple, list)))


def _snake(name: str) -> str:
    return "".join("_" + ch.lower() if ch.isupper() else ch for ch in name).lstrip("_")


def _span(text: str, stmt: ast.Statement) -> str:
    pos = stmt.pos
    return text[pos.start:pos.end] if pos.end > pos.start else stmt.sql()
