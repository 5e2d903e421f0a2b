"""AST + catalog + public facts -> Plan, by an ordered list of small named rules (:data:`RULES`).

The planner reads only public facts: the statement, the declared domains, the number of users (after the
public WHERE) and of groups, and the ledger's remaining budget. It never sees a private value, so two
tables that differ in one user's private value get the same plan (a test checks this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from ldpql.catalog import OTHER, BooleanDomain, CategoricalDomain, NumericDomain, Table
from ldpql.errors import PlanError, PrivacyError, did_you_mean
from ldpql.grammar import ast
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.planner.aggregates import AGGREGATES, COMMON_ARGS, AggregateSpec, register_aggregate
from ldpql.planner.plan import AggregatePlan, Candidate, Plan, Target
from ldpql.planner import histogram  # noqa: F401,E402  (registers LDP_HISTOGRAM/FREQUENCY/TOPK/MODE)
from ldpql.planner import accuracy
from ldpql.planner import joint

__all__ = ["AGGREGATES", "COMMON_ARGS", "AggregateSpec", "Candidate", "Plan", "PublicFacts", "Target", "plan", "check_option",
           "check_public", "register_aggregate", "RULES", "OPTIONS", "sweep"]

# OPTIONS keys and what they accept; session SET takes the same keys (and epsilon).
OPTIONS = {
    "model": ("local", "shuffle", "auto"),
    "delta": float,
    "rounds": int,
    "mechanism": str,
    "confidence": float,
    "seed": int,
    "simulation": ("auto", "exact", "per_user"),
    "force": bool,
    "epsilon": float,
    "split": ("auto", "users", "epsilon"),
    "beta": float,                              # Gaussian means: failure probability of the coarse stage
    "constants": ("practical", "paper"),        # Gaussian means: thresholds profile
    "postprocess": ("none", "capped_simplex"),  # key-value counts: projected onto {0 <= f <= 1, sum <= s}
}
EXAMPLES = {"model": "model = 'local'", "delta": "delta = 1e-8", "rounds": "rounds = 1 or rounds = 'auto'",
            "mechanism": "mechanism = 'grr'", "confidence": "confidence = 0.95", "seed": "seed = 7",
            "simulation": "simulation = 'per_user'", "force": "force = true", "epsilon": "epsilon = 1",
            "split": "split = 'users'", "beta": "beta = 0.01", "constants": "constants = 'paper'",
            "postprocess": "postprocess = 'capped_simplex'"}


@dataclass(frozen=True)
class PublicFacts:
    """What the planner may know about the data: user and group counts after the public WHERE, the remaining
    budget of the most-charged user the statement touches, and the δ left (None when not known)."""

    n: int
    cells: int = 1
    remaining: float | None = None
    remaining_delta: float | None = None
    ledger: str | None = None
    groups: tuple[tuple[tuple, int], ...] = ()   # GROUP BY: each group's public key and user count

    @property
    def typical_n(self) -> int:
        """The user count predictions are made at: the whole population, or under GROUP BY the median group's
        (each group runs its own protocol on its own users; EXPLAIN shows every group's prediction)."""
        sizes = sorted(n for _, n in self.groups)
        return sizes[len(sizes) // 2] if len(sizes) > 1 else self.n   # (the upper median: one tiny group of two
        # must not plan the large one's mechanism)


@dataclass
class _Context:
    select: ast.Select
    table: Table
    facts: PublicFacts
    session: dict
    text: str
    evaluation: bool
    options: dict = field(default_factory=dict)
    epsilon: float = 0.0
    delta: float = 0.0
    items: list = field(default_factory=list)
    aggregates: list[AggregatePlan] = field(default_factory=list)
    split: str = "single"
    split_note: str = ""
    notes: list[str] = field(default_factory=list)
    split_costs: dict = field(default_factory=dict)   # split_budget's relative variances, by split
    joint: list | None = None                         # means that could share one report (planner.joint)

    def error(self, cls, message: str, node=None, hint: str | None = None, width: int = 1):
        return _error(cls, message, self.text, node, hint, width)


def check_public(select: ast.Select, table: Table, text: str = "") -> None:
    """WHERE and GROUP BY run at the server, so they may use public columns only."""
    refs = (ast.columns_of(select.where) if select.where is not None else []) + list(select.group_by)
    for ref in refs:
        col = table.column(ref.name, ref.pos, text)
        if not col.public:
            clause = "GROUP BY" if ref in select.group_by else "WHERE"
            joint = f"LDP_HISTOGRAM({col.name}, other_column) for the joint distribution, " if clause == "GROUP BY" \
                else ""
            if clause == "GROUP BY":   # key-value rows: the table's unit may have several rows (SPARSITY)
                joint += (f"or for key-value rows (several keys per user) declare `{col.name}` with a public domain "
                          "and the table with PRIVACY UNIT user_id SPARSITY s, ")
            raise _error(PrivacyError, f"{clause} may only use public columns, and `{col.name}` is private", text,
                         ref, width=len(ref.name),
                         hint=f"the server never sees private values; count a condition on them with an "
                              f"aggregate, e.g. LDP_COUNT({col.name} = ...), {joint}or declare `{col.name}` "
                              "PUBLIC if it is not sensitive")


def refuse_repeated_units(ctx: _Context) -> None:
    """Rule: a table declared with SPARSITY (several rows per unit) answers key-value statements only, which
    :mod:`ldpql.planner.keyvalue` plans: every row-based mechanism would let a unit report once per row."""
    if getattr(ctx.table, "sparsity", None) is not None:
        raise ctx.error(PlanError, f"`{ctx.table.name}` has several rows per privacy unit (SPARSITY), so it answers "
                        "key-value statements only", ctx.select, hint="group by its private key column alone: "
                        "key, LDP_COUNT(*), LDP_AVG(value) per key, EPSILON e")


def check_public_clauses(ctx: _Context) -> None:
    """Rule: :func:`check_public` on the statement."""
    check_public(ctx.select, ctx.table, ctx.text)


def _error(cls, message: str, text: str, node=None, hint: str | None = None, width: int = 1):
    pos = getattr(node, "pos", None) or ast.Pos()
    return cls(message, hint=hint).with_position(text, pos.line or None, pos.column or None, width)


def resolve_options(ctx: _Context) -> None:
    """Merge session defaults (SET) under the statement's OPTIONS, checking every key and value."""
    merged = {k: v for k, v in ctx.session.items() if k in OPTIONS}
    for opt in ctx.select.options:
        merged[opt.name] = opt.value.value
    for key, value in merged.items():
        node = next((o for o in ctx.select.options if o.name == key), None)
        if key == "seed" and not ctx.evaluation:  # a known seed is known noise (DESIGN §4.3)
            raise _error(PrivacyError, "a seed makes the noise predictable, so it is honoured in evaluation mode "
                         "only", ctx.text, node, width=len(key), hint="for reproducible research runs open "
                         "ldpql.connect(evaluation=True) or run ldpql --evaluate; the results are labelled not private")
        merged[key] = check_option(key, value, node, ctx.text)
    ctx.options = merged


def check_option(key: str, value, node=None, text: str = ""):
    """The value of option (or SET) ``key`` converted to its type, or a PlanError saying what it accepts."""
    kind, hint = OPTIONS.get(key), f"for example {EXAMPLES.get(key, key)}"
    if kind is None:
        raise _error(PlanError, f"unknown option `{key}`", text, node, width=len(key),
                     hint=did_you_mean(key, list(OPTIONS)) or f"options are: {', '.join(OPTIONS)}")
    if isinstance(kind, tuple):
        if str(value).lower() not in kind:
            raise _error(PlanError, f"option {key} must be one of {', '.join(kind)}, not {value!r}", text, node, hint)
        return str(value).lower()
    if key == "rounds" and str(value).lower() == "auto":
        return None
    try:
        if kind is int and (isinstance(value, bool) or (isinstance(value, float) and not value.is_integer())):
            raise ValueError(value)   # seed = 1.5 or rounds = true is a mistake, not a number to round
        value = kind(value) if kind is not bool else _bool(value)
    except (TypeError, ValueError):
        raise _error(PlanError, f"option {key} must be {kind.__name__}, not {value!r}", text, node, hint) from None
    if key == "confidence" and not 0 < value < 1:
        raise _error(PlanError, f"confidence must be between 0 and 1, not {value}", text, node, hint)
    if key == "beta" and not 0 < value < 1:
        raise _error(PlanError, f"beta must be between 0 and 1, not {value}", text, node, hint)
    if key == "delta" and not 0 <= value < 1:
        raise _error(PlanError, f"delta must be in [0, 1), not {value}", text, node, hint)
    if key == "rounds" and value < 1:
        raise _error(PlanError, f"rounds must be 'auto' or at least 1, not {value}", text, node, hint)
    return value


def _bool(v) -> bool:
    """TRUE or FALSE (SQL literals, or 'true'/'false' text); anything else, such as 'yes', is refused."""
    if isinstance(v, bool):
        return v
    if str(v).lower() in ("true", "false"):
        return str(v).lower() == "true"
    raise ValueError(v)


def resolve_items(ctx: _Context) -> None:
    """Resolve every select item: group columns, and aggregates through the registry."""
    group = {c.name.lower() for c in ctx.select.group_by}
    names: set[str] = set()
    for item in ctx.select.items:
        if isinstance(item.expr, ast.ColumnRef):
            col = ctx.table.column(item.expr.name, item.expr.pos, ctx.text)
            if col.name.lower() not in group:
                raise ctx.error(PlanError, f"column `{col.name}` must appear in GROUP BY or inside an LDP aggregate",
                                item.expr, width=len(col.name), hint=f"add GROUP BY {col.name}")
            ctx.items.append((_unique(item.alias or col.name, names), col.name))
            continue
        agg = _resolve_call(ctx, item.expr)
        agg.output = _unique(item.alias or f"{item.expr.name.lower()}_{_label(agg)}", names)
        ctx.items.append((agg.output, agg.index))
    if not ctx.aggregates:
        raise ctx.error(PlanError, "the statement has no LDP aggregate", ctx.select,
                        hint="LDP aggregates: " + ", ".join(sorted(AGGREGATES)) + "; the number of users is public")
    if sum(a.table_valued for a in ctx.aggregates) > 1:
        raise ctx.error(PlanError, "at most one histogram-like aggregate per statement", ctx.select,
                        hint="ask for each histogram in its own statement")


def _label(agg: AggregatePlan) -> str:
    args = agg.call.args
    if agg.target.column:
        return agg.target.column
    return args[0].name if args and isinstance(args[0], ast.ColumnRef) else "condition"


def _unique(name: str, taken: set[str]) -> str:
    out, i = name, 2
    while out.lower() in taken:
        out, i = f"{name}_{i}", i + 1
    taken.add(out.lower())
    return out


def _resolve_call(ctx: _Context, call: ast.Call) -> AggregatePlan:
    spec = AGGREGATES.get(call.name.upper())
    if spec is None:
        raise ctx.error(PlanError, f"unknown aggregate `{call.name}`", call, width=len(call.name),
                        hint=(did_you_mean(call.name, list(AGGREGATES)) or "") +
                        " available: " + ", ".join(s.signature for s in _unique_specs()))
    for arg in call.named:
        if arg.name not in COMMON_ARGS and arg.name not in spec.named_args:
            raise ctx.error(PlanError, f"{spec.name} has no argument `{arg.name}`", arg, width=len(arg.name),
                            hint=f"named arguments: {', '.join([*COMMON_ARGS, *spec.named_args])}")
    extra = {"select": ctx.select, "options": ctx.options} if spec.statement_aware else {}
    target = spec.resolve(call, ctx.table, ctx.text, **extra)
    agg = AggregatePlan(len(ctx.aggregates), "", call, spec.kind, target, candidates=spec.candidates(target))
    ctx.aggregates.append(agg)
    return agg


def share_releases(ctx: _Context) -> None:
    """Aggregates that need the same release (same column and domain, same release arguments: equal
    ``target.release`` keys) share one protocol run: the first runs it, the others read it (``source``) and
    derive their answers from it by post-processing, so the release's ε is charged once."""
    first: dict[tuple, AggregatePlan] = {}
    for a in ctx.aggregates:
        if a.target.release is None:
            continue
        owner = first.setdefault(a.target.release, a)
        if owner is not a:
            a.source, a.candidates = owner.index, []
            ctx.notes.append(f"{a.output} is answered from the release of {owner.output} (post-processing: "
                             "no extra ε)")


def _runs(ctx: _Context) -> list[AggregatePlan]:
    """The aggregates that run a protocol of their own (the others read a shared release)."""
    return [a for a in ctx.aggregates if a.source is None]


def _unique_specs() -> list[AggregateSpec]:
    seen: dict[str, AggregateSpec] = {}
    for spec in AGGREGATES.values():
        seen.setdefault(spec.name, spec)
    return list(seen.values())


def _named(call: ast.Call, name: str):
    return next((a.value.value for a in call.named if a.name == name), None)


def resolve_epsilon(ctx: _Context) -> None:
    """The statement's total per-user ε: EPSILON, else OPTIONS/SET epsilon, else the sum of fixed shares."""
    sel = ctx.select
    shares = [_named(a.call, "epsilon") for a in _runs(ctx)]
    for a, s in zip(_runs(ctx), shares):
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 < s < math.inf):
            node = next(arg for arg in a.call.named if arg.name == "epsilon")
            raise ctx.error(PlanError, f"an epsilon => share must be a finite positive number, not {node.value.sql()}",
                            node, hint="for example LDP_MEAN(income, epsilon => 0.3)")
    eps = sel.epsilon.value if sel.epsilon is not None else ctx.options.get("epsilon")
    if eps is None and shares and all(s is not None for s in shares):
        eps = sum(shares)
    if eps is None:
        raise ctx.error(PlanError, "the statement does not say how much ε to spend", sel,
                        hint="add EPSILON e after the select list or at the end, e.g. EPSILON 1")
    if not isinstance(eps, (int, float)) or not eps > 0 or (math.isinf(eps) and not ctx.evaluation):
        hint = ("EPSILON INF (noise off) is for evaluation: connect(evaluation=True) or ldpql --evaluate"
                if isinstance(eps, float) and math.isinf(eps) else "use a positive number such as EPSILON 1")
        raise ctx.error(PlanError, f"EPSILON must be finite and positive, but is {eps}", sel.epsilon or sel, hint=hint)
    ctx.epsilon = float(eps)
    if shares and all(s is not None for s in shares) and not math.isinf(eps):
        ctx.epsilon = min(ctx.epsilon, float(sum(shares)))  # what the shares spend is what is charged
    ctx.delta = float(sel.delta.value) if sel.delta is not None else float(ctx.options.get("delta", 0.0))


EPSILON_FLOOR = 1e-6   # the smallest ε an aggregate may get (with every ε split among the statement's aggregates)


def enforce_epsilon_cap(ctx: _Context) -> None:
    """Refuse, before anything runs, a statement that would run a local randomizer above EPSILON_CAP (DESIGN
    §4.5): each aggregate's ε bounds the ε of every randomizer its local protocols run (a search splits it over
    rounds, never raises it). An aggregate's ε is its epsilon => share, or what the split leaves it, which is
    the statement's ε when no share is given (a users split keeps the full ε). EPSILON INF (evaluation) runs no
    randomizer. Shuffle-model candidates check their own, larger ε₀ (:class:`~ldpql.mechanisms.shuffle.ShuffleBudget`)."""
    if math.isinf(ctx.epsilon):
        return
    shares = [_named(a.call, "epsilon") for a in _runs(ctx)]
    fixed, free = sum(s for s in shares if s is not None), sum(s is None for s in shares)
    rest = ctx.epsilon if len(shares) == 1 or fixed == 0 else (ctx.epsilon - fixed) / max(free, 1)
    worst = max(min(s, ctx.epsilon) if s is not None else rest for s in shares)
    least = min(min(s, ctx.epsilon) if s is not None else rest for s in shares) / max(len(shares), 1)
    if 0 < least < EPSILON_FLOOR:   # (shares that overspend are refused by split_budget) below it the debiasing factor 1/(p - q) is astronomically large, then infinite
        raise ctx.error(PlanError, f"ε = {least:g} per aggregate is below the engine's floor of {EPSILON_FLOOR:g}",
                        ctx.select.epsilon or ctx.select, hint="no mechanism gives a usable answer there; use "
                        "EPSILON 0.01 or more (EXPLAIN shows the predicted error)")
    if worst > EPSILON_CAP:
        split = "" if len(shares) == 1 else (f", or split ε over the aggregates with epsilon => shares of at most "
                                              f"{EPSILON_CAP:g} each")
        raise ctx.error(PlanError, f"ε = {worst:g} per randomizer is above the engine's cap of {EPSILON_CAP:g} "
                        "(EPSILON_CAP)", ctx.select.epsilon or ctx.select,
                        hint=f"lower EPSILON to at most {EPSILON_CAP:g}{split}; beyond the cap a report is the true "
                             "value itself for any practical number of users, so more ε buys no accuracy")


def choose_model(ctx: _Context) -> None:
    """Local or shuffle: shuffle-model candidates need δ > 0 within what is left of the table's DELTA budget."""
    model = ctx.options.get("model", "local")
    left = ctx.table.budget_delta if ctx.facts.remaining_delta is None else ctx.facts.remaining_delta
    if not 0 <= ctx.delta < 1:
        raise ctx.error(PlanError, f"DELTA must be in [0, 1), not {ctx.delta:g}", ctx.select,
                        hint="for example DELTA 1e-8")
    if ctx.delta > max(left, 0.0) * (1 + 1e-9):
        raise ctx.error(PlanError, f"DELTA {ctx.delta:g} is more than the δ left on `{ctx.table.name}` "
                        f"({max(left, 0.0):g} of its DELTA budget {ctx.table.budget_delta:g})", ctx.select,
                        hint="use a smaller DELTA, or model = 'local' (pure ε, no δ)")
    none = ctx.delta == 0 and (ctx.select.delta is not None or "delta" in ctx.options)   # DELTA 0 asks for no δ
    if model == "shuffle":
        if none:
            raise ctx.error(PlanError, "model = 'shuffle' spends δ, and DELTA 0 asks for none", ctx.select,
                            hint="drop DELTA 0 (the δ left on the table is then used), give DELTA d > 0, or use "
                                 "model = 'local'")
        if left <= 0:
            raise ctx.error(PlanError, f"model = 'shuffle' needs a DELTA budget, and `{ctx.table.name}` has none",
                            ctx.select, hint=f"ALTER TABLE {ctx.table.name} SET BUDGET EPSILON e DELTA d, "
                                             "or use model = 'local'")
        kinds = sorted({a.call.name.upper() for a in _runs(ctx)
                        if not any(c.model == "shuffle" for c in a.candidates)})
        if kinds and not joint.can_shuffle(ctx):   # (several means: one shuffled joint report, planner.joint)
            raise ctx.error(PlanError, f"no shuffle-model protocol is available for {', '.join(kinds)}",
                            ctx.select, hint="use model = 'local' (or 'auto', which falls back to local)")
    for a in ctx.aggregates:
        for c in a.candidates:
            if c.model == "shuffle" and (model == "local" or left <= 0 or none):
                c.rejected = "shuffle model not allowed (model = 'local', DELTA 0, or no DELTA budget left on the table)"
            elif c.model == "shuffle":  # the δ its amplification bound may use, charged if it is chosen: the
                c.delta = (ctx.delta or left) / len(_runs(ctx))  # statement's, shared by the aggregates that run


def apply_rounds_limit(ctx: _Context) -> None:
    """Reject candidates that need more sequential rounds than the table or OPTIONS (rounds = k) allow."""
    limits = [r for r in (ctx.table.rounds, ctx.options.get("rounds")) if r]
    if limits:
        for a in ctx.aggregates:
            for c in a.candidates:
                if c.rounds > min(limits) and not c.rejected:
                    c.rejected = f"needs {c.rounds} rounds; at most {min(limits)} allowed"


def apply_mechanism_override(ctx: _Context) -> None:
    """OPTIONS (mechanism = ...) or LDP_X(..., mechanism => ...) keeps only the named mechanism."""
    for a in _runs(ctx):
        wanted = _named(a.call, "mechanism") or ctx.options.get("mechanism")
        if wanted is None:
            continue
        names, wanted = [c.mechanism for c in a.candidates], str(wanted).lower()
        if not any(wanted in (c.mechanism, *c.aliases) for c in a.candidates):
            raise ctx.error(PlanError, f"mechanism `{wanted}` cannot answer {a.call.name.upper()}", a.call,
                            hint=f"mechanisms for {a.call.name.upper()}: {', '.join(names)}")
        for c in a.candidates:
            if wanted not in (c.mechanism, *c.aliases) and not c.rejected:
                c.rejected = f"mechanism = '{wanted}' was asked for"


def split_budget(ctx: _Context) -> None:
    """Give each aggregate its ε and its users: split ε over all users, or split the users (each group at the
    full ε, parallel composition), whichever predicts the smaller total relative error."""
    aggs, n, eps = _runs(ctx), ctx.facts.n, ctx.epsilon
    shares = [_named(a.call, "epsilon") for a in aggs]
    if len(aggs) == 1 and shares[0] is not None and shares[0] > eps * (1 + 1e-9):   # (several: "add up" below)
        raise ctx.error(PlanError, f"an epsilon => share of {shares[0]:g} is more than the statement's EPSILON "
                        f"{eps:g}", ctx.select, hint="lower the share, or raise EPSILON")
    if len(aggs) == 1:
        aggs[0].epsilon = eps if shares[0] is None else shares[0]
        return
    fixed = sum(s for s in shares if s is not None)
    if fixed > eps * (1 + 1e-9):
        raise ctx.error(PlanError, f"the aggregates' epsilon => shares add up to {fixed:g}, more than the "
                        f"statement's EPSILON {eps:g}", ctx.select, hint="lower a share or raise EPSILON")
    silent = [a for a, s in zip(aggs, shares) if s is None and _asks_nobody(ctx, a, eps)]
    if silent:   # an answer from the declared domain alone takes neither users nor ε from the others
        for a in silent:
            a.epsilon, a.users = eps, (0.0, 1.0)
        ctx.notes.append(f"{', '.join(a.output for a in silent)}: answered from the declared domain without asking "
                         "anyone, so the other aggregates share the users and ε without it")
        shares = [s for a, s in zip(aggs, shares) if a not in silent]
        aggs = [a for a in aggs if a not in silent]
        if len(aggs) <= 1:
            for a, s in zip(aggs, shares):
                a.epsilon = eps if s is None else s
            return
    free = [i for i, s in enumerate(shares) if s is None]
    split_eps = [s if s is not None else (eps - fixed) / len(free) for s in shares]
    asked = str(ctx.options.get("split", "auto")).lower()
    if asked == "users" and (any(s is not None for s in shares) or math.isinf(eps)):
        raise ctx.error(PlanError, "split = 'users' cannot apply: " + ("epsilon => shares split ε" if fixed else
                        "with EPSILON INF there is no noise to weigh"), ctx.select,
                        hint="drop the epsilon => shares, or the split option")
    if any(s is not None for s in shares) or math.isinf(eps) or n == 0:   # no users: nothing to weigh
        _assign(ctx, "epsilon", aggs, split_eps, [(0.0, 1.0)] * len(aggs))
        return
    k, n = len(aggs), ctx.facts.typical_n
    full = [_best_se(a, eps, n) for a in aggs]
    cost_eps = sum((_best_se(a, eps / k, n) / f) ** 2 for a, f in zip(aggs, full))
    cost_users = sum((_best_se(a, eps, n, 1 / k) / f) ** 2 for a, f in zip(aggs, full))
    ctx.split_costs = {"epsilon": cost_eps, "users": cost_users}
    why = "split = '{}' was asked for; ".format(asked) if asked != "auto" else ""   # the note still shows both
    fewest = min((size for _, size in ctx.facts.groups), default=ctx.facts.n)
    if asked == "auto" and fewest < k:   # some group has fewer users than aggregates: a share would be empty
        cost_users, why = math.inf, f"a group of {fewest} user(s) cannot give each of {k} aggregates its own; "
    if cost_users <= cost_eps if asked == "auto" else asked == "users":
        ctx.split_note = (f"users: {k} disjoint groups, one per aggregate, each at the full ε ({why}relative "
                          f"variance {cost_users:.3g} vs {cost_eps:.3g} for splitting ε; sampling error included)")
        _assign(ctx, "users", aggs, [eps] * k, [(i / k, (i + 1) / k) for i in range(k)])
    else:
        ctx.split_note = (f"ε: every user answers all {k} aggregates at ε/{k} each ({why}relative variance "
                          f"{cost_eps:.3g} vs {cost_users:.3g} for splitting users, sampling error included)")
        _assign(ctx, "epsilon", aggs, split_eps, [(0.0, 1.0)] * k)


def _assign(ctx: _Context, split: str, aggs: list[AggregatePlan], eps: list[float],
            users: list[tuple[float, float]]) -> None:
    ctx.split = split
    for a, e, u in zip(aggs, eps, users):
        a.epsilon, a.users = e, u
    if split == "epsilon" and not ctx.split_note:
        ctx.split_note = "ε: " + ", ".join(f"{a.output} {a.epsilon:.4g}" for a in aggs)


def _asks_nobody(ctx: _Context, a: AggregatePlan, eps: float) -> bool:
    """Whether the candidate :func:`choose_mechanisms` would pick for ``a`` at the full ε and all users asks no
    user (a quantile at a domain bound). Such a choice stands under any split: its prediction is fixed while
    every search only loses accuracy with fewer users or less ε. Public facts only."""
    if math.isinf(eps) or ctx.facts.n == 0:
        return False
    allowed = [c for c in a.candidates if not c.rejected and not (c.check and c.check(eps, ctx.facts.n))]
    best = min(allowed, key=lambda c: c.expected_se(eps, ctx.facts.typical_n) * c.choice_weight, default=None)
    return best is not None and best.asks_nobody


def _best_se(a: AggregatePlan, eps: float, n: int, share: float = 1.0) -> float:
    return min((c.expected_se(eps, n, share) for c in a.candidates if not c.rejected), default=math.inf)


def choose_mechanisms(ctx: _Context) -> None:
    """For each aggregate, predict every candidate's error at its (ε, n) and choose the smallest (the first
    listed on a tie); an aggregate that reads a shared release takes that release's ε, users and mechanism."""
    for a in _runs(ctx):
        share = a.users[1] - a.users[0]
        fewest = min((size for _, size in ctx.facts.groups), default=ctx.facts.n)   # every group must pass a
        n_a = max(int(fewest * share), 1)                                           # check (audit6 F1)
        for c in a.candidates:
            c.predicted_se = c.expected_se(a.epsilon, ctx.facts.typical_n, share)
            reason = c.check(a.epsilon, n_a) if c.check is not None and not c.rejected else None
            if reason:
                c.rejected = reason
        allowed = [c for c in a.candidates if not c.rejected]
        if not allowed:
            small = (f": a group of {fewest:,} users is too small at ε = {a.epsilon:g}"
                     if ctx.facts.groups and fewest < ctx.facts.n else " under this statement's limits")
            raise ctx.error(PlanError, f"no mechanism can answer {a.call.sql()}{small}", a.call,
                            hint="; ".join(f"{c.mechanism}: {c.rejected}" for c in a.candidates)
                                 + ("; use fewer, larger groups or a larger ε" if ctx.facts.groups else ""))
        pool = [c for c in allowed if not c.baseline] or allowed   # a baseline runs only when asked for by name
        a.chosen = near_minimax(min(pool, key=lambda c: c.predicted_se * c.choice_weight), pool,
                                a.epsilon, ctx.facts.typical_n, share)
        if ctx.options.get("model") == "shuffle" and a.chosen.model != "shuffle":   # asked for, cannot apply: say why
            why = "; ".join(f"{c.mechanism}: {c.rejected}" for c in a.candidates if c.model == "shuffle")
            ctx.notes.append(f"{a.output}: model = 'shuffle' was asked for, but runs in the local model ({why})")
        for c in allowed:
            if c.baseline and c is not a.chosen:
                c.rejected = f"a baseline, run only when asked for (mechanism => '{c.mechanism}')"
            elif c is not a.chosen and c.typical and a.chosen.typical and not math.isinf(a.epsilon) and (
                    c.predicted_se <= a.chosen.predicted_se * NEAR_MINIMAX):
                mine, best = (x.typical(a.epsilon, ctx.facts.typical_n, share) for x in (c, a.chosen))
                c.rejected = (f"worst case within {NEAR_MINIMAX - 1:.0%} of {a.chosen.mechanism}'s, larger error at "
                              f"a typical data set, E[x²] = 1/2 ({mine:.3g} vs {best:.3g})" if mine > best else
                              f"same error as {a.chosen.mechanism}, which is listed first")
            elif c is not a.chosen:
                mine, best = c.predicted_se * c.choice_weight, a.chosen.predicted_se * a.chosen.choice_weight
                c.rejected = ("larger predicted error" if c.predicted_se > a.chosen.predicted_se and mine > best else
                              f"larger predicted mean error ({mine:.3g} vs {best:.3g})" if mine > best else
                              f"same predicted error as {a.chosen.mechanism}, which is listed first")
        if math.isinf(a.epsilon):
            a.chosen.note = "EPSILON INF: noise off, the answer is exact (evaluation only)"
    for a in ctx.aggregates:
        if a.source is not None:
            src = ctx.aggregates[a.source]
            a.epsilon, a.users, a.chosen = src.epsilon, src.users, src.chosen


NEAR_MINIMAX = 1.1   # a mean's choice gives up at most 10% of the best worst-case error for its typical error


def near_minimax(best: Candidate, allowed: list[Candidate], eps: float, n: int, share: float) -> Candidate:
    """Of the candidates with a typical error whose worst case (predicted_se) is within NEAR_MINIMAX of the best
    worst case, the one with the smallest typical error (the first listed on a tie); ``best`` otherwise. Public
    facts only: both errors are closed forms of ε and n."""
    near = [c for c in allowed if c.typical and c.predicted_se <= best.predicted_se * NEAR_MINIMAX]
    if not best.typical or math.isinf(eps) or len(near) < 2:
        return best
    return min(near, key=lambda c: c.typical(eps, n, share))


def _answer_width(a: AggregatePlan, n: int) -> float | None:
    """How wide the range of possible answers is (public: the declared domain and n), for scalar aggregates."""
    half = a.target.affine[0]
    return {"mean": 2 * half, "sum": 2 * half * n, "count": float(n)}.get(a.kind)


def note_predictions(ctx: _Context) -> None:
    """An answer whose interval is in other units than its predicted error (a quantile's value interval, its
    rank error) gets a note with the prediction, so the result shows both."""
    conf = ctx.options.get("confidence", 0.95)
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    for a in _runs(ctx):
        width = _answer_width(a, ctx.facts.n)
        if width and not math.isinf(a.epsilon) and z * a.chosen.predicted_se > width:
            ctx.notes.append(f"{a.output}: the predicted error ±{z * a.chosen.predicted_se:.3g} ({conf:.0%}) is wider "
                             f"than every possible answer (a range of {width:.3g}): at this ε and n it says little")
        if a.target.notes_prediction and not math.isinf(a.epsilon):
            outputs = ", ".join([a.output] + [b.output for b in ctx.aggregates if b.source == a.index])
            ctx.notes.append(f"{outputs}: predicted {a.target.unit} ±{z * a.chosen.predicted_se:.3g} ({conf:.0%}, "
                             f"calibrated); {getattr(a.target, 'interval_note', 'the interval is in value units')}")


def note_nulls(ctx: _Context) -> None:
    """Say, for every private column an answer uses, which NULL semantics applies (and so what is estimated): a
    silent imputation can reverse a conclusion (a column 44% NULL, imputed at its midpoint)."""
    notes: list[str] = []
    for a in ctx.aggregates:
        ns, col = a.target.nulls, a.target.column
        if ns is not None:
            notes.append(_null_semantics(col, ns))
            continue
        for arg in a.call.args if col else ():   # (a condition's NULL counts as false, as its domain text says)
            if isinstance(arg, ast.ColumnRef):
                notes.append(_null_value(ctx.table.column(arg.name)))
    ctx.notes.extend(n for n in dict.fromkeys(notes) if n)


def _null_semantics(col: str, ns) -> str:
    """The note of a numeric mean or sum: over the users with a value, or NULL as a value, and why."""
    if ns.skip:
        return (f"{col}: {ns.why}, so means and sums are over the users with a value, as SQL's AVG and SUM (NULL, NaN "
                "and unreadable values are skipped; each user's report says privately whether it has one)" +
                ("" if ns.why.startswith("nulls") else f"; nulls => 'midpoint' counts NULL as {ns.value:g}"))
    how = {"declared NOT NULL": "declared NOT NULL, never checked: a NULL that appears anyway counts as this",
           "declared DEFAULT": "its DEFAULT"}.get(ns.why, f"{ns.why}: the mean is over every user")
    return f"{col}: NULL or unreadable values count as {ns.value:g} ({how})"


def _null_value(column) -> str:
    dom = column.domain
    if isinstance(dom, NumericDomain):
        how = ("declared NOT NULL, never checked: a NULL that appears anyway counts as this" if dom.not_null else
               "DEFAULT" if dom.default is not None else "the midpoint of its domain; DEFAULT v sets it")
        return f"{column.name}: NULL or unreadable values count as {dom.null_value:g} ({how})"
    if isinstance(dom, CategoricalDomain):
        return f"{column.name}: NULL and undeclared values count as {OTHER}" + \
            (f" (NULL as {dom.default!r}, its DEFAULT)" if dom.default is not None else "")
    if isinstance(dom, BooleanDomain):
        return f"{column.name}: NULL counts as {str(dom.default).upper()}"
    return ""


RULES = (check_public_clauses, refuse_repeated_units, resolve_options, resolve_items, share_releases, note_nulls, resolve_epsilon, enforce_epsilon_cap,
         choose_model,
         apply_rounds_limit, joint.consider_joint_release, apply_mechanism_override, split_budget,
         joint.choose_joint_release, choose_mechanisms, note_predictions)


def plan(select: ast.Select, table: Table, facts: PublicFacts, session: dict | None = None, text: str = "",
         evaluation: bool = False) -> Plan:
    """Plan a query over ``table`` from public facts only; ``str(result)`` is its EXPLAIN text. With
    ``ACCURACY ±a`` the ε is the smallest whose predicted error is within ±a (:mod:`ldpql.planner.accuracy`)."""
    text = text or select.sql()
    if select.sweep:
        raise _error(PlanError, "EPSILON IN (...) compares predictions and runs nothing, so it needs EXPLAIN", text,
                     select.sweep[0], hint="EXPLAIN the statement with EPSILON IN (0.5, 1, 2, 4), then run the statement "
                     "with the EPSILON (or ACCURACY) you choose")
    accuracy.refuse_stray_accuracy(select, text)
    if select.accuracy is None:
        return _plan(select, table, facts, session, text, evaluation)
    return accuracy.plan_by_accuracy(select, lambda eps, shares=None: _plan(
        accuracy.trial_select(select, eps, select.accuracy, shares), table, facts, session, text, evaluation),
        text, EPSILON_FLOOR)


def sweep(select: ast.Select, table: Table, facts: PublicFacts, session: dict | None = None, text: str = "",
          evaluation: bool = False) -> accuracy.Sweep:
    """EXPLAIN ... EPSILON IN (e1, e2, ...): the predictions at each listed ε, side by side; runs nothing."""
    text = text or select.sql()
    accuracy.refuse_stray_accuracy(select, text)
    return accuracy.sweep(select, lambda eps: _plan(accuracy.trial_select(select, eps, select.sweep[0]), table, facts,
                                                    session, text, evaluation), text)


def _plan(select: ast.Select, table: Table, facts: PublicFacts, session: dict | None, text: str,
          evaluation: bool) -> Plan:
    ctx = _Context(select, table, facts, dict(session or {}), text, evaluation)
    for rule in RULES:
        rule(ctx)
    if facts.n == 0:
        ctx.notes.append("no users match: every answer is NULL and nothing is spent")
    return Plan(select, table, ctx.epsilon, ctx.delta, select.where.sql() if select.where is not None else None,
                [table.column(c.name).name for c in select.group_by], ctx.items, ctx.aggregates, facts.n, facts.cells, ctx.split,
                ctx.split_note, ctx.options.get("confidence", 0.95), ctx.options.get("seed"),
                ctx.options.get("simulation", "auto"), facts.remaining, ctx.notes, facts.ledger, facts.groups)
from ldpql.planner import quantile  # noqa: F401,E402  (registers LDP_QUANTILE, LDP_MEDIAN)
from ldpql.planner import minimum  # noqa: F401,E402  (registers LDP_MIN, LDP_MAX)
from ldpql.planner import gaussian  # noqa: F401,E402  (LDP_MEAN on a column declared Gaussian)
