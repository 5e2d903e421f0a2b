"""The Plan: what will run, and why. ``str(plan)`` is the EXPLAIN text, so what is shown is what runs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from statistics import NormalDist

import numpy as np

from ldpql.catalog import Table
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding, Estimate, Protocol
from ldpql.mechanisms.base import unseen
from ldpql.papers import mechanism_papers


@dataclass
class Candidate:
    """One way to answer an aggregate: a mechanism in a model with a number of rounds, and its predicted
    standard error at the (ε, n) it would get. ``protocol(eps)`` builds its protocol factory (n -> protocol)."""

    mechanism: str
    model: str
    rounds: int
    predict: Callable[[float, int], float]
    protocol: Callable[[float], Callable[[int], Protocol]]
    note: str = ""
    predicted_se: float = float("nan")
    rejected: str = ""  # why it was not chosen ('' for the chosen one)
    # check(eps, n) -> why this candidate cannot run at (ε, n), or None; the planner rejects it with that text
    check: Callable[[float, int], str | None] | None = None
    # describe(eps, n) -> extra EXPLAIN lines (schedule, rounds, parameters) for the chosen candidate
    describe: Callable[[float, int], list[str]] | None = None
    # shuffle model: the statement's δ (the planner sets it on shuffle candidates), and local_epsilon(eps, n) ->
    # the ε₀ each user's randomizer runs at for the central (ε, δ) after shuffling, which the executor's
    # per-user check and the ledger use
    delta: float = 0.0
    local_epsilon: Callable[[float, int], float] | None = None
    # what predict() returns: 'stderr' (shown as ±z·se), 'mean_abs_bound' (an upper bound on E|error|, shown
    # as E|error| ≤ ...) or 'mean_abs' (E|error|, shown as E|error| ≈ ...)
    predicts: str = "stderr"
    # True: protocol(eps)(n) gets the number of users the aggregate reaches (n × its share under a users
    # split), the same n that predict, check and describe get; False: the group's n
    share_n: bool = False
    aliases: tuple[str, ...] = ()  # other names OPTIONS (mechanism = ...) accepts for this one
    # sampling(N) -> the largest variance of one user's true value, in the answer's units, for a group of N
    # users: when only a random share of them answers, the estimate stands for all N and carries this sampling
    # variance too (None: the candidate's prediction already holds it, or it has none)
    sampling: Callable[[int], float] | None = None
    # scale(N) -> the factor a protocol told N users applies to its estimate (LDP_COUNT, LDP_SUM: N): under a
    # users split, predict() at the users asked scales by their number, but the answer stands for all N
    scale: Callable[[int], float] | None = None
    # split_se(eps, N, n) -> the whole prediction under a users split (n of N users asked), for a family whose
    # worst cases of noise and of sampling are at different data sets (a mean's: Duchi's noise is largest at
    # x = 0, where the users do not spread at all), so adding the two worst cases would overstate it
    split_se: Callable[[float, int, int], float] | None = None
    # the planner ranks candidates by predicted_se × choice_weight: a measured mean error per unit of σ, for
    # candidates whose errors have differently shaped distributions (quantiles); 1 ranks by predicted_se alone
    choice_weight: float = 1.0
    # typical(eps, N, share) -> the error at a typical data set rather than the worst (a mean's: E[x²] = 1/2, the
    # average over data sets with E[x²] uniform in [0, 1]); candidates that have it are chosen near-minimax: of
    # those whose worst case is within NEAR_MINIMAX of the best worst case, the smallest typical error
    typical: Callable[[float, int, float], float] | None = None
    # a baseline: predicted and shown in EXPLAIN beside the others, run only when asked for by name (mechanism =>)
    baseline: bool = False

    @property
    def asks_nobody(self) -> bool:
        """True for an answer from the declared domain alone (no round: no user is asked, nothing is spent)."""
        return self.rounds == 0

    def expected_se(self, eps: float, population: int, share: float = 1.0) -> float:
        """The predicted standard error for a group of ``population`` users of whom a random ``share`` answer:
        the mechanism's error at the users asked, plus the sampling error of standing for the others (finite-
        population corrected, with what the users asked cannot show: :func:`~ldpql.mechanisms.base.unseen`). This
        is what the planner compares and what EXPLAIN shows."""
        n = max(int(population * share), 1)
        se = 0.0 if math.isinf(eps) else self.predict(eps, n)
        if n >= population:
            return se
        if self.split_se is not None and not math.isinf(eps):   # (and what the users asked cannot show)
            se = self.split_se(eps, population, n)
            return se if self.sampling is None else math.hypot(se, math.sqrt(unseen(self.sampling(population), n,
                                                                                    1 - n / population)))
        if self.scale is not None:
            se *= abs(self.scale(population) / self.scale(n))
        if self.sampling is None:
            return se
        spread, sampled = self.sampling(population), 1 - n / population
        return math.sqrt(se ** 2 + spread * sampled / n + unseen(spread, n, sampled))


@dataclass
class Target:
    """A resolved aggregate: what its users randomize (the encoding) and how its answer is labelled."""

    column: str | None
    encoding: Encoding
    domain_text: str
    categories: tuple | None = None      # labels of a table-valued (histogram) aggregate
    unit: str = ""                       # what the predicted error is measured in
    # True when the answer's interval is not in ``unit`` (a quantile: values, against a rank error); the
    # result then notes the predicted error too
    notes_prediction: bool = False
    affine: tuple[float, float] = (1.0, 0.0)  # a numeric answer is a·(estimate on the encoded scale) + b
    # Aggregates of one statement with equal ``release`` keys share one protocol run (and one ε charge); each
    # computes its answer from that release's estimate with ``derive(release, confidence)`` (post-processing),
    # which ``derived`` describes for EXPLAIN. None: the protocol's estimate is the answer.
    release: tuple | None = None
    derive: Callable[[Estimate, float], Estimate] | None = None
    derived: str = ""
    nulls: Any = None   # a numeric mean's or sum's NULL semantics (planner.aggregates.Nulls); None elsewhere


@dataclass
class AggregatePlan:
    """The plan of one LDP aggregate of the select list."""

    index: int
    output: str
    call: ast.Call
    kind: str
    target: Target
    epsilon: float = 0.0
    users: tuple[float, float] = (0.0, 1.0)
    candidates: list[Candidate] = field(default_factory=list)
    chosen: Candidate | None = None
    source: int | None = None   # the aggregate whose release this one reads (None: it runs its own protocol)

    @property
    def table_valued(self) -> bool:
        return self.target.categories is not None

    def local_epsilon(self, n: int) -> float:
        """The ε each user of this aggregate may spend in its own randomizer, in a group of n users: the
        aggregate's ε, or the larger ε₀ of a shuffle-model protocol (for the n its protocol is told), whose
        central guarantee after shuffling is (ε, δ)."""
        c = self.chosen
        if c is None or c.model != "shuffle" or c.local_epsilon is None or self.epsilon == float("inf"):
            return self.epsilon
        return max(self.epsilon, c.local_epsilon(self.epsilon, self._told(n)))

    def _told(self, n: int) -> int:
        if self.chosen.share_n and n:
            return max(int(n * (self.users[1] - self.users[0])), 1)
        return n

    def protocol(self, n: int) -> Protocol:
        """The protocol this aggregate runs for a group of n users (none when it reads another's release)."""
        if self.source is not None:
            return _no_rounds()
        return self.chosen.protocol(self.epsilon)(self._told(n))


def _no_rounds() -> Protocol:
    """The protocol of an aggregate that reads another one's release: no round, so no user spends ε on it."""
    return Estimate(np.array([]), np.array([]))
    yield  # pragma: no cover  (unreachable; makes this a generator that returns before any round)


@dataclass
class Plan:
    """A planned query: the table, the public facts used, the ε split and one AggregatePlan per aggregate."""

    statement: ast.Select
    table: Table
    epsilon: float
    delta: float
    where_sql: str | None
    group_by: list[str]
    items: list[tuple[str, str | int]]          # (output name, group column name | aggregate index)
    aggregates: list[AggregatePlan]
    n: int
    cells: int
    split: str = "single"                        # 'single' | 'users' | 'epsilon'
    split_note: str = ""
    confidence: float = 0.95
    seed: int | None = None
    simulation: str = "auto"                    # 'auto' | 'exact' | 'per_user'
    remaining: float | None = None
    notes: list[str] = field(default_factory=list)
    ledger: str | None = None                   # where the budget is kept (shown: which ledger a plan is checked on)
    groups: tuple[tuple[tuple, int], ...] = ()   # GROUP BY: each group's public key and user count
    accuracy: Any = None                        # ACCURACY ±a: how its ε was chosen (planner.accuracy.Accuracy)

    @property
    def z(self) -> float:
        """The normal quantile of the two-sided interval at ``confidence``."""
        return NormalDist().inv_cdf(0.5 + self.confidence / 2)

    def __str__(self) -> str:
        return "\n".join(explain_lines(self))

    @property
    def epsilon0(self) -> float | None:
        """The largest local ε₀ of the shuffle-model aggregates at the statement's n users (an upper bound for
        every group, since ε₀ grows with n), or None when every aggregate runs in the local model."""
        local = [a.local_epsilon(self.n) for a in self.aggregates
                 if a.source is None and a.chosen is not None and a.chosen.model == "shuffle"]
        return max(local) if local else None

    @property
    def asks_nobody(self) -> bool:
        """True when every answer comes from the declared domain alone (public facts decide it): no user is
        asked, so the statement spends nothing whatever budget is left."""
        runs = [a for a in self.aggregates if a.source is None]
        return bool(runs) and self.n > 0 and not math.isinf(self.epsilon) and \
            all(a.chosen is not None and a.chosen.asks_nobody for a in runs)

    @property
    def shuffle_delta(self) -> float:
        """The δ the statement spends: the sum over its shuffle-model aggregates (δ composes by addition; the
        planner gives each a share of the statement's δ); 0 if none."""
        return sum((a.chosen.delta for a in self.aggregates if a.source is None and a.chosen is not None
                    and a.chosen.model == "shuffle"), 0.0)

    def answers(self, estimates: dict[tuple[int, int], Estimate]) -> dict[tuple[int, int], Estimate]:
        """Each aggregate's answer per cell, from the protocol estimates {(aggregate, cell): Estimate}: the
        estimate itself, or ``target.derive`` of the release it reads (its own, or its ``source``'s)."""
        out = dict(estimates)
        for a in self.aggregates:
            if a.target.derive is None:
                continue
            src = a.index if a.source is None else a.source
            for (i, cell), est in estimates.items():
                if i == src and est is not None:
                    out[(a.index, cell)] = a.target.derive(est, self.confidence)
        return out


def _eps(e: float) -> str:
    return "inf (noise off)" if e == float("inf") else f"{e:.4g}"


def _se(c: Candidate, z: float, conf: float, se: float | None = None) -> str:
    se = c.predicted_se if se is None else se
    if c.predicts == "mean_abs_bound":
        return f"E|error| ≤ {se:.4g}"
    if c.predicts == "mean_abs":
        return f"E|error| ≈ {se:.4g}"
    return f"±{z * se:.4g} ({conf:.0%})"


GROUP_LINES = 8   # EXPLAIN lists at most this many groups' predictions, then a summary of the rest


def _predicted_lines(a: AggregatePlan, p: Plan, pad: str) -> list[str]:
    """The predicted error: at the statement's users (the share asked, sampling error included), or under
    GROUP BY one line per group at its own public user count, since each group runs on its own users."""
    c, share = a.chosen, a.users[1] - a.users[0]
    asked = f" ({max(int(p.n * share), 1):,} asked; sampling error included)" if share < 1 else ""
    note = f"  ({c.note})" if c.note else ""
    if not p.groups:
        return [f"{pad}├─ predicted   {_se(c, p.z, p.confidence)} {a.target.unit} at n = {p.n:,}{asked}{note}"]
    out = [f"{pad}├─ predicted   {a.target.unit} per group, each on its own users{note}"]
    for key, n in p.groups[:GROUP_LINES]:
        label = ", ".join(f"{g} = {v}" for g, v in zip(p.group_by, key))
        out.append(f"{pad}│    {label}: {_se(c, p.z, p.confidence, c.expected_se(a.epsilon, n, share))} at n = {n:,}")
    rest = [n for _, n in p.groups[GROUP_LINES:]]
    if rest:   # errors are monotone in a group's size: the range is at the smallest and the largest group
        ends = sorted(c.expected_se(a.epsilon, n, share) for n in {min(rest), max(rest)})
        out.append(f"{pad}│    … {len(rest)} more groups: from {_se(c, p.z, p.confidence, ends[0])} "
                   f"to {_se(c, p.z, p.confidence, ends[-1])}")
    return out


def explain_lines(p: Plan) -> list[str]:
    """The EXPLAIN text as lines: a tree of the plan, the ε split, and each aggregate's candidates."""
    where = f" WHERE {p.where_sql}" if p.where_sql else ""
    groups = f", {p.cells} group(s) by {', '.join(p.group_by)}" if p.group_by else ""
    lines = [f"plan for: {p.statement.sql()}",
             f"├─ table       {p.table.name} ({p.table.source_id}): {p.n:,} users{where}{groups}"]
    budget = f"├─ budget      ε = {_eps(p.epsilon)} per user"
    if p.remaining is not None and p.epsilon != float("inf"):
        left = max(p.remaining, 0.0)
        budget += (f" (table budget {p.table.budget_epsilon:g}: {left:.4g} remain"
                   + ("; this statement asks no user, so nothing is spent)" if p.asks_nobody else
                      f" -> {left - p.epsilon:.4g} after this statement)" if p.epsilon <= left * (1 + 1e-9) else
                      f"; this statement would be refused: it needs {p.epsilon:.4g})"))
    lines.append(budget)
    if p.accuracy is not None:
        lines.extend(f"├─ accuracy    {line}" for line in p.accuracy.lines())
    if p.ledger is not None:
        lines.append(f"├─ ledger      {p.ledger}")
    if p.epsilon0 is None:
        lines.append(f"├─ model       local (pure ε-LDP){'; δ = ' + format(p.delta, 'g') if p.delta else ''}")
    else:
        lines.append(f"├─ model       shuffle: (ε, δ) = ({_eps(p.epsilon)}, {p.shuffle_delta:g}) for the shuffled reports; "
                     f"users randomize at ε₀ = {p.epsilon0:.4g}")
    if p.split_note:
        lines.append(f"├─ split       {p.split_note}")
    lines.extend(f"├─ note        {n}" for n in p.notes)
    for i, a in enumerate(p.aggregates):
        last = i == len(p.aggregates) - 1
        lines.extend(_aggregate_lines(a, p, "└─ " if last else "├─ ", "   " if last else "│  "))
    return lines


def _aggregate_lines(a: AggregatePlan, p: Plan, head: str, pad: str) -> list[str]:
    if a.source is not None:
        src = p.aggregates[a.source]
        return [f"{head}{a.output} = {a.call.sql()}",
                f"{pad}└─ shares      the release of {src.output} ({src.chosen.mechanism}, ε = {_eps(src.epsilon)}, "
                f"charged once): {a.target.derived or 'post-processing'}"]
    share = a.users[1] - a.users[0]
    users = "all users" if share == 1 else f"users [{a.users[0]:.3g}, {a.users[1]:.3g}) = {share:.0%} of them"
    c = a.chosen
    out = [f"{head}{a.output} = {a.call.sql()}",
           f"{pad}├─ domain      {a.target.domain_text}",
           f"{pad}├─ mechanism * {c.mechanism}: {c.model}, {c.rounds} round(s), ε = {_eps(a.epsilon)}, {users}",
           *[f"{pad}├─ paper       {cited}" for cited in mechanism_papers(c.mechanism)],
           *_predicted_lines(a, p, pad)]
    if c.describe is not None:
        n_a = max(int(p.n * share), 1)
        out.extend(f"{pad}├─ {line}" for line in c.describe(a.epsilon, n_a))
    rejected = [r for r in a.candidates if r is not c]
    for j, r in enumerate(rejected):
        branch = "└─" if j == len(rejected) - 1 else "├─"
        err = _se(r, p.z, p.confidence) if r.predicted_se == r.predicted_se else "n/a"
        basis = f" ({r.note})" if r.note and err != "n/a" else ""   # what the prediction assumes
        out.append(f"{pad}{branch} rejected    {r.mechanism}: {err}{basis}; {r.rejected}")
    if not rejected:
        out[-1] = out[-1].replace("├─ predicted", "└─ predicted", 1)
    return out
