"""The seam between the protocol driver and the engines that read data (DESIGN §4.2, "Backends").

A :class:`Backend` answers what a round needs, and nothing else: the statement's public cells and their user
counts, which users a statement covers (for the ledger), the value counts of an encoding over a slice of the
users (the exact-aggregate path: one scan answers every threshold and level question about that encoding),
and per-user randomized summaries over row batches (the per-user path). Encodings arrive as
:mod:`ldpql.expr` values; each backend renders them its own way.

Users and slices. A user's identity is ldpql's own 64-bit key (DESIGN §4.3): the lower 64 bits of the md5 of
its privacy unit's text, or its row position in a source whose rows keep their order. A statement splits its
users with a fresh random salt: user k is in the slice [u0, u1) when :func:`slice_uniform` (k, salt) is in it.
That function is integer arithmetic on 32-bit halves (every product below 2^63), written once here as
:func:`slice_steps` and rendered by every backend, so a user lands in the same slice on every engine; numpy's
:func:`slice_uniform` is its reference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ldpql import expr as E
from ldpql.catalog import Table
from ldpql.errors import ExecuteError
from ldpql.grammar import ast

UNIT_BATCH = 1 << 16   # privacy units per batch of a key-value read (each with all of its rows)


def unit_keys(values) -> np.ndarray:
    """ldpql's 64-bit user ids of privacy-unit values, as DuckDB's ``md5_number_lower(CAST(u AS VARCHAR))``: bytes
    8-15 of the md5 of the value's text, little-endian (for units held in memory; integers and text)."""
    import hashlib

    def text(v) -> str:
        return str(int(v)) if isinstance(v, (int, np.integer)) else str(v)
    return np.array([int.from_bytes(hashlib.md5(text(v).encode()).digest()[8:16], "little") for v in values],
                    dtype=np.uint64)


@dataclass(frozen=True)
class Cell:
    """One GROUP BY group (the whole population when there is no GROUP BY): its key and user count."""

    key: tuple
    n: int


@dataclass(frozen=True)
class Population:
    """The users of one statement: a declared table, its public WHERE, and its public GROUP BY columns."""

    table: Table
    where: E.Expr | None = None
    group_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slice:
    """The users whose :func:`slice_uniform` under ``salt`` lies in [u0, u1); (0, 1) is every user."""

    u0: float = 0.0
    u1: float = 1.0
    salt: int = 0

    @property
    def everyone(self) -> bool:
        return (self.u0, self.u1) == (0.0, 1.0)


Counts = dict[int, tuple[np.ndarray, np.ndarray]]
"""Per cell index: the distinct values of an encoding among the cell's users (ascending) and their counts."""


class Backend(ABC):
    """What the protocol driver needs from an engine. Every method reads public facts or private values only
    through the expressions it is given, and raises only :class:`ldpql.ExecuteError` (with no data in it)."""

    name: str = "backend"
    errors: tuple[type[BaseException], ...] = ()   # the engine's own errors, which the driver reports as ExecuteError

    @abstractmethod
    def cells(self, pop: Population) -> list[Cell]:
        """The GROUP BY cells and their user counts (public), in a fixed order."""

    @abstractmethod
    def covered_users(self, pop: Population) -> np.ndarray | None:
        """The keys of the users the statement covers, for the ledger: None for every user of the source (no
        WHERE, or users without identity); reads the public WHERE and the key only."""

    @abstractmethod
    def value_counts(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice,
                     where: E.Expr | None = None) -> Counts:
        """Per cell, the value counts of ``x`` over the users in ``users`` (and ``where``, a condition on the
        private value that only narrows a search): one scan."""

    @abstractmethod
    def batches(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice) -> Iterator[tuple[np.ndarray | None, np.ndarray]]:
        """The users' ``x`` in row batches of bounded size: (cell index per row, or None without GROUP BY; x),
        in the source's row order."""

    def keyed_values(self, pop: Population, cells: list[Cell], x: E.Expr,
                     where: E.Expr | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Every user's (cell index, 64-bit key, ``x``) over the statement's users (and ``where``), for
        :func:`sliced_counts`: what an EVALUATE that repeats a users split reads once instead of once a run. None
        where the backend does not offer it (the driver then reads :meth:`value_counts` for every slice)."""
        return None

    def histograms(self, encoding, counts, cells: list[int]) -> dict[int, np.ndarray]:
        """Every cell's input histogram of one exact round over all of the aggregate's users: the encoding's own
        reading of the value counts ``counts(expr)`` (an in-memory backend may answer otherwise)."""
        return encoding.histograms(counts, cells)

    def interrupt(self) -> None:
        """Stop a running read (another thread calls this when the consumer stops early)."""

    # -- key-value statements: several rows per privacy unit (a table declared with SPARSITY) ----------------------
    def units(self, pop: Population) -> int:
        """The number of privacy units with a row after the public WHERE (public: reads the unit and WHERE only)."""
        raise ExecuteError(f"the {self.name} backend does not run key-value statements")

    def unit_rows(self, pop: Population, key: E.Expr, value: E.Expr) -> Iterator[tuple[np.ndarray, ...]]:
        """Every unit's rows after the public WHERE, in batches that never split a unit: (user id per row as
        uint64, ``key`` per row as int64, ``value`` per row as float). Batches hold a bounded number of units; the
        order of units and of a unit's rows is the engine's (a seeded run sorts them)."""
        raise ExecuteError(f"the {self.name} backend does not run key-value statements")


# ---- values of a Vector encoding (several numbers per user) ------------------------------------------------------

def rows_of(values) -> np.ndarray:
    """An encoding's values as numpy: a :class:`ldpql.expr.Vector`'s lists (an Arrow list column, or numpy's
    object array of arrays) as an (n, d) array of doubles; any other values as they are."""
    import pyarrow as pa  # (imported here: the seam itself needs no Arrow)

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            return arr.to_numpy(zero_copy_only=False)
        flat = arr.flatten().to_numpy(zero_copy_only=False).astype(float)
        return flat.reshape(len(arr), -1) if len(arr) else flat.reshape(0, 0)
    v = np.asarray(values)
    if v.dtype == object and len(v) and isinstance(v[0], (np.ndarray, list, tuple)):
        return np.stack([np.asarray(row, dtype=float) for row in v])
    return v


def value_order(xs: np.ndarray) -> np.ndarray:
    """The stable ascending order of an encoding's distinct values: rows of a Vector lexicographically."""
    return np.argsort(xs, kind="stable") if xs.ndim == 1 else np.lexsort(xs.T[::-1])


# ---- the public WHERE --------------------------------------------------------------------------------------------

def where_expr(e: ast.Expr) -> E.Expr:
    """A grammar expression (the statement's public WHERE) as an Expr; AND/OR chains stay flat."""
    if isinstance(e, ast.BoolOp):
        return E.Logic(e.op, tuple(where_expr(x) for x in ast.operands(e)))
    if isinstance(e, ast.ColumnRef):
        return E.Column(e.name)
    if isinstance(e, ast.Literal):
        return E.Literal(e.value)
    if isinstance(e, ast.Comparison):
        return E.BinOp("<>" if e.op == "!=" else e.op, where_expr(e.left), where_expr(e.right))
    if isinstance(e, ast.Not):
        return E.Not(where_expr(e.operand))
    if isinstance(e, ast.IsNull):
        return E.IsNull(where_expr(e.operand), e.negated)
    if isinstance(e, ast.InList):
        return E.In(where_expr(e.operand), tuple(where_expr(v) for v in e.values), e.negated)
    if isinstance(e, ast.Between):
        inside = E.Logic("AND", (E.BinOp(">=", where_expr(e.operand), where_expr(e.low)),
                               E.BinOp("<=", where_expr(e.operand), where_expr(e.high))))
        return E.Not(inside) if e.negated else inside
    raise TypeError(f"not an expression: {e!r}")


# ---- the portable user slice -----------------------------------------------------------------------------------

MASK32 = (1 << 32) - 1
_ROUNDS = ((1540483477, 15, 668265263, 13), (374761393, 16, 1640531527, 15), (1540483477, 13, 668265263, 16))
"""(multiplier a, shift a, multiplier b, shift b) per round: odd constants below 2^31 (so a 32-bit value times
one stays below 2^63), from MurmurHash2 and xxHash."""


def salt_halves(salt: int) -> tuple[int, int]:
    """Two 31-bit words of a statement's salt."""
    return salt & 0x7FFFFFFF, (salt >> 31) & 0x7FFFFFFF


def slice_uniform(keys: np.ndarray, salt: int) -> np.ndarray:
    """The reference of the user slice: a uniform in [0, 1) on a 2^-32 grid per 64-bit user key."""
    k = np.asarray(keys).astype(np.uint64)
    s0, s1 = salt_halves(salt)
    a = (k & np.uint64(MASK32)).astype(np.int64) ^ s0
    b = (k >> np.uint64(32)).astype(np.int64) ^ s1
    for ma, sa, mb, sb in _ROUNDS:
        a = (a * ma + b) & MASK32
        a ^= a >> sa
        b = (b * mb + a) & MASK32
        b ^= b >> sb
    return (a ^ b).astype(np.float64) / 2.0 ** 32


def sliced_counts(keyed: tuple[np.ndarray, np.ndarray, np.ndarray], users: Slice) -> Counts:
    """:meth:`Backend.value_counts` over the slice ``users`` from :meth:`Backend.keyed_values`' rows, the slice
    drawn by :func:`slice_uniform` as the backends' SQL draws it (the same users, the same counts)."""
    cell, key, xs = keyed
    u = slice_uniform(key, users.salt)
    mine = (u >= users.u0) & (u < users.u1)
    cell, xs = cell[mine], xs[mine]
    out: Counts = {}
    for c in np.unique(cell):
        values, n = np.unique(xs[cell == c], axis=0 if xs.ndim > 1 else None, return_counts=True)
        order = value_order(values)
        out[int(c)] = (values[order], n[order].astype(np.int64))
    return out


def slice_steps(salt: int) -> list[tuple[str, E.Expr]]:
    """:func:`slice_uniform` as assignments over the BIGINT columns ``__lo`` and ``__hi`` (the key's halves):
    each step defines one column from earlier ones; the last, ``__u``, is the uniform. A backend renders them
    as nested projections (an expression tree would repeat each intermediate)."""
    s0, s1 = salt_halves(salt)
    steps = [("__a", E.op("^", E.Column("__lo"), s0)), ("__b", E.op("^", E.Column("__hi"), s1))]
    for i, (ma, sa, mb, sb) in enumerate(_ROUNDS):
        a, b = ("__a", "__b") if i == 0 else (f"__a{i}", f"__b{i}")
        na, nb = f"__a{i + 1}", f"__b{i + 1}"
        mixed = E.op("%", E.op("+", E.op("*", E.Column(a), ma), E.Column(b)), MASK32 + 1)
        steps.append((f"{na}m", mixed))
        steps.append((na, E.op("^", E.Column(f"{na}m"), E.op(">>", E.Column(f"{na}m"), sa))))
        mixed = E.op("%", E.op("+", E.op("*", E.Column(b), mb), E.Column(na)), MASK32 + 1)
        steps.append((f"{nb}m", mixed))
        steps.append((nb, E.op("^", E.Column(f"{nb}m"), E.op(">>", E.Column(f"{nb}m"), sb))))
    last = len(_ROUNDS)
    steps.append(("__u", E.op("/", E.Cast(E.op("^", E.Column(f"__a{last}"), E.Column(f"__b{last}")), "DOUBLE"),
                              float(2 ** 32))))
    return steps
