"""Per-user budget accounting (DESIGN §4.5), in memory or in a SQLite file shared by processes.

Spend belongs to the data: a charge is recorded against the source's identity (its resolved path, DuckDB
table or query text, or frame name), never a table name, so declaring the same data again does not reset
it. A charge covers the users that satisfy its public predicate (the statement's WHERE); a user's spend is
the sum of the charges that cover it, and a statement is allowed when the most-charged user it touches stays
within budget. The caller computes that maximum over the data's public columns (``max_spend``).

Reserve, run, then commit or refund: the check and the reservation happen in one write transaction
(``BEGIN IMMEDIATE``), so two processes racing on one ledger file can never overspend.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from dataclasses import dataclass
from typing import Callable, Sequence

from ldpql.errors import BudgetExceededError, CatalogError

SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (source_id TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, kind TEXT NOT NULL, source_id TEXT NOT NULL,
    table_name TEXT, statement TEXT, predicate TEXT, epsilon REAL NOT NULL DEFAULT 0,
    epsilon0 REAL, delta REAL NOT NULL DEFAULT 0, users INTEGER, status TEXT NOT NULL);
"""
TOLERANCE = 1e-9  # a request within this relative margin of what remains is allowed (rounding down)

MaxSpend = Callable[[Sequence[tuple[str | None, float]], str | None], float]


@dataclass(frozen=True)
class Charge:
    """One row of the ledger."""

    id: int
    time: str
    kind: str
    source_id: str
    table_name: str
    statement: str
    predicate: str | None
    epsilon: float
    epsilon0: float | None
    delta: float
    users: int | None
    status: str


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def refusal_message(table: str, requested: float, remaining: float, budget: float) -> str:
    """The budget refusal text: a contract pinned by tests (one sentence, then aligned figures)."""
    return (f"this statement needs ε = {_fmt(requested)} per user of `{table}`, but only ε = {_fmt(remaining)} "
            f"remains for the users it covers (budget {_fmt(budget)})\n"
            f"  requested  ε = {_fmt(requested)}\n"
            f"  remaining  ε = {_fmt(remaining)}\n"
            f"  short by   ε = {_fmt(requested - remaining)}\n"
            f"No budget was spent.")


class Ledger:
    """The budget ledger: ``Ledger()`` in memory, ``Ledger('budget.ldpql')`` in a file."""

    def __init__(self, path: str | None = None):
        self.path = path or ":memory:"
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self.db.executescript(SCHEMA)
        except sqlite3.Error as e:
            raise CatalogError(f"cannot open the ledger {self.path!r}: {e}",
                               hint="check that the path is a writable file (it is created if missing)") from None

    @property
    def persistent(self) -> bool:
        return self.path != ":memory:"

    # -- budgets ---------------------------------------------------------------------------------------------
    def budget(self, source_id: str) -> tuple[float, float] | None:
        row = self.db.execute("SELECT epsilon, delta FROM budgets WHERE source_id = ?", (source_id,)).fetchone()
        return (row[0], row[1]) if row else None

    def declare(self, source_id: str, table: str, epsilon: float, delta: float, statement: str) -> tuple[float, float]:
        """Record a declared budget. A first declaration sets it, a smaller one lowers it (stricter is always
        safe), and a larger one than the ledger holds is refused: raising a budget takes ALTER TABLE."""
        with self._transaction():
            held = self.budget(source_id)
            if held is not None and (epsilon > held[0] * (1 + TOLERANCE) or delta > held[1]):
                raise CatalogError(
                    f"the ledger already holds a budget of ε = {_fmt(held[0])}" +
                    (f", δ = {held[1]:g}" if held[1] else "") + f" for this data; declaring ε = {_fmt(epsilon)}"
                    + (f", δ = {delta:g}" if delta else "") + " would raise it",
                    hint=f"spend belongs to the data, not to a declaration; raise a budget on purpose with "
                         f"ALTER TABLE {table} SET BUDGET EPSILON {_fmt(epsilon)}")
            if held != (epsilon, delta):
                self._set_budget(source_id, table, epsilon, delta, statement, "declare")
            return epsilon, delta

    def alter(self, source_id: str, table: str, epsilon: float, delta: float, statement: str) -> None:
        """Set a budget explicitly (ALTER TABLE ... SET BUDGET); logged as a ledger row."""
        with self._transaction():
            self._set_budget(source_id, table, epsilon, delta, statement, "alter budget")

    def _set_budget(self, source_id, table, epsilon, delta, statement, kind) -> None:
        self.db.execute("INSERT INTO budgets VALUES (?, ?, ?) ON CONFLICT(source_id) DO UPDATE SET "
                        "epsilon = excluded.epsilon, delta = excluded.delta", (source_id, epsilon, delta))
        self._insert(kind, source_id, table, statement, None, epsilon, None, delta, None, "logged")

    # -- charges ---------------------------------------------------------------------------------------------
    def active(self, source_id: str) -> list[tuple[str | None, float]]:
        """(predicate, ε) of every reserved or committed charge on this data."""
        return [(p, e) for p, e in self.db.execute(
            "SELECT predicate, epsilon FROM charges WHERE source_id = ? AND kind = 'query' AND status IN "
            "('reserved', 'committed')", (source_id,))]

    def remaining_delta(self, source_id: str) -> float:
        """The δ budget left on this data: δ composes by addition over every reserved or committed charge
        (counted for all users, whatever their WHERE: conservative)."""
        budget = self.budget(source_id)
        spent = self.db.execute("SELECT coalesce(sum(delta), 0) FROM charges WHERE source_id = ? AND kind = 'query' "
                                "AND status IN ('reserved', 'committed')", (source_id,)).fetchone()[0]
        return (budget[1] if budget else 0.0) - spent

    def remaining(self, source_id: str, predicate: str | None, max_spend: MaxSpend) -> float:
        """What remains of the budget for the most-charged user that ``predicate`` covers."""
        budget = self.budget(source_id)
        eps = budget[0] if budget else 0.0
        return eps - max_spend(self.active(source_id), predicate)

    def reserve(self, source_id: str, table: str, statement: str, predicate: str | None, epsilon: float,
                max_spend: MaxSpend, users: int | None = None, epsilon0: float | None = None,
                delta: float = 0.0) -> int:
        """Check and reserve ``epsilon`` for the users ``predicate`` covers, atomically; returns the charge id.

        Raises BudgetExceededError (nothing written) when the most-charged covered user would exceed the budget.
        """
        with self._transaction():
            budget_eps, _ = self.budget(source_id) or (0.0, 0.0)
            left = budget_eps - max_spend(self.active(source_id), predicate)
            if epsilon > left + TOLERANCE * max(1.0, budget_eps):
                raise BudgetExceededError(refusal_message(table, epsilon, max(left, 0.0), budget_eps),
                                          hint=f"use EPSILON {_fmt(max(left, 0.0))} or less, or EXPLAIN to compare "
                                               "plans; raise the budget only on purpose with ALTER TABLE",
                                          context={"requested": epsilon, "remaining": max(left, 0.0),
                                                   "budget": budget_eps, "table": table})
            delta_left = self.remaining_delta(source_id)
            if delta > 0 and delta > delta_left * (1 + TOLERANCE):
                raise BudgetExceededError(f"this statement needs δ = {_fmt(delta)} of `{table}`, but only δ = "
                                          f"{_fmt(max(delta_left, 0.0))} remains\nNo budget was spent.",
                                          hint="use a smaller DELTA, or model = 'local' (pure ε, no δ)",
                                          context={"requested_delta": delta, "remaining_delta": max(delta_left, 0.0),
                                                   "table": table})
            return self._insert("query", source_id, table, statement, predicate, epsilon, epsilon0, delta, users,
                                "reserved")

    def commit(self, charge_id: int) -> None:
        self.db.execute("UPDATE charges SET status = 'committed' WHERE id = ?", (charge_id,))

    def refund(self, charge_id: int) -> None:
        self.db.execute("UPDATE charges SET status = 'refunded' WHERE id = ?", (charge_id,))

    def charges(self, source_id: str | None = None) -> list[Charge]:
        """Every ledger row (optionally of one source), oldest first."""
        sql, args = "SELECT * FROM charges", ()
        if source_id is not None:
            sql, args = sql + " WHERE source_id = ?", (source_id,)
        return [Charge(*row) for row in self.db.execute(sql + " ORDER BY id", args)]

    def _insert(self, kind, source_id, table, statement, predicate, epsilon, epsilon0, delta, users, status) -> int:
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        statement = " ".join(statement.split()) if statement else statement  # one line per row
        cur = self.db.execute(
            "INSERT INTO charges (time, kind, source_id, table_name, statement, predicate, epsilon, epsilon0, "
            "delta, users, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (now, kind, source_id, table, statement, predicate, epsilon, epsilon0, delta, users, status))
        return int(cur.lastrowid)

    def _transaction(self):
        return _Immediate(self.db)

    def close(self) -> None:
        self.db.close()


class _Immediate:
    """``with`` block that holds SQLite's write lock from the first read (BEGIN IMMEDIATE) to commit."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        return False
