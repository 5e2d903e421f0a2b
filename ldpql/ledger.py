"""Per-user budget accounting and the owner's catalog (DESIGN §4.5), in memory or in a SQLite file.

Spend belongs to the data, and to each user of it:

- A **source** is the data a declaration reads, identified by what is read (its base relations' keys: real
  paths and inodes of files, base tables, a frame's content hash), never by how it is spelt. Two sources that
  share a key read some of the same rows: each is checked against the other's spend too (below).
- A **charge** records the users it covered: every user of the source (``users=None``: the statement had no
  WHERE, or its users have no stable identity), or the ids of the users its public WHERE matched (a privacy
  unit's 64-bit hash, or a row position while the source is unchanged). Charges are kept per source as one
  spend vector: ``floor`` (charged to every user, present and future) plus a per-user amount for ids.
- A statement runs when the most-charged user it covers stays within budget, counting the peak spend of every
  other source that shares rows with it (a user of both may be that peak user: conservative). The check is one
  pass over the statement's users whatever the length of the ledger.
- When a source's data change (its fingerprint) and its users are row positions, positions no longer name the
  same people: the per-user amounts collapse into the floor, so no user is ever charged less than they spent.

Reserve, run, then commit or refund (charge on touch: the caller refunds only when no private value was read).
The check and the reservation happen in one write transaction (``BEGIN IMMEDIATE``), so processes racing on one
ledger file can never overspend. The catalog (each declaration, bound to its source) lives here too, so an
analyst's connection sees the owner's tables by name.
"""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
import zlib
from dataclasses import dataclass

import numpy as np

from ldpql.errors import BudgetExceededError, CatalogError

SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    source_id TEXT PRIMARY KEY, keys TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
    delta_spent REAL NOT NULL DEFAULT 0, floor REAL NOT NULL DEFAULT 0, peak REAL NOT NULL DEFAULT 0,
    ids BLOB, spend BLOB, fingerprint TEXT);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, kind TEXT NOT NULL, source_id TEXT NOT NULL,
    table_name TEXT, statement TEXT, predicate TEXT, epsilon REAL NOT NULL DEFAULT 0,
    epsilon0 REAL, delta REAL NOT NULL DEFAULT 0, users INTEGER, status TEXT NOT NULL, covered BLOB);
CREATE INDEX IF NOT EXISTS charges_by_source ON charges (source_id);
CREATE TABLE IF NOT EXISTS catalog (
    name TEXT PRIMARY KEY, source_id TEXT NOT NULL, statement TEXT NOT NULL, declaration TEXT NOT NULL,
    database TEXT);
"""
TOLERANCE = 1e-9  # a request may exceed what remains by this relative rounding margin of itself, no more
CHARGE_COLUMNS = "id, time, kind, source_id, table_name, statement, predicate, epsilon, epsilon0, delta, users, status"


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


def fits(requested: float, remaining: float) -> bool:
    """Whether a request fits what remains: never when nothing remains; the margin only rounds the request."""
    return remaining > 0 and requested * (1 - TOLERANCE) <= remaining


@dataclass
class Spend:
    """A source's spend vector: ``floor`` for every user, plus ``spend[i]`` for the user with id ``ids[i]``
    (sorted, unique uint64)."""

    floor: float
    ids: np.ndarray
    spend: np.ndarray

    def peak(self, users: np.ndarray | None = None) -> float:
        """The largest spend of ``users`` (every user when None)."""
        if users is None or not len(self.ids):
            top = self.spend.max(initial=0.0) if users is None else 0.0
            return self.floor + float(top)
        at = np.minimum(np.searchsorted(self.ids, users), len(self.ids) - 1)
        hit = self.ids[at] == users
        return self.floor + float(self.spend[at[hit]].max(initial=0.0))

    def add(self, users: np.ndarray | None, epsilon: float) -> None:
        """Charge ``epsilon`` to ``users`` (every user when None); a negative one refunds it."""
        if users is None:
            self.floor = max(self.floor + epsilon, 0.0)
            return
        merged = np.union1d(self.ids, users)
        spend = np.zeros(len(merged))
        spend[np.searchsorted(merged, self.ids)] = self.spend
        spend[np.searchsorted(merged, users)] += epsilon
        keep = spend > 1e-15   # a refund leaves rounding dust; ids at zero need no row
        self.ids, self.spend = merged[keep], np.maximum(spend[keep], 0.0)

    def collapse(self) -> None:
        """Users are no longer known by these ids: everyone is charged the most-charged user's spend."""
        self.floor, self.ids, self.spend = self.peak(), np.zeros(0, np.uint64), np.zeros(0)


def _pack(a: np.ndarray) -> bytes:
    return zlib.compress(a.tobytes(), 1)


def _unpack(blob: bytes | None, dtype) -> np.ndarray:
    return np.frombuffer(zlib.decompress(blob), dtype=dtype).copy() if blob else np.zeros(0, dtype)


class Ledger:
    """The budget ledger: ``Ledger()`` in memory, ``Ledger('budget.ldpql')`` in a file."""

    def __init__(self, path: str | None = None, read_only: bool = False):
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

    # -- sources and budgets -------------------------------------------------------------------------------------
    def budget(self, source_id: str) -> tuple[float, float] | None:
        """The (ε, δ) budget of a source, or None when it was never declared."""
        row = self.db.execute("SELECT epsilon, delta FROM sources WHERE source_id = ?", (source_id,)).fetchone()
        return (row[0], row[1]) if row else None

    def declare(self, source_id: str, keys: list[str] | tuple[str, ...], table: str, epsilon: float, delta: float,
                statement: str) -> tuple[float, float]:
        """Record a source and its declared budget. A first declaration sets it, a smaller one lowers it (stricter
        is always safe), and a larger one is refused: raising a budget takes ALTER TABLE (an owner's act)."""
        with self._transaction():
            held = self.budget(source_id)
            if held is not None and (epsilon > held[0] * (1 + TOLERANCE) or delta > held[1]):
                raise CatalogError(
                    f"the ledger already holds a budget of ε = {_fmt(held[0])}" +
                    (f", δ = {held[1]:g}" if held[1] else "") + f" for this data; declaring ε = {_fmt(epsilon)}"
                    + (f", δ = {delta:g}" if delta else "") + " would raise it",
                    hint=f"spend belongs to the data, not to a declaration; raise a budget on purpose with "
                         f"ALTER TABLE {table} SET BUDGET EPSILON {_fmt(epsilon)}")
            if held is None:
                self.db.execute("INSERT INTO sources (source_id, keys, epsilon, delta) VALUES (?, ?, ?, ?)",
                                (source_id, json.dumps(sorted(keys)), epsilon, delta))
                self._insert("declare", source_id, table, statement, epsilon=epsilon, delta=delta)
            elif held != (epsilon, delta):
                self._set_budget(source_id, table, epsilon, delta, statement, "declare")
            return epsilon, delta

    def alter(self, source_id: str, table: str, epsilon: float, delta: float, statement: str) -> None:
        """Set a budget explicitly (ALTER TABLE ... SET BUDGET); logged as a ledger row."""
        with self._transaction():
            self._set_budget(source_id, table, epsilon, delta, statement, "alter budget")

    def _set_budget(self, source_id, table, epsilon, delta, statement, kind) -> None:
        self.db.execute("UPDATE sources SET epsilon = ?, delta = ? WHERE source_id = ?", (epsilon, delta, source_id))
        self._insert(kind, source_id, table, statement, epsilon=epsilon, delta=delta)

    def log(self, kind: str, source_id: str, table: str, statement: str) -> None:
        """A logged row for an owner's statement that weakens protection (ALTER, evaluation runs); spends nothing."""
        self._insert(kind, source_id, table, statement)

    # -- spend -----------------------------------------------------------------------------------------------------
    def _spend(self, source_id: str) -> Spend:
        row = self.db.execute("SELECT floor, ids, spend FROM sources WHERE source_id = ?", (source_id,)).fetchone()
        if row is None:
            return Spend(0.0, np.zeros(0, np.uint64), np.zeros(0))
        return Spend(row[0], _unpack(row[1], np.uint64), _unpack(row[2], np.float64))

    def _save(self, source_id: str, s: Spend) -> None:
        self.db.execute("UPDATE sources SET floor = ?, peak = ?, ids = ?, spend = ? WHERE source_id = ?",
                        (s.floor, s.peak(), _pack(s.ids), _pack(s.spend), source_id))

    def _group(self, source_id: str) -> list[tuple]:
        """(source_id, ε budget, δ budget, δ spent, peak) of this source and every source sharing a key with it."""
        rows = self.db.execute("SELECT source_id, keys, epsilon, delta, delta_spent, peak FROM sources").fetchall()
        mine = next((set(json.loads(r[1])) for r in rows if r[0] == source_id), set())
        return [(r[0], r[2], r[3], r[4], r[5]) for r in rows if r[0] == source_id or mine & set(json.loads(r[1]))]

    def _left(self, source_id: str, users: np.ndarray | None) -> tuple[float, float]:
        """(ε left for the most-charged of ``users``, the budget it is counted against)."""
        group = self._group(source_id)
        if not group:
            return 0.0, 0.0
        budget = min(g[1] for g in group)
        others = sum(g[4] for g in group if g[0] != source_id)  # peak spend of sources sharing rows with it
        return budget - others - self._spend(source_id).peak(users), budget

    def remaining(self, source_id: str, users: np.ndarray | None = None) -> float:
        """What remains of the budget for the most-charged of ``users`` (every user of the source when None)."""
        return self._left(source_id, users)[0]

    def remaining_delta(self, source_id: str) -> float:
        """The δ left: δ composes by addition over every charge of the source and of sources sharing its rows."""
        group = self._group(source_id)
        return min((g[2] for g in group), default=0.0) - sum(g[3] for g in group)

    def touch_data(self, source_id: str, table: str, fingerprint: str, by_position: bool) -> None:
        """Note the data's current fingerprint. When it changed and users are row positions, the per-user amounts
        collapse into the floor (positions no longer name the same people); logged."""
        with self._transaction():
            row = self.db.execute("SELECT fingerprint FROM sources WHERE source_id = ?", (source_id,)).fetchone()
            if row is None or row[0] == fingerprint:
                return
            if row[0] is not None and by_position:
                s = self._spend(source_id)
                s.collapse()
                self._save(source_id, s)
                self._insert("data changed", source_id, table, "the data changed: every user is now charged as "
                             "the most-charged one")
            self.db.execute("UPDATE sources SET fingerprint = ? WHERE source_id = ?", (fingerprint, source_id))

    def reserve(self, source_id: str, table: str, statement: str, users: np.ndarray | None, epsilon: float,
                predicate: str | None = None, n: int | None = None, epsilon0: float | None = None,
                delta: float = 0.0) -> int:
        """Check and charge ``epsilon`` to ``users`` (ids, or every user when None), atomically; returns the
        charge id. Raises BudgetExceededError (nothing written) when the most-charged covered user would exceed
        the budget, or δ would."""
        users = None if users is None else np.unique(np.asarray(users, dtype=np.uint64))
        with self._transaction():
            left, budget = self._left(source_id, users)
            if not fits(epsilon, left):
                raise BudgetExceededError(refusal_message(table, epsilon, max(left, 0.0), budget),
                                          hint=_refusal_hint(left), context={"requested": epsilon, "table": table,
                                                                             "remaining": max(left, 0.0),
                                                                             "budget": budget})
            delta_left = self.remaining_delta(source_id)
            if delta > 0 and not fits(delta, delta_left):
                raise BudgetExceededError(f"this statement needs δ = {_fmt(delta)} of `{table}`, but only δ = "
                                          f"{_fmt(max(delta_left, 0.0))} remains\nNo budget was spent.",
                                          hint="use a smaller DELTA, or model = 'local' (pure ε, no δ)",
                                          context={"requested_delta": delta, "remaining_delta": max(delta_left, 0.0),
                                                   "table": table})
            self._apply(source_id, users, epsilon, delta)
            return self._insert("query", source_id, table, statement, predicate, epsilon, epsilon0, delta, n,
                                "reserved", None if users is None else _pack(users))

    def _apply(self, source_id: str, users: np.ndarray | None, epsilon: float, delta: float) -> None:
        s = self._spend(source_id)
        s.add(users, epsilon)
        self._save(source_id, s)
        self.db.execute("UPDATE sources SET delta_spent = max(delta_spent + ?, 0) WHERE source_id = ?",
                        (delta, source_id))

    def commit(self, charge_id: int) -> None:
        """The reserved charge stands (its users' ids are no longer needed)."""
        self.db.execute("UPDATE charges SET status = 'committed', covered = NULL WHERE id = ?", (charge_id,))

    def refund(self, charge_id: int) -> None:
        """Undo a reserved charge: only for a statement that read no private value (charge on touch)."""
        with self._transaction():
            row = self.db.execute("SELECT source_id, epsilon, delta, covered, status FROM charges WHERE id = ?",
                                  (charge_id,)).fetchone()
            if row is None or row[4] != "reserved":
                return
            self._apply(row[0], None if row[3] is None else _unpack(row[3], np.uint64), -row[1], -row[2])
            self.db.execute("UPDATE charges SET status = 'refunded', covered = NULL WHERE id = ?", (charge_id,))

    def charges(self, source_id: str | None = None) -> list[Charge]:
        """Every ledger row (optionally of one source), oldest first."""
        sql, args = f"SELECT {CHARGE_COLUMNS} FROM charges", ()
        if source_id is not None:
            sql, args = sql + " WHERE source_id = ?", (source_id,)
        return [Charge(*row) for row in self.db.execute(sql + " ORDER BY id", args)]

    def statements(self, source_id: str) -> int:
        """How many charged statements stand on this source."""
        return self.db.execute("SELECT count(*) FROM charges WHERE source_id = ? AND kind = 'query' AND status = "
                               "'committed'", (source_id,)).fetchone()[0]

    # -- the owner's catalog ---------------------------------------------------------------------------------------
    def save_table(self, name: str, source_id: str, statement: str, declaration: dict,
                   database: str | None = None) -> None:
        """Record a declared table by name (replacing an earlier declaration of that name)."""
        self.db.execute("INSERT INTO catalog VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                        "source_id = excluded.source_id, statement = excluded.statement, "
                        "declaration = excluded.declaration, database = excluded.database",
                        (name.lower(), source_id, statement, json.dumps(declaration), database))

    def held_declaration(self, source_id: str) -> dict | None:
        """The first declaration recorded for this source (what later ones may only tighten), or None."""
        row = self.db.execute("SELECT declaration FROM catalog WHERE source_id = ? ORDER BY rowid LIMIT 1",
                              (source_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_declaration(self, source_id: str, declaration: dict) -> None:
        """Replace the declaration bound to a source (an owner's ALTER, logged by the caller)."""
        self.db.execute("UPDATE catalog SET declaration = ? WHERE source_id = ?", (json.dumps(declaration), source_id))

    def tables(self) -> list[tuple[str, str, str, str | None]]:
        """(name, source_id, CREATE statement, database) of every declared table."""
        return list(self.db.execute("SELECT name, source_id, statement, database FROM catalog ORDER BY rowid"))

    def forget_table(self, name: str) -> None:
        """DROP TABLE: the name goes, the spend stays."""
        self.db.execute("DELETE FROM catalog WHERE name = ?", (name.lower(),))

    # -- rows ----------------------------------------------------------------------------------------------------
    def _insert(self, kind, source_id, table, statement, predicate=None, epsilon=0.0, epsilon0=None, delta=0.0,
                users=None, status="logged", covered=None) -> int:
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        statement = " ".join(statement.split()) if statement else statement  # one line per row
        cur = self.db.execute(
            "INSERT INTO charges (time, kind, source_id, table_name, statement, predicate, epsilon, epsilon0, "
            "delta, users, status, covered) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (now, kind, source_id, table, statement, predicate, epsilon, epsilon0, delta, users, status, covered))
        return int(cur.lastrowid)

    def _transaction(self):
        return _Immediate(self.db)

    def close(self) -> None:
        self.db.close()


def _refusal_hint(left: float) -> str:
    if left <= 0:
        return "nothing remains for these users; a WHERE over other users may still fit (SHOW BUDGET shows the " \
               "most-charged user's)"
    return f"use EPSILON {_fmt(left * (1 - 1e-6))} or less, or EXPLAIN to compare plans; only the data owner can " \
           "raise a budget (ALTER TABLE, logged)"


class _Immediate:
    """``with`` block that holds SQLite's write lock from the first read (BEGIN IMMEDIATE) to commit; nested
    blocks join the outer transaction."""

    def __init__(self, db: sqlite3.Connection):
        self.db, self.outer = db, False

    def __enter__(self):
        self.outer = not self.db.in_transaction
        if self.outer:
            self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        if self.outer:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        return False
