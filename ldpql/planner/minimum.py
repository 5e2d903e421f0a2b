"""LDP_MIN and LDP_MAX: the one-round bucket search (issue 11), the locally private bisection of Fukuchi, Yu,
Haishima, Sakuma, "Locally Differentially Private Minimum Finding" (2019), and the naive Laplace baseline on
request.

    LDP_MIN(column [, alpha => a])      alpha => a: a known lower bound α₀ = a on the tail exponent α
    LDP_MAX(column [, alpha => a])      ('lower α' schedule of the bisection); default: 'unknown α'

The column needs a numeric domain (BETWEEN lo AND hi). No locally private mechanism can see a few users at the
extreme, so every candidate estimates a point with at most about γ of the users beyond it; EXPLAIN says which
γ. The candidates: ``buckets_oue`` / ``buckets_grr`` (every user reports its bucket of the domain once through
OUE or GRR; the answer is the start of the lowest bucket whose estimated share stands out from 0; the number of
buckets B and the threshold t minimise a bound that assumes users at least as dense near the extreme as a spread
over the whole domain), ``bisect_min`` / ``bisect_max`` (every user answers L threshold bits at ε/L; it finds
the point with the paper's γ of users beyond it, often a quarter or more of them). The planner takes the
smallest bound (docs/extremes.md, examples/extremes_grid.py). A statement is refused, with the n or ε that would
work, when no candidate can say which half of the domain holds the extreme (the bucket search's bound is half
the domain or more, and the bisection's γ ≥ 1 or the part of its bound that holds whatever the data, e^{-h_N} +
2^{-L}, is half the domain or more), unless OPTIONS (force = true). OPTIONS (mechanism =
'laplace_min') / 'laplace_max' runs the naive baseline (spec §2.6).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ldpql import expr as E
from ldpql.catalog import Column, NumericDomain, Table
from ldpql.errors import InternalError, PlanError
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.mechanisms.buckets import BucketPlan, Buckets, bucket_search, plan_buckets
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.identity import Identity
from ldpql.mechanisms.minimum import (
    Grid,
    GridEncoding,
    Lattice,
    Schedule,
    laplace_error,
    laplace_protocol,
    min_epsilon,
    min_users,
    schedule,
    search,
)
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.rr import keep_probability
from ldpql.planner.aggregates import AggregateSpec, _column_arg, _err, _missing_domain, register_aggregate
from ldpql.planner.plan import Candidate, Target

INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT")


@dataclass
class ExtremeTarget(Target):
    """A resolved LDP_MIN / LDP_MAX: the column and its domain, the α assumption, and the statement's options
    that decide whether a degenerate search may run (force) and how many rounds the deployment allows."""

    kind: str = "min"                              # 'min' | 'max'
    column_def: Column | None = None
    domain: NumericDomain | None = None
    alpha: float | None = None                     # α₀ of the 'lower α' schedule; None: 'unknown α'
    force: bool = False
    rounds_limit: int | None = None
    grouped: bool = False
    call_sql: str = ""
    confidence: float = 0.95

    @property
    def negate(self) -> bool:
        return self.kind == "max"


# ---- resolve -----------------------------------------------------------------------------------------------

def resolve_extreme(call: ast.Call, table: Table, text: str, select: ast.Select | None = None,
                    options: dict | None = None) -> ExtremeTarget:
    """A private numeric column with a declared BETWEEN domain; the optional alpha => α₀ argument. The
    statement's options (SET values included) say whether a degenerate search may run (force) and how many
    sequential rounds the deployment allows (rounds)."""
    ref, col = _column_arg(call, table, text)
    dom = col.domain
    name = call.name.upper()
    if not isinstance(dom, NumericDomain):
        if dom is None:
            raise _missing_domain(col, ref, text, name)
        raise _err(PlanError, f"{name} needs a numeric column; `{col.name}` is categorical", ref, text,
                   width=len(col.name), hint="declare it BETWEEN lo AND hi, or use LDP_HISTOGRAM for categories")
    options = options or {}
    half, mid = (dom.high - dom.low) / 2, (dom.high + dom.low) / 2
    scaled = dom.scaled(col.name)
    kind = "max" if name == "LDP_MAX" else "min"
    laplace = Encoding(_negated(scaled) if kind == "max" else scaled, None, col.name)
    limits = [r for r in (table.rounds, _option(options, "rounds")) if r]
    return ExtremeTarget(col.name, laplace, dom.describe(), None, col.name, affine=(half, mid), kind=kind,
                         column_def=col, domain=dom, alpha=_alpha(call, text), force=bool(_option(options, "force")),
                         rounds_limit=min(limits) if limits else None,
                         grouped=bool(select is not None and select.group_by), call_sql=call.sql(),
                         confidence=float(_option(options, "confidence") or 0.95))


def _alpha(call: ast.Call, text: str) -> float | None:
    arg = next((a for a in call.named if a.name == "alpha"), None)
    if arg is None:
        return None
    v = arg.value.value
    if isinstance(v, str) and v.lower() == "unknown":
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
        raise _err(PlanError, f"alpha must be a positive number (a known lower bound on the tail exponent α) or "
                   f"'unknown', not {arg.value.sql()}", arg, text, width=len(arg.name),
                   hint="alpha => 1 holds for any distribution with a density bounded away from 0 at its minimum; "
                        "leave it out to assume nothing")
    return float(v)


def _option(options: dict, key: str):
    return options.get(key)


# ---- the encoding of one round: each user's block in the round's grid ---------------------------------------

FETCH_LIMIT = 1 << 20   # users whose lattice indices the exact path may hold in memory for one search


def _negated(x: E.Expr) -> E.Expr:
    return E.op("*", -1.0, x)   # exact, and NULL stays NULL


def value_expr(col: Column, dom: NumericDomain, negate: bool) -> E.Expr:
    """The value the search compares (rounded for an INTEGER domain over a float column, as ``dom.clamped``
    does; negated for the maximum), not yet clamped: the lattice index clamps it. NULL where it does not
    convert (never raises)."""
    x: E.Expr = E.number(col.name)
    if dom.integer and col.dtype.upper() not in INTEGER_TYPES:
        x = E.call("round", x)
    return _negated(x) if negate else x


def index_expr(v: E.Expr, lattice: Lattice) -> E.Expr:
    """The lattice index g(v) as a DOUBLE (exact integers below 2^53), like Lattice.index."""
    return E.clamp(E.call("ceil", E.op("/", E.op("-", v, lattice.low), lattice.width)), 0.0, float(lattice.top))


def _is_missing(x: E.Expr) -> E.Expr:
    return E.Logic("OR", (E.IsNull(x), E.call("isnan", x)))


@dataclass(frozen=True)
class SearchEncoding(GridEncoding):
    """A grid encoding whose users the exact path counts by ranges of the value instead of by block.

    ``expr`` (the per-user path) is each user's block, NULL and NaN taking the block of the domain's NULL
    value. :meth:`histograms` gives the same histograms from at most two value-count reads for the first grid
    of a search and one for each later grid, and from memory once the users left in the search interval are
    few: it keeps, per group, the exact number of users at or below every lattice index it has seen, and grids
    nest exactly on the lattice."""

    value: E.Expr = None
    null_index: int = 0

    def histograms(self, counts, cells: list[int]) -> dict[int, np.ndarray]:
        state = counts.memo.setdefault(("ldpql.minimum", self.value), {})
        g = self.grid
        memo = state.setdefault("histograms", {})
        todo = [c for c in cells if (g, c) not in memo and _cumulative(state.get(c), g) is None]
        if todo:
            self._query(counts, todo, state)
        for c in cells:
            if (g, c) not in memo:
                memo[(g, c)] = np.diff(np.concatenate([[0], _cumulative(state[c], g), [state[c].total]]))
        return {c: memo[(g, c)] for c in cells}

    def _query(self, counts, cells, state) -> None:
        first = [c for c in cells if c not in state]
        if first:
            self._first(counts, first, state)
        rest = [c for c in cells if c not in first]
        if rest:
            self._refine(counts, rest, state)

    def _first(self, counts, cells, state) -> None:
        """The search's first grid (the whole lattice): one read, each user's block by arithmetic alone."""
        g, lat, x = self.grid, self.grid.lattice, self.value
        if (g.j0, g.j1) != (0, lat.top):
            raise InternalError("LDP_MIN exact path: a search must start with the whole domain")
        # q = ceil(g/B) (= ceil((v - a)/(W·B)) exactly: B is a power of two), clipped to [0, M]: 0 for v ≤ a,
        # M for v above the domain; NULL and NaN are counted apart (-1) and moved to the NULL value's index
        q = E.bounded_index(E.call("ceil", E.op("/", E.op("-", x, lat.low), lat.width * g.step)), g.size)
        found = counts(E.Case(_is_missing(x), E.Literal(-1), q))
        for c in cells:
            values, n = found.get(c, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            values = np.asarray(values, dtype=np.int64)
            nulls = int(n[values < 0].sum())
            blocks = np.bincount(values[values >= 0], weights=n[values >= 0], minlength=g.size + 1).astype(np.int64)
            known = state[c] = _Counts(int(blocks.sum()) + nulls, nulls, self.null_index)
            known.known[0] = int(blocks[0]) + known._nulls(-1, 0)
            known.add_blocks(g, np.concatenate([[0], blocks[1:], [0]]))

    def _refine(self, counts, cells, state) -> None:
        """A later grid, inside one block of an earlier one (so the counts at its ends are known): one read
        over the users in its range (a cheap comparison; the lattice index only for those), either held in
        memory when few or counted per block."""
        g, lat, x = self.grid, self.grid.lattice, self.value
        lo, hi = lat.point(g.j0) - lat.slack, lat.point(g.j1) + lat.slack  # v ≤ lo: index ≤ j0; v > hi: > j1
        inside = (E.op(">", x, lo), E.op("<=", x, hi))
        if sum(state[c].at(g.j1) - state[c].at(g.j0) for c in cells) <= FETCH_LIMIT:
            gi = index_expr(x, lat)
            found = counts(E.Cast(gi, "BIGINT"), E.Logic("AND", inside + (E.op(">", gi, g.j0), E.op("<=", gi, g.j1))))
            for c in cells:
                values, n = found.get(c, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
                state[c].keep_sample(g.j0, g.j1, np.repeat(np.asarray(values, dtype=np.int64), n))
            return
        q = E.bounded_index(E.call("ceil", E.op("-", E.op("/", E.op("-", x, lat.low), lat.width * g.step),
                                                 g.j0 // g.step)), g.size + 1)
        found = counts(q, E.Logic("AND", inside))
        for c in cells:
            values, n = found.get(c, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            blocks = np.bincount(np.asarray(values, dtype=np.int64), weights=n, minlength=g.size + 2).astype(np.int64)
            state[c].add_blocks(g, blocks)   # [≤ j0, blocks 0..M-1, > j1]


class _Counts:
    """What the exact path knows about one group's users on the lattice: their number (NULL/NaN users sit at
    the NULL value's index), the exact count at or below every index seen, and maybe a sample in memory."""

    def __init__(self, total: int, nulls: int, null_index: int):
        self.total, self.nulls, self.null_index = total, nulls, null_index
        self.known: dict[int, int] = {}
        self.sample: tuple[int, int, np.ndarray] | None = None

    def _nulls(self, lo: int, hi: int) -> int:
        """NULL/NaN users with lo < index ≤ hi."""
        return self.nulls if lo < self.null_index <= hi else 0

    def at(self, j: int) -> int | None:
        """Users with index ≤ j, when known."""
        if j in self.known:
            return self.known[j]
        if self.sample is not None and self.sample[0] <= j <= self.sample[1]:
            s0, _, values = self.sample
            return self.known[s0] + int(np.searchsorted(values, j, side="right")) + self._nulls(s0, j)
        return None

    def keep_sample(self, j0: int, j1: int, values: np.ndarray) -> None:
        expected = self.at(j1) - self.at(j0) - self._nulls(j0, j1)
        if len(values) != expected:
            raise InternalError(f"LDP_MIN exact path: {len(values)} users in a lattice range where the counts say "
                                f"{expected}")
        self.sample = (j0, j1, values)

    def add_blocks(self, g: Grid, blocks: np.ndarray) -> None:
        """Counts of one grid: blocks[1..M] the non-NULL users per block (blocks[0] and blocks[M+1], users of
        the range's margins at or below j0 and above j1, are already counted at j0 and at j1)."""
        base = self.known[g.j0]
        cum = base + np.cumsum(blocks[1:g.size + 1])
        before = self.known.get(g.j1)
        for k in range(1, g.size + 1):
            j = g.j0 + k * g.step
            self.known[j] = int(cum[k - 1]) + self._nulls(g.j0, j)
        if before is not None and before != self.known[g.j1]:
            raise InternalError(f"LDP_MIN exact path: {self.known[g.j1]} users at or below a lattice point where "
                                f"the counts say {before}")


def _cumulative(counts: _Counts | None, g: Grid) -> np.ndarray | None:
    """Users at or below each inner threshold of grid g, or None when not known yet."""
    if counts is None:
        return None
    out = []
    for k in range(1, g.size):
        v = counts.at(g.j0 + k * g.step)
        if v is None:
            return None
        out.append(v)
    return np.array(out, dtype=np.int64)


def cell_expr(col: Column, dom: NumericDomain, grid: Grid, negate: bool) -> E.Expr:
    """The user's block in ``grid`` (per-user path): the block of its lattice index, NULL and NaN taking the
    block of the domain's NULL value (the same as ``grid.cell(lattice.index(clamped value))``: the index is
    monotone, so clamping to the domain first changes nothing)."""
    v = value_expr(col, dom, negate)
    null = -dom.null_value if negate else dom.null_value
    null_block = int(grid.cell(grid.lattice.index(np.array([null])))[0])
    g = E.clamp(index_expr(v, grid.lattice), float(grid.j0), float(grid.j1))
    block = E.op("-", E.Cast(E.call("greatest", E.call("ceil", E.op("/", E.op("-", g, grid.j0), grid.step)), 1),
                             "BIGINT"), 1)
    return E.Case(_is_missing(v), E.Literal(null_block), block)


def _encoder(t: ExtremeTarget):
    v = value_expr(t.column_def, t.domain, t.negate)
    null = -t.domain.null_value if t.negate else t.domain.null_value

    def encode(grid: Grid) -> SearchEncoding:
        return SearchEncoding(cell_expr(t.column_def, t.domain, grid, t.negate), grid.size, t.column, grid=grid,
                              value=v, null_index=int(grid.lattice.index(np.array([null]))[0]))
    return encode


# ---- candidates --------------------------------------------------------------------------------------------

def extreme_candidates(t: ExtremeTarget) -> list[Candidate]:
    """The bisection, the one-round bucket search through each oracle of :data:`BUCKET_ORACLES` (the smallest
    bound wins), and the Laplace baseline (only when asked for by name)."""
    half, _ = t.affine
    alpha_ref = t.alpha or 1.0

    def predict(eps: float, n: int) -> float:
        return half * schedule(n, eps, t.alpha).bound(alpha_ref)

    def check(eps: float, n: int) -> str | None:
        if math.isinf(eps):
            return None
        s = schedule(n, eps, t.alpha)
        bisect.rounds = s.depth
        if t.rounds_limit and s.depth > t.rounds_limit:
            return f"needs {s.depth} sequential rounds at n = {n:,}; at most {t.rounds_limit} allowed"
        if (s.degenerate or _too_short(s)) and not t.force:
            return _bisection_reason(s) + "; OPTIONS (force = true) runs it anyway"
        return None

    def protocol(eps: float):
        def factory(n: int):
            s = schedule(n, eps, t.alpha)
            if (s.degenerate or _too_short(s)) and not t.force:
                raise PlanError(f"{t.call_sql}: a group of {n:,} users is too small at ε = {eps:g}: "
                                + _bisection_reason(s), hint="use fewer, larger groups, a larger ε, or "
                                                             "OPTIONS (force = true) to run it anyway")
            return search(n, s, t.domain.low, t.domain.high, _encoder(t), t.negate)
        return factory

    def describe(eps: float, n: int) -> list[str]:
        return explain_lines(t, eps, n)

    bisect = Candidate(f"bisect_{t.kind}", "local", 2, predict, protocol,
                       note=f"Algorithm 2, fixed data, α = {alpha_ref:g}", check=check, describe=describe)
    bisect.predicts, bisect.share_n = "mean_abs_bound", True

    def laplace_predict(eps: float, n: int) -> float:
        return half * laplace_error(n, eps)

    def laplace_check(eps: float, n: int) -> str | None:
        if "was asked for" in bisect.rejected:   # the planner's OPTIONS (mechanism = ...) override
            return None
        return f"the naive baseline runs only when asked for: OPTIONS (mechanism = 'laplace_{t.kind}')"

    def laplace(eps: float):
        return lambda n: laplace_protocol(n, eps, t.encoding, half, t.affine[1], t.negate)

    lap = Candidate(f"laplace_{t.kind}", "local", 1, laplace_predict, laplace,
                    note="the naive baseline, all users at the extreme", check=laplace_check)
    lap.predicts = "mean_abs"
    bisect.aliases = ("bisect",)
    # listed first: at EPSILON INF every prediction is 0 and the first wins, and the noise-off bisection is the
    # exact extreme (what EVALUATE compares with)
    return [bisect] + [bucket_candidate(t, o) for o in BUCKET_ORACLES] + [lap]


BUCKET_ORACLES = {"oue": OUE, "grr": GRR}   # frequency oracles with an exact-aggregate path (OLH: see docs)
DETECTION = 0.95   # γ is the share a bucket must hold to stand out with this probability (whatever `confidence`)


def _buckets(t: ExtremeTarget, size: int) -> Buckets:
    return Buckets(t.domain.low, t.domain.high, size, t.domain.integer)


def _most_buckets(t: ExtremeTarget) -> int:
    """At most one bucket per value of an INTEGER domain."""
    return t.domain.size if t.domain.integer else 1 << 30


@functools.lru_cache(maxsize=4096)
def _oracle(oracle: str, eps: float, size: int):
    """One oracle per (ε, buckets), built once: the plan below reads only its p, q and variance."""
    return Identity(size) if math.isinf(eps) else BUCKET_ORACLES[oracle](eps, size)


@functools.lru_cache(maxsize=4096)
def _bucket_plan(oracle: str, eps: float, n: int, most: int) -> BucketPlan:
    return plan_buckets(lambda d: _oracle(oracle, eps, d), max(n, 1), most)


def bucket_candidate(t: ExtremeTarget, oracle: str) -> Candidate:
    """The one-round bucket search through ``oracle``: (B, t) by the smallest bound, refused (unless forced)
    when that bound is no better than half the domain (it could not tell which half the extreme is in)."""
    width, most = 2 * t.affine[0], _most_buckets(t)

    def predict(eps: float, n: int) -> float:
        return width * _bucket_plan(oracle, eps, n, most).bound

    def check(eps: float, n: int) -> str | None:
        if math.isinf(eps) or t.force or _bucket_plan(oracle, eps, n, most).bound < 0.5:
            return None
        return _useless_reason(oracle, eps, n, most) + "; OPTIONS (force = true) runs it anyway"

    def protocol(eps: float):
        def factory(n: int):
            bp = _bucket_plan(oracle, eps, n, most)
            if not math.isinf(eps) and not t.force and bp.bound >= 0.5:   # a GROUP BY group smaller than planned
                raise PlanError(f"{t.call_sql}: a group of {n:,} users is too small at ε = {eps:g}: "
                                + _useless_reason(oracle, eps, n, most), hint="use fewer, larger groups, a larger "
                                "ε, or OPTIONS (force = true) to run it anyway")
            make = (lambda d: Identity(d)) if math.isinf(eps) else (lambda d: BUCKET_ORACLES[oracle](eps, d))
            gamma = bp.gamma(make, max(n, 1), DETECTION)
            b = _buckets(t, bp.size)
            enc = Encoding(b.expr(t.domain.clamped(t.column_def.name), t.negate), bp.size, t.column)
            return bucket_search(make(bp.size), b, bp.threshold, gamma, t.confidence, enc, t.negate)
        return factory

    c = Candidate(f"buckets_{oracle}", "local", 1, predict, protocol, check=check,
                  note=f"one {oracle.upper()} report of the user's bucket", aliases=("buckets",),
                  describe=lambda eps, n: bucket_lines(t, oracle, eps, n))
    c.predicts, c.share_n = "mean_abs_bound", True
    return c


@functools.lru_cache(maxsize=256)
def _useless_reason(oracle: str, eps: float, n: int, most: int) -> str:
    """Why the bucket search cannot say which half of the domain the extreme is in, and the n or ε that would."""
    def ok_n(m: int) -> bool:
        return _bucket_plan(oracle, eps, m, most).bound < 0.5

    def ok_eps(e: float) -> bool:
        return _bucket_plan(oracle, e, n, most).bound < 0.5

    lo, hi = n, min(2 * n + 1, 1 << 40)
    while hi < 1 << 40 and not ok_n(hi):   # gallop first: an ACCURACY search asks this at every ε it tries
        lo, hi = hi, min(2 * hi, 1 << 40)
    while lo < hi:   # the bound falls with n: the first n that works
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if not ok_n(mid) else (lo, mid)
    need_n = f"n ≥ {lo:,} at ε = {eps:g}" if ok_n(lo) else f"no n at ε = {eps:g}"
    e_lo, e_hi = eps, eps
    while not ok_eps(e_hi) and e_hi < EPSILON_CAP:   # (the oracles refuse ε above the engine's cap)
        e_lo, e_hi = e_hi, min(e_hi * 2, EPSILON_CAP)
    if ok_eps(e_hi):
        for _ in range(22):   # to a relative 4e-7, far below the 3 significant digits shown
            mid = math.sqrt(e_lo * e_hi)
            e_lo, e_hi = (e_lo, mid) if ok_eps(mid) else (mid, e_hi)
        need_eps = f"ε ≥ {_round_up(e_hi)} at n = {n:,}"
    else:
        need_eps = f"no ε up to the engine's cap {EPSILON_CAP:g} at n = {n:,}"
    return (f"too few users for this ε: its bound on E|error| is half the domain or more, so it could not tell "
            f"which half holds the extreme; needs {need_n}, or {need_eps}")


def bucket_lines(t: ExtremeTarget, oracle: str, eps: float, n: int) -> list[str]:
    """EXPLAIN of the bucket search: the buckets, the rule, what the answer estimates (γ), the bound and what it
    assumes, and what the interval means."""
    bp = _bucket_plan(oracle, eps, n, _most_buckets(t))
    b = _buckets(t, bp.size)
    what, side, inward = ("maximum", "above", "below") if t.negate else ("minimum", "below", "above")
    if math.isinf(eps):
        return [(f"buckets     noise off: the {'end' if t.negate else 'start'} of the {'highest' if t.negate else 'lowest'}"
                f" non-empty of {bp.size:,} buckets (width {b.width:.4g})")]
    make = lambda d: BUCKET_ORACLES[oracle](eps, d)
    gamma = bp.gamma(make, n, DETECTION)
    return [
        (f"buckets     {bp.size:,} buckets of width {b.width:.4g} over the domain; every user reports its bucket "
        f"once through {oracle.upper()} at ε = {eps:g} (one round)"),
        (f"answer      the {'end' if t.negate else 'start'} of the {'highest' if t.negate else 'lowest'} bucket whose "
        f"estimated share of users, alone or with the buckets {side} it, is more than t = {bp.threshold:g} "
         f"standard errors (se₀ = {bp.se0:.3g}) above 0"),
        (f"estimates   a point with at most about γ = {gamma:.3g} of the users {side} it: a bucket holding γ of "
        f"them stands out with probability ≥ {DETECTION:.0%} (normal approximation); more can be {side} it "
        f"when they are spread thinly over several buckets (a long thin tail)"),
        (f"bound       E|error| ≤ {2 * t.affine[0] * bp.bound:.4g} from the {what} (assumes every bucket next to "
        f"the {what}, {inward} it, holds at least 1/{bp.size} = {1 / bp.size:.3g} of the users, as a spread over the whole "
        f"domain would; such a bucket stands out with probability {bp.detect:.3f})"),
        (f"interval    the buckets holding the point with γ of the users {side} it, from one-sided bounds at "
        f"{(1 + t.confidence) / 2:.4g} on the cumulative shares: ≥ {t.confidence:.0%}, more when it is deep "
        f"inside a bucket")]


def _too_short(s: Schedule) -> bool:
    """Theorem 4's bound has two terms that hold whatever the data: e^{-h_N} (a wrong step, Lemma 2) and 2^{-L}
    (the resolution of L rounds), in half-widths of the domain. When they alone reach half the domain (a
    search of one round at n = 3: 0.92 + 0.5), not even users all at the extreme let it tell which half holds
    it, so it is refused like a bucket search whose bound is half the domain."""
    return not s.exact and math.exp(-s.h) + 2.0 ** -s.depth >= 1


def _bisection_reason(s: Schedule) -> str:
    if s.degenerate:
        return degenerate_reason(s)
    return (f"{s.depth} round(s) and h_N = {s.h:.3g} at n = {s.n:,}: the part of its bound that holds whatever the "
            f"data, e^(-h_N) + 2^(-L), is half the domain or more, so it could not tell which half holds the "
            f"extreme; too few users")


def degenerate_reason(s: Schedule) -> str:
    """Why a schedule with γ ≥ 1 cannot find the extreme, and the n or ε that would."""
    users = min_users(s.epsilon, s.alpha)
    eps = min_epsilon(s.n, s.alpha)
    fix = f"γ < 1 needs n ≥ {users:,} at ε = {s.epsilon:g}" if users else f"no n gives γ < 1 at ε = {s.epsilon:g}"
    fix += f", or ε ≥ {_round_up(eps)} at n = {s.n:,}" if eps else f" (no ε is enough at n = {s.n:,})"
    return (f"γ = {s.gamma:.3g} ≥ 1 at n = {s.n:,} and ε = {s.epsilon:g}: too few users for this ε, the search "
            f"would only drift to the end of the domain; {fix}")


def _round_up(x: float, digits: int = 3) -> str:
    """x rounded up to ``digits`` significant digits (a threshold shown must still be enough)."""
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(x)))
    return f"{math.ceil(x * scale) / scale:g}"


def explain_lines(t: ExtremeTarget, eps: float, n: int) -> list[str]:
    """EXPLAIN: the schedule, L, h_N, γ, ε per round, the rounds as the users' ε spend, the error bound with its
    assumption on α, the interval the result will carry, and the groups."""
    half, _ = t.affine
    s = schedule(n, eps, t.alpha)
    what = "maximum" if t.negate else "minimum"
    if s.exact:
        resolution = 2 * half * 2.0 ** -(s.depth + 1)
        return [f"schedule    noise off: Algorithm 1 (exact bisection), {s.depth} rounds, resolution {resolution:.3g}"]
    alpha_ref = t.alpha or 1.0
    p_flip = 1 - keep_probability(s.round_epsilon)
    corollary = (f"Corollary 1: O((ln³n/(ε² n))^(1/2α)) for every α ≥ {t.alpha:g}" if t.alpha is not None else
                 "Corollary 2: O((ln⁶n/(ε² n))^(1/2α)) for every α > 0")
    schedule_line = f"schedule    {s.name}: L = {s.depth}, h_N = {s.h:.4g}, γ = {s.gamma:.4g} (at n = {n:,})"
    rounds_line = (f"rounds      every user answers all {s.depth} rounds by binary RR at ε/L = {s.round_epsilon:.4g} "
                   f"(flip probability {p_flip:.4f}): {s.depth} × {s.round_epsilon:.4g} = ε {eps:g} per user")
    side = "above" if t.negate else "below"
    estimates_line = (f"estimates   the point with γ = {s.gamma:.3g} of the users {side} it (Φ' ≥ γ keeps the "
                      f"{'upper' if t.negate else 'lower'} half), not the {what} itself: Fukuchi et al. 2019, App. B.1")
    bound_line = (f"bound       E|error| ≤ {half * s.bound(alpha_ref):.4g} from the {what} (Theorem 4, fixed data; "
                  f"assumes at least (r/width)^{alpha_ref:g} of the users within r of the {what} for every r, as "
                  f"a spread over the whole domain has; thinner tails can exceed it); rate (L² h_N/(ε² n))^(1/2α) = {half * s.rate(alpha_ref):.4g} (Theorem 2; "
                  f"{corollary})")
    interval_line = (f"interval    one-sided: {what} {'≥ bottom' if t.negate else '≤ top'} of the final interval "
                     f"with probability ≥ {s.confidence():.6g} (exact binomial tail of a wrong step, union over L "
                     "rounds; no assumption on the data); the other end is the domain's")
    lines = [schedule_line, rounds_line, estimates_line, bound_line, interval_line]
    if t.grouped:
        users = min_users(eps, t.alpha)
        need = (f"γ < 1 needs n ≥ {users:,} per group at ε = {eps:g}" if users and users > 2 else
                f"γ < 1 for every group size at ε = {eps:g}")
        lines.append(f"groups      each group runs its own search, with L, h_N and γ from its own n; {need}")
    if s.degenerate:
        lines.append("WARNING     " + degenerate_reason(s) + " (force = true)")
    return lines


NAMED_ARGS = {"alpha": "a known lower bound α on the tail exponent of the data near the extreme (Fukuchi et al. 2019); default: α unknown"}
register_aggregate(AggregateSpec("LDP_MIN", "LDP_MIN(column [, alpha => a])",
                                 "a low extreme of a bounded numeric column: a point with at most about γ of the users below it", "min",
                                 resolve_extreme, extreme_candidates, named_args=NAMED_ARGS,
                                 statement_aware=True))
register_aggregate(AggregateSpec("LDP_MAX", "LDP_MAX(column [, alpha => a])",
                                 "a high extreme of a bounded numeric column: a point with at most about γ of the users above it", "max",
                                 resolve_extreme, extreme_candidates, named_args=NAMED_ARGS,
                                 statement_aware=True))
