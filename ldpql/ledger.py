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
import math
import os
import sqlite3
import zlib
from dataclasses import dataclass

import numpy as np

from ldpql.errors import BudgetExceededError, CatalogError

SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    source_id TEXT PRIMARY KEY, keys TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
    delta_spent REAL NOT NULL DEFAULT 0, floor REAL NOT NULL DEFAULT 0, fingerprint TEXT, declaration TEXT);
CREATE TABLE IF NOT EXISTS spend (
    source_id TEXT NOT NULL, chunk INTEGER NOT NULL, ids BLOB NOT NULL, spend BLOB NOT NULL, peak REAL NOT NULL,
    PRIMARY KEY (source_id, chunk));
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, kind TEXT NOT NULL, source_id TEXT NOT NULL,
    table_name TEXT, statement TEXT, predicate TEXT, epsilon REAL NOT NULL DEFAULT 0,
    epsilon0 REAL, delta REAL NOT NULL DEFAULT 0, users INTEGER, status TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS charges_by_source ON charges (source_id);
CREATE TABLE IF NOT EXISTS catalog (
    name TEXT PRIMARY KEY, source_id TEXT NOT NULL, statement TEXT NOT NULL, database TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
"""
TOLERANCE = 1e-9  # a request may exceed what remains by this relative rounding margin of itself, no more


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


CHUNK_BITS = 16       # user ids are kept in chunks: a statement reads and rewrites only the chunks it touches
HASHED = 1 << 24      # chunks from here on hold unit hashes (sorted ids + spend); below, row positions (dense)


def _chunks(users: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``users`` (sorted, unique uint64) split by chunk: [(chunk, ids), ...]. Row positions fill consecutive
    dense chunks of 2^16; unit hashes (uniform over 2^64) go to one of 256 chunks by their top bits."""
    if not len(users):
        return []
    small = users < np.uint64(1 << 40)   # row positions; anything larger is a 64-bit unit hash
    chunk = np.where(small, users >> np.uint64(CHUNK_BITS), (users >> np.uint64(56)) + np.uint64(HASHED))
    cuts = np.flatnonzero(np.diff(chunk.astype(np.int64))) + 1
    return [(int(c[0]), u) for c, u in zip(np.split(chunk, cuts), np.split(users, cuts))]


def _lookup(chunk: int, ids: np.ndarray, spend: np.ndarray, users: np.ndarray) -> np.ndarray:
    """The spend of ``users`` in one chunk (0 for users it does not hold)."""
    if chunk < HASHED:   # dense: spend[i] belongs to position chunk·2^16 + i
        return spend[(users - np.uint64(chunk << CHUNK_BITS)).astype(np.int64)] if len(spend) else np.zeros(1)
    if not len(ids):
        return np.zeros(1)
    at = np.minimum(np.searchsorted(ids, users), len(ids) - 1)
    return np.where(ids[at] == users, spend[at], 0.0)


def _merge(chunk: int, ids: np.ndarray, spend: np.ndarray, users: np.ndarray,
           epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """One chunk's (ids, spend) with ``epsilon`` added for ``users`` (a negative one refunds it)."""
    if chunk < HASHED:
        dense = spend.copy() if len(spend) else np.zeros(1 << CHUNK_BITS)
        dense[(users - np.uint64(chunk << CHUNK_BITS)).astype(np.int64)] += epsilon
        return ids, np.maximum(dense, 0.0)
    merged = np.union1d(ids, users)
    out = np.zeros(len(merged))
    out[np.searchsorted(merged, ids)] = spend
    out[np.searchsorted(merged, users)] += epsilon
    keep = out > 1e-12   # a refund leaves rounding dust; ids back at zero need no entry
    return merged[keep], out[keep]


def _pack(a: np.ndarray) -> bytes:
    return zlib.compress(a.tobytes(), 1)


def _unpack(blob: bytes | None, dtype) -> np.ndarray:
    return np.frombuffer(zlib.decompress(blob), dtype=dtype) if blob else np.zeros(0, dtype)


class Ledger:
    """The budget ledger: ``Ledger()`` in memory, ``Ledger('budget.ldpql')`` in a file."""

    def __init__(self, path: str | None = None):
        self.path = path or ":memory:"
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            if self.persistent:   # a write-ahead log: one sync per statement, and readers never block the writer
                self.db.execute("PRAGMA journal_mode = WAL")
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
    # A source's spend: `floor` (charged to every user, present and future) in `sources`, plus per-user amounts
    # in `spend`, one row per chunk of user ids with its peak, so that the most-charged user of the whole source
    # is one SQL max and a statement reads and rewrites only the chunks of its own users.
    def _peak(self, source_id: str, users: np.ndarray | None) -> float:
        """The largest spend of ``users`` (sorted unique ids; every user when None)."""
        row = self.db.execute("SELECT floor FROM sources WHERE source_id = ?", (source_id,)).fetchone()
        floor = row[0] if row else 0.0
        if users is None:
            top = self.db.execute("SELECT max(peak) FROM spend WHERE source_id = ?", (source_id,)).fetchone()[0]
            return floor + (top or 0.0)
        top = 0.0
        for chunk, mine in _chunks(users):
            top = max(top, float(_lookup(chunk, *self._chunk(source_id, chunk), mine).max(initial=0.0)))
        return floor + top

    def _chunk(self, source_id: str, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        row = self.db.execute("SELECT ids, spend FROM spend WHERE source_id = ? AND chunk = ?",
                              (source_id, chunk)).fetchone()
        return (_unpack(row[0], np.uint64), _unpack(row[1], np.float64)) if row else (np.zeros(0, np.uint64),
                                                                                       np.zeros(0))

    def _add(self, source_id: str, users: np.ndarray | None, epsilon: float) -> None:
        """Charge ``epsilon`` to ``users`` (every user when None); a negative one refunds it."""
        if users is None:
            self.db.execute("UPDATE sources SET floor = max(floor + ?, 0) WHERE source_id = ?", (epsilon, source_id))
            return
        rows = []
        for chunk, mine in _chunks(users):
            ids, spend = _merge(chunk, *self._chunk(source_id, chunk), mine, epsilon)
            rows.append((source_id, chunk, _pack(ids), _pack(spend), float(spend.max(initial=0.0))))
        self.db.executemany("INSERT OR REPLACE INTO spend VALUES (?, ?, ?, ?, ?)", rows)

    def _group(self, source_id: str) -> list[tuple]:
        """(source_id, ε budget, δ budget, δ spent) of this source and every source sharing a key with it."""
        rows = self.db.execute("SELECT source_id, keys, epsilon, delta, delta_spent FROM sources").fetchall()
        mine = next((set(json.loads(r[1])) for r in rows if r[0] == source_id), set())
        return [(r[0], r[2], r[3], r[4]) for r in rows if r[0] == source_id or mine & set(json.loads(r[1]))]

    def _left(self, source_id: str, users: np.ndarray | None) -> tuple[float, float]:
        """(ε left for the most-charged of ``users``, the budget it is counted against). A source that shares
        rows with others is checked against the smallest of their budgets and the peak spend of each of them."""
        group = self._group(source_id)
        if not group:
            return 0.0, 0.0
        budget = min(g[1] for g in group)
        others = sum(self._peak(g[0], None) for g in group if g[0] != source_id)
        return budget - others - self._peak(source_id, users), budget

    def remaining(self, source_id: str, users: np.ndarray | None = None) -> float:
        """What remains of the budget for the most-charged of ``users`` (every user of the source when None)."""
        return self._left(source_id, _ids(users))[0]

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
                self.collapse(source_id, table, "the data changed")
            self.db.execute("UPDATE sources SET fingerprint = ? WHERE source_id = ?", (fingerprint, source_id))

    def collapse(self, source_id: str, table: str, why: str) -> None:
        """Users are no longer known by their ids (the data changed under row positions, or the privacy unit
        changed): every user, present and future, is charged as the most-charged one; logged."""
        with self._transaction():
            peak = self._peak(source_id, None)
            self.db.execute("DELETE FROM spend WHERE source_id = ?", (source_id,))
            self.db.execute("UPDATE sources SET floor = ? WHERE source_id = ?", (peak, source_id))
            self._insert("users re-keyed", source_id, table, f"{why}: every user is now charged as the most-charged "
                         "one")

    def reserve(self, source_id: str, table: str, statement: str, users: np.ndarray | None, epsilon: float,
                predicate: str | None = None, n: int | None = None, epsilon0: float | None = None,
                delta: float = 0.0) -> int:
        """Check and charge ``epsilon`` to ``users`` (ids, or every user when None), atomically; returns the
        charge id. Raises BudgetExceededError (nothing written) when the most-charged covered user would exceed
        the budget, or δ would. A refund needs the same ``users`` (:meth:`refund`)."""
        users = _ids(users)
        with self._transaction():
            left, budget = self._left(source_id, users)
            if not fits(epsilon, left):
                raise BudgetExceededError(refusal_message(table, epsilon, max(left, 0.0), budget),
                                          hint=refusal_hint(left), context={"requested": epsilon, "table": table,
                                                                             "remaining": max(left, 0.0),
                                                                             "budget": budget,
                                                                             "fits": fitting_epsilon(left)})
            delta_left = self.remaining_delta(source_id)
            if delta > 0 and not fits(delta, delta_left):
                raise BudgetExceededError(f"this statement needs δ = {_fmt(delta)} of `{table}`, but only δ = "
                                          f"{_fmt(max(delta_left, 0.0))} remains\nNo budget was spent.",
                                          hint="use a smaller DELTA, or model = 'local' (pure ε, no δ)",
                                          context={"requested_delta": delta, "remaining_delta": max(delta_left, 0.0),
                                                   "table": table})
            self._apply(source_id, users, epsilon, delta)
            return self._insert("query", source_id, table, statement, predicate, epsilon, epsilon0, delta, n,
                                "reserved")

    def _apply(self, source_id: str, users: np.ndarray | None, epsilon: float, delta: float) -> None:
        self._add(source_id, users, epsilon)
        self.db.execute("UPDATE sources SET delta_spent = max(delta_spent + ?, 0) WHERE source_id = ?",
                        (delta, source_id))

    def commit(self, charge_id: int) -> None:
        """The reserved charge stands."""
        self.db.execute("UPDATE charges SET status = 'committed' WHERE id = ? AND status = 'reserved'", (charge_id,))

    def refund(self, charge_id: int, users: np.ndarray | None) -> None:
        """Undo a reserved charge over the same ``users`` it was reserved for: only for a statement that read no
        private value (charge on touch). A process that dies before it commits or refunds leaves the charge."""
        with self._transaction():
            row = self.db.execute("SELECT source_id, epsilon, delta, status FROM charges WHERE id = ?",
                                  (charge_id,)).fetchone()
            if row is None or row[3] != "reserved":
                return
            self._apply(row[0], _ids(users), -row[1], -row[2])
            self.db.execute("UPDATE charges SET status = 'refunded' WHERE id = ?", (charge_id,))

    def charges(self, source_id: str | None = None) -> list[Charge]:
        """Every ledger row (optionally of one source), oldest first."""
        sql, args = "SELECT * FROM charges", ()
        if source_id is not None:
            sql, args = sql + " WHERE source_id = ?", (source_id,)
        return [Charge(*row) for row in self.db.execute(sql + " ORDER BY id", args)]

    def statements(self, source_id: str) -> int:
        """How many charged statements stand on this source."""
        return self.db.execute("SELECT count(*) FROM charges WHERE source_id = ? AND kind = 'query' AND status = "
                               "'committed'", (source_id,)).fetchone()[0]

    # -- the owner's catalog ---------------------------------------------------------------------------------------
    def save_table(self, name: str, source_id: str, statement: str, database: str | None = None) -> None:
        """Record a declared table by name (replacing an earlier declaration of that name)."""
        self.db.execute("INSERT INTO catalog VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                        "source_id = excluded.source_id, statement = excluded.statement, database = excluded.database",
                        (name.lower(), source_id, statement, database))

    def bound_declarations(self, keys) -> list[dict]:
        """The declarations bound to every source that shares a key with ``keys`` (what a new one may only
        tighten)."""
        rows = self.db.execute("SELECT keys, declaration FROM sources WHERE declaration IS NOT NULL").fetchall()
        return [json.loads(d) for k, d in rows if set(keys) & set(json.loads(k))]

    def bind(self, source_id: str, declaration: dict, replace: bool = False) -> None:
        """Bind a declaration to a source: the first one stays, unless ``replace`` (an owner's ALTER, logged)."""
        cond = "" if replace else " AND declaration IS NULL"
        self.db.execute(f"UPDATE sources SET declaration = ? WHERE source_id = ?{cond}",
                        (json.dumps(declaration), source_id))

    def tables(self) -> list[tuple[str, str, str, str | None]]:
        """(name, source_id, CREATE statement, database) of every declared table."""
        return list(self.db.execute("SELECT name, source_id, statement, database FROM catalog ORDER BY rowid"))

    def forget_table(self, name: str) -> None:
        """DROP TABLE: the name goes; the spend and the bound declaration stay."""
        self.db.execute("DELETE FROM catalog WHERE name = ?", (name.lower(),))

    def secret(self) -> bytes:
        """A random key kept in the ledger, so that identities derived from content (a frame's hash) cannot be
        tested against guesses by anyone without the ledger file."""
        with self._transaction():
            row = self.db.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
            if row is None:
                row = (os.urandom(32),)
                self.db.execute("INSERT INTO meta VALUES ('secret', ?)", row)
            return bytes(row[0])

    # -- rows ----------------------------------------------------------------------------------------------------
    def _insert(self, kind, source_id, table, statement, predicate=None, epsilon=0.0, epsilon0=None, delta=0.0,
                users=None, status="logged") -> int:
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        statement = " ".join(statement.split()) if statement else statement  # one line per row
        cur = self.db.execute(
            "INSERT INTO charges (time, kind, source_id, table_name, statement, predicate, epsilon, epsilon0, "
            "delta, users, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (now, kind, source_id, table, statement, predicate, epsilon, epsilon0, delta, users, status))
        return int(cur.lastrowid)

    def transaction(self):
        """A write transaction (``with ledger.transaction(): ...``); nested ones join the outer one."""
        return _Immediate(self.db)

    _transaction = transaction

    def close(self) -> None:
        self.db.close()


def _ids(users) -> np.ndarray | None:
    """Sorted unique uint64 user ids, or None (every user)."""
    if users is None:
        return None
    users = np.asarray(users, dtype=np.uint64)
    return users if len(users) < 2 or bool(np.all(users[1:] > users[:-1])) else np.unique(users)  # positions: sorted


def fitting_epsilon(remaining: float) -> float | None:
    """The ε to suggest when a statement is refused: what remains, written with at most 3 significant digits
    (rounded down unless rounding to nearest still fits), or None when nothing remains.

    >>> fitting_epsilon(0.5), fitting_epsilon(4 / 3), fitting_epsilon(0.0999999999999), fitting_epsilon(0.0)
    (0.5, 1.33, 0.1, None)
    """
    if not remaining > 0 or not math.isfinite(remaining):
        return None
    nearest = float(f"{remaining:.3g}")
    if fits(nearest, remaining):
        return nearest
    step = 10.0 ** (math.floor(math.log10(remaining)) - 2)
    return float(f"{math.floor(remaining / step) * step:.3g}")


def refusal_hint(remaining: float) -> str:
    """The budget refusal's hint: an EPSILON that would fit, when one would (a contract pinned by tests)."""
    eps = fitting_epsilon(remaining)
    if eps is None:
        return "nothing remains for these users; a WHERE over other users may still fit (SHOW BUDGET shows the " \
               "most-charged user's)"
    return f"EPSILON {_fmt(eps)} would fit (what remains for the most-charged user it covers); EXPLAIN compares " \
           "plans at that ε; only the data owner can raise a budget (ALTER TABLE, logged)"


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
