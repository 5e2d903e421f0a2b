"""Running a key-value statement (:mod:`ldpql.planner.keyvalue`) through a backend: public facts, the ledger charge
(one per statement, for every covered unit, whatever the number of keys and aggregates), one Collision report per
user (:mod:`ldpql.mechanisms.kv`, Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in
the Local and Shuffle Model", IJCAI 2021 journal version), and one result row per declared key.

The backend streams each unit's rows (:meth:`ldpql.backends.base.Backend.unit_rows`, the public WHERE applied to the
rows first) in batches of whole units; each batch is assembled and randomized on its own (bounded memory). A seeded
(evaluation) run of up to 2^26 units reads every batch first and sorts the rows, so that its answer depends on the data and the seed
alone, not on the order in which a backend groups or partitions the rows.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from ldpql.backends.base import Population, where_expr
from ldpql.errors import ExecuteError, PlanError, PrivacyError
from ldpql.grammar import ast
from ldpql.mechanisms.kv import KVCollision, assemble, exact_answers, key_answers, project_capped_simplex
from ldpql.planner import PublicFacts
from ldpql.planner.keyvalue import CAVEAT, PROJECTED, KVPlan, check, plan_keyvalue
from ldpql.result import Result

CANONICAL_UNITS = 1 << 26   # up to this many units a seeded run reads every row before randomizing (then it streams)
NOT_PRIVATE = "EVALUATION ONLY: these figures use the true data and are NOT private; never release them"


def plan(con, select: ast.Select, text: str, table) -> tuple[KVPlan, Population, np.ndarray | None]:
    """(plan, population, covered users) from public facts: the statement is checked before any read."""
    check(select, table, text, con.evaluation, con.session)   # the WHERE is public before the engine evaluates it
    con._check_data(table)
    pop = Population(table, where_expr(select.where) if select.where is not None else None)
    users = con.backend.covered_users(pop)
    facts = PublicFacts(con.backend.units(pop), 1, con.ledger.remaining(table.ledger_key, users),
                        con.ledger.remaining_delta(table.ledger_key), con.ledger.path)
    return plan_keyvalue(select, table, facts, con.session, text, con.evaluation), pop, users


def explain(con, select: ast.Select, text: str, table) -> Result:
    """EXPLAIN of a key-value statement: reads no private value, spends nothing."""
    if select.sweep:
        raise PlanError("EPSILON IN (...) is not available for key-value statements",
                        hint="EXPLAIN the statement at each EPSILON")
    p = plan(con, select, text, table)[0]
    footer = "nothing was run and no budget was spent"
    return Result(["plan"], [(line,) for line in str(p).splitlines()], plan=p, footer=footer,
                  view=Result([], [], message=str(p), footer=footer))


def select(con, stmt: ast.Select, text: str, table, span: str) -> Result:
    """Run a key-value statement: charge, read, one report per user, one row per key."""
    started = time.monotonic()
    p, pop, users = plan(con, stmt, text, table)
    seeded = con.evaluation and (p.seed is not None or con.seed is not None)
    if p.n == 0 or math.isinf(p.epsilon):
        if math.isinf(p.epsilon):
            con.ledger.log("evaluation", table.ledger_key, table.name, span)
        answers, n = release(con.backend, pop, p, con._entropy(p), seeded) if p.n else ({}, 0)
        return result(p, answers, n, 0.0, None, time.monotonic() - started, seeded)
    charge = con.ledger.reserve(table.ledger_key, table.name, span, users, p.epsilon, p.where_sql, p.n, p.epsilon0,
                                p.shuffle_delta)
    try:   # charge on touch: every statement here reads private values, so the charge stands from now on
        answers, n = release(con.backend, pop, p, con._entropy(p, charge=charge), seeded)
    except BaseException as e:  # noqa: BLE001  (charge on touch: any failure after the read keeps the charge)
        con.ledger.commit(charge)
        failure = "was interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
    else:
        con.ledger.commit(charge)
        left = max(con.ledger.remaining(table.ledger_key), 0.0)
        return result(p, answers, n, p.epsilon, left, time.monotonic() - started, seeded)
    raise ExecuteError(f"the statement {failure} after it had read private data, so its charge of ε = {p.epsilon:g} "
                       "per user stands (charge on touch)", hint="the details are withheld because they could depend "
                       "on private values; SHOW LEDGER lists the charge", context={"charge_kept": charge})


def release(backend, pop: Population, p: KVPlan, entropy: int, seeded: bool) -> tuple[dict, int]:
    """Every user's one report (or, noise off, its exact pairs) and the per-key answers: ({kind: Estimate}, n)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
    batches = backend.unit_rows(pop, p.key_expr, p.value_expr)
    if seeded and p.n <= CANONICAL_UNITS:   # reproducible whatever the backend's order (memory grows with the rows)
        batches = [_canonical(list(batches))]
    noisy = not math.isinf(p.epsilon)
    r = KVCollision(p.local, p.d, p.s, p.states) if noisy else None   # (shuffle model: at ε₀)
    total, n, pairs = None, 0, []
    for users, keys, values in batches:
        ids, k, v = assemble(users, keys, values, p.s, rng)
        n += len(ids)
        if noisy:
            part = r.summary(k, v, rng)
            total = part if total is None else total + part
        else:
            pairs.append((k, v))
    if n == 0:
        return {}, 0
    if not noisy:
        k, v = (np.concatenate([a[i] for a in pairs]) for i in (0, 1))
        return exact_answers(k, v, p.d, n, p.low, p.high), n
    answers = key_answers(r, total, n, p.low, p.high, p.confidence)
    return (project(answers, n, p.s, p.z) if p.postprocess == "capped_simplex" else answers), n


def project(answers: dict, n: int, s: int, z: float) -> dict:
    """The per-key frequencies and counts (n times them) projected onto the capped simplex (post-processing); each
    keeps the unprojected estimate's interval, which :func:`_cell` widens to hold the projected point (an interval
    centred on a biased point would not hold its confidence)."""
    f = project_capped_simplex(answers["frequency"].values, s)
    out = dict(answers)
    for kind, scale in (("frequency", 1.0), ("count", float(n))):
        est = answers[kind]
        ivs = [(np.array([v - z * se]), np.array([v + z * se])) for v, se in zip(est.values, est.stderr)]
        out[kind] = dataclasses.replace(est, values=scale * f, extra={**est.extra, "intervals": ivs})
    return out


def _canonical(batches: list) -> tuple[np.ndarray, ...]:
    """All rows in one batch, sorted by user, key and value: the order no longer depends on the backend."""
    if not batches:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0)
    u, k, v = (np.concatenate([b[i] for b in batches]) for i in range(3))
    order = np.lexsort((v, k, u))
    return u[order], k[order], v[order]


def feasible(kind: str, n: int, low: float, high: float) -> tuple[float, float]:
    """The range an answer can take (public): a count in [0, n], a share in [0, 1], a mean in the value's domain,
    a sum over the holders in n·[min(lo, 0), max(hi, 0)]."""
    return {"count": (0.0, float(n)), "frequency": (0.0, 1.0), "mean": (low, high),
            "sum": (n * min(low, 0.0), n * max(high, 0.0))}[kind]


def _cell(est, j: int, kind: str, p: KVPlan, n: int):
    """(value, interval) of key j, both clipped to the feasible range (post-processing)."""
    v = float(est.values[j])
    if math.isnan(v):
        return None, None
    lo, hi = feasible(kind, n, p.low, p.high)
    given = est.extra.get("intervals", [None] * (j + 1))[j] if est.extra else None
    a, b = (float(given[0][0]), float(given[1][0])) if given is not None else \
        (v - p.z * float(est.stderr[j]), v + p.z * float(est.stderr[j]))
    v = min(max(v, lo), hi)
    return v, (min(max(a, lo), v), max(min(b, hi), v), p.confidence)


def result(p: KVPlan, answers: dict, n: int, spent: float, left: float | None, elapsed: float,
           seeded: bool) -> Result:
    """One row per declared key: the key's label and each aggregate, with intervals."""
    rows, intervals = [], []
    for j, label in enumerate(p.labels):
        row, ivs = [], []
        for item in p.items:
            if item.kind == "key":
                row.append(label), ivs.append(None)
                continue
            value, iv = _cell(answers[item.kind], j, item.kind, p, n) if item.kind in answers else (None, None)
            row.append(value), ivs.append(iv)
        rows.append(tuple(row)), intervals.append(ivs)
    shuffled = "" if p.epsilon0 is None else (f"; shuffled: users randomized at ε₀ = {p.epsilon0:.4g}, "
                                              f"(ε_c, δ) = ({p.epsilon:g}, {p.shuffle_delta:g})")
    notes = [f"one Collision report per user for every key and aggregate (d = {p.d}, s = {p.s}, t = {p.t}){shuffled}"
             if not math.isinf(p.epsilon) else "EPSILON INF: noise off, exact answers on the assembled rows",
             "sparsity: " + _caveat(p)] + list(p.notes) + ([PROJECTED] if p.postprocess == "capped_simplex" else [])
    low = [str(lab) for lab, note in zip(p.labels, answers["mean"].extra.get("notes", ()))
           if note] if "mean" in answers and any(i.kind == "mean" for i in p.items) else []
    if low:
        notes.append(f"low confidence: few users hold {', '.join(low[:8])}{' …' if len(low) > 8 else ''}, so their "
                     "mean (a ratio of two noisy estimates) is unreliable")
    if seeded or math.isinf(p.epsilon):
        notes.append(NOT_PRIVATE)
    footer = f"-- collision (key-value); ε spent {spent:g} per user" + (
        f"; {left:.4g} left on {p.table.name}" if left is not None else "") + f"; {n:,} users; {elapsed:.2f} s"
    return Result([i.output for i in p.items], rows, intervals, plan=p, epsilon_spent=spent, notes=notes,
                  footer=footer, elapsed=elapsed)


def _caveat(p: KVPlan) -> str:
    return CAVEAT.replace("s/(", f"{p.s}/(").replace("than s", f"than s = {p.s}")


def _scores(true: float, runs: list[Result], j: int, c: int) -> tuple:
    """(truth, mean estimate, bias, RMSE, coverage) of row j, column c over the runs; where the truth is NULL (no
    holder has a value) or no run answered, the scores are undefined (None), not 0."""
    est = np.array([np.nan if r.fetchall()[j][c] is None else r.fetchall()[j][c] for r in runs], float)
    if math.isnan(true) or not runs or np.isnan(est).all():
        return (None if math.isnan(true) else true, None, None, None, None)
    hit = [iv is not None and iv[0] <= true <= iv[1] for iv in (r.intervals()[j][c] for r in runs)]
    mean = float(np.nanmean(est))
    return true, mean, mean - true, float(np.sqrt(np.nanmean((est - true) ** 2))), float(np.mean(hit))


def evaluate(con, stmt: ast.Evaluate, text: str, table, span: str) -> Result:
    """EVALUATE of a key-value statement (evaluation mode, spends nothing): per aggregate and key, the true answer
    (noise off, on the assembled rows) against REPEAT runs: mean estimate, bias, RMSE, interval coverage."""
    if not con.evaluation:
        raise PrivacyError("EVALUATE reveals true answers and is only allowed in evaluation mode",
                           hint="open the connection with ldpql.connect(evaluation=True), or run ldpql --evaluate")
    if stmt.repeat < 1:
        raise PlanError("REPEAT must be at least 1")
    p, pop, _ = plan(con, stmt.select, text, table)
    con.ledger.log("evaluation", table.ledger_key, table.name, span)
    seeded = p.seed is not None or con.seed is not None
    truth, n = release(con.backend, pop, dataclasses.replace(p, epsilon=math.inf), con._entropy(p), seeded)
    runs = [result(p, *release(con.backend, pop, p, con._entropy(p, r + 1), seeded), 0.0, None, 0.0, seeded)
            for r in range(stmt.repeat)] if n and not math.isinf(p.epsilon) else []
    rows = []
    for c, item in enumerate(p.items):
        if item.kind == "key" or not n:
            continue
        for j, label in enumerate(p.labels):
            rows.append((item.output, label, *_scores(float(truth[item.kind].values[j]), runs, j, c)))
    notes = [(f"{len(runs)} runs; coverage of the {p.confidence:.0%} intervals; truth: noise off on the assembled "
              "rows (a user with more than s keys keeps a random s of them, so the truth is the subsampled data's)"),
             NOT_PRIVATE]
    return Result(["output", p.key, "truth", "mean_estimate", "bias", "rmse", "coverage"], rows, plan=p,
                  notes=notes, message=NOT_PRIVATE)
