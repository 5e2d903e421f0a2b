"""Several LDP_AVG/LDP_MEAN columns from one report per user: the joint release of Wang, Li, Li, Li, Yang, Yan,
"Differentially Private Numerical Vector Analyses in the Local and Shuffle Model" (spec seed-003 §9, rules 1–3).

Two planner rules. :func:`consider_joint_release` finds a statement whose aggregates are all means over private
bounded columns (at least two); OPTIONS (mechanism = 'coco' | 'collision') makes them one joint release there
and then. Otherwise, after :func:`~ldpql.planner.split_budget` has weighed splitting ε against splitting users,
:func:`choose_joint_release` predicts one CoCo report (unconditional means only) and one Collision report (any
mean; the only one for a column whose NULLs are skipped, whose answer is a conditional mean), each user at the full
ε with no split, and takes the joint release where its total relative variance Σ_j (se_j / se_j at the full ε
and all users)² is below the chosen split's. The first mean runs the release; the others read their column of
it (post-processing: ε charged once). Predictions are worst cases over the data (a coordinate's mean at 0), from
public facts only.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ldpql import expr as E
from ldpql.catalog import NumericDomain
from ldpql.errors import PlanError
from ldpql.mechanisms import Encoding
from ldpql.mechanisms.vector import (
    KINDS,
    VectorIdentity,
    VectorMeans,
    column,
    optimal_t,
    predicted_variance,
    vector_round,
)
from ldpql.planner.plan import Candidate

MEANS = ("LDP_MEAN", "LDP_AVG")
NOTE = "one report per user for every column, at the full ε (no split)"


@dataclasses.dataclass(frozen=True)
class Column:
    """One coordinate of the joint release."""

    name: str
    half: float
    mid: float
    skip: bool      # NULLs skipped: the answer is the mean over the users with a value (Collision only)
    item: E.Expr    # what the user's device computes: x' in [-1, 1], NaN for a skipped NULL


def _named(call, name: str):
    return next((a.value.value for a in call.named if a.name == name), None)


def _skips(a, dom: NumericDomain) -> bool:
    nulls = getattr(a.target, "nulls", None)   # a statement's nulls => (where the engine has it) wins
    return bool(nulls.skip) if nulls is not None else bool(getattr(dom, "skips_nulls", False))


def _eligible(ctx) -> list | None:
    """The mean aggregates of a statement that could share one report (every aggregate that runs is one, at
    least two, none with its own epsilon => or mechanism =>), or None."""
    runs = [a for a in ctx.aggregates if a.source is None]
    if len(runs) < 2 or any(a.call.name.upper() not in MEANS or a.target.column is None for a in runs):
        return None
    for a in runs:
        dom = ctx.table.column(a.target.column).domain
        if not isinstance(dom, NumericDomain) or dom.gaussian is not None or a.target.encoding.size is not None:
            return None
        if _named(a.call, "epsilon") is not None or _named(a.call, "mechanism") is not None:
            return None
    return runs


def _columns(ctx, runs) -> tuple[list[Column], list[int]]:
    """The distinct columns (coordinates) and each aggregate's coordinate."""
    cols: dict[str, Column] = {}
    where = []
    for a in runs:
        col = ctx.table.column(a.target.column)
        if col.name not in cols:
            dom = col.domain
            skip = _skips(a, dom)
            scaled = dom.scaled(col.name)
            if skip:   # a NULL (or a value that does not convert) is no element: NaN, not the midpoint
                raw = E.number(col.name)
                scaled = E.Case(E.Logic("OR", (E.IsNull(raw), E.call("isnan", raw))), E.Literal(math.nan), scaled)
            cols[col.name] = Column(col.name, (dom.high - dom.low) / 2, (dom.high + dom.low) / 2, skip, scaled)
        where.append(list(cols).index(col.name))
    return list(cols.values()), where


def joint_candidate(kind: str, cols: list[Column], owner: int = 0) -> Candidate:
    """One joint release by ``kind`` (CoCo or Collision) over ``cols``; its prediction is column ``owner``'s."""
    d = len(cols)
    halves, mids = np.array([c.half for c in cols]), np.array([c.mid for c in cols])
    skips = np.array([c.skip for c in cols])
    encoding = Encoding(E.Vector(tuple(c.item for c in cols)), None, ", ".join(c.name for c in cols))

    def predict(eps: float, n: int) -> float:
        return halves[owner] * math.sqrt(predicted_variance(kind, eps, d, n))

    def protocol(eps: float):
        r = VectorIdentity(d) if math.isinf(eps) else VectorMeans(eps, d, kind)
        return lambda n: vector_round(r, encoding, halves, mids, skips)

    def describe(eps: float, n: int) -> list[str]:
        if math.isinf(eps):
            return [f"joint       {d} columns read together (EPSILON INF: exact, NULLs as declared)"]
        t, sd = optimal_t(kind, eps, d), math.sqrt(predicted_variance(kind, eps, d, n))
        per = ", ".join(f"{c.name} ±{1.959964 * c.half * sd:.4g}" for c in cols)
        lines = [(f"joint       {kind}: one report of d = s = {d} signs per user (each column's x' rounded to ±1 "
                 f"with P[+1] = (1 + x')/2 on the device), t = {t}, ε = {eps:g}"),
                 f"per column  predicted (95%, worst case): {per}"]
        if skips.any():
            lines.append("conditional " + ", ".join(c.name for c in cols if c.skip) + ": NULLs skipped, the mean over "
                         "the users with a value (Collision's conditional mean), predicted as if every user had one: "
                         "a column where a share p has one has about 1/p times this error")
        return lines

    return Candidate(kind, "local", 1, predict, protocol, NOTE, describe=describe)


def _convert(ctx, runs, kind: str, cols: list[Column], where: list[int]) -> None:
    """Make the first mean run the joint release and every other mean read its column of it."""
    owner = runs[0]
    ranked = [kind] + [k for k in KINDS if k != kind and not (k == "coco" and any(c.skip for c in cols))]
    owner.candidates = [joint_candidate(k, cols, where[0]) for k in ranked]
    owner.epsilon, owner.users = ctx.epsilon, (0.0, 1.0)
    for a, j in zip(runs, where):
        a.target = dataclasses.replace(a.target, derive=lambda est, conf, j=j: column(est, j),
                                       derived=f"column {j + 1} ({cols[j].name}) of the joint {kind} report")
        if a is not owner:
            a.source, a.candidates = owner.index, []
    ctx.split = "single"


def consider_joint_release(ctx) -> None:
    """Rule: find the statement's joint-release candidates; OPTIONS (mechanism = 'coco' | 'collision') forces
    one (a clear error where it cannot apply)."""
    wanted = str(ctx.options.get("mechanism", "")).lower()
    runs = _eligible(ctx)
    ctx.joint = None
    if wanted not in KINDS:
        ctx.joint = runs
        return
    if runs is None:
        raise ctx.error(PlanError, f"mechanism = '{wanted}' answers several LDP_AVG/LDP_MEAN columns from one report, "
                        "and this statement is not that", ctx.select,
                        hint="use it on a statement of two or more LDP_AVG(column) over bounded private columns and "
                             "nothing else (no epsilon => or mechanism => on them), or drop the option")
    cols, where = _columns(ctx, runs)
    if wanted == "coco" and any(c.skip for c in cols):
        raise ctx.error(PlanError, "CoCo gives unconditional means only, and the NULLs of "
                        + ", ".join(c.name for c in cols if c.skip) + " are skipped", ctx.select,
                        hint="use mechanism = 'collision' (its conditional mean is SQL's AVG over the users with "
                             "a value), or declare the column NOT NULL or with a DEFAULT")
    if str(ctx.options.get("split", "auto")).lower() != "auto":
        raise ctx.error(PlanError, f"mechanism = '{wanted}' sends one report per user, so there is nothing to split",
                        ctx.select, hint="drop the split option")
    _convert(ctx, runs, wanted, cols, where)
    ctx.split_note = f"none: {NOTE} (mechanism = '{wanted}' was asked for)"


def _relative(ctx, kind: str, cols: list[Column], where: list[int], runs) -> float:
    """Σ over the aggregates of (joint se / best se at the full ε and all users)², the split's unit."""
    n, eps = ctx.facts.typical_n, ctx.epsilon
    var = predicted_variance(kind, eps, len(cols), n)
    full = [min((c.expected_se(eps, n) for c in a.candidates if not c.rejected), default=math.inf) for a in runs]
    return sum(cols[j].half ** 2 * var / f ** 2 for j, f in zip(where, full))


def choose_joint_release(ctx) -> None:
    """Rule: after the split is weighed, take one joint report instead where it predicts less total relative
    variance (spec §9 rules 1–3; CoCo for unconditional means, Collision where a column's NULLs are skipped)."""
    runs = getattr(ctx, "joint", None)
    if not runs or math.isinf(ctx.epsilon) or ctx.facts.n == 0 or not ctx.split_costs:
        return
    cols, where = _columns(ctx, runs)
    kinds = [k for k in KINDS if not (k == "coco" and any(c.skip for c in cols))]
    costs = {k: _relative(ctx, k, cols, where, runs) for k in kinds}
    best = min(kinds, key=costs.get)
    split = ctx.split_costs[ctx.split]
    others = "; ".join(f"{k} {v:.3g}" for k, v in costs.items() if k != best)
    versus = f"relative variance {costs[best]:.3g} vs {split:.3g} for splitting {'ε' if ctx.split == 'epsilon' else 'users'}"
    if str(ctx.options.get("split", "auto")).lower() != "auto" or costs[best] >= split:
        ctx.split_note += f"; one {best} report per user for all {len(runs)} means would predict {costs[best]:.3g}"
        return
    _convert(ctx, runs, best, cols, where)
    ctx.split_note = f"none: {NOTE}; {best} ({versus}{'; ' + others if others else ''})"
