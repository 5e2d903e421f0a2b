"""The LDP aggregates the language knows, resolved against a registry so that a family only registers itself.

Each :class:`AggregateSpec` resolves a call against the catalog (which column, which declared domain, the
encoding every user applies locally) and lists its candidate mechanisms, each with a closed-form predicted
error. The planner chooses among them; nothing here reads data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ldpql import expr as E
from ldpql.catalog import BooleanDomain, NumericDomain, Table, type_kind
from ldpql.errors import PlanError, PrivacyError
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding, Identity, Randomizer, conditional, one_round, rare
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.laplace import LaplaceMean
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.rr import RandomizedResponse
from ldpql.mechanisms.square_wave import SquareWave
from ldpql.planner.plan import Candidate, Target


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate function of the language."""

    name: str
    signature: str
    doc: str
    kind: str
    resolve: Callable[..., Target]
    candidates: Callable[[Target], list[Candidate]]
    named_args: dict[str, str] = field(default_factory=dict)   # its own named arguments -> what each takes
    # resolve(call, table, text) by default; a statement-aware family also gets select= (the statement) and
    # options= (the statement's OPTIONS over the session's SET values, already checked)
    statement_aware: bool = False


AGGREGATES: dict[str, AggregateSpec] = {}
# Named arguments every aggregate takes, and what they take (HELP shows them with the family's own)
COMMON_ARGS = {"epsilon": "a fixed share of the statement's ε for this aggregate, e.g. epsilon => 0.3",
               "mechanism": "run this mechanism (EXPLAIN lists the candidates), e.g. mechanism => 'grr'",
               "accuracy": "with ACCURACY: this aggregate's own ±a in its own unit, e.g. accuracy => 50"}


def register_aggregate(spec: AggregateSpec, *aliases: str) -> None:
    """Make ``spec`` (and its aliases) callable from the language."""
    for name in (spec.name, *aliases):
        AGGREGATES[name.upper()] = spec


def _err(cls, message: str, node, text: str, hint: str | None = None, width: int = 1):
    pos = getattr(node, "pos", ast.Pos())
    return cls(message, hint=hint).with_position(text, pos.line or None, pos.column or None, width)


def _column_arg(call: ast.Call, table: Table, text: str, nargs: int = 1):
    if call.star or len(call.args) != nargs or not isinstance(call.args[0], ast.ColumnRef):
        raise _err(PlanError, f"{call.name.upper()} takes a column" + (f" and {nargs - 1} more argument(s)"
                   if nargs > 1 else ""), call, text, hint=f"write {AGGREGATES[call.name.upper()].signature}")
    ref = call.args[0]
    col = table.column(ref.name, ref.pos, text)
    if col.public:
        raise _err(PlanError, f"`{col.name}` is a public column; LDP aggregates answer questions about private "
                   "columns", ref, text, width=len(ref.name),
                   hint="public columns need no noise: use them in WHERE or GROUP BY")
    return ref, col


def _missing_domain(col, ref, text: str, wanted: str):
    return _err(PrivacyError, f"{wanted} of `{col.name}` needs a declared domain, and `{col.name}` has none",
                ref, text, width=len(col.name),
                hint=f"declare it in CREATE TABLE: {col.name} PRIVATE BETWEEN lo AND hi (numbers) or "
                     f"IN ('a', 'b', ...) (categories); domains are never read from the data")


def candidate(name: str, make: Callable[[float], Randomizer], target: Target, reference: np.ndarray,
              scale=lambda n: 1.0, shift=lambda n: 0.0, note: str = "", worst_case: bool = False) -> Candidate:
    """A one-round local candidate: its predicted error is scale(n)·sqrt(Σ Var) at the reference truth, or with
    ``worst_case`` (a value in [-1, 1]) the largest over every data set (:func:`worst_case_variance`); its
    sampling variance under a users split is scale(N)² times the reference's spread (Σ 1 - x² for a value in
    [-1, 1], Σ f(1 - f) for frequencies: the worst case when the reference is x = 0 or uniform), or with
    ``worst_case`` the largest of noise and sampling together over every data set."""
    spread = float(np.sum(1 - reference ** 2 if target.encoding.size is None else reference * (1 - reference)))

    def predict(eps: float, n: int) -> float:
        r, n = make(eps), max(n, 1)
        var = worst_case_variance(r, n) if worst_case else float(np.sum(r.variance(reference, n)))
        return abs(scale(n)) * math.sqrt(var)

    def split_se(eps: float, population: int, n: int) -> float:
        return abs(scale(population)) * math.sqrt(worst_case_variance(make(eps), n, 1 - n / population))

    def typical(eps: float, population: int, share: float = 1.0) -> float:
        n, r = max(int(population * share), 1), make(eps)
        # every variance is linear in E[x²]: its average over E[x²] uniform in [0, 1] is at E[x²] = 1/2
        var = float(r.variance(np.zeros(1), n, second_moment=0.5)[0]) + max(0.0, 1 - n / max(population, 1)) * 0.5 / n
        return abs(scale(population)) * math.sqrt(var)

    def protocol(eps: float):
        r = Identity.like(make(1.0)) if math.isinf(eps) else make(eps)
        return lambda n: one_round(r, target.encoding, scale(n), shift(n), population=n)

    return Candidate(name, "local", 1, predict, protocol, note, sampling=lambda pop: scale(pop) ** 2 * spread,
                     scale=scale, split_se=split_se if worst_case else None, typical=typical if worst_case else None)


# ---- LDP_MEAN / LDP_AVG and LDP_SUM -----------------------------------------------------------------------

NULLS_FORMS = {"skip": True, "midpoint": False, "default": False}
MEAN_ARGS = {"nulls": "'skip' (over the users with a value, as SQL's AVG; the default on a nullable column) or "
                      "'midpoint'/'default' (NULL counts as the column's DEFAULT, else its midpoint), e.g. "
                      "nulls => 'midpoint'",
             "present": "the least share of users with a value the analyst assumes (public, never read from the data), "
                        "at which a mean over the users with a value is predicted, e.g. present => 0.4; ACCURACY "
                        "needs it on such a mean"}


@dataclass(frozen=True)
class Nulls:
    """How a numeric mean or sum treats NULL (and NaN, and values that do not convert), from public facts only:
    ``skip`` (SQL's: over the users with a value, estimated privately) or NULL counted as ``value`` (the DEFAULT,
    else the midpoint); ``why`` names the declaration or argument that decided it."""

    skip: bool
    value: float
    why: str
    low: float
    high: float
    missing: Encoding            # the scaled value, or conditional.MISSING for a NULL: keeps NULL apart
    zero: Encoding | None        # the scaled value with NULL as 0 (for a sum), None when 0 is outside the range
    nullable: bool               # not declared NOT NULL: NULLs may be in the data
    midpoint: Encoding           # the scaled value with NULL as the midpoint (0 on the scaled axis)
    present: Encoding            # 1 where the row has a value, else 0
    share: float | None = None   # present => p: the analyst's least share with a value, predictions are made at


def _nulls(call: ast.Call, col, dom: NumericDomain, text: str) -> Nulls:
    """The statement's NULL semantics for ``col``: ``nulls =>`` if given, else the declaration's."""
    arg = next((a for a in call.named if a.name == "nulls"), None)
    if arg is not None:
        v = arg.value.value
        if not isinstance(v, str) or v.lower() not in NULLS_FORMS:
            raise _err(PlanError, f"nulls => takes 'skip', 'midpoint' or 'default', not {arg.value.sql()}", arg, text,
                       width=len(arg.sql()), hint="nulls => 'skip' (the mean over the users with a value, as SQL's "
                       "AVG) or nulls => 'midpoint' (NULL counts as the column's DEFAULT, else its midpoint)")
        skip, why = NULLS_FORMS[v.lower()], f"nulls => '{v.lower()}'"
    else:
        skip = dom.skips_nulls
        why = ("declared NOT NULL" if dom.not_null else "declared DEFAULT" if dom.default is not None else
               "nullable: neither NOT NULL nor DEFAULT is declared")
    share = _present(call, skip, dom, text)
    zero = Encoding(dom.scaled(col.name, 0.0), None, col.name) if dom.low <= 0 <= dom.high else None
    x = E.number(col.name)
    present = E.indicator(E.Not(E.Logic("OR", (E.IsNull(x), E.call("isnan", x)))))
    return Nulls(skip, dom.null_value, why, dom.low, dom.high,
                 Encoding(dom.scaled_or(col.name, conditional.MISSING), None, col.name), zero, not dom.not_null,
                 Encoding(dom.scaled(col.name, (dom.low + dom.high) / 2), None, col.name),
                 Encoding(present, 2, f"{col.name} IS NOT NULL"), share)


def _present(call: ast.Call, skip: bool, dom: NumericDomain, text: str) -> float | None:
    """``present => p``: the analyst's public assumption of the least share of users with a value, in (0, 1], at
    which a mean over the users with a value is predicted (the share itself is private: the planner cannot know
    it). Only where NULLs may be there and are skipped, and on a mean: a sum's error does not grow as the share
    falls (for a fixed population its variance is linear in the share; at share 0 at most 1.2% above its variance
    at 1 over the domains and ε measured), so its prediction stays at the reference share."""
    arg = next((a for a in call.named if a.name == "present"), None)
    if arg is None:
        return None
    v, shown = arg.value.value, arg.value.sql()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise _err(PlanError, f"present => takes the least share of users with a value, a number in (0, 1], not "
                   f"{shown}", arg, text, width=len(arg.sql()),
                   hint="for example present => 0.4 (at least 40% of the users have a value); it is your assumption, "
                        "never read from the data")
    name = call.name.upper()
    why = ("it is declared NOT NULL (every user has a value)" if dom.not_null else
           "its NULLs are not skipped here (NULL counts as a value, so every user counts)" if not skip else
           "a sum's predicted error does not grow as the share with a value falls" if name == "LDP_SUM" else "")
    if why:
        raise _err(PlanError, f"present => sets the share of users with a value a mean over them is predicted at, "
                   f"and for this {name} {why}", arg, text, width=len(arg.sql()),
                   hint="remove present =>; it applies to LDP_AVG/LDP_MEAN over a nullable column whose NULLs are "
                        "skipped")
    return float(v)


def resolve_mean(call: ast.Call, table: Table, text: str, domain: NumericDomain | None = None) -> Target:
    """A bounded numeric column, scaled to [-1, 1] on the user's side: x' = (x - mid)/half; with its NULL
    semantics (:func:`_nulls`). ``domain`` replaces the declared one (a Gaussian column's candidates all clamp to
    its padded range)."""
    ref, col = _column_arg(call, table, text)
    dom = domain or col.domain
    if not isinstance(dom, NumericDomain):
        if dom is None:
            raise _missing_domain(col, ref, text, f"{call.name.upper()}")
        raise _err(PlanError, f"{call.name.upper()} needs a numeric column; `{col.name}` is categorical", ref,
                   text, hint="use LDP_HISTOGRAM for categories")
    half, mid = (dom.high - dom.low) / 2, (dom.high + dom.low) / 2
    nulls = _nulls(call, col, dom, text)
    enc = Encoding(dom.scaled(col.name), None, col.name)
    shown = dom.describe()
    if nulls.skip != dom.skips_nulls:
        shown += f"; here ({nulls.why}): " + ("NULL skipped" if nulls.skip else f"NULL -> {nulls.value:g}")
    # a conditional mean's interval is Fieller's at the statement's confidence (post-processing of the release)
    # otherwise, where few PM/Hybrid reports leave their band, the exact law's quantile, not est ± z·se (rare.widen)
    derive = conditional.with_interval if nulls.skip else rare.widen
    return Target(col.name, enc, shown, None, col.name, affine=(half, mid), nulls=nulls, derive=derive)


WORST_CASE = "worst case over the domain"


def worst_case_variance(r: Randomizer, n: int, unsampled: float = 0.0) -> float:
    """The largest variance of the mean of n users over every data set in [-1, 1]: each mechanism's per-user
    variance is a + b·E[x²], so the largest is at E[x²] = 0 or 1 (Duchi's at 0, PM's at 1, Hybrid's anywhere).
    Under a users split (``unsampled`` = 1 - n/N of the users not asked) the sampling variance (E[x²] - μ²)·
    unsampled/n joins it, largest at μ = 0: the maximum of the sum is again at E[x²] = 0 or 1, taken jointly."""
    return max(float(r.variance(np.zeros(1), n, second_moment=m2)[0]) + unsampled * m2 / n for m2 in (0.0, 1.0))


def _numeric_candidates(target: Target, scale, shift) -> list[Candidate]:
    """Duchi et al., the Piecewise Mechanism and the Hybrid Mechanism, chosen near-minimax (a choice that cannot
    depend on the data; which is best for a given data set depends on its E[x²]): of those whose worst case is
    within 10% of the best worst case, the one best at a typical data set. Strict minimax picks the Hybrid
    Mechanism from ε ≈ 0.7 on, whose error is flat at about PM's worst case: up to 1.7× PM's on data away from
    the bounds, to gain at most 5% at them. At ε ≤ 0.61 the Hybrid Mechanism is Duchi's, listed first, so Duchi
    wins the tie. The discrete Laplace mechanism and Square Wave are listed as baselines (predicted, shown, run only
    when asked for by name): their worst case is 1.13-3.4× the best of the three for ε ≤ 13, and beyond, where SW's
    band is one cell, SW is the Piecewise Mechanism's lattice up to a rescaling, equal to within 0.03%."""
    out = [candidate(name, make, target, np.zeros(1), scale, shift, WORST_CASE, worst_case=True)
           for name, make in (("duchi", Duchi), ("piecewise", Piecewise), ("hybrid", Hybrid),
                              ("laplace", LaplaceMean), ("square_wave", SquareWave))]
    for c in out[3:]:   # predicted worse than the best of the three at every ε ≤ 13 (docs/means.md): baselines
        c.baseline = True
    return out


REFERENCE = ("predicted at a public reference share of users with a value of 1: the error grows about as "
             "1/share")


def share_note(nulls: Nulls) -> str:
    """What a mean over the users with a value is predicted at: the declared share, else the reference."""
    if nulls.share is None:
        return REFERENCE
    return f"predicted at a declared share of users with a value of {nulls.share:g} (present => {nulls.share:g})"


def _unconditional_rejected(out: list[Candidate], nulls: Nulls) -> list[Candidate]:
    for c in out:
        c.rejected = (f"estimates the mean with NULL as {nulls.value:g}, not over the users with a value "
                      "(nulls => 'midpoint' asks for that)")
    return out


def collision_candidate(target: Target, what: str) -> Candidate:
    """Collision (d = 1, s = 1) on the value or NULL (:mod:`ldpql.mechanisms.conditional`): the mean (``what`` =
    'mean') or sum over the users with a value, from one report per user. Its prediction is the largest error over
    data sets with a share of 1 of the users holding a value (a public reference; the planner never reads the share),
    or for a mean the declared ``present => p`` (exact, by the same delta method), and holds the sampling error of a
    users split already (its variance treats the users as a sample)."""
    ns = target.nulls
    per = (lambda n: float(n)) if what == "sum" else (lambda n: 1.0)
    share = ns.share if what == "mean" and ns.share is not None else 1.0

    def predict(eps: float, n: int) -> float:
        return per(n) * math.sqrt(conditional.predicted_variance(eps, what, ns.low, ns.high, share) / max(n, 1))

    def protocol(eps: float):
        r = conditional.NoNoise() if math.isinf(eps) else conditional.CollisionMean(eps)
        return lambda n: conditional.protocol(r, ns.missing, what, ns.low, ns.high, population=n)

    def describe(eps: float, n: int) -> list[str]:
        t = conditional.CollisionMean(eps).t if not math.isinf(eps) else "-"
        return [f"reports     Collision with d = 1, s = 1, t = {t}: each user rounds its scaled value to ±1 at random "
                "(a NULL sends no element) and sends one report; the answer is x̄/max(x̲, 1/n), clipped"
                if what == "mean" else f"reports     Collision with d = 1, s = 1, t = {t}: the sum is n(hi·f₊ + lo·f₋)"]

    return Candidate("collision", "local", 1, predict, protocol, share_note(ns) if what == "mean" else "",
                     describe=describe, scale=per if what == "sum" else None,
                     split_se=lambda eps, pop, n: per(pop) * predict(eps, n) / per(n))


SPLIT_SHARES = (0.5, 0.6, 0.7, 0.8, 0.9)   # the mean report's share of ε the split candidate considers


def _split_plan(eps: float, present: float = 1.0) -> tuple[float, Callable[[float], Randomizer], float]:
    """(n × predicted variance on the scaled axis, mean mechanism, its ε₁) of the best split of ε between a mean
    report and a presence bit, each mechanism at its worst case and the ratio at R² = 1, at a share ``present`` with
    a value (1, the reference, or the declared present => p)."""
    out = []
    for share in SPLIT_SHARES:
        bit = float(RandomizedResponse(eps * (1 - share)).variance(np.array([present]), 1)[0])
        out += [(conditional.split_predicted_variance(worst_case_variance(make(eps * share), 1), bit, present), make,
                 eps * share) for make in (Duchi, Piecewise, Hybrid)]
    return min(out, key=lambda t: t[0])


def split_candidate(target: Target) -> Candidate:
    """Two reports per user: the best unconditional mean mechanism on x with NULL as the midpoint (ε₁) and binary
    randomized response on "x has a value" (ε − ε₁); the mean over the users with a value is their ratio."""
    ns = target.nulls
    half, share = (ns.high - ns.low) / 2, 1.0 if ns.share is None else ns.share

    def predict(eps: float, n: int) -> float:
        return half * math.sqrt(_split_plan(eps, share)[0] / max(n, 1)) if not math.isinf(eps) else 0.0

    def protocol(eps: float):
        if math.isinf(eps):
            mean_r, bit = Identity(None, "mean"), Identity(2, "ones")
        else:
            _, make, e1 = _split_plan(eps, share)
            mean_r, bit = make(e1), RandomizedResponse(eps - e1)
        return lambda n: conditional.split_protocol(mean_r, bit, ns.midpoint, ns.present, ns.low, ns.high, n)

    def describe(eps: float, n: int) -> list[str]:
        _, make, e1 = _split_plan(eps, share)
        return [f"reports     two per user: {make(e1).name} at ε₁ = {e1:.3g} on the value (NULL as the midpoint) and "
                f"randomized response at ε₂ = {eps - e1:.3g} on whether it has one; the answer is mid + (m̃ − mid)/π̂"]

    # a users split's sampling error: the mean of the n·share users with a value asked (spread ≤ half²)
    return Candidate("split", "local", 2, predict, protocol, share_note(ns), describe=describe,
                     sampling=lambda pop: half ** 2 / share)


def mean_candidates(target: Target) -> list[Candidate]:
    half, mid = target.affine
    out = _numeric_candidates(target, lambda n: half, lambda n: mid)
    if target.nulls is None or not target.nulls.skip:
        return out
    return [collision_candidate(target, "mean"), split_candidate(target)] + _unconditional_rejected(out, target.nulls)


def sum_candidates(target: Target) -> list[Candidate]:
    half, mid = target.affine
    ns = target.nulls
    if ns is None or not ns.skip:
        return _numeric_candidates(target, lambda n: n * half, lambda n: n * mid)
    if ns.zero is None:   # NULL as 0 is outside the range: only the report that tells NULL apart can do it
        return [collision_candidate(target, "sum")]
    zeroed = dataclasses.replace(target, encoding=ns.zero)
    out = _numeric_candidates(zeroed, lambda n: n * half, lambda n: n * mid)
    for c in out:
        c.note += "; NULL as 0, which adds nothing to the sum"
    return [collision_candidate(target, "sum")] + out


# ---- LDP_COUNT(predicate) ---------------------------------------------------------------------------------

def resolve_count(call: ast.Call, table: Table, text: str) -> Target:
    """A condition each user evaluates on its own row (private columns allowed); NULL counts as false."""
    if call.star or len(call.args) != 1:
        raise _err(PlanError, "LDP_COUNT takes one condition, e.g. LDP_COUNT(age > 30)", call, text,
                   hint="the number of users is public: COUNT(*) needs no LDP")
    arg = call.args[0]
    for ref in ast.columns_of(arg):
        table.column(ref.name, ref.pos, text)
    if isinstance(arg, ast.ColumnRef) and isinstance(table.column(arg.name).domain, NumericDomain):
        # SQL's COUNT(x) on a numeric column: the users whose x is not NULL (nor NaN, nor unreadable), privately
        cond = E.Not(E.Logic("OR", (E.IsNull(E.number(arg.name)), E.call("isnan", E.number(arg.name)))))
        return Target(None, Encoding(E.indicator(cond), 2, f"{arg.sql()} IS NOT NULL"),
                      f"the users with a value of {arg.sql()} (SQL's COUNT: NULL and unreadable values do not count)",
                      None, "users")
    enc = E.indicator(Condition(table, text).render(arg))
    return Target(None, Encoding(enc, 2, arg.sql()), f"condition {arg.sql()}; NULL counts as false", None, "users")


# What each kind of value is compared as. A condition is rendered so that no row can make it raise: operands are
# type-checked against the declared schema (public) at plan time, and each column is read with a try-cast (TryCast) into
# its kind's type, so a value that does not convert is NULL (the condition is then false for that user) instead
# of a DuckDB conversion error that would quote the private value.
_KIND_TYPE = {"integer": "DOUBLE", "numeric": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN"}
_KIND_TEXT = {"integer": "a number", "numeric": "a number", "string": "a string", "boolean": "a boolean",
              "temporal": "a date or time"}


class Condition:
    """Type-checks and renders an LDP_COUNT condition over one table."""

    def __init__(self, table: Table, text: str):
        self.table, self.text = table, text

    def render(self, e: ast.Expr) -> E.Expr:
        """A boolean condition that never raises on any row; PlanError when the types do not fit."""
        if isinstance(e, ast.BoolOp):
            return E.Logic(e.op, (self.render(e.left), self.render(e.right)))
        if isinstance(e, ast.Not):
            return E.Not(self.render(e.operand))
        if isinstance(e, ast.IsNull):
            return E.IsNull(self.operand(e.operand, None)[0], e.negated)
        if isinstance(e, (ast.Comparison, ast.InList, ast.Between)):
            return self.predicate(e)
        x, kind = self.operand(e, None)
        if kind not in ("boolean", None):
            raise _err(PlanError, f"LDP_COUNT needs a condition; {_what(e)} is {_KIND_TEXT.get(kind, kind)}", e,
                       self.text, width=len(e.sql()), hint=f"write a condition such as {e.sql()} > 0")
        return x

    def predicate(self, e: ast.Comparison | ast.InList | ast.Between) -> E.Expr:
        if isinstance(e, ast.Comparison):
            left, right = self.fit(e.left, e.right)
            return E.BinOp("<>" if e.op == "!=" else e.op, left, right)
        others = e.values if isinstance(e, ast.InList) else (e.low, e.high)
        parts = self.fit(e.operand, *others)
        if isinstance(e, ast.InList):
            return E.In(parts[0], tuple(parts[1:]), e.negated)
        inside = E.Logic("AND", (E.BinOp(">=", parts[0], parts[1]), E.BinOp("<=", parts[0], parts[2])))
        return E.Not(inside) if e.negated else inside

    def fit(self, *operands: ast.Expr) -> list[E.Expr]:
        """The operands of one comparison, rendered in one common kind; PlanError when their kinds differ."""
        typed = [self.operand(o, None) for o in operands]
        kinds = {_family(k) for _, k in typed if k is not None}
        temporal = next((o for o, (_, k) in zip(operands, typed) if k == "temporal"), None)
        if kinds <= {"temporal", "string"} and temporal is not None:
            # a date/time column compared with string literals: the literals are converted, the column is not
            dtype = self.table.column(temporal.name).dtype
            return [self.operand(o, dtype)[0] for o in operands]
        if len(kinds) > 1:
            raise self._mismatch(operands, typed)
        return [x for x, _ in typed]

    def operand(self, e: ast.Expr, as_type: str | None) -> tuple[E.Expr, str | None]:
        """(expression, kind) of one operand; kind None for NULL. ``as_type`` converts a string literal (dates)."""
        if isinstance(e, ast.Literal):
            return _literal(e, as_type)
        if isinstance(e, ast.ColumnRef):
            col = self.table.column(e.name, e.pos, self.text)
            kind = "boolean" if isinstance(col.domain, BooleanDomain) else type_kind(col.dtype)
            if kind == "other":
                raise _err(PlanError, f"`{col.name}` is {col.dtype}; LDP_COUNT conditions compare numbers, strings, "
                           "booleans and dates", e, self.text, width=len(e.name),
                           hint="convert it in a query source, and declare the table over that query")
            return E.TryCast(E.Column(col.name), _KIND_TYPE.get(kind, col.dtype)), kind
        return self.render(e), "boolean"

    def _mismatch(self, operands, typed) -> PlanError:
        known = [(o, k) for o, (_, k) in zip(operands, typed) if k is not None]
        col, kind = next(((o, k) for o, k in known if isinstance(o, ast.ColumnRef)), known[0])
        other = next(o for o, k in known if _family(k) != _family(kind))
        return _err(PlanError, f"{_what(col)} is {_KIND_TEXT.get(kind, kind)} and cannot be compared with "
                    f"{_what(other)}", other, self.text, width=len(other.sql()),
                    hint=f"compare {_what(col)} with {_KIND_TEXT.get(kind, kind)} (the declared type of a column "
                         "is shown by DESCRIBE)")


def _family(kind: str) -> str:
    return "number" if kind in ("integer", "numeric") else kind


def _what(e: ast.Expr) -> str:
    if isinstance(e, ast.ColumnRef):
        return f"`{e.name}`"
    if isinstance(e, ast.Literal):
        return f"the literal {e.sql()}"
    return f"the condition {e.sql()}"


def _literal(e: ast.Literal, as_type: str | None) -> tuple[E.Expr, str | None]:
    v = e.value
    if v is None:
        return E.Literal(None), None
    if isinstance(v, bool):
        return E.Literal(v), "boolean"
    if isinstance(v, str):
        return (E.TryCast(E.Literal(v), as_type) if as_type else E.Literal(v)), "string"
    return E.double(v), "numeric"


def count_candidates(target: Target) -> list[Candidate]:
    return [candidate("rr", RandomizedResponse, target, np.array([0.5]), lambda n: float(n))]


register_aggregate(AggregateSpec("LDP_MEAN", "LDP_MEAN(column)", "mean of a bounded numeric column (over the users "
                                 "with a value on a nullable one)", "mean", resolve_mean, mean_candidates,
                                 MEAN_ARGS), "LDP_AVG")
register_aggregate(AggregateSpec("LDP_SUM", "LDP_SUM(column)", "sum of a bounded numeric column (over the users with a "
                                 "value on a nullable one)", "sum", resolve_mean, sum_candidates, MEAN_ARGS))
register_aggregate(AggregateSpec("LDP_COUNT", "LDP_COUNT(condition)",
                                 "number of users for whom a condition on their own row holds, or LDP_COUNT(column): "
                                 "with a non-NULL value", "count", resolve_count, count_candidates))
