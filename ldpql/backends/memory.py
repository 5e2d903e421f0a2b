"""Users held in memory as value counts: what the driver answers sub-interval rounds from, and the data of the
in-memory runs that tests and reproductions use.

:class:`SlicedUsers` is one aggregate's users on one cell as the counts of their encoded values. A round that
reaches the sub-interval [s0, s1) of them (a quantile search's batch, a hierarchical level) gets a random
subset, drawn without replacement from the users not asked yet: with users at independent uniform positions
(the backend's salted hash), the number in a new interval, given the intervals already taken, is binomial
over the users left with probability ℓ/(1 − taken length), and which users they are is a multivariate
hypergeometric draw from the counts left. That is the law of the hashed slice, and it needs one read of the
counts instead of one per round; disjoint intervals reach disjoint users, so no user answers twice.
"""

from __future__ import annotations

import bisect
import math
from typing import Mapping

import numpy as np

from ldpql import expr as E
from ldpql.backends.base import Backend, Cell, Counts, Population, Slice, unit_keys
from ldpql.errors import InternalError

SMALL_SUPPORT = 2048      # up to this many distinct values (or the users drawn), numpy's multivariate
                          # hypergeometric draws directly
PERMUTE_LIMIT = 1 << 22   # up to this many users, they are held as one random permutation of their values


class SlicedUsers:
    """The users of one protocol, asked in disjoint sub-intervals of [0, 1).

    Up to :data:`PERMUTE_LIMIT` users are held as a random permutation of their base values, and a round takes
    the next users of it (a uniformly random subset of those not asked yet; O(m) for m users, so BayesLearn's
    thousands of one-user rounds stay cheap); more are held as counts, and a round draws a multivariate
    hypergeometric subset of them. With ``exact`` positions user i sits at (i + 0.5)/n, so [s0, s1) holds
    exactly round(n·(s1 - s0)) users (a paper's batch sizes); otherwise the number is binomial, as under the
    backends' hash.
    """

    def __init__(self, base, values: np.ndarray, counts: np.ndarray, rng: np.random.Generator,
                 exact: bool = False):
        self.base, self.values, self.rng, self.exact = base, np.asarray(values), rng, exact
        counts = np.asarray(counts, dtype=np.int64)
        self.n, self.asked = int(counts.sum()), 0
        self.taken: list[tuple[float, float]] = []   # sorted by start, disjoint: a search asks thousands of rounds
        self.spent = 0.0                              # their summed widths, in the order they were taken
        self.drawn: dict[tuple[float, float], np.ndarray] = {}
        if self.n <= PERMUTE_LIMIT:
            self.users, self.left = rng.permutation(np.repeat(self.values, counts)), None
        else:
            self.users, self.left = None, counts.copy()

    def counts(self, encoding, users: tuple[float, float]) -> np.ndarray:
        """The input histogram of the round's users: a random subset, of the size described above."""
        s0, s1 = users
        if (s0, s1) in self.drawn:   # the same users again (their ε counted again by the driver's spend check)
            return self._histogram(encoding, self.drawn[(s0, s1)])
        i = bisect.bisect_left(self.taken, (s1, -math.inf))   # the taken parts starting before s1 end at [i - 1]
        if i and self.taken[i - 1][1] > s0:
            raise InternalError("a round's users overlap an earlier round's without being the same users")
        m = self._size(s0, s1)
        self.taken.insert(i, (s0, s1))
        self.spent += s1 - s0
        if self.users is not None:
            mine = self.users[self.asked:self.asked + m]
        else:
            mine = self._draw(m)
            self.left -= mine
        self.asked += m
        self.drawn[(s0, s1)] = mine
        return self._histogram(encoding, mine)

    def _histogram(self, encoding, mine: np.ndarray) -> np.ndarray:
        """Input histogram of a part's users: their base values (permutation mode) or counts per value."""
        if self.users is not None:
            return np.bincount(encoding.inputs(mine), minlength=encoding.size).astype(np.int64)
        return np.bincount(encoding.inputs(self.values), weights=mine, minlength=encoding.size).astype(np.int64)

    def _size(self, s0: float, s1: float) -> int:
        if self.exact:
            span = max(0, math.ceil(s1 * self.n - 0.5)) - max(0, math.ceil(s0 * self.n - 0.5))
            return min(span, self.n - self.asked)
        free, remaining = 1.0 - self.spent, self.n - self.asked
        return int(self.rng.binomial(remaining, min(1.0, (s1 - s0) / free))) if free > 0 and remaining else 0

    def _draw(self, m: int) -> np.ndarray:
        if m == 0:
            return np.zeros(len(self.left), dtype=np.int64)
        if len(self.left) <= max(SMALL_SUPPORT, m):   # O(distinct values), in C: cheaper than m picks then
            return multivariate_hypergeometric(self.rng, self.left, m)
        picks = self.rng.choice(int(self.left.sum()), m, replace=False)   # O(m log K), not O(K) per draw
        return np.bincount(np.searchsorted(np.cumsum(self.left), picks, side="right"), minlength=len(self.left))


NUMPY_LIMIT = 10 ** 9   # numpy's hypergeometric draws refuse populations (or parts) of this size and more


def hypergeometric(rng: np.random.Generator, good: int, bad: int, m: int) -> int:
    """How many of m users drawn without replacement from good + bad are good. numpy draws it below
    :data:`NUMPY_LIMIT`; above, exactly by rejection: X ~ Bin(good, p) and Y ~ Bin(bad, p) with p = m/(good + bad),
    conditioned on X + Y = m, is hypergeometric (any p); about sqrt(2πm(1 − p)) pairs per draw, drawn in batches."""
    if good < NUMPY_LIMIT and bad < NUMPY_LIMIT:
        return int(rng.hypergeometric(good, bad, m)) if m else 0
    total = good + bad
    if m in (0, total) or good == 0 or bad == 0:
        return m if bad == 0 else (0 if good == 0 else good)
    p = m / total
    batch = min(1 << 16, 16 + int(4 * math.sqrt(2 * math.pi * m * (1 - p))))   # ~4 accepted pairs expected
    while True:
        x, y = rng.binomial(good, p, batch), rng.binomial(bad, p, batch)
        hit = np.flatnonzero(x + y == m)
        if len(hit):
            return int(x[hit[0]])


def multivariate_hypergeometric(rng: np.random.Generator, colors: np.ndarray, m: int) -> np.ndarray:
    """How many of m users drawn without replacement from ``colors`` (users per value) hold each value: numpy's
    draw below :data:`NUMPY_LIMIT` users; above, the values are split in two halves, the halves' shares drawn by
    :func:`hypergeometric`, and each half drawn the same way (a median over 10^9 users failed here)."""
    colors = np.asarray(colors, dtype=np.int64)
    total = int(colors.sum())
    if total < NUMPY_LIMIT:
        return rng.multivariate_hypergeometric(colors, m, method="marginals")
    if len(colors) == 1:
        return np.array([m], dtype=np.int64)
    half = len(colors) // 2
    left = int(colors[:half].sum())
    k = hypergeometric(rng, left, total - left, m)
    return np.concatenate([multivariate_hypergeometric(rng, colors[:half], k),
                           multivariate_hypergeometric(rng, colors[half:], m - k)])


# ---- in-memory data: an ldpql.expr evaluator over numpy, with SQL's NULLs ------------------------------------

Vec = tuple[np.ndarray, np.ndarray]   # (values, null mask)


def evaluate(e: E.Expr, columns: Mapping[str, np.ndarray], n: int) -> Vec:
    """``e`` over ``n`` rows of ``columns`` with SQL semantics (NULLs propagate, least/greatest skip them,
    three-valued AND/OR), the same arithmetic as the SQL the backends render. None in an object column is
    NULL; NaN in a float column is NaN."""
    ev = lambda x: evaluate(x, columns, n)  # noqa: E731
    if isinstance(e, E.Column):
        v = np.asarray(columns[e.name])
        return v, (np.array([x is None for x in v], dtype=bool) if v.dtype == object else np.zeros(n, bool))
    if isinstance(e, E.Literal):
        return np.full(n, e.value if e.value is not None else 0, dtype=object if isinstance(e.value, str) else None), \
            np.full(n, e.value is None)
    if isinstance(e, (E.TryCast, E.Cast)):
        return _cast(ev(e.arg), e.type)
    if isinstance(e, E.Call):
        return _call(e.func, [ev(a) for a in e.args])
    if isinstance(e, E.BinOp):
        return _binop(e.op, ev(e.left), ev(e.right))
    if isinstance(e, E.Logic):
        return _logic(e.op, [ev(a) for a in e.args])
    if isinstance(e, E.Not):
        v, null = ev(e.arg)
        return ~v.astype(bool), null
    if isinstance(e, E.IsNull):
        null = ev(e.arg)[1]
        return (~null if e.negated else null), np.zeros(n, bool)
    if isinstance(e, E.In):
        x = ev(e.arg)
        return _logic("OR", [_binop("=", x, ev(v)) for v in e.values]) if not e.negated else \
            _logic("AND", [_binop("<>", x, ev(v)) for v in e.values])
    if isinstance(e, E.Case):
        when, wnull = ev(e.when)
        (a, anull), (b, bnull) = ev(e.then), ev(e.otherwise)
        pick = when.astype(bool) & ~wnull
        return np.where(pick, a, b), np.where(pick, anull, bnull)
    if isinstance(e, E.Vector):   # (n, d) doubles; a row is NULL if an item is (items are total: never)
        parts = [ev(x) for x in e.items]
        return np.stack([np.asarray(v, dtype=float) for v, _ in parts], axis=1), np.logical_or.reduce([m for _, m in parts])
    if isinstance(e, E.Position):
        x, null = ev(e.arg)
        pos = np.zeros(n, dtype=np.int64)
        for i, v in enumerate(e.values, 1):
            pos = np.where((pos == 0) & ~null & (x == v), i, pos)
        return pos, null | (pos == 0)
    raise TypeError(f"cannot evaluate {e!r}")


def _cast(x: Vec, to: str) -> Vec:
    v, null = x
    if to == "DOUBLE":
        out = np.full(len(v), np.nan)
        for i, item in enumerate(v) if v.dtype == object else ():
            try:   # DuckDB's TRY_CAST reads ASCII only: Python's float() would read '١' or '５' as digits
                if isinstance(item, str) and not item.isascii():
                    raise ValueError(item)
                out[i] = float(item) if item is not None and not isinstance(item, bool) else np.nan
            except (TypeError, ValueError):
                null = null.copy()
                null[i] = True
        return (out, null | np.array([i is None for i in v], bool)) if v.dtype == object else (v.astype(float), null)
    if to == "BIGINT":   # only ever applied to whole numbers (after floor, ceil, round, or a clamped integer)
        with np.errstate(invalid="ignore"):   # NaN in a CASE branch not taken
            return np.where(null, 0, np.rint(np.nan_to_num(np.asarray(v, dtype=float)))).astype(np.int64), null
    if to == "VARCHAR":
        return np.array([None if isinstance(i, float) and np.isnan(i) else str(i) for i in v], dtype=object), null
    if to == "BOOLEAN":
        return np.asarray(v).astype(bool), null
    raise TypeError(f"cannot cast to {to} in memory")


def _round(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)   # half away from zero, as SQL's round


def _call(func: str, args: list[Vec]) -> Vec:
    if func in ("least", "greatest"):   # NaN is above every number, as in SQL engines
        pick = np.fmin if func == "least" else np.maximum
        (v, null), rest = args[0], args[1:]
        for w, wnull in rest:
            v = np.where(null, w, np.where(wnull, v, pick(v, w)))
            null = null & wnull
        return v, null
    if func == "coalesce":
        (v, null), rest = args[0], args[1:]
        for w, wnull in rest:
            v, null = np.where(null, w, v), null & wnull
        return v, null
    (v, null), = args
    f = {"round": _round, "floor": np.floor, "ceil": np.ceil, "abs": np.abs,
         "isnan": lambda x: np.isnan(np.asarray(x, dtype=float))}[func]
    with np.errstate(invalid="ignore"):
        return f(np.where(null, 0, v).astype(float)), null


_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide,
          "%": np.mod, "^": np.bitwise_xor, "&": np.bitwise_and, ">>": np.right_shift,
          "=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
          ">=": np.greater_equal}


_COMPARE = ("=", "<>", "<", "<=", ">", ">=")


def _binop(op: str, a: Vec, b: Vec) -> Vec:
    with np.errstate(all="ignore"):
        if op in _COMPARE and a[0].dtype.kind == "f" or op in _COMPARE and b[0].dtype.kind == "f":
            return _compare(op, a[0].astype(float), b[0].astype(float)), a[1] | b[1]
        return _ARITH[op](a[0], b[0]), a[1] | b[1]


def _compare(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SQL engines' order on doubles (DuckDB's and Spark's): NaN equals NaN and is above every other value."""
    key = lambda v: np.where(np.isnan(v), 1, 0)  # noqa: E731
    kx, ky = key(x), key(y)
    x, y = np.where(kx == 1, 0.0, x), np.where(ky == 1, 0.0, y)
    less = (kx < ky) | ((kx == ky) & (x < y))
    equal = (kx == ky) & (x == y)
    return {"=": equal, "<>": ~equal, "<": less, "<=": less | equal, ">": ~(less | equal), ">=": ~less}[op]


def _logic(op: str, args: list[Vec]) -> Vec:
    vals = [(v.astype(bool), null) for v, null in args]
    if op == "AND":
        false = np.logical_or.reduce([~v & ~null for v, null in vals])
        null = ~false & np.logical_or.reduce([null for _, null in vals])
        return ~false & ~null, null
    true = np.logical_or.reduce([v & ~null for v, null in vals])
    null = ~true & np.logical_or.reduce([null for _, null in vals])
    return true, null


class MemoryBackend(Backend):
    """Users held in memory as the counts of their values of some columns (no GROUP BY, no WHERE): the data of
    the in-memory runs (:func:`simulate`). An expression over those columns is evaluated once per distinct row
    and its counts summed, so a column of 10^7 users with a few thousand values costs a few thousand."""

    name = "memory"

    def __init__(self, columns: Mapping[str, np.ndarray], counts: np.ndarray | None = None):
        self.columns = {k: np.asarray(v) for k, v in columns.items()}
        first = next(iter(self.columns.values()))
        self.counts = np.ones(len(first), np.int64) if counts is None else np.asarray(counts, dtype=np.int64)

    @classmethod
    def of_values(cls, name: str, values: np.ndarray) -> "MemoryBackend":
        """One column, stored as its distinct values and their counts."""
        distinct, counts = np.unique(np.asarray(values), return_counts=True)
        return cls({name: distinct}, counts)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def cells(self, pop: Population) -> list[Cell]:
        return [Cell((), self.n)]

    def covered_users(self, pop: Population) -> np.ndarray | None:
        return None

    def value_counts(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice,
                     where: E.Expr | None = None) -> Counts:
        if not users.everyone:
            raise ValueError("the in-memory backend holds counts, not users: it answers slices through SlicedUsers")
        n = len(self.counts)
        v, null = evaluate(x, self.columns, n)
        keep = self.counts > 0
        if where is not None:
            w, wnull = evaluate(where, self.columns, n)
            keep &= w.astype(bool) & ~wnull
        if (null & keep).any():
            raise ValueError("an encoding produced NULL: encodings must be total")
        distinct, inverse = np.unique(v[keep], return_inverse=True, axis=0 if v.ndim > 1 else None)
        inverse = inverse.reshape(-1)
        return {0: (distinct, np.bincount(inverse, weights=self.counts[keep], minlength=len(distinct)).astype(np.int64))}

    def batches(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice):
        if not users.everyone:
            raise ValueError("the in-memory backend answers per-user rounds over all of its users only")
        v, _ = evaluate(x, self.columns, len(self.counts))
        yield None, np.repeat(v, self.counts, axis=0)

    def _rows(self, pop: Population) -> np.ndarray:
        """The rows (with their counts) the public WHERE keeps."""
        keep = self.counts > 0
        if pop.where is not None:
            w, wnull = evaluate(pop.where, self.columns, len(self.counts))
            keep &= w.astype(bool) & ~wnull
        return np.repeat(np.arange(len(self.counts))[keep], self.counts[keep])

    def units(self, pop: Population) -> int:
        return len(np.unique(unit_keys(self.columns[pop.table.privacy_unit][self._rows(pop)])))

    def unit_rows(self, pop: Population, key: E.Expr, value: E.Expr):
        """One batch: every kept row (held in memory already)."""
        rows, n = self._rows(pop), len(self.counts)
        keys, values = evaluate(key, self.columns, n)[0], evaluate(value, self.columns, n)[0]
        yield (unit_keys(self.columns[pop.table.privacy_unit][rows]), np.asarray(keys, np.int64)[rows],
               np.asarray(values, float)[rows])


class FunctionBackend(Backend):
    """Users known only through ``histogram(encoding)``, the true input histogram of any encoding (a
    reproduction's data drawn lazily from a distribution, 10^9 users without holding them): every round is
    one exact read of all of them."""

    name = "function"

    def __init__(self, histogram):
        self.histogram = histogram

    def cells(self, pop: Population) -> list[Cell]:
        return [Cell((), 0)]

    def covered_users(self, pop: Population) -> np.ndarray | None:
        return None

    def histograms(self, encoding, counts, cells: list[int]) -> dict[int, np.ndarray]:
        return {0: np.asarray(self.histogram(encoding), dtype=np.int64)}

    def value_counts(self, pop, cells, x, users, where=None) -> Counts:
        raise ValueError("a histogram function answers whole rounds only")

    def batches(self, pop, cells, x, users):
        raise ValueError("a histogram function has no users to randomize one by one")
