"""Runs a Plan over DuckDB data (DESIGN §4.2-4.3): user groups, rounds, the two simulation paths.

Every aggregate runs one protocol per GROUP BY cell. The executor advances all of them in lockstep: at each
step it gathers the rounds they yield, runs rounds that share an encoding and a user interval as one DuckDB
query over all cells, and sends each protocol its reply.

- Per user: stream ``cell, input`` in Arrow batches (bounded memory), run the randomizer on each cell's
  users, and add up the summaries batch by batch.
- Exact aggregate: let DuckDB count the inputs per cell (``GROUP BY cell, input``) and draw the summary from
  that histogram with the randomizer's closed-form distribution; one scan per round.

Users are split into disjoint groups (aggregates under a user split, or a protocol's own sub-groups) by
u = hash(row position, salt) / 2^64, where the salt comes from the statement's seed: a function of position
and seed only, never of a private value, the same on both paths and when streamed. Before each round the
executor checks that no user's ε, summed over the rounds it takes part in, exceeds the plan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa

from ldpql.catalog import Table
from ldpql.errors import ExecuteError, InternalError
from ldpql.grammar.ast import quote_name
from ldpql.mechanisms import Estimate, Reply, Round
from ldpql.planner import Plan

BATCH_ROWS = 1 << 20
REPORT_CELLS = 1 << 23          # cap on users x report width randomized at once (bounds memory)
POS = "__ldpql_pos"
CELLS = "__ldpql_cells"

Progress = Callable[[float, str], None]


@dataclass
class Cell:
    """One GROUP BY group (the whole population when there is no GROUP BY): its key and user count."""

    key: tuple
    n: int


def population_sql(table: Table, where: str | None, positions: bool = False) -> str:
    """The users of a statement: the source's rows after the public WHERE (with row positions if asked)."""
    src = f"SELECT *, row_number() OVER () - 1 AS {POS} FROM {table.from_sql}" if positions else \
        f"SELECT * FROM {table.from_sql}"
    return f"SELECT * FROM ({src}) AS src" + (f" WHERE {where}" if where else "")


def public_cells(duck: duckdb.DuckDBPyConnection, table: Table, where: str | None, group_by: list[str]) -> list[Cell]:
    """The GROUP BY cells and their user counts: public facts (public columns and counts only)."""
    try:
        if not group_by:
            return [Cell((), int(duck.execute(f"SELECT count(*) FROM ({population_sql(table, where)})").fetchall()[0][0]))]
        cols = ", ".join(quote_name(c) for c in group_by)
        rows = duck.execute(f"SELECT {cols}, count(*) FROM ({population_sql(table, where)}) GROUP BY ALL "
                            f"ORDER BY ALL NULLS LAST").fetchall()
    except duckdb.Error as e:
        raise ExecuteError(f"DuckDB could not read `{table.name}`: {str(e).splitlines()[0]}",
                           hint="check that the source still exists and that WHERE compares columns with "
                                "values of their type") from None
    return [Cell(tuple(r[:-1]), int(r[-1])) for r in rows]


def max_spend(duck: duckdb.DuckDBPyConnection, table: Table, charges, predicate: str | None) -> float:
    """The largest total ε of earlier charges over the users ``predicate`` covers (public columns only)."""
    by_pred: dict[str | None, float] = {}
    for p, e in charges:
        by_pred[p] = by_pred.get(p, 0.0) + e
    if not by_pred:
        return 0.0
    if set(by_pred) == {None}:
        return by_pred[None]
    terms = " + ".join(f"{e!r}" if p is None else f"(CASE WHEN {p} THEN {e!r} ELSE 0 END)" for p, e in by_pred.items())
    row = duck.execute(f"SELECT max({terms}) FROM ({population_sql(table, predicate)})").fetchall()[0]
    return float(row[0] or 0.0)


@dataclass
class _Task:
    """One protocol in flight: aggregate ``agg`` on cell ``cell``."""

    agg: int
    cell: int
    gen: object
    round: Round | None = None
    result: Estimate | None = None
    spent: list[tuple[float, float, float]] = field(default_factory=list)  # (u0, u1, ε) of rounds it ran


class Executor:
    """Runs plans over one DuckDB connection."""

    def __init__(self, duck: duckdb.DuckDBPyConnection, progress: Progress | None = None):
        self.duck = duck
        self.progress = progress
        self.cache: dict[str, dict[int, np.ndarray]] | None = None  # exact-path histograms (EVALUATE reuses)

    def run(self, plan: Plan, cells: list[Cell], entropy: int) -> dict[tuple[int, int], Estimate]:
        """Run every aggregate on every cell; returns {(aggregate index, cell index): Estimate}."""
        self._started, self._plan, self._cells = time.monotonic(), plan, cells
        self._salt = entropy % (1 << 62)
        self._positions = any(a.users != (0.0, 1.0) for a in plan.aggregates)
        self._cell_spent: dict[int, list] = {}
        tasks = [_Task(a.index, c, a.protocol(cell.n)) for a in plan.aggregates for c, cell in enumerate(cells)]
        for t in tasks:
            self._advance(t, None)
        step = 0
        while pending := [t for t in tasks if t.result is None]:
            self._check_spend(plan, pending)
            for key, group in _batches(pending).items():
                rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(key[0], step))))
                replies = self._run_round(group, rng, step)
                for t in group:
                    self._advance(t, replies[t.cell])
            step += 1
        return {(t.agg, t.cell): t.result for t in tasks}

    def _advance(self, t: _Task, reply: Reply | None) -> None:
        try:
            t.round = next(t.gen) if reply is None else t.gen.send(reply)
        except StopIteration as stop:
            t.round, t.result = None, stop.value

    def _check_spend(self, plan: Plan, pending: list[_Task]) -> None:
        """No user may exceed its planned ε: its aggregate's share, and the statement's ε over all aggregates."""
        for t in pending:
            a = plan.aggregates[t.agg]
            spent = (*self._interval(a.users, t.round.users), t.round.randomizer.epsilon)
            t.spent.append(spent)
            self._cell_spent.setdefault(t.cell, []).append(spent)
            if _max_coverage(t.spent) > a.epsilon * (1 + 1e-9):
                raise InternalError(f"{a.output}: a round would take some users past the planned ε = {a.epsilon:g}")
        for cell in {t.cell for t in pending}:
            if _max_coverage(self._cell_spent[cell]) > plan.epsilon * (1 + 1e-9):
                raise InternalError(f"a round would take some users past the statement's ε = {plan.epsilon:g}")

    @staticmethod
    def _interval(share: tuple[float, float], sub: tuple[float, float]) -> tuple[float, float]:
        width = share[1] - share[0]
        return share[0] + sub[0] * width, share[0] + sub[1] * width

    # -- one round over all cells ----------------------------------------------------------------------------
    def _run_round(self, group: list[_Task], rng: np.random.Generator, step: int) -> dict[int, Reply]:
        a = self._plan.aggregates[group[0].agg]
        rounds = {t.cell: t.round for t in group}
        u0, u1 = self._interval(a.users, group[0].round.users)
        exact = self._use_exact(list(rounds.values()))
        self._report(f"{a.output}: round {step + 1} ({'exact aggregate' if exact else 'per user'})")
        sql = self._round_sql(group[0].round.encoding.sql, u0, u1)
        try:
            if exact:
                return self._exact(sql, rounds, rng)
            return self._per_user(sql, rounds, rng, a.output, step)
        except duckdb.Error as e:
            raise ExecuteError(f"DuckDB failed while running {a.output}: {str(e).splitlines()[0]}",
                               hint="nothing was spent; check the data source") from None

    def _use_exact(self, rounds: list[Round]) -> bool:
        mode = self._plan.simulation
        available = all(r.randomizer.exact and r.encoding.size is not None for r in rounds)
        if mode == "exact" and not available:
            names = sorted({r.randomizer.name for r in rounds})
            raise ExecuteError(f"{', '.join(names)} has no exact-aggregate path",
                               hint="use OPTIONS (simulation = 'per_user') or 'auto'")
        return available and mode != "per_user"

    def _round_sql(self, encoding: str, u0: float, u1: float) -> str:
        p = self._plan
        pop = population_sql(p.table, p.where_sql, self._positions)
        cell = "0"
        if p.group_by:
            self._register_cells()
            on = " AND ".join(f"src.{quote_name(g)} IS NOT DISTINCT FROM c.{quote_name(g)}" for g in p.group_by)
            pop = f"SELECT src.*, c.__cell FROM ({pop}) AS src JOIN {CELLS} AS c ON {on}"
            cell = "__cell"
        users = ""
        if (u0, u1) != (0.0, 1.0):
            u = f"(hash({POS}, {self._salt}) / 18446744073709551616.0)"
            users = f" WHERE {u} >= {u0!r} AND {u} < {u1!r}"
        return f"SELECT {cell} AS cell, {encoding} AS x FROM ({pop}) AS pop{users}"

    def _register_cells(self) -> None:
        keys = list(zip(*[c.key for c in self._cells])) if self._cells else [[] for _ in self._plan.group_by]
        cols = {g: pa.array(list(k)) for g, k in zip(self._plan.group_by, keys)}
        cols["__cell"] = pa.array(range(len(self._cells)), pa.int64())
        self.duck.register(CELLS, pa.table(cols))

    def _exact(self, sql: str, rounds: dict[int, Round], rng: np.random.Generator) -> dict[int, Reply]:
        hist = self.cache.get(sql) if self.cache is not None else None
        if hist is None:
            hist = {}
            for cell, x, count in self.duck.execute(f"SELECT cell, x, count(*) FROM ({sql}) GROUP BY ALL").fetchall():
                if cell in rounds:
                    h = hist.setdefault(cell, np.zeros(rounds[cell].encoding.size, dtype=np.int64))
                    h[int(x)] += count
            if self.cache is not None:
                self.cache[sql] = hist
        out = {}
        for cell, r in rounds.items():
            h = hist.get(cell, np.zeros(r.encoding.size, dtype=np.int64))
            out[cell] = Reply(r.randomizer.sample_aggregate(h, rng), int(h.sum()))
        return out

    def _per_user(self, sql: str, rounds: dict[int, Round], rng: np.random.Generator, label: str,
                  step: int) -> dict[int, Reply]:
        sums: dict[int, np.ndarray] = {}
        counts = dict.fromkeys(rounds, 0)
        total = sum(self._cells[c].n for c in rounds) or 1
        done = 0
        reader = self.duck.sql(sql).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
            cell = batch.column(0).to_numpy(zero_copy_only=False)
            x = batch.column(1).to_numpy(zero_copy_only=False)
            for c, xs in _split_by_cell(cell, x, rounds):
                s = _randomize_sum(rounds[c].randomizer, xs, rng)
                sums[c] = s if c not in sums else sums[c] + s
                counts[c] += len(xs)
            done += len(x)
            self._report(f"{label}: round {step + 1} (per user)", done / total)
        return {c: Reply(sums.get(c, np.zeros(1)), counts[c]) for c in rounds}

    def _report(self, message: str, fraction: float = 0.0) -> None:
        if self.progress is not None:
            self.progress(fraction, message)


def _batches(pending: list[_Task]) -> dict[tuple, list[_Task]]:
    """Rounds that can share one DuckDB query: same aggregate, same encoding, same users."""
    out: dict[tuple, list[_Task]] = {}
    for t in pending:
        out.setdefault((t.agg, t.round.encoding.sql, t.round.users), []).append(t)
    return out


def _split_by_cell(cell: np.ndarray, x: np.ndarray, rounds: dict[int, Round]):
    if len(rounds) == 1:
        (only,) = rounds
        yield only, x[cell == only] if np.any(cell != only) else x
        return
    order = np.argsort(cell, kind="stable")
    cs, xs = cell[order], x[order]
    bounds = np.flatnonzero(np.diff(cs)) + 1
    for part_c, part_x in zip(np.split(cs, bounds), np.split(xs, bounds)):
        if len(part_c) and int(part_c[0]) in rounds:
            yield int(part_c[0]), part_x


def _randomize_sum(r, xs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomize users in chunks small enough that a chunk's reports fit in REPORT_CELLS values."""
    step = max(1024, REPORT_CELLS // r.report_width)
    total = None
    for i in range(0, len(xs), step):
        s = r.aggregate(r.randomize(xs[i:i + step], rng))
        total = s if total is None else total + s
    return total if total is not None else r.aggregate(r.randomize(xs[:0], rng))


def _max_coverage(intervals: list[tuple[float, float, float]]) -> float:
    """The largest total ε over any point of [0, 1) covered by the (u0, u1, ε) intervals."""
    points = sorted({p for a, b, _ in intervals for p in (a, b)})
    best = 0.0
    for lo, hi in zip(points, points[1:]):
        mid = (lo + hi) / 2
        best = max(best, sum(e for a, b, e in intervals if a <= mid < b))
    return best
