"""Runs a Plan over DuckDB data (DESIGN §4.2-4.3): user groups, rounds, the two simulation paths.

Every aggregate runs one protocol per GROUP BY cell. The executor advances all of them in lockstep: at each
step it gathers the rounds they yield, runs rounds that share an encoding and a user interval as one DuckDB
query over all cells, and sends each protocol its reply.

- Per user: stream ``cell, input`` in Arrow batches (bounded memory), run the randomizer on each cell's
  users, and add up the summaries batch by batch.
- Exact aggregate: let DuckDB count the inputs per cell (``GROUP BY cell, input``) and draw the summary from
  that histogram with the randomizer's closed-form distribution; one scan per round.

Users are split into disjoint groups (aggregates under a user split, or a protocol's own sub-groups) by
u = hash(user key, salt) / 2^64, where the salt comes from the statement's seed. The user key is the PRIVACY
UNIT column when the table declares one, else the row's position in the source, which must be the same in
every round of the statement: files, frames and stored tables are scanned in order (DuckDB's
preserve_insertion_order, which the connection sets), and a query or view source, whose row order DuckDB may
change from one scan to the next, is read once per statement into a snapshot by the connection. The key is a
function of the user's identity and the seed only, never of a private value, the same on both paths and when
streamed. ``touched`` turns true just before the first read of a private value (charge on touch).
Before each round the executor checks that no user's ε, summed over the rounds it takes part in, exceeds the
plan.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa

from ldpql.catalog import Table
from ldpql.errors import ExecuteError, InternalError
from ldpql.grammar.ast import quote_name
from ldpql.mechanisms import Estimate, Reply, Round, add_virtual
from ldpql.planner import Plan

BATCH_ROWS = 1 << 20
REPORT_CELLS = 1 << 20          # users x report width randomized at once (bounds memory; cache-sized chunks)
CHUNK_USERS = 1 << 16           # and at most this many users (narrow reports: smaller chunks stay in cache)
QUEUE_BATCHES = 4               # Arrow batches read ahead of the randomizers (bounds memory)
PARTS = 2                       # each batch is randomized in PARTS slices, one Generator per slice (fixed, so
                                # results do not depend on the machine's core count)
POS = "__ldpql_pos"
CELLS = "__ldpql_cells"

Progress = Callable[[float, str], None]


@dataclass
class Cell:
    """One GROUP BY group (the whole population when there is no GROUP BY): its key and user count."""

    key: tuple
    n: int


def population_sql(table: Table, where: str | None, keyed: str | None = None) -> str:
    """The users of a statement: the source's rows after the public WHERE; ``keyed`` is a source whose rows
    carry their user key in column POS (:meth:`Executor._keyed_source`)."""
    src = f"SELECT * FROM {keyed or table.from_sql}"
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


def user_key_sql(table: Table) -> str | None:
    """ldpql's 64-bit identity of a user (DESIGN §4.3): the lower half of the md5 of its privacy unit's text, or
    its row position in a source whose rows keep their order; None when neither names a person."""
    if table.privacy_unit:
        return f"md5_number_lower(CAST({quote_name(table.privacy_unit)} AS VARCHAR))"
    return "row_number() OVER () - 1" if table.identity.stable_rows else None


def covered_users(duck: duckdb.DuckDBPyConnection, table: Table, where: str | None) -> np.ndarray | None:
    """The ids of the users a statement covers, for the ledger: None (every user of the source) without a WHERE
    or when users have no identity; else one pass over the public WHERE and the key (never a private value)."""
    key = user_key_sql(table)
    if where is None or key is None:
        return None
    sql = f"SELECT __ldpql_key FROM (SELECT *, {key} AS __ldpql_key FROM {table.from_sql}) AS src WHERE {where}"
    try:
        return duck.execute(sql).fetchnumpy()["__ldpql_key"].astype(np.uint64)
    except duckdb.Error as e:
        raise ExecuteError(f"DuckDB could not read `{table.name}`: {str(e).splitlines()[0]}") from None


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
        self.touched = False
        self._at, self._planned = (0, 0, 1), 1   # (round, batch, batches in it) and the rounds planned (progress)
        self.cache: dict[str, dict[int, np.ndarray]] | None = None  # exact-path histograms (EVALUATE reuses)

    def run(self, plan: Plan, cells: list[Cell], entropy: int) -> dict[tuple[int, int], Estimate]:
        """Run every aggregate on every cell; returns {(aggregate index, cell index): Estimate}."""
        return self.finish(self.start(plan, cells), entropy)

    def start(self, plan: Plan, cells: list[Cell]) -> list[_Task]:
        """Build every cell's protocol and take it to its first round, without touching the data: a protocol
        that refuses its cell (too few users) raises here, before any budget is reserved."""
        self._plan, self._cells = plan, cells
        self.touched = False  # charge on touch: set just before the first read of a private value
        tasks = [_Task(a.index, c, a.protocol(cell.n)) for a in plan.aggregates for c, cell in enumerate(cells)]
        for t in tasks:
            self._advance(t, None)
        return tasks

    def finish(self, tasks: list[_Task], entropy: int) -> dict[tuple[int, int], Estimate]:
        """Run the started protocols to their estimates, with randomness from ``entropy``."""
        plan = self._plan
        self._started, self._salt = time.monotonic(), entropy % (1 << 62)
        self._cell_spent: dict[int, list] = {}
        self._hist = self.cache if self.cache is not None else {}  # rounds sharing an encoding share one scan
        if plan.group_by:
            self._register_cells()
        return self._loop(plan, tasks, entropy)

    def _loop(self, plan: Plan, tasks: list[_Task], entropy: int) -> dict[tuple[int, int], Estimate]:
        step, self._planned = 0, planned_rounds(plan)
        while pending := [t for t in tasks if t.result is None]:
            self._check_spend(plan, pending)
            seen: dict[int, int] = {}
            batches = _batches(pending)
            for b, (key, group) in enumerate(batches.items()):
                self._at = (step, b, len(batches))   # where the progress display is in the planned schedule
                k = seen[key[0]] = seen.get(key[0], -1) + 1  # batches of one aggregate in one step: own streams
                spawn = (key[0], step) if k == 0 else (key[0], step, k)
                rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=spawn)))
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
            limit = a.local_epsilon(self._cells[t.cell].n)  # its ε, or a shuffle protocol's local ε₀
            if _max_coverage(t.spent) > limit * (1 + 1e-9):
                raise InternalError(f"{a.output}: a round would take some users past the planned ε = {limit:g}")
        for cell in {t.cell for t in pending}:
            n = self._cells[cell].n
            limit = plan.epsilon + sum(a.local_epsilon(n) - a.epsilon for a in plan.aggregates if a.source is None)
            if _max_coverage(self._cell_spent[cell]) > limit * (1 + 1e-9):
                raise InternalError(f"a round would take some users past the statement's ε = {limit:g}")

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
        self.touched = True
        try:
            replies = self._exact(sql, rounds, rng, u0, u1) if exact else self._per_user(sql, rounds, rng, a.output, step)
        except duckdb.Error as e:
            raise ExecuteError(f"DuckDB failed while running {a.output}: {str(e).splitlines()[0]}",
                               hint="nothing was spent; check the data source") from None
        return {c: add_virtual(rounds[c], r, rng) for c, r in replies.items()}

    def _use_exact(self, rounds: list[Round]) -> bool:
        mode = self._plan.simulation
        available = all(r.randomizer.exact and r.encoding.size is not None for r in rounds)
        if mode == "exact" and not available:
            names = sorted({r.randomizer.name for r in rounds})
            raise ExecuteError(f"{', '.join(names)} has no exact-aggregate path",
                               hint="use OPTIONS (simulation = 'per_user') or 'auto'")
        return available and mode != "per_user"

    def _keyed_source(self) -> str:
        """The source with each user's key in column POS, the same in every round (see the module docstring)."""
        t = self._plan.table
        if t.privacy_unit:
            return f"(SELECT *, {quote_name(t.privacy_unit)} AS {POS} FROM {t.from_sql})"
        if not t.identity.stable_rows and t.source_kind != "snapshot":  # the connection snapshots such sources
            raise InternalError(f"`{t.name}` has no stable row order to key its users by")
        return f"(SELECT *, row_number() OVER () - 1 AS {POS} FROM {t.from_sql})"

    def _round_sql(self, encoding: str, u0: float, u1: float) -> str:
        p = self._plan
        pop = population_sql(p.table, p.where_sql, self._keyed_source() if (u0, u1) != (0.0, 1.0) else None)
        cell = "0"
        if p.group_by:
            on = " AND ".join(f"src.{quote_name(g)} IS NOT DISTINCT FROM c.{quote_name(g)}" for g in p.group_by)
            pop = f"SELECT src.*, c.__cell FROM ({pop}) AS src JOIN {CELLS} AS c ON {on}"
            cell = "__cell"
        users = ""
        if (u0, u1) != (0.0, 1.0):
            # a fresh partition per statement: the salt is mixed into the key's hash, then hashed again
            u = f"(hash(xor(hash({POS}), {self._salt}::UBIGINT)) / 18446744073709551616.0)"
            users = f" WHERE {u} >= {u0!r} AND {u} < {u1!r}"
        return f"SELECT {cell} AS cell, {encoding} AS x FROM ({pop}) AS pop{users}"

    def _register_cells(self) -> None:
        keys = list(zip(*[c.key for c in self._cells])) if self._cells else [[] for _ in self._plan.group_by]
        cols = {g: pa.array(list(k)) for g, k in zip(self._plan.group_by, keys)}
        cols["__cell"] = pa.array(range(len(self._cells)), pa.int64())
        self.duck.register(CELLS, pa.table(cols))

    def _exact(self, sql: str, rounds: dict[int, Round], rng: np.random.Generator, u0: float = 0.0,
               u1: float = 1.0) -> dict[int, Reply]:
        enc = next(iter(rounds.values())).encoding
        hist = self._hist.get(sql)
        if hist is None and hasattr(enc, "count_cells"):
            # hook: an encoding that counts its users itself, from the rows (cell, x) of any value expression
            # of this round's users, with its own queries and the run's cache (ldpql.planner.minimum)
            hist = enc.count_cells(lambda value: self._round_sql(value, u0, u1),
                                   lambda q: self.duck.execute(q).fetchall(), list(rounds), self._hist)
        elif hist is None:  # every cell's histogram: a later batch with the same SQL may hold other cells
            size = next(iter(rounds.values())).encoding.size
            rows = self.duck.execute(f"SELECT cell, x, count(*) AS n FROM ({sql}) GROUP BY ALL").fetchnumpy()
            cell_of, x, n = (np.asarray(rows[k], dtype=np.int64) for k in ("cell", "x", "n"))
            hist = {}
            for cell in np.unique(cell_of):
                h = hist[int(cell)] = np.zeros(size, dtype=np.int64)
                np.add.at(h, x[cell_of == cell], n[cell_of == cell])
            self._hist[sql] = hist
        out = {}
        for cell, r in rounds.items():
            h = hist.get(cell, np.zeros(r.encoding.size, dtype=np.int64))
            out[cell] = Reply(r.randomizer.sample_aggregate(h, rng), int(h.sum()))
        return out

    def _per_user(self, sql: str, rounds: dict[int, Round], rng: np.random.Generator, label: str,
                  step: int) -> dict[int, Reply]:
        """Stream ``cell, x`` in Arrow batches and randomize every user, PARTS slices of a batch in parallel.

        Slice p of every batch draws from its own Generator, spawned from the round's: the draws depend only on
        the seed, the row order and BATCH_ROWS / PARTS, not on thread timing. A reader thread has DuckDB
        produce batches (it releases the GIL, and yields them in bursts) into a queue of at most QUEUE_BATCHES;
        worker threads randomize them (numpy releases the GIL), so memory stays bounded.
        """
        seeds = rng.bit_generator.seed_seq.spawn(PARTS)
        gens = [np.random.Generator(np.random.SFC64(s)) for s in seeds]
        sums: dict[int, np.ndarray] = {}
        counts = dict.fromkeys(rounds, 0)
        total = sum(self._cells[c].n for c in rounds) or 1
        done = 0
        only = next(iter(rounds)) if len(rounds) == 1 and not self._plan.group_by else None
        query = f"SELECT x FROM ({sql})" if only is not None else sql  # one cell: no cell column to stream

        def work(part: int, items: list[tuple[int, np.ndarray]]) -> list[tuple[int, np.ndarray]]:
            return [(c, _randomize_sum(rounds[c].randomizer, xs, gens[part])) for c, xs in items]

        def collect(futures) -> None:
            for f in futures:
                for c, s in f.result():
                    sums[c] = s if c not in sums else sums[c] + s

        pending = []
        batches = _ReadAhead(self.duck.sql(query).to_arrow_reader(BATCH_ROWS), QUEUE_BATCHES, self.duck.interrupt)
        with ThreadPoolExecutor(max_workers=max(1, min(PARTS, os.cpu_count() or 1))) as pool:
            try:
                for batch in batches:
                    if only is not None:
                        items = [(only, batch.column(0).to_numpy(zero_copy_only=False))]
                    else:
                        items = list(_split_by_cell(batch.column(0).to_numpy(zero_copy_only=False),
                                                    batch.column(1).to_numpy(zero_copy_only=False), rounds))
                    collect(pending)  # the previous batch: each Generator is used by one slice at a time
                    pending = [pool.submit(work, p, [(c, xs[len(xs) * p // PARTS:len(xs) * (p + 1) // PARTS])
                                                     for c, xs in items]) for p in range(PARTS)]
                    for c, xs in items:
                        counts[c] += len(xs)
                    done += len(batch)
                    self._report(f"{label}: round {step + 1} (per user)", done / total)
                collect(pending)
            finally:
                batches.close()
                for f in pending:
                    f.cancel()
        return {c: Reply(sums[c] if c in sums else _randomize_sum(rounds[c].randomizer, np.zeros(0, np.int64),
                                                                  gens[0]), counts[c]) for c in rounds}

    def _report(self, message: str, fraction: float = 0.0) -> None:
        """Tell the progress callback how far the statement is in its planned schedule: rounds done, plus
        ``fraction`` of the current round's batch, out of the rounds the plan said it would take (public; an
        adaptive protocol that stops early jumps to the end, one that runs longer stays at 99%)."""
        if self.progress is None:
            return
        step, b, batches = self._at
        done = (step + (b + min(max(fraction, 0.0), 1.0)) / batches) / self._planned
        of = f" of {self._planned}" if step < self._planned else ""
        self.progress(min(done, 1.0) if step < self._planned else 0.99, message.replace(f"round {step + 1} ", f"round {step + 1}{of} ", 1))


def planned_rounds(plan: Plan) -> int:
    """How many sequential rounds the plan expects to run (its aggregates run in lockstep): the most any chosen
    protocol plans, at least 1."""
    return max([a.chosen.rounds for a in plan.aggregates if a.source is None and a.chosen is not None] + [1])


def _batches(pending: list[_Task]) -> dict[tuple, list[_Task]]:
    """Rounds that can share one DuckDB query: same aggregate, same encoding, same users."""
    out: dict[tuple, list[_Task]] = {}
    for t in pending:
        out.setdefault((t.agg, t.round.encoding.sql, t.round.users), []).append(t)
    return out


class _ReadAhead:
    """Iterate over an Arrow reader's batches while a thread reads up to ``depth`` batches ahead: DuckDB
    releases the GIL while it works and yields batches in bursts, so reading overlaps the randomizers."""

    def __init__(self, reader, depth: int, interrupt: Callable[[], None]):
        self._queue: queue.Queue = queue.Queue(depth)
        self._stop, self._interrupt, self._ended = threading.Event(), interrupt, False
        self._thread = threading.Thread(target=self._read, args=(reader,), name="ldpql-reader", daemon=True)
        self._thread.start()

    def _read(self, reader) -> None:
        last: object = None
        try:
            for batch in reader:
                if not self._put(batch):
                    return
        except BaseException as e:  # noqa: BLE001  (handed to the consuming thread, which raises it)
            last = e
        self._put(last)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        while (item := self._queue.get()) is not None:
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            yield item
        self._ended = True

    def close(self) -> None:
        """Wait for the reading thread; if the consumer stopped early, stop it and interrupt DuckDB first."""
        if not self._ended:
            self._stop.set()
            self._interrupt()
        self._thread.join()


def _split_by_cell(cell: np.ndarray, x: np.ndarray, rounds: dict[int, Round]):
    """Each cell's users of a batch, in row order (a counting sort: cells are small non-negative integers)."""
    if len(rounds) == 1:
        (only,) = rounds
        mask = cell == only
        yield only, x if mask.all() else x[mask]
        return
    sizes = np.bincount(cell)
    key = cell.astype(np.uint16) if len(sizes) <= 1 << 16 else cell  # numpy sorts 16-bit keys by radix
    xs = x[np.argsort(key, kind="stable")]
    ends = np.cumsum(sizes)
    for c in np.flatnonzero(sizes):
        if int(c) in rounds:
            yield int(c), xs[ends[c] - sizes[c]:ends[c]]


def _randomize_sum(r, xs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomize users in chunks of about REPORT_CELLS report values (bounded memory, cache-sized) and add
    up the chunks' summaries."""
    step = max(256, min(CHUNK_USERS, REPORT_CELLS // r.report_width))
    total = None
    for i in range(0, len(xs), step):
        s = r.aggregate(r.randomize(xs[i:i + step], rng))
        total = s if total is None else total + s
    return total if total is not None else r.aggregate(r.randomize(xs[:0], rng))


def _max_coverage(intervals: list[tuple[float, float, float]]) -> float:
    """The largest total ε over any point of [0, 1) covered by the half-open (u0, u1, ε) intervals: a sweep
    over their ends, O(k log k), so protocols with hundreds of rounds stay cheap to check."""
    spans = np.array([(a, b, e) for a, b, e in intervals if b > a], dtype=float).reshape(-1, 3)
    if not len(spans):
        return 0.0
    if np.isinf(spans[:, 2]).any():
        return float("inf")
    pos = np.concatenate([spans[:, 0], spans[:, 1]])
    step = np.concatenate([spans[:, 2], -spans[:, 2]])
    order = np.lexsort((step, pos))  # at one point, an interval that ends there is left before one starts
    return float(max(np.cumsum(step[order]).max(), 0.0))
