"""Key-value statements: ``GROUP BY key`` on a table whose privacy unit has several rows (declared ``PRIVACY UNIT u
SPARSITY s``), every answer per key of the key's declared domain from one Collision report per user (Wang, Li, Li,
Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the Local and Shuffle Model", journal version of
IJCAI 2021; spec seed-003 §9 "Key-value queries"; the mechanism is :mod:`ldpql.mechanisms.kv`).

A small list of named rules (:data:`RULES`) turns the statement into a :class:`KVPlan`, from public facts only (the
statement, the declared domains and sparsity, the number of units after the public WHERE, the ledger): the key is
the one GROUP BY column, private with a declared domain (``IN (...)`` or an integer ``BETWEEN``); the aggregates are
LDP_COUNT(*), LDP_FREQUENCY(*), and LDP_AVG / LDP_MEAN / LDP_SUM of one private bounded value column; s is the
table's SPARSITY or the statement's ``GROUP BY key SPARSITY s``, never read from data; t minimises Collision's total
variance. Every other statement on such a table is refused: the row-based mechanisms would let a unit report once
per row. ``model = 'shuffle'`` (or 'auto' with δ left) runs the same report at the larger ε₀ whose n shuffled
reports are (ε, δ)-DP by the exact clone reduction at the generic weight 1/(e^ε₀ + 1), valid for every ε₀-LDP
randomizer (:func:`shuffle_epsilon0`); not (yet) at Collision's own s/Ω, derived for exactly s elements per user
(an audit found its condition holds on small key-value inputs; docs/keyvalue.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from ldpql import expr as E
from ldpql.catalog import MAX_SPARSITY, CategoricalDomain, NumericDomain, Table
from ldpql.errors import PlanError, PrivacyError
from ldpql.grammar import ast
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.mechanisms.kv import kv_t, predicted_se
from ldpql.mechanisms.shuffle import MIN_GAIN, generic_weights, local_epsilon
from ldpql.papers import cite
from ldpql.planner import PublicFacts, _error, check_option

KINDS = {"LDP_COUNT": "count", "LDP_FREQUENCY": "frequency", "LDP_AVG": "mean", "LDP_MEAN": "mean", "LDP_SUM": "sum"}
UNIT = {"count": "users", "frequency": "share of users", "mean": "value units", "sum": "value units"}
ALLOWED_OPTIONS = ("confidence", "seed", "model", "mechanism", "epsilon", "postprocess", "delta")
PROJECTED = ("counts and frequencies projected onto {0 <= f <= 1, Σ f <= s} (postprocess = 'capped_simplex'): "
             "a smaller total error, no longer unbiased; each interval is the unprojected one, widened to hold the "
             "projected answer")
CAVEAT = ("a user with more than s keys sends a uniformly random s of them, so counts, frequencies and sums of the "
          "keys of such users come out lower by the factor s/(their number of keys); a key's mean weighs such users "
          "less, so it is biased too where their values differ from other holders' (it is not where a user's values "
          "do not depend on how many keys it holds); "
          "a user's rows with the same key count once, with their mean value")


@dataclass
class KVItem:
    """One output column: the key's label or an aggregate of one kind."""

    output: str
    kind: str               # 'key' | 'count' | 'frequency' | 'mean' | 'sum'
    call: ast.Call | None = None


@dataclass
class KVPlan:
    """A planned key-value statement; ``str(plan)`` is its EXPLAIN text."""

    statement: ast.Select
    table: Table
    epsilon: float
    key: str
    labels: tuple
    key_expr: E.Expr
    value: str | None
    value_expr: E.Expr
    low: float
    high: float
    states: int
    s: int
    s_from: str
    n: int
    items: list[KVItem]
    confidence: float = 0.95
    seed: int | None = None
    where_sql: str | None = None
    remaining: float | None = None
    ledger: str | None = None
    notes: list[str] = field(default_factory=list)
    postprocess: str = "none"
    delta: float = 0.0
    epsilon0: float | None = None    # shuffle model: the ε each user's randomizer runs at (None: local)
    shuffle_delta: float = 0.0       # shuffle model: the δ charged
    asks_nobody = False
    accuracy = None

    @property
    def d(self) -> int:
        return len(self.labels)

    @property
    def local(self) -> float:
        """The ε each user's randomizer runs at: ε₀ in the shuffle model, else the statement's ε."""
        return self.epsilon if self.epsilon0 is None else self.epsilon0

    @property
    def t(self) -> int:
        return kv_t(min(self.local, EPSILON_CAP), self.d, self.s, self.states)

    @property
    def z(self) -> float:
        return NormalDist().inv_cdf(0.5 + self.confidence / 2)

    def predicted(self) -> dict[str, float]:
        """Worst-case standard error per key of every kind (public facts only)."""
        if math.isinf(self.epsilon) or self.n == 0:
            return {}
        return predicted_se(self.local, self.d, self.s, self.states, self.n, self.low, self.high)

    def __str__(self) -> str:
        return "\n".join(explain_lines(self))


def explain_lines(p: KVPlan) -> list[str]:
    """The EXPLAIN text: the table, the budget, the one report, the per-key predictions and the caveats."""
    where = f" WHERE {p.where_sql}" if p.where_sql else ""
    eps = "inf (noise off)" if math.isinf(p.epsilon) else f"{p.epsilon:.4g}"
    lines = [f"plan for: {p.statement.sql()}",
             (f"├─ table       {p.table.name} ({p.table.source_id}): {p.n:,} users (privacy units){where}, several "
              f"rows each; key {p.key} with {p.d} declared values"),
             f"├─ budget      ε = {eps} per user" + _budget(p)]
    if p.ledger is not None:
        lines.append(f"├─ ledger      {p.ledger}")
    states = {1: "presence only", 2: "value rounded to ±1 on the device (P[+1] = (1 + v')/2)",
              3: "value rounded to ±1 on the device, or present without a value (a NULL value)"}[p.states]
    lines += [_model(p),
              (f"├─ mechanism * collision: one report per user for every key and aggregate, ε = "
               f"{eps if p.epsilon0 is None else format(p.epsilon0, '.4g') + ' (ε₀)'}, no split; "
               f"d = {p.d} keys, s = {p.s} ({p.s_from}), t = {p.t}, {p.states} element(s) per key: {states}"),
              f"├─ paper       {cite('wang2023')}",
              f"├─ sparsity    {CAVEAT}"]
    if p.postprocess == "capped_simplex":
        lines.append(f"├─ postprocess {PROJECTED}")
    lines += [f"├─ note        {n}" for n in p.notes]
    pred = p.predicted()
    aggs = [i for i in p.items if i.kind != "key"]
    for j, item in enumerate(aggs):
        head, pad = ("└─ ", "   ") if j == len(aggs) - 1 else ("├─ ", "│  ")
        lines.append(f"{head}{item.output} = {item.call.sql()} per {p.key}")
        se = pred.get(item.kind)
        text = ("no users: every answer is NULL and nothing is spent" if p.n == 0 else "exact (noise off)"
                if se is None else f"±{p.z * se:.4g} ({p.confidence:.0%}) {UNIT[item.kind]}")
        lines.append(f"{pad}└─ predicted   {text} per key at n = {p.n:,} (" + {
            "count": "worst case: a key every user holds)", "frequency": "worst case: a key every user holds)",
            "mean": "at a key every user holds with a value, its best case: a key a share q of the users holds "
                    "with a value has up to about 1/q times this, since the noise does not shrink with q)",
            "sum": "worst case: every user holds the key with a value at the worst value)"}[item.kind])
    return lines


def _model(p: KVPlan) -> str:
    if p.epsilon0 is None:
        return "├─ model       local (pure ε-LDP)"
    return (f"├─ model       shuffle: (ε_c, δ) = ({p.epsilon:g}, {p.shuffle_delta:g}) for the {p.n:,} shuffled reports; "
            f"users randomize at ε₀ = {p.epsilon0:.4g}, the largest ε₀ whose shuffled reports are (ε_c, δ)-DP by the "
            "exact clone reduction (Feldman, McMillan and Talwar 2023, computed as in Wang et al. 2023) at the generic "
            f"weight 1/(e^ε₀ + 1) = {generic_weights(p.epsilon0)[0]:.4g}, valid for every ε₀-LDP randomizer; not at "
            "Collision's s/Ω, which Wang et al. derive for users with exactly s elements, while a user with fewer keys "
            "sends fewer (no padding)")


def _budget(p: KVPlan) -> str:
    if p.remaining is None or math.isinf(p.epsilon):
        return ""
    left = max(p.remaining, 0.0)
    after = (f" -> {left - p.epsilon:.4g} after this statement" if p.epsilon <= left * (1 + 1e-9) else
             f"; this statement would be refused: it needs {p.epsilon:.4g}")
    return f" (table budget {p.table.budget_epsilon:g}: {left:.4g} remain{after}); charged once for every key"


# ---- the rules -------------------------------------------------------------------------------------------------

@dataclass
class _Ctx:
    select: ast.Select
    table: Table
    text: str
    evaluation: bool
    facts: PublicFacts | None = None
    session: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    key: str = ""
    items: list[KVItem] = field(default_factory=list)
    value: str | None = None
    epsilon: float = 0.0
    delta: float = 0.0
    notes: list[str] = field(default_factory=list)

    def error(self, cls, message: str, node=None, hint: str | None = None, width: int = 1):
        return _error(cls, message, self.text, node, hint, width)


def refuse_other_statements(ctx: _Ctx) -> None:
    """Rule: a table whose units have several rows answers key-value statements only (GROUP BY one private key)."""
    group = ctx.select.group_by
    cols = [ctx.table.column(c.name, c.pos, ctx.text) for c in group]
    if len(group) == 1 and not cols[0].public:
        ctx.key = cols[0].name
        return
    raise ctx.error(PlanError, f"`{ctx.table.name}` has several rows per privacy unit (SPARSITY {ctx.table.sparsity}), "
                    "so it answers key-value statements only: every other aggregate would let a user report once per "
                    "row", group[0] if group else ctx.select,
                    hint="group by its private key column alone and ask LDP_COUNT(*), LDP_FREQUENCY(*), LDP_AVG(value) "
                         "or LDP_SUM(value) per key; for other statements declare a source with one row per unit "
                         "(pre-aggregate each unit's rows in the source query)")


def check_public_where(ctx: _Ctx) -> None:
    """Rule: the public WHERE (applied to rows before the user's device sees them) reads public columns only."""
    for ref in ast.columns_of(ctx.select.where) if ctx.select.where is not None else []:
        col = ctx.table.column(ref.name, ref.pos, ctx.text)
        if not col.public:
            raise ctx.error(PrivacyError, f"WHERE may only use public columns, and `{col.name}` is private", ref,
                            width=len(ref.name), hint=f"declare `{col.name}` PUBLIC if it is not sensitive")


def check_key_domain(ctx: _Ctx) -> None:
    """Rule: the key needs a public domain of keys: categories, or an integer range."""
    dom = ctx.table.column(ctx.key).domain
    if isinstance(dom, CategoricalDomain) or (isinstance(dom, NumericDomain) and dom.integer):
        return
    ref = ctx.select.group_by[0]
    raise ctx.error(PrivacyError, f"GROUP BY a private key needs its public domain of keys, and `{ctx.key}` has "
                    + ("none" if dom is None else "a continuous one"), ref, width=len(ref.name),
                    hint=f"declare {ast.quote_name(ctx.key)} PRIVATE IN ('a', 'b', ...) or PRIVATE INTEGER BETWEEN 1 "
                         "AND 100 (the keys are never read from the data)")


def resolve_items(ctx: _Ctx) -> None:
    """Rule: the key column and the aggregates, each over the key (one value column at most)."""
    for item in ctx.select.items:
        e = item.expr
        if isinstance(e, ast.ColumnRef):
            if ctx.table.column(e.name, e.pos, ctx.text).name != ctx.key:
                raise ctx.error(PlanError, f"column `{e.name}` must appear in GROUP BY or inside an LDP aggregate",
                                e, width=len(e.name), hint=f"a key-value statement lists its key `{ctx.key}` and "
                                "aggregates per key, e.g. LDP_AVG(value)")
            ctx.items.append(KVItem(item.alias or ctx.key, "key"))
            continue
        kind = KINDS.get(e.name.upper())
        if kind is None or e.named:
            raise ctx.error(PlanError, f"{e.name.upper()} is not a key-value aggregate", e, width=len(e.name),
                            hint="per key: LDP_COUNT(*), LDP_FREQUENCY(*), LDP_AVG(value), LDP_MEAN(value), "
                                 "LDP_SUM(value), without named arguments")
        _check_argument(ctx, e, kind)
        ctx.items.append(KVItem(item.alias or (f"{e.name.lower()}_{ctx.value}" if kind in ("mean", "sum") else
                                               e.name.lower()), kind, e))
    if not any(i.kind != "key" for i in ctx.items):
        raise ctx.error(PlanError, "the statement has no LDP aggregate", ctx.select,
                        hint="for example LDP_COUNT(*) or LDP_AVG(value)")


def _check_argument(ctx: _Ctx, e: ast.Call, kind: str) -> None:
    if kind in ("count", "frequency"):
        if not e.star:
            raise ctx.error(PlanError, f"{e.name.upper()} per key counts the users holding the key: write "
                            f"{e.name.upper()}(*)", e, width=len(e.name),
                            hint=f"{e.name.upper()}(*) counts a key's holders (a NULL value included); the users with "
                                 "a value are the ones LDP_AVG(value) averages")
        return
    arg = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], ast.ColumnRef) else None
    col = ctx.table.column(arg.name, arg.pos, ctx.text) if arg is not None else None
    if col is None or col.public or not isinstance(col.domain, NumericDomain) or col.name == ctx.key:
        raise ctx.error(PlanError, f"{e.name.upper()} per key takes one private value column with a declared "
                        "range", e, width=len(e.name),
                        hint="declare it PRIVATE BETWEEN lo AND hi and write e.g. LDP_AVG(rating)")
    if ctx.value not in (None, col.name):
        raise ctx.error(PlanError, f"one report carries one value per key, and this statement asks about "
                        f"`{ctx.value}` and `{col.name}`", e, hint="ask about each value column in its own statement")
    ctx.value = col.name


def resolve_options(ctx: _Ctx) -> None:
    """Rule: the options a key-value statement accepts (model = 'shuffle' is planned by :func:`shuffle_epsilon0`)."""
    merged = {k: v for k, v in ctx.session.items() if k in ALLOWED_OPTIONS}
    for opt in ctx.select.options:
        if opt.name not in ALLOWED_OPTIONS:
            raise ctx.error(PlanError, f"option `{opt.name}` does not apply to a key-value statement", opt,
                            width=len(opt.name), hint="options here: " + ", ".join(ALLOWED_OPTIONS))
        merged[opt.name] = opt.value.value
    for key, value in merged.items():
        node = next((o for o in ctx.select.options if o.name == key), ctx.select)
        if key == "seed" and not ctx.evaluation:
            raise ctx.error(PrivacyError, "a seed makes the noise predictable, so it is honoured in evaluation mode "
                            "only", node, hint="open ldpql.connect(evaluation=True)")
        merged[key] = check_option(key, value, node, ctx.text)
    if str(merged.get("mechanism", "collision")).lower() not in ("collision", "auto"):
        raise ctx.error(PlanError, f"key-value statements use Collision, not {merged['mechanism']!r}", ctx.select,
                        hint="drop the mechanism option or write mechanism = 'collision'")
    ctx.options = merged


def resolve_epsilon(ctx: _Ctx) -> None:
    """Rule: the statement's ε (EPSILON, else OPTIONS/SET epsilon); INF in evaluation mode only; at most the cap."""
    sel = ctx.select
    eps = sel.epsilon.value if sel.epsilon is not None else ctx.options.get("epsilon")
    if eps is None or sel.accuracy is not None or sel.sweep:
        raise ctx.error(PlanError, "a key-value statement needs EPSILON e", sel,
                        hint="add EPSILON e, e.g. EPSILON 1 (ACCURACY and EPSILON IN (...) are not available here)")
    if not isinstance(eps, (int, float)) or not eps > 0 or (math.isinf(eps) and not ctx.evaluation):
        raise ctx.error(PlanError, f"EPSILON must be finite and positive, but is {eps}", sel.epsilon or sel,
                        hint="EPSILON INF (noise off) is for evaluation only" if math.isinf(eps) else "e.g. EPSILON 1")
    if eps > EPSILON_CAP and not math.isinf(eps):
        raise ctx.error(PlanError, f"EPSILON {eps:g} is above the per-randomizer cap {EPSILON_CAP:g}", sel.epsilon,
                        hint=f"use EPSILON {EPSILON_CAP:g} or less")
    ctx.epsilon = float(eps)
    ctx.delta = float(sel.delta.value) if sel.delta is not None else float(ctx.options.get("delta", 0.0))
    if not 0 <= ctx.delta < 1:
        raise ctx.error(PlanError, f"DELTA must be in [0, 1), not {ctx.delta:g}", sel, hint="for example DELTA 1e-8")


def check_model(ctx: _Ctx) -> None:
    """Rule: model = 'shuffle' needs a DELTA budget on the table and a finite ε (what is left is checked with the
    public facts, :func:`shuffle_epsilon0`)."""
    model = ctx.options.get("model", "local")
    if model == "shuffle" and ctx.table.budget_delta <= 0:
        raise ctx.error(PlanError, f"model = 'shuffle' needs a DELTA budget, and `{ctx.table.name}` has none",
                        ctx.select, hint=f"ALTER TABLE {ctx.table.name} SET BUDGET EPSILON e DELTA d, or use "
                                         "model = 'local'")
    if model == "shuffle" and _no_delta(ctx):
        raise ctx.error(PlanError, "model = 'shuffle' spends δ, and DELTA 0 asks for none", ctx.select,
                        hint="drop DELTA 0 (the δ left on the table is then used), give DELTA d > 0, or use "
                             "model = 'local'")
    if model == "shuffle" and math.isinf(ctx.epsilon):
        raise ctx.error(PlanError, "model = 'shuffle' needs a finite EPSILON (the central ε_c)", ctx.select,
                        hint="EPSILON INF is noise off: drop model = 'shuffle'")


def _no_delta(ctx: _Ctx) -> bool:
    """An explicit DELTA 0 (statement, OPTIONS or SET): no δ may be spent, so no shuffle."""
    return ctx.delta == 0 and (ctx.select.delta is not None or "delta" in ctx.options)


def shuffle_epsilon0(ctx: _Ctx, facts: PublicFacts) -> tuple[float | None, float]:
    """(ε₀, δ) of a shuffled statement, (None, 0) in the local model: the largest ε₀ whose n shuffled reports are
    (ε_c, δ)-DP by the exact clone reduction at the generic weight α₁ = r = 1/(e^ε₀ + 1), which holds for any
    ε₀-LDP randomizer (spec §5.5), verified at the final ε₀ (spec §5.4). Collision's own weight s/Ω (Theorem 5)
    is derived for exactly s elements per user; a key-value user with fewer keys sends fewer, and only the weight's
    condition (not the whole clone decomposition) has been checked for that, so it is not used yet (~6% of ε₀). model = 'shuffle' is refused where no ε₀ gains over ε_c (too few users, or too small a δ); 'auto'
    then stays local. δ: the statement's DELTA, else all the δ left on the table."""
    model = ctx.options.get("model", "local")
    left = ctx.table.budget_delta if facts.remaining_delta is None else facts.remaining_delta
    if model == "local" or math.isinf(ctx.epsilon) or (model == "auto" and left <= 0) or facts.n == 0 or _no_delta(ctx):
        return None, 0.0
    if ctx.delta > max(left, 0.0) * (1 + 1e-9):
        raise ctx.error(PlanError, f"DELTA {ctx.delta:g} is more than the δ left on `{ctx.table.name}` "
                        f"({max(left, 0.0):g} of its DELTA budget {ctx.table.budget_delta:g})", ctx.select,
                        hint="use a smaller DELTA, or model = 'local' (pure ε, no δ)")
    delta = ctx.delta or max(left, 0.0)
    if delta <= 0 and model == "shuffle":
        raise ctx.error(PlanError, f"model = 'shuffle' needs δ, and none is left on `{ctx.table.name}` (its DELTA "
                        f"budget {ctx.table.budget_delta:g} is spent)", ctx.select,
                        hint=f"ALTER TABLE {ctx.table.name} SET BUDGET EPSILON e DELTA d, or use model = 'local'")
    e0 = local_epsilon(ctx.epsilon, delta, facts.n, generic_weights) if 0 < delta and facts.n > 1 else ctx.epsilon
    if e0 > ctx.epsilon * (1 + MIN_GAIN):
        return e0, delta
    if model == "shuffle":
        raise ctx.error(PlanError, f"shuffling {facts.n:,} reports gives no amplification at ε_c = {ctx.epsilon:g}, "
                        f"δ = {delta:g} (ε₀ = {e0:.4g})", ctx.select,
                        hint="shuffling needs many users (amplification grows about as √n): use model = 'local', or "
                             "a larger DELTA or ε")
    return None, 0.0


RULES = (refuse_other_statements, check_public_where, check_key_domain, resolve_items, resolve_options,
         resolve_epsilon, check_model)


def check(select: ast.Select, table: Table, text: str, evaluation: bool = False, session: dict | None = None) -> _Ctx:
    """Every rule that needs no data: run before anything reads the table (the WHERE is checked public here)."""
    ctx = _Ctx(select, table, text, evaluation, session=dict(session or {}))
    for rule in RULES:
        rule(ctx)
    return ctx


def plan_keyvalue(select: ast.Select, table: Table, facts: PublicFacts, session: dict | None = None,
                  text: str = "", evaluation: bool = False) -> KVPlan:
    """Plan a key-value statement from public facts only (``facts.n`` is the number of units after the WHERE)."""
    text = text or select.sql()
    ctx = check(select, table, text, evaluation, session)
    epsilon0, delta = shuffle_epsilon0(ctx, facts)
    key_dom = table.column(ctx.key).domain
    labels = key_dom.labels if isinstance(key_dom, CategoricalDomain) else \
        tuple(int(key_dom.low) + i for i in range(key_dom.size))
    s = select.sparsity if select.sparsity is not None else table.sparsity
    if s < 1 or s > MAX_SPARSITY:
        raise ctx.error(PlanError, f"SPARSITY must be at least 1 and at most {MAX_SPARSITY}, not {s}", select,
                        hint="e.g. GROUP BY key SPARSITY 8; a user with more keys sends a random s of them")
    val = table.column(ctx.value).domain if ctx.value else None
    states = 1 if val is None else (3 if val.skips_nulls else 2)
    notes = [f"{ctx.key}: rows whose key is NULL" + (" or outside the declared range" if isinstance(key_dom, NumericDomain)
             else "") + (" are dropped" if isinstance(key_dom, NumericDomain) else " count under OTHER")]
    if val is not None:
        notes.append(f"{ctx.value}: " + ("a NULL value keeps its key (counted by LDP_COUNT(*)) and is skipped by AVG "
                                         "and SUM, as SQL does" if states == 3 else
                                         f"NULL counts as {val.null_value:g} (declared)") + "; values clamped to "
                     f"[{val.low:g}, {val.high:g}]")
    return KVPlan(select, table, ctx.epsilon, ctx.key, labels, key_expression(ctx.key, key_dom), ctx.value,
                  value_expression(ctx.value, val), val.low if val else 0.0, val.high if val else 0.0, states,
                  min(s, len(labels)), "the statement's SPARSITY" if select.sparsity is not None else
                  "the table's SPARSITY", facts.n, ctx.items, ctx.options.get("confidence", 0.95),
                  ctx.options.get("seed"), select.where.sql() if select.where is not None else None,
                  facts.remaining, facts.ledger, notes, ctx.options.get("postprocess", "none"), ctx.delta,
                  epsilon0, delta)


def key_expression(col: str, dom) -> E.Expr:
    """Each row's key index in [0, d): a category's index (OTHER last); an integer key's offset, -1 (the row is
    dropped on the device) for a NULL or out-of-range key. Never raises."""
    if isinstance(dom, CategoricalDomain):
        return dom.index(col)
    raw = E.number(col)
    out = E.Logic("OR", (E.IsNull(raw), E.call("isnan", raw), E.BinOp("<", raw, E.double(dom.low - 0.5)),
                         E.BinOp(">=", raw, E.double(dom.high + 0.5))))
    return E.Case(out, E.Literal(-1), dom.index(col))


def value_expression(col: str | None, dom) -> E.Expr:
    """Each row's value on [−1, 1] (clamped), NaN for a NULL of a nullable column; 0 when no value is asked for."""
    if col is None:
        return E.double(0.0)
    if not dom.skips_nulls:
        return dom.scaled(col)
    raw = E.number(col)
    return E.Case(E.Logic("OR", (E.IsNull(raw), E.call("isnan", raw))), E.Literal(math.nan), dom.scaled(col))
