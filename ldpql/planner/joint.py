"""Several LDP_AVG/LDP_MEAN columns (and the non-NULL counts LDP_COUNT(column) beside them) from one report per
user: the joint release of Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the
Local and Shuffle Model" (spec seed-003 §9, rules 1–3).

Two planner rules. :func:`consider_joint_release` finds a statement whose aggregates are all means over private
bounded columns, or means and counts of the users with a value of such columns (at least two aggregates, one a
mean); OPTIONS (mechanism = 'coco' | 'collision') makes them one joint release there and then. Otherwise, after :func:`~ldpql.planner.split_budget` has weighed splitting ε against splitting users,
:func:`choose_joint_release` predicts one CoCo report (unconditional means only) and one Collision report (any
mean; the only one for a column whose NULLs are skipped, whose answer is a conditional mean, or whose non-NULL
count is asked), each user at the full ε with no split, and takes the joint release where its total relative
variance Σ_j (se_j / se_j at the full ε and all users)² is below the chosen split's. One mean runs the release;
the other aggregates read their column of it (post-processing: ε charged once): a mean its (conditional) mean, a
count n·x̲̂_j, Collision's estimate of the share of users with a value (spec §9: LDP_COUNT(x) = n·x̲̂). Predictions
are worst cases over the data, from public facts only: an unconditional mean's at 0, a conditional mean's over
every value with every user holding one, a count's at a share of 0 or 1.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ldpql import expr as E
from ldpql.catalog import NumericDomain
from ldpql.errors import PlanError
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding, collision
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.mechanisms.conditional import worst_variance
from ldpql.mechanisms.shuffle import MIN_GAIN, local_epsilon, sparse_weights
from ldpql.mechanisms.vector import (
    KINDS,
    VectorIdentity,
    VectorMeans,
    column,
    count,
    optimal_t,
    predicted_variance,
    present_variance,
    total,
    vector_round,
)
from ldpql.planner.plan import Candidate

MEANS = ("LDP_MEAN", "LDP_AVG")
COUNT, SUM = "LDP_COUNT", "LDP_SUM"
NOTE = "one report per user for every column, at the full ε (no split)"
SHUFFLED = "one shuffled report per user for every column, at the amplified ε₀ (no split)"


@dataclasses.dataclass(frozen=True)
class Column:
    """One coordinate of the joint release."""

    name: str
    half: float
    mid: float
    skip: bool      # NULLs skipped: the answer is the mean over the users with a value (Collision only)
    item: E.Expr    # what the user's device computes: x' in [-1, 1], NaN for a skipped NULL
    share: float | None = None   # present => p on its mean: the declared least share with a value


def _named(call, name: str):
    return next((a.value.value for a in call.named if a.name == name), None)


def _skips(a, dom: NumericDomain) -> bool:
    nulls = getattr(a.target, "nulls", None)   # a statement's nulls => (where the engine has it) wins
    return bool(nulls.skip) if nulls is not None else bool(getattr(dom, "skips_nulls", False))


def _what(ctx, a) -> str | None:
    """'mean' for LDP_AVG/LDP_MEAN over a bounded numeric column, 'sum' for LDP_SUM over one, 'count' for
    LDP_COUNT(column) over one (SQL's COUNT(x): the users with a value), else None (no joint release answers it)."""
    name, args = a.call.name.upper(), a.call.args
    if name in MEANS + (SUM,) and a.target.column is not None and a.target.encoding.size is None:
        col, what = a.target.column, "mean" if name in MEANS else "sum"
    elif name == COUNT and not a.call.star and len(args) == 1 and isinstance(args[0], ast.ColumnRef):
        col, what = args[0].name, "count"
    else:
        return None
    dom = ctx.table.column(col).domain
    if not isinstance(dom, NumericDomain) or dom.gaussian is not None:
        return None
    if _named(a.call, "epsilon") is not None or _named(a.call, "mechanism") is not None:
        return None
    return what


def _eligible(ctx) -> list | None:
    """The aggregates of a statement that could share one report (every aggregate that runs is a mean, a sum or a
    non-NULL count of a bounded column, at least two, at least one mean, none with its own epsilon => or mechanism
    =>; a sum or a count only without ACCURACY, whose one ±a cannot bound answers in two units), or None."""
    runs = [a for a in ctx.aggregates if a.source is None]
    whats = [_what(ctx, a) for a in runs]
    if len(runs) < 2 or None in whats or "mean" not in whats:
        return None
    if set(whats) != {"mean"} and ctx.select.accuracy is not None:
        return None
    return runs


def _columns(ctx, runs) -> tuple[list[Column], list[int]]:
    """The distinct coordinates (a column under one NULL semantics: LDP_AVG(x) and LDP_AVG(x, nulls =>
    'midpoint') are two, audit7n H1; a count's column has its NULLs skipped) and each aggregate's coordinate."""
    cols: dict[tuple[str, bool], Column] = {}
    where = []
    for a in runs:
        counted = _what(ctx, a) == "count"
        col = ctx.table.column(a.call.args[0].name if counted else a.target.column)   # (a sum: as its mean)
        dom = col.domain
        skip = counted or _skips(a, dom)
        share = getattr(getattr(a.target, "nulls", None), "share", None) if skip and not counted else None
        old = cols.get((col.name, skip))
        if old is not None and share is not None:   # two means of one column: the least share declared
            cols[(col.name, skip)] = dataclasses.replace(old, share=min(share, old.share or 1.0))
        if (col.name, skip) not in cols:
            scaled = dom.scaled(col.name)
            if skip:   # a NULL (or a value that does not convert) is no element: NaN, not the midpoint
                raw = E.number(col.name)
                scaled = E.Case(E.Logic("OR", (E.IsNull(raw), E.call("isnan", raw))), E.Literal(math.nan), scaled)
            cols[(col.name, skip)] = Column(col.name, (dom.high - dom.low) / 2, (dom.high + dom.low) / 2, skip, scaled,
                                            share)
        where.append(list(cols).index((col.name, skip)))
    return list(cols.values()), where


def aggregate_se(kind: str, eps0: float, cols: list[Column], j: int, what: str, n: int) -> float:
    """The predicted standard error of one aggregate of a joint release at ε₀ over n users, worst case over the
    data: an unconditional mean's (A/n at a mean of 0), a conditional mean's (over every value, every user holding
    one, as for one column), a count's n·sd(x̲̂_j) (at a share of 0 or 1); a sum's n times its mean's, or over the
    users with a value its own (every user holding one value, the worst of a grid, as for one column)."""
    d, c = len(cols), cols[j]
    if what == "count":
        return n * math.sqrt(present_variance(kind, eps0, d, n))
    scale = n if what == "sum" else 1
    if not c.skip:
        return scale * c.half * math.sqrt(predicted_variance(kind, eps0, d, n))
    pt, pf = collision.rates(eps0, d, optimal_t(kind, eps0, d))
    low, high = (c.mid - c.half, c.mid + c.half) if what == "sum" else (-1.0, 1.0)
    share = c.share if what == "mean" and c.share is not None else 1.0   # (a sum's: see aggregates._present)
    return scale * (1 if what == "sum" else c.half) * math.sqrt(worst_variance(pt, pf, what, low, high, share)
                                                                / max(n, 1))


@functools.lru_cache(maxsize=1024)
def shuffle_epsilon0(kind: str, d: int, eps: float, delta: float, n: int) -> float:
    """ε₀ = f(ε_c, δ, n, mechanism): the largest local ε₀ whose n shuffled reports are (ε, δ)-DP by the exact
    clone reduction at the mechanism's own mixture weight α_mix = s/Ω with s = d and t = t(ε₀) (spec §5.4, §5.5),
    verified at the t the randomizer uses; ε itself when shuffling gains nothing."""
    if delta <= 0 or n <= 1:
        return eps
    return local_epsilon(eps, delta, n, sparse_weights(d, lambda e0: optimal_t(kind, e0, d)))


def joint_candidate(kind: str, cols: list[Column], owner: int = 0, delta: float = 0.0,
                    wants: tuple[tuple[int, str], ...] = ()) -> Candidate:
    """One joint release by ``kind`` (CoCo or Collision) over ``cols``; its prediction is column ``owner``'s mean.
    ``wants`` lists the statement's (coordinate, 'mean' | 'count') answers (default: every column's mean), which
    EXPLAIN shows. With ``delta`` > 0 it is the shuffle-model release: users randomize at ε₀ (:func:`shuffle_epsilon0`)."""
    d = len(cols)
    wants = wants or tuple((j, "mean") for j in range(d))
    halves, mids = np.array([c.half for c in cols]), np.array([c.mid for c in cols])
    skips = np.array([c.skip for c in cols])
    encoding = Encoding(E.Vector(tuple(c.item for c in cols)), None, ", ".join(c.name for c in cols))
    cand = Candidate(kind, "shuffle" if delta > 0 else "local", 1, None, None, NOTE if delta <= 0 else SHUFFLED,
                     delta=delta)

    def local(eps: float, n: int) -> float:   # the ε each user's randomizer runs at
        return shuffle_epsilon0(kind, d, eps, cand.delta, n) if cand.model == "shuffle" else eps

    def predict(eps: float, n: int) -> float:
        return aggregate_se(kind, local(eps, n), cols, owner, "mean", n)

    def protocol(eps: float):
        if math.isinf(eps):
            return lambda n: vector_round(VectorIdentity(d), encoding, halves, mids, skips)
        return lambda n: vector_round(VectorMeans(local(eps, n), d, kind), encoding, halves, mids, skips)

    def check(eps: float, n: int) -> str | None:
        if cand.model != "shuffle" or math.isinf(eps):
            return None
        e0 = local(eps, n)
        if e0 > EPSILON_CAP:
            return f"its ε₀ = {e0:.4g} is above the per-randomizer cap {EPSILON_CAP:g}"
        return None if e0 > eps * (1 + MIN_GAIN) else f"amplification gives no gain at n = {n:,} (ε₀ = {e0:.4g})"

    def describe(eps: float, n: int) -> list[str]:
        if math.isinf(eps):
            return [f"joint       {d} columns read together (EPSILON INF: exact, NULLs as declared)"]
        e0 = local(eps, n)
        t = optimal_t(kind, e0, d)
        per = ", ".join(f"{cols[j].name} ±{1.959964 * aggregate_se(kind, e0, cols, j, 'mean', n):.4g}"
                        for j, what in wants if what == "mean")
        lines = [(f"joint       {kind}: one report of d = s = {d} signs per user (each column's x' rounded to ±1 "
                  f"with P[+1] = (1 + x')/2 on the device), t = {t}, ε = {e0:.4g}"),
                 f"per column  predicted (95%, worst case): {per}"]
        sums = [j for j, what in wants if what == "sum"]
        if sums:
            lines.append("sums        from the same report, predicted (95%, worst case): " + ", ".join(
                f"{cols[j].name} ±{1.959964 * aggregate_se(kind, e0, cols, j, 'sum', n):.4g}" for j in sums))
        counts = [j for j, what in wants if what == "count"]
        if counts:
            lines.append("counts      users with a value, n·x̲̂ from the same report, predicted (95%, worst case): "
                         + ", ".join(f"{cols[j].name} ±{1.959964 * aggregate_se(kind, e0, cols, j, 'count', n):.4g}"
                                     for j in counts))
        if cand.model == "shuffle":
            alpha = d / (d * math.exp(e0) + t - d)
            lines.append(f"shuffle     users randomize at ε₀ = {e0:.4g}; shuffled, the reports are (ε_c, δ) = ({eps:g}, "
                         f"{cand.delta:g})-DP by the exact clone reduction at α_mix = s/Ω = {alpha:.4g} (Feldman, "
                         "McMillan and Talwar 2023, computed as in Wang et al. 2023)")
        declared: dict[float, list[str]] = {}
        for j, what in wants:
            if what == "mean" and cols[j].skip and cols[j].share:
                declared.setdefault(cols[j].share, []).append(cols[j].name)
        for share, names in declared.items():
            lines.append(f"conditional {', '.join(names)}: NULLs skipped, the mean over the users with a value "
                         f"(Collision's conditional mean), predicted at a declared share of users with a value of "
                         f"{share:g} (present => {share:g})")
        skipped = [cols[j].name for j, what in wants if what == "mean" and cols[j].skip and not cols[j].share]
        if skipped:
            lines.append("conditional " + ", ".join(skipped) + ": NULLs skipped, the mean over the users with a "
                         "value (Collision's conditional mean), predicted as if every user had one: a column where a "
                         "share p has one has about 1/p times this error")
        return lines

    cand.predict, cand.protocol, cand.check, cand.describe = predict, protocol, check, describe
    cand.local_epsilon = local if delta > 0 else None
    return cand


def _delta(ctx) -> float:
    """The δ a shuffled joint release may spend: the statement's, else what is left of the table's (0: none,
    model = 'local', or DELTA 0)."""
    if ctx.options.get("model", "local") == "local" or (ctx.delta == 0 and (ctx.select.delta is not None
                                                                          or "delta" in ctx.options)):
        return 0.0   # (an explicit DELTA 0 asks for no δ)
    left = ctx.table.budget_delta if ctx.facts.remaining_delta is None else ctx.facts.remaining_delta
    return max(ctx.delta or left, 0.0) if left > 0 else 0.0


def _kinds(cols: list[Column]) -> list[str]:
    return [k for k in KINDS if not (k == "coco" and any(c.skip for c in cols))]


def _convert(ctx, runs, choice: tuple[str, str], cols: list[Column], where: list[int]) -> None:
    """Make the mean with the largest predicted error run the joint release (``choice`` = (kind, model) listed
    first) and every other aggregate read its column of it: a mean's error is its half-width times a factor of
    the column's kind, so the owner's prediction bounds every mean's (what ACCURACY checks)."""
    whats = [_what(ctx, a) for a in runs]
    n, eps = max(ctx.facts.typical_n, 1), ctx.epsilon if math.isfinite(ctx.epsilon) else 1.0   # (INF: any ε ranks)
    at = max((i for i, w in enumerate(whats) if w == "mean"),   # (the first on ties)
             key=lambda i: aggregate_se(choice[0], eps, cols, where[i], "mean", n))
    owner, delta = runs[at], _delta(ctx)
    wants = tuple(dict.fromkeys(zip(where, whats)))
    options = [(k, m) for k in _kinds(cols) for m in ("local", "shuffle") if m == "local" or delta > 0]
    owner.candidates = [joint_candidate(k, cols, where[at], delta if m == "shuffle" else 0.0, wants)
                        for k, m in [choice] + [o for o in options if o != choice]]
    owner.epsilon, owner.users = ctx.epsilon, (0.0, 1.0)
    for a, j, what in zip(runs, where, whats):
        if what == "count":
            a.target = dataclasses.replace(a.target, derive=lambda est, conf, j=j: count(est, j, conf),
                                           derived=f"n × the share with a value of column {j + 1} ({cols[j].name}) "
                                                   f"of the joint {choice[0]} report")
        elif what == "sum":
            a.target = dataclasses.replace(a.target, derive=lambda est, conf, j=j: total(est, j, conf),
                                           derived=f"the sum of column {j + 1} ({cols[j].name}) of the joint "
                                                   f"{choice[0]} report")
        else:
            a.target = dataclasses.replace(a.target, derive=lambda est, conf, j=j: column(est, j, conf),
                                           derived=f"column {j + 1} ({cols[j].name}) of the joint {choice[0]} report")
        if a is not owner:
            a.source, a.candidates = owner.index, []
    ctx.split = "single"


def can_shuffle(ctx) -> bool:
    """Whether the statement's means could be one shuffled joint release (so model = 'shuffle' applies)."""
    return _eligible(ctx) is not None


def consider_joint_release(ctx) -> None:
    """Rule: find the statement's joint-release candidates; OPTIONS (mechanism = 'coco' | 'collision') forces
    one (a clear error where it cannot apply)."""
    wanted = str(ctx.options.get("mechanism", "")).lower()
    runs = _eligible(ctx)
    ctx.joint = None
    if wanted not in KINDS:
        ctx.joint = runs
        return
    if runs is None and wanted == "collision" and len(ctx.aggregates) == 1:
        return   # one mean: 'collision' is its own candidate on a nullable column (ldpql.mechanisms.conditional)
    if runs is None:
        raise ctx.error(PlanError, f"mechanism = '{wanted}' answers several LDP_AVG/LDP_MEAN columns from one report, "
                        "and this statement is not that", ctx.select,
                        hint="use it on a statement of two or more LDP_AVG(column) over bounded private columns, or "
                             "LDP_AVG and LDP_COUNT(column), and nothing else (no epsilon => or mechanism => on them), "
                             "or drop the option")
    cols, where = _columns(ctx, runs)
    if wanted == "coco" and any(c.skip for c in cols):
        raise ctx.error(PlanError, "CoCo gives unconditional means only, and the NULLs of "
                        + ", ".join(c.name for c in cols if c.skip) + " are skipped", ctx.select,
                        hint="use mechanism = 'collision' (its conditional mean is SQL's AVG over the users with "
                             "a value), or declare the column NOT NULL or with a DEFAULT")
    if str(ctx.options.get("split", "auto")).lower() != "auto":
        raise ctx.error(PlanError, f"mechanism = '{wanted}' sends one report per user, so there is nothing to split",
                        ctx.select, hint="drop the split option")
    _convert(ctx, runs, (wanted, "shuffle" if _delta(ctx) > 0 else "local"), cols, where)
    ctx.split_note = f"none: {NOTE} (mechanism = '{wanted}' was asked for)"


def _options(ctx, cols: list[Column]) -> dict[tuple[str, str], float]:
    """Every joint release that can run, (kind, model) -> the ε its users randomize at (typical group's n). A
    shuffled one only where every group amplifies: its candidate's check rejects it at the smallest group, and it
    must not win here on an ε₀ that does not run (audit9)."""
    n, eps, d, delta = ctx.facts.typical_n, ctx.epsilon, len(cols), _delta(ctx)
    fewest = min((size for _, size in ctx.facts.groups), default=ctx.facts.n)
    out = {(k, "local"): eps for k in _kinds(cols)}
    for k in _kinds(cols) if delta > 0 else ():
        e0 = shuffle_epsilon0(k, d, eps, delta, n)
        if eps * (1 + MIN_GAIN) < min(e0, shuffle_epsilon0(k, d, eps, delta, max(fewest, 1))) and e0 <= EPSILON_CAP:
            out[(k, "shuffle")] = e0
    return out


def _relative(ctx, kind: str, eps0: float, cols: list[Column], where: list[int], runs) -> float:
    """Σ over the aggregates of (joint se at ε₀ / best se at the full ε and all users)², the split's unit."""
    n, eps = ctx.facts.typical_n, ctx.epsilon
    full = [min((c.expected_se(eps, n) for c in a.candidates if not c.rejected), default=math.inf) for a in runs]
    return sum((aggregate_se(kind, eps0, cols, j, _what(ctx, a), n) / f) ** 2 for a, j, f in zip(runs, where, full))


def _label(option: tuple[str, str], eps0: float, d: int) -> str:
    kind, model = option
    return f"{kind} (t = {optimal_t(kind, eps0, d)}{f', shuffled at ε₀ = {eps0:.4g}' if model == 'shuffle' else ''})"


def choose_joint_release(ctx) -> None:
    """Rule: after the split is weighed, take one joint report instead where it predicts less total relative
    variance (spec §9 rules 1–4: CoCo for unconditional means, Collision where a column's NULLs are skipped;
    shuffled where the model allows, each at its own ε₀). model = 'shuffle' takes the best shuffled report."""
    runs = getattr(ctx, "joint", None)
    if not runs or math.isinf(ctx.epsilon) or ctx.facts.n == 0 or not ctx.split_costs:
        return
    cols, where = _columns(ctx, runs)
    options = _options(ctx, cols)
    costs = {o: _relative(ctx, o[0], e0, cols, where, runs) for o, e0 in options.items()}
    shuffled = [o for o in costs if o[1] == "shuffle"]
    best = min(shuffled if ctx.options.get("model") == "shuffle" and shuffled else costs, key=costs.get)
    split, what = ctx.split_costs[ctx.split], "ε" if ctx.split == "epsilon" else "users"
    label = _label(best, options[best], len(cols))
    others = "; ".join(f"{_label(o, options[o], len(cols))} {v:.3g}" for o, v in costs.items() if o != best)
    asked = ctx.options.get("model") == "shuffle" and best[1] == "shuffle"
    if str(ctx.options.get("split", "auto")).lower() != "auto" or (costs[best] >= split and not asked):
        what = "means" if all(_what(ctx, a) == "mean" for a in runs) else "aggregates"
        ctx.split_note += f"; one {label} report per user for all {len(runs)} {what} would predict {costs[best]:.3g}"
        return
    _convert(ctx, runs, best, cols, where)
    ctx.split_note = (f"none: {SHUFFLED if best[1] == 'shuffle' else NOTE}; {label}: relative variance "
                      f"{costs[best]:.3g} vs {split:.3g} for splitting {what}" + (f"; {others}" if others else "")
                      + ("; model = 'shuffle' was asked for" if asked else ""))
