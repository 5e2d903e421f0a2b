"""The Plan: what will run, and why. ``str(plan)`` is the EXPLAIN text, so what is shown is what runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from scipy.stats import norm

from ldpql.catalog import Table
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding, Protocol


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


@dataclass
class Target:
    """A resolved aggregate: what its users randomize (the encoding) and how its answer is labelled."""

    column: str | None
    encoding: Encoding
    domain_text: str
    categories: tuple | None = None      # labels of a table-valued (histogram) aggregate
    unit: str = ""                       # what the predicted error is measured in
    affine: tuple[float, float] = (1.0, 0.0)  # a numeric answer is a·(estimate on the encoded scale) + b


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

    @property
    def table_valued(self) -> bool:
        return self.target.categories is not None

    def protocol(self, n: int) -> Protocol:
        """The protocol this aggregate runs for a group of n users."""
        return self.chosen.protocol(self.epsilon)(n)


@dataclass
class Plan:
    """A planned SELECT: the table, the public facts used, the ε split and one AggregatePlan per aggregate."""

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

    @property
    def z(self) -> float:
        """The normal quantile of the two-sided interval at ``confidence``."""
        return float(norm.ppf(0.5 + self.confidence / 2))

    def __str__(self) -> str:
        return "\n".join(explain_lines(self))


def _eps(e: float) -> str:
    return "inf (noise off)" if e == float("inf") else f"{e:.4g}"


def _se(c: Candidate, z: float, conf: float) -> str:
    return f"±{z * c.predicted_se:.4g} ({conf:.0%})"


def explain_lines(p: Plan) -> list[str]:
    """The EXPLAIN text as lines: a tree of the plan, the ε split, and each aggregate's candidates."""
    where = f" WHERE {p.where_sql}" if p.where_sql else ""
    groups = f", {p.cells} group(s) by {', '.join(p.group_by)}" if p.group_by else ""
    lines = [f"plan for: {p.statement.sql()}",
             f"├─ table       {p.table.name} ({p.table.source_id}): {p.n:,} users{where}{groups}"]
    budget = f"├─ budget      ε = {_eps(p.epsilon)} per user"
    if p.remaining is not None and p.epsilon != float("inf"):
        budget += (f" (table budget {p.table.budget_epsilon:g}: {p.remaining:.4g} remain"
                   f" -> {max(p.remaining - p.epsilon, 0):.4g} after this statement)")
    lines.append(budget)
    lines.append(f"├─ model       local (pure ε-LDP){'; δ = ' + format(p.delta, 'g') if p.delta else ''}")
    if p.split_note:
        lines.append(f"├─ split       {p.split_note}")
    lines.extend(f"├─ note        {n}" for n in p.notes)
    for i, a in enumerate(p.aggregates):
        last = i == len(p.aggregates) - 1
        lines.extend(_aggregate_lines(a, p, "└─ " if last else "├─ ", "   " if last else "│  "))
    return lines


def _aggregate_lines(a: AggregatePlan, p: Plan, head: str, pad: str) -> list[str]:
    share = a.users[1] - a.users[0]
    users = "all users" if share == 1 else f"users [{a.users[0]:.3g}, {a.users[1]:.3g}) = {share:.0%} of them"
    c = a.chosen
    out = [f"{head}{a.output} = {a.call.sql()}",
           f"{pad}├─ domain      {a.target.domain_text}",
           f"{pad}├─ mechanism * {c.mechanism}: {c.model}, {c.rounds} round(s), ε = {_eps(a.epsilon)}, {users}",
           f"{pad}├─ predicted   {_se(c, p.z, p.confidence)} {a.target.unit} at n = {p.n:,}"
           + (f"  ({c.note})" if c.note else "")]
    if c.describe is not None:
        n_a = max(int(p.n * share), 1)
        out.extend(f"{pad}├─ {line}" for line in c.describe(a.epsilon, n_a))
    rejected = [r for r in a.candidates if r is not c]
    for j, r in enumerate(rejected):
        branch = "└─" if j == len(rejected) - 1 else "├─"
        err = _se(r, p.z, p.confidence) if r.predicted_se == r.predicted_se else "n/a"
        out.append(f"{pad}{branch} rejected    {r.mechanism}: {err}; {r.rejected}")
    if not rejected:
        out[-1] = out[-1].replace("├─ predicted", "└─ predicted", 1)
    return out
