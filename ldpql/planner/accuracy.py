"""Accuracy-first planning: ``… ACCURACY ±a`` and ``EXPLAIN … EPSILON IN (e1, e2, …)``.

The planner predicts every aggregate's error at a given ε from public facts only. ACCURACY turns the question
round: the statement's total ε becomes the unknown, and the planner itself (its split rule and mechanism
choice, unchanged) is evaluated at trial values of ε until the smallest one is found at which every aggregate's
predicted error at the statement's confidence is within ±a. ``EPSILON IN (...)`` evaluates it at each listed ε
and shows the predictions side by side. Neither reads a private value nor spends anything: a trial plan is a
plan, and plans are built from :class:`~ldpql.planner.PublicFacts`.

What "within ±a" means is what EXPLAIN's ``predicted`` line shows for the aggregate (under GROUP BY, in its
smallest group): the half-width z·se of the interval at the statement's confidence, in the unit the aggregate's
prediction is measured in (the answer's unit for LDP_MEAN/LDP_SUM/LDP_COUNT, a rank error as a fraction of the
users for quantiles). A frequency release predicts the ℓ2 norm of its error over all d bins; ACCURACY holds each
bin to ±a, taking the per-bin error as the root mean square over the bins, ℓ2/√d. A candidate whose prediction
is a bound on the mean absolute error (E|error| ≤ b, LDP_MIN/LDP_MAX's bisection) is held to b ≤ a instead, and
EXPLAIN says so. Only the generic :class:`~ldpql.planner.plan.Candidate` interface is used (``predicted_se``,
``expected_se``, ``predicts``), so a family that changes its predictions changes what ACCURACY picks with it.

The search: every trial plan is evaluated on a coarse grid (factors of 2 from the engine's floor up to its cap);
the first grid point that meets ±a brackets the smallest ε with the point before it, and a bisection on log ε
narrows the bracket to a relative width of :data:`TOLERANCE`. The ε that runs is the upper end, rounded up to
:data:`DIGITS` significant digits, so the number shown is the number charged and its prediction is within ±a.
The predicted error falls with ε for every candidate; the split rule may switch between splitting users and
splitting ε as ε grows, which can make a statement's worst error jump, so the grid finds the first crossing
rather than assuming a single one.

The split rule divides a statement's ε equally, so with several aggregates of unequal needs the equal split
overpays: a mean that needs 1.926 beside a count that needs 0.894 would run at 2 × 1.926. ACCURACY therefore
also prices ``epsilon =>`` shares, each aggregate at the smallest ε that meets its own ±a (its prediction
depends on its own share only), and runs whichever plan spends less: those shares (1.926 + 0.894), or the
split rule's plan (a users split can beat both).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ldpql.errors import PlanError
from ldpql.grammar import ast
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.planner.histogram import UNIT as L2_UNIT
from ldpql.planner.plan import AggregatePlan, Candidate, Plan

TOLERANCE = 1e-4     # the final bracket on ε: hi / lo ≤ 1 + TOLERANCE
DIGITS = 4           # the ε that runs, rounded up to this many significant digits
GRID_FACTOR = 2.0    # the coarse scan's step in ε

PlanAt = Callable[..., Plan]   # plan_at(ε) or plan_at(ε, {aggregate index: its epsilon => share})


def predicted_error(a: AggregatePlan, p: Plan) -> float:
    """What ACCURACY compares with a: the predicted half-width at the plan's confidence (z·se), or the bound
    on E|error| for a candidate that predicts one; under GROUP BY the largest over the groups (each runs on its
    own users, whose count is public). Infinite for an aggregate without a chosen mechanism."""
    c = a.chosen
    if c is None or c.predicted_se != c.predicted_se:
        return math.inf
    sizes = {min(n for _, n in p.groups), max(n for _, n in p.groups)} if p.groups else set()
    # every family's error is monotone in the group's size (a mean's falls, a count's grows), so the largest
    # over the groups is at the smallest or the largest one: two predictions, not one per group
    se = max((c.expected_se(a.epsilon, n, a.users[1] - a.users[0]) for n in sizes), default=c.predicted_se)
    se /= math.sqrt(bins(a) or 1)
    return p.z * se if c.predicts == "stderr" else se


def bins(a: AggregatePlan) -> int | None:
    """A frequency release predicts the ℓ2 norm of its error over all d bins; ACCURACY holds each bin to ±a,
    so its error is taken per bin: the root mean square over the bins, ℓ2/√d. None for other aggregates."""
    return a.target.encoding.size if a.target.unit == L2_UNIT and a.target.encoding.size else None


def smallest_group(p: Plan) -> int | None:
    """Under GROUP BY, the smallest group's user count (shown; which group binds depends on the aggregate: a
    mean's error is largest in the smallest group, a count's in the largest); None without groups."""
    return min((n for _, n in p.groups), default=None) if len(p.groups) > 1 else None


def describe_error(c: Candidate, value: float, confidence: float) -> str:
    """``value`` as the kind of prediction ``c`` makes: ±v (95%) or E|error| ≤ v."""
    if c.predicts == "stderr":
        return f"±{value:.4g} ({confidence:.0%})"
    return f"E|error| {'≤' if c.predicts == 'mean_abs_bound' else '≈'} {value:.4g}"


def runs(p: Plan) -> list[AggregatePlan]:
    """The aggregates that run a protocol (an aggregate that reads a shared release has its owner's error)."""
    return [a for a in p.aggregates if a.source is None]


def targets(p: Plan, default: float) -> dict[int, float]:
    """Each running aggregate's ±a: its own ``accuracy =>``, else the statement's; an aggregate that reads a
    shared release tightens its owner's (post-processing of one release: one error to bound)."""
    own = {a.index: _named_accuracy(a) or default for a in p.aggregates}
    out = {a.index: own[a.index] for a in runs(p)}
    for a in p.aggregates:
        if a.source is not None:
            out[a.source] = min(out[a.source], own[a.index])
    return out


def _named_accuracy(a: AggregatePlan) -> float | None:
    return next((float(arg.value.value) for arg in a.call.named if arg.name == "accuracy"), None)


def _worst(p: Plan, target: float, which: int | None = None) -> float:
    """The largest ratio of predicted error to ±a among the aggregates (or the one with index ``which``)."""
    goal = targets(p, target)
    return max((predicted_error(a, p) / goal[a.index] for a in runs(p) if which in (None, a.index)), default=0.0)


class _Trials:
    """Plans at trial ε, each built once; a PlanError at a trial ε (a candidate that refuses to run there, say)
    counts as missing the target, so the search only moves towards ε where the statement can run."""

    def __init__(self, plan_at: PlanAt):
        self.plan_at, self.plans = plan_at, {}

    def __call__(self, eps: float) -> Plan | None:
        if eps not in self.plans:
            try:
                with np.errstate(divide="ignore", over="ignore", invalid="ignore"):   # ε near the floor: inf is
                    self.plans[eps] = self.plan_at(eps)                                # a fine prediction there
            except PlanError:
                self.plans[eps] = None
        return self.plans[eps]

    def meets(self, eps: float, target: float, which: int | None = None) -> bool:
        p = self(eps)
        return p is not None and _worst(p, target, which) <= 1.0


def smallest_epsilon(trials: _Trials, target: float, low: float, high: float, which: int | None = None) -> float | None:
    """The smallest ε in [low, high] whose plan's predicted error is within ±a (``target``, or an aggregate's own
    ``accuracy =>``) for every aggregate, or for the one with index ``which``, rounded up to DIGITS significant
    digits; None when not even ``high`` reaches it."""
    grid = [low]
    while grid[-1] * GRID_FACTOR < high:
        grid.append(grid[-1] * GRID_FACTOR)
    grid.append(high)
    first = next((i for i, e in enumerate(grid) if trials.meets(e, target, which)), None)
    if first is None:
        return None
    if first == 0:
        return grid[0]
    lo, hi = grid[first - 1], grid[first]
    while hi / lo > 1 + TOLERANCE:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if trials.meets(mid, target, which) else (mid, hi)
    shown = min(round_up(hi), high)
    return shown if trials.meets(shown, target, which) else hi


def round_up(x: float, digits: int = DIGITS) -> float:
    """``x`` rounded up to ``digits`` significant digits (1.23412 -> 1.235)."""
    step = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return float(f"{math.ceil(x / step - 1e-9) * step:.{digits}g}")


@dataclass
class Accuracy:
    """What ACCURACY chose: the target, the ε that runs, and for each aggregate the smallest ε that reaches its
    target (under the statement's split rule). ``refusal`` is set when no ε up to the cap reaches it."""

    target: float
    confidence: float
    epsilon: float
    reached: bool
    per_aggregate: list[tuple[str, float, float | None, str]] = field(default_factory=list)  # (output, ±a, ε, error)
    smallest_group: int | None = None
    low: float = 0.0
    shares: bool = False       # each aggregate runs at the ε it needs (epsilon => shares), not an equal split
    refusal: PlanError | None = None
    within_budget: str = ""    # over budget: what the ε left would give
    empty: bool = False        # no users match


    def summary(self) -> str:
        """One line: the ε chosen and why (EXPLAIN's accuracy line; also a note on the result)."""
        where = " in every group (each on its own users; the group where it is largest binds)" \
            if self.smallest_group is not None else ""
        goal = f"±{self.target:g}" if all(t == self.target for _, t, _, _ in self.per_aggregate) else \
            "its ±a"
        if self.empty:
            return "no users match, so ACCURACY picks no ε: every answer is NULL and nothing is spent"
        if not self.reached:
            return (f"no ε up to the engine's cap {EPSILON_CAP:g} brings every predicted error "
                    f"({self.confidence:.0%}) "
                    f"within {goal}{where}; this statement would be refused")
        lowest = f" (or less: ldpql plans no ε below {self.low:.4g})" if self.epsilon <= self.low else ""
        shares = "; each aggregate at the ε it needs (epsilon => shares, less than splitting ε equally or " \
                 "the users)" if self.shares else ""
        return (f"ε = {self.epsilon:.4g}{lowest}, the smallest ε whose predicted error ({self.confidence:.0%}) is "
                f"within {goal} for every aggregate{where}{shares}")

    def lines(self) -> list[str]:
        """EXPLAIN's accuracy lines: the summary, then per aggregate the ε it needs and its error at the chosen ε."""
        out = [self.summary()]
        if self.empty:
            return out
        binding = max((e for _, _, e, _ in self.per_aggregate if e is not None), default=None)
        group = " in the group where it is largest" if self.smallest_group is not None else ""
        for output, goal, eps, error in self.per_aggregate:
            needs = f"within ±{goal:g} from ε = {eps:.4g}" if eps is not None else \
                f"not within ±{goal:g} at any ε up to {EPSILON_CAP:g}"
            mark = " (the binding one)" if len(self.per_aggregate) > 1 and eps == binding else ""
            out.append(f"{output}: {needs}{mark}; predicted {error} at ε = {self.epsilon:.4g}{group}")
        if self.within_budget:
            out.append(self.within_budget)
        return out


def plan_by_accuracy(select: ast.Select, plan_at: PlanAt, text: str, floor: float) -> Plan:
    """The plan of an ``ACCURACY ±a`` statement: :func:`smallest_epsilon` over ``plan_at`` (the planner at a
    trial ε), then the plan at the ε found, or at the cap when none reaches ±a (then marked refused). ``floor``
    is the least ε the planner gives one aggregate."""
    target = float(select.accuracy.value)
    _check_arguments(select, text)
    trials = _Trials(plan_at)
    top = trials(EPSILON_CAP)
    if top is None:            # the statement cannot run even at the cap: say why, as EPSILON would
        plan_at(EPSILON_CAP)
    _refuse_unknown_share(top, text, target)
    n, low = top.n, floor * max(len(runs(top)), 1) * 1.01
    chosen = smallest_epsilon(trials, target, low, EPSILON_CAP) if n else low   # no users: nothing is spent
    reached = chosen is not None
    final = trials(chosen if reached else EPSILON_CAP) or top
    needs = {a.index: smallest_epsilon(trials, target, low, EPSILON_CAP, a.index) if n else None for a in runs(final)}
    by_shares = _plan_by_shares(plan_at, final, target, low) if reached and n and len(runs(final)) > 1 else None
    if by_shares is not None and by_shares[0].epsilon < final.epsilon * (1 - 1e-9):
        final, needs = by_shares
    goal = targets(final, target)
    per = [(_outputs(a, final), goal[a.index], needs[a.index],
            describe_error(a.chosen, predicted_error(a, final), final.confidence) + _per_bin(a) + _assumes(a))
           for a in runs(final)]
    acc = Accuracy(target, final.confidence, final.epsilon, reached, per, smallest_group(final), low, empty=n == 0,
                   shares=by_shares is not None and final is by_shares[0])
    if not reached:
        acc.refusal = _unreachable(acc, final, goal, text, select.accuracy)
    elif final.remaining is not None and n and final.epsilon > max(final.remaining, 0) * (1 + 1e-9):
        acc.within_budget = _what_is_left(trials, max(final.remaining, 0), low, target)
    return replace(final, statement=select, accuracy=acc)   # (a copy: the trial plans stay as they were)


def _plan_by_shares(plan_at: PlanAt, base: Plan, target: float, low: float) -> tuple[Plan, dict] | None:
    """The plan that gives each running aggregate of ``base`` an ``epsilon =>`` share, the smallest ε at which it
    meets its own ±a (found with every aggregate at the same trial share: each prediction depends on its own
    share only), and the statement the sum; with each aggregate's share. None when shares cannot apply (split =
    'users' asked for) or miss a target. An aggregate that reads a shared release takes its owner's share, so
    the calls still shape one release."""
    def share_of(p_shares: dict[int, float]) -> dict[int, float]:
        return {a.index: p_shares[a.index if a.source is None else a.source] for a in base.aggregates}

    k = len(runs(base))
    same = _Trials(lambda e: plan_at(k * e, share_of({a.index: e for a in runs(base)})))
    needs = {a.index: smallest_epsilon(same, target, low, EPSILON_CAP, a.index) for a in runs(base)}
    if any(e is None for e in needs.values()):
        return None
    total = float(f"{sum(needs.values()):.12g}")
    p = _Trials(lambda e: plan_at(e, share_of(needs)))(total)
    return (p, needs) if p is not None and _worst(p, target) <= 1.0 else None


def _assumes(a: AggregatePlan) -> str:
    """An E|error| bound of an extreme holds only for data as dense near it as an even spread: say so where
    ACCURACY shows it (no bound on the distance to the extreme holds whatever the data short of an ε at which
    a single user stands out)."""
    if a.chosen.predicts != "mean_abs_bound":
        return ""
    return (" (assumes users as dense near the extreme as an even spread over the domain; a long thin tail can "
            "exceed it: see the bound line)")


def _per_bin(a: AggregatePlan) -> str:
    return f" per bin (root mean square over its {bins(a):,} bins)" if bins(a) else ""


def _outputs(a: AggregatePlan, p: Plan) -> str:
    """An aggregate's output name, with those that read its release (one error bounds them all)."""
    readers = [b.output for b in p.aggregates if b.source == a.index]
    return a.output + (f" (and {', '.join(readers)}: one release)" if readers else "")


def _check_arguments(select: ast.Select, text: str) -> None:
    """ACCURACY chooses the ε and its split, so neither an aggregate's ε share nor the statement's OPTIONS
    (epsilon = ...) may fix one (a session's SET epsilon is a default, which ACCURACY overrides); ``accuracy =>``
    is positive."""
    for opt in select.options:
        if opt.name == "epsilon":
            raise _error("OPTIONS (epsilon = ...) cannot be given when ACCURACY chooses the statement's ε", text, opt,
                         "remove the epsilon option, or write EPSILON e instead of ACCURACY")
    for item in select.items:
        for arg in item.expr.named if isinstance(item.expr, ast.Call) else ():
            v = arg.value.value
            if arg.name == "epsilon":
                raise _error("an epsilon => share cannot be fixed when ACCURACY chooses the statement's ε", text, arg,
                             "remove the epsilon => share (the planner splits the ε it picks), or write EPSILON e")
            if arg.name == "accuracy" and (isinstance(v, bool) or not isinstance(v, (int, float))
                                           or not 0 < v < math.inf):
                raise _error(f"accuracy => must be a positive error bound, not {arg.value.sql()}", text, arg,
                             "for example LDP_COUNT(age > 65, accuracy => 50)")


def _refuse_unknown_share(p: Plan, text: str, target: float) -> None:
    """A mean over the users with a value of a nullable column has an error of about 1/share times its error at a
    share of 1, and the share is private: no ε can promise ±a unless the analyst states the least share
    (``present => p``, public), so ACCURACY refuses without it (EPSILON statements predict at a reference share)."""
    for a in p.aggregates:
        ns = a.target.nulls
        if a.kind == "mean" and ns is not None and ns.skip and ns.nullable and ns.share is None:
            col = a.target.column
            raise _error(f"ACCURACY cannot promise an error for {a.call.sql()}: it is the mean over the users with a "
                         f"value of `{col}`, whose error grows about as 1/share with the share of users who have one, "
                         f"and that share is private, so no ε can promise ±{target:g}", text, a.call,
                         f"state the least share you assume: {a.call.name}({col}, present => 0.5) (public; predicted "
                         f"at that share), or ask for nulls => 'midpoint' (NULL counts as {ns.value:g}), or declare "
                         f"`{col}` NOT NULL; EPSILON e runs without it", width=len(a.call.sql()))


def refuse_stray_accuracy(select: ast.Select, text: str) -> None:
    """``accuracy =>`` sets an aggregate's own ±a for ACCURACY; without the clause it would silently do nothing."""
    if select.accuracy is not None:
        return
    for item in select.items:
        for arg in item.expr.named if isinstance(item.expr, ast.Call) else ():
            if arg.name == "accuracy":
                raise _error("accuracy => sets this aggregate's own ±a when the statement plans by ACCURACY", text,
                             arg, "add ACCURACY ±a to the statement (its default for the other aggregates), or remove "
                                  "accuracy =>")


def _what_is_left(trials: _Trials, left: float, low: float, target: float) -> str:
    """Over budget: the predicted errors at the ε that is left (the best this budget can buy)."""
    p = trials(left) if left >= low else None
    if p is None:
        return f"over budget: {left:.4g} is left, too little to plan with"
    errors = ", ".join(f"{a.output} {describe_error(a.chosen, predicted_error(a, p), p.confidence)}" for a in runs(p))
    return f"over budget: the ε = {left:.4g} left would give {errors}"


def _unreachable(acc: Accuracy, at: Plan, goal: dict[int, float], text: str, node) -> PlanError:
    """The refusal of an ACCURACY that no ε up to the cap reaches, with the best accuracy there."""
    worst = max(runs(at), key=lambda a: predicted_error(a, at) / goal[a.index])
    best = predicted_error(worst, at)
    lower = ", lower the confidence (OPTIONS (confidence = 0.9))" if worst.chosen.predicts == "stderr" else ""
    return _error(f"ACCURACY ±{goal[worst.index]:g} cannot be reached for {worst.output}: at the engine's cap "
                  f"ε = {EPSILON_CAP:g} its predicted error is {describe_error(worst.chosen, best, acc.confidence)}",
                  text, node, f"ask for ±{round_up(best, 2):g} or more{lower}, or query more users; EXPLAIN shows "
                  "each aggregate's error")


def _error(message: str, text: str, node, hint: str, width: int = 1) -> PlanError:
    pos = getattr(node, "pos", None) or ast.Pos()
    return PlanError(message, hint=hint).with_position(text, pos.line or None, pos.column or None, width)


# ---- EPSILON IN (e1, e2, ...) ------------------------------------------------------------------------------

@dataclass
class Sweep:
    """EXPLAIN ... EPSILON IN (...): each aggregate's predicted error and chosen mechanism at each listed ε,
    as a table (``columns``, ``rows``); ``str()`` is the text EXPLAIN prints. Nothing runs, nothing is spent."""

    statement: ast.Select
    confidence: float
    n: int
    smallest_group: int | None
    columns: list[str]
    rows: list[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)    # why an ε was refused

    def header(self) -> list[str]:
        """What the table shows, above it."""
        where = (" in the group where it is largest (groups are disjoint and each gets the full ε; the smallest "
                 f"has {self.smallest_group:,} users)" if self.smallest_group is not None else f" at n = {self.n:,}")
        return [f"predicted error by ε for: {self.statement.sql()}",
                (f"the half-width of each answer's interval at {self.confidence:.0%} confidence{where}, "
                 "and the mechanism the planner would choose")]

    def __str__(self) -> str:
        lines = [tuple(self.columns), *self.rows]
        widths = [max(len(str(r[i])) for r in lines) for i in range(len(self.columns))]
        table = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in lines]
        return "\n".join(self.header() + table + self.notes)


def sweep(select: ast.Select, plan_at: PlanAt, text: str) -> Sweep:
    """The predictions of ``select`` at each ε of its ``EPSILON IN (...)``: one trial plan per ε."""
    for lit in select.sweep:
        v = lit.value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
            raise _error(f"every ε of EPSILON IN (...) must be a finite positive number, not {lit.sql()}", text, lit,
                         "for example EPSILON IN (0.5, 1, 2, 4)")
    plans, errors = [], {}
    for lit in select.sweep:
        try:
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                plans.append(plan_at(float(lit.value)))
        except PlanError as e:
            plans.append(None)
            errors[f"{float(lit.value):.4g}"] = e
    if all(p is None for p in plans):
        raise next(iter(errors.values()))
    some = next(p for p in plans if p is not None)
    rows = [_sweep_row(a.index, a.output, plans) for a in some.aggregates]   # every answer, shared or not (audit9)
    if any(p is not None and len(runs(p)) > 1 for p in plans):
        rows.append(("split", *[p.split if p is not None else "" for p in plans]))
    if some.remaining is not None:
        rows.append((f"budget ({max(some.remaining, 0):.4g} left)",
                     *["" if p is None else "ok" if p.asks_nobody or p.epsilon <= max(p.remaining, 0) * (1 + 1e-9)
                       else "would be refused" for p in plans]))
    columns = ["aggregate", *[f"ε = {float(lit.value):.4g}" for lit in select.sweep]]
    notes = [f"{a.output}: per bin, the root mean square over its {bins(a):,} bins" for a in runs(some) if bins(a)]
    notes += [f"ε = {eps}: refused: {e.message}" for eps, e in errors.items()]
    return Sweep(select, some.confidence, some.n, smallest_group(some), columns, rows, notes)


def _sweep_row(index: int, output: str, plans: list[Plan | None]) -> tuple[str, ...]:
    cells = []
    for p in plans:
        a = next((a for a in p.aggregates if a.index == index), None) if p is not None else None
        if a is None or a.chosen is None:
            cells.append("refused")
        elif a.source is not None:   # read from another aggregate's release (post-processing, charged once)
            cells.append(f"from {p.aggregates[a.source].output} {a.chosen.mechanism}")
        else:
            cells.append(f"{_short(a.chosen, predicted_error(a, p))} {a.chosen.mechanism}")
    return (output, *cells)


def _short(c: Candidate, value: float) -> str:
    return f"±{value:.3g}" if c.predicts == "stderr" else f"E|err|≤{value:.3g}"


def trial_select(select: ast.Select, eps: float, node, shares: dict[int, float] | None = None) -> ast.Select:
    """``select`` with EPSILON eps in place of its ACCURACY or EPSILON IN clause (errors point at ``node``), and
    with ``shares`` {aggregate index: ε} as ``epsilon =>`` arguments of those aggregates' calls."""
    items, i = [], 0
    for item in select.items:
        if isinstance(item.expr, ast.Call):
            if shares and i in shares:
                arg = ast.NamedArg("epsilon", ast.Literal(float(shares[i]), item.expr.pos), item.expr.pos)
                item = replace(item, expr=replace(item.expr, named=(*item.expr.named, arg)))
            i += 1
        items.append(item)
    return replace(select, items=tuple(items), epsilon=ast.Literal(float(eps), getattr(node, "pos", ast.Pos())),
                   accuracy=None, sweep=())
