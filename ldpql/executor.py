"""The one protocol driver (DESIGN §4.1-4.3): runs a Plan's protocols through a backend, round by round.

Every aggregate runs one protocol per GROUP BY cell. The driver advances all of them in lockstep: at each
step it gathers the rounds they yield, runs rounds that share an encoding and a user interval as one backend
read over all cells, and sends each protocol its reply. It knows no SQL: encodings are :mod:`ldpql.expr`
values that the backend (:mod:`ldpql.backends`) renders.

- Exact aggregate: the backend counts the users per value of the round's encoding (its *base*: the coin of a
  quantile, the lattice index of a minimum) over the aggregate's users, once per statement; every round is
  answered from those counts, each randomizer drawing its summary from the input histogram in closed form. A
  round that reaches a sub-interval of the aggregate's users (a quantile search's batch, a hierarchical level)
  is a random subset of them, independent of their values: it is drawn from the users not yet asked
  (:class:`ldpql.backends.memory.SlicedUsers`), the same law as the users a fresh hash would put there.
- Per user: the backend streams the users' inputs in batches (bounded memory), the driver randomizes every
  user and adds up the summaries batch by batch. Without a seed, a backend that can randomize users where it
  reads them (``randomized``: Spark's executors) does so and returns the summaries only.

Users are split among aggregates (a users split) by the backend's portable slice of their 64-bit keys under a
salt drawn from the statement's entropy. ``touched`` turns true just before the first read of a private value
(charge on touch). Before each round the driver checks that no user's ε, summed over the rounds it takes part
in, exceeds the plan.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ldpql import expr as E
from ldpql.backends.base import Backend, Cell, Counts, Population, Slice, sliced_counts, where_expr
from ldpql.backends.memory import SlicedUsers
from ldpql.errors import ExecuteError, InternalError
from ldpql.mechanisms import Estimate, Protocol, Reply, Round, add_virtual
from ldpql.planner import Plan

REPORT_CELLS = 1 << 20          # users x report width randomized at once (bounds memory; cache-sized chunks)
CHUNK_USERS = 1 << 16           # and at most this many users (narrow reports: smaller chunks stay in cache)
CANONICAL_ROWS = 1 << 16        # users per batch when a seeded run rebuilds them from value counts
KEYED_USERS = 4_000_000        # up to this many users an EVALUATE keeps their keys and values between its runs
CANONICAL_USERS = 1 << 27       # up to this many users a seeded run randomizes them in a fixed order (memory
                                # grows with a continuous column's distinct values); beyond, in the row order
PARTS = 2                       # each batch is randomized in PARTS slices, one Generator per slice (fixed, so
                                # results do not depend on the machine's core count)

Progress = Callable[[float, str], None]

__all__ = ["Cell", "Executor", "planned_rounds"]


@dataclass
class _Task:
    """One protocol in flight: aggregate ``agg`` on cell ``cell``."""

    agg: int
    cell: int
    gen: object
    round: Round | None = None
    result: Estimate | None = None
    spent: list[tuple[float, float, float]] = field(default_factory=list)  # (u0, u1, ε) of rounds it ran
    path: str | None = None   # 'exact' or 'per user': the path its sub-interval rounds take (one only)


class Executor:
    """Runs plans through one backend."""

    def __init__(self, backend: Backend, progress: Progress | None = None):
        self.backend = backend
        self.progress = progress
        self.touched = False
        self._at, self._planned = (0, 0, 1), 1   # (round, batch, batches in it) and the rounds planned (progress)
        self.cache: dict | None = None  # value counts kept across runs (EVALUATE repeats a statement)
        self.canonical = False          # per-user rounds from value counts in a fixed order (seeded runs)
        self.seeded = True              # False: no run has to be reproduced, so a backend that randomizes users
                                        # where it reads them (Spark's executors) may do so

    def run(self, plan: Plan, cells: list[Cell], entropy: int) -> dict[tuple[int, int], Estimate]:
        """Run every aggregate on every cell; returns {(aggregate index, cell index): Estimate}."""
        return self.finish(self.start(plan, cells), entropy)

    def start(self, plan: Plan, cells: list[Cell]) -> list[_Task]:
        """Build every cell's protocol and take it to its first round, without touching the data: a protocol
        that refuses its cell (too few users) raises here, before any budget is reserved."""
        self._plan, self._cells = plan, cells
        where = plan.statement.where
        self._pop = Population(plan.table, where_expr(where) if where is not None else None, tuple(plan.group_by))
        self.touched = False  # charge on touch: set just before the first read of a private value
        tasks = [_Task(a.index, c, a.protocol(cell.n)) for a in plan.aggregates for c, cell in enumerate(cells)]
        for t in tasks:
            self._advance(t, None)
        if plan.simulation == "exact":   # refused here, before any read, not after another aggregate's rounds
            # touched the data (audit 17: an LDP_AVG beside a quantile under simulation = 'exact' was charged)
            for t in tasks:
                if t.round is not None:
                    self._use_exact([t.round])
        return tasks

    def run_protocol(self, protocol: Protocol, rng: np.random.Generator, exact_positions: bool = False) -> Estimate:
        """One protocol over every user of the backend, at its own ε, randomness from ``rng``: the in-memory runs
        of tests and reproductions (:mod:`ldpql.simulation`), through the same round code as a statement's.
        ``exact_positions`` gives sub-intervals exactly round(n·length) users (a paper's batch sizes)."""
        self._pop = Population(None)
        self._cells = self.backend.cells(self._pop)
        self._counts, self._slices, self._users, self._salt, self._entropy = {}, {}, {}, 0, None
        self._users_rng, self._exact_positions = rng, exact_positions
        t = _Task(0, 0, protocol)
        self._advance(t, None)
        while t.result is None:
            r = t.round
            if r.randomizer.exact and r.encoding.size is not None:
                reply = self._exact([t], Slice(), rng)[0]
            else:
                reply = self._per_user(Slice(*r.users), {0: r}, rng, "protocol", 0)[0]
            self._advance(t, add_virtual(r, reply, rng))
        return t.result

    def finish(self, tasks: list[_Task], entropy: int) -> dict[tuple[int, int], Estimate]:
        """Run the started protocols to their estimates, with randomness from ``entropy``."""
        self._started, self._salt, self._entropy = time.monotonic(), entropy % (1 << 62), entropy
        self._cell_spent: dict[int, list] = {}
        self._counts = self.cache if self.cache is not None else {}  # rounds sharing a base share one read
        self._slices: dict = {}   # this run's slices' counts: their salt is the run's, so EVALUATE keeps none
        self._users: dict[tuple[int, int], SlicedUsers] = {}
        self._users_rng, self._exact_positions = None, False
        return self._loop(self._plan, tasks, entropy)

    def _loop(self, plan: Plan, tasks: list[_Task], entropy: int) -> dict[tuple[int, int], Estimate]:
        step, self._planned = 0, planned_rounds(plan)
        while pending := [t for t in tasks if t.result is None]:
            self._check_spend(plan, pending)
            seen: dict[int, int] = {}
            batches = _batches(pending)
            for b, (key, group) in enumerate(batches.items()):
                self._at = (step, b, len(batches))   # where the progress display is in the planned schedule
                k = seen[key[0]] = seen.get(key[0], -1) + 1  # batches of one aggregate in one step: own streams
                # tagged keys: a round's (0, agg, step, k) can equal neither another round's nor a child of one
                # (the per-user parts spawn (0, agg, step, k, p)) nor a task's user draws (1, agg, cell)
                spawn = (0, key[0], step, k)
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
        exact = self._use_exact(list(rounds.values()))
        self._report(f"{a.output}: round {step + 1} ({'exact aggregate' if exact else 'per user'})")
        self.touched = True
        if group[0].round.users != (0.0, 1.0):
            self._one_path(group, "exact" if exact else "per user")
        try:
            if exact:
                replies = self._exact(group, Slice(*a.users, self._salt), rng)
            else:
                users = Slice(*self._interval(a.users, group[0].round.users), self._salt)
                replies = self._per_user(users, rounds, rng, a.output, step)
        except self.backend.errors as e:
            raise ExecuteError(f"{self.backend.name} failed while running {a.output}: {str(e).splitlines()[0]}",
                               hint="nothing was spent; check the data source") from None
        return {c: add_virtual(rounds[c], r, rng) for c, r in replies.items()}

    def _one_path(self, group: list[_Task], path: str) -> None:
        """A task's sub-interval rounds all take one path: the exact path draws a part's users from counts, the
        per-user path takes them by the hash, and the two are different partitions of the same users."""
        for t in group:
            if t.path not in (None, path):
                raise InternalError(f"{self._plan.aggregates[t.agg].output}: sub-interval rounds on both the exact "
                                    "and the per-user path would reach some users twice")
            t.path = path

    def _use_exact(self, rounds: list[Round]) -> bool:
        mode = self._plan.simulation
        available = all(r.randomizer.exact and r.encoding.size is not None for r in rounds)
        if mode == "exact" and not available:
            names = sorted({r.randomizer.name for r in rounds})
            raise ExecuteError(f"{', '.join(names)} has no exact-aggregate path",
                               hint="use OPTIONS (simulation = 'per_user') or 'auto'")
        return available and mode != "per_user"

    def _counter(self, share: Slice) -> Callable[..., Counts]:
        """Value counts over the aggregate's users ``share``, each (expression, condition) read once per run (and
        across EVALUATE's runs when the users are everyone, whose counts do not depend on the salt)."""
        cells, users = self._cells, (share if not share.everyone else None)

        kept = self._counts if users is None else self._slices   # (audit 20: EVALUATE kept every run's slices)

        def counts(x: E.Expr, where: E.Expr | None = None) -> Counts:
            key = (x, where, users)
            if key not in kept:
                keyed = self._keyed(x, where) if users is not None else None
                kept[key] = (sliced_counts(keyed, share) if keyed is not None else
                             self.backend.value_counts(self._pop, cells, x, share, where))
            return kept[key]
        counts.memo = kept.setdefault(("memo", users), {})   # an encoding's own state over these users
        return counts

    def _keyed(self, x: E.Expr, where: E.Expr | None):
        """Every user's (cell, key, x), read once across EVALUATE's runs, whose users splits draw other slices each
        run (a slice's counts from them in numpy: 3-20x faster than a query per slice); None outside EVALUATE, for
        more than KEYED_USERS users, or where the backend does not offer them."""
        if self.cache is None or self._plan.n > KEYED_USERS:
            return None
        key = ("keyed", x, where)
        if key not in self._counts:
            self._counts[key] = self.backend.keyed_values(self._pop, self._cells, x, where)
        return self._counts[key]

    def _exact(self, group: list[_Task], share: Slice, rng: np.random.Generator) -> dict[int, Reply]:
        """Every cell's reply from its input histogram: the encoding's counts over the aggregate's users, or over
        the round's random subset of them (a sub-interval)."""
        first = group[0].round
        counter = self._counter(share)
        if first.users == (0.0, 1.0):
            hists = self.backend.histograms(first.encoding, counter, [t.cell for t in group])
        else:
            hists = {t.cell: self._sliced(t, counter).counts(t.round.encoding, t.round.users) for t in group}
        out = {}
        for t in group:
            r = t.round
            h = hists.get(t.cell)
            h = np.zeros(r.encoding.size, dtype=np.int64) if h is None else h
            out[t.cell] = Reply(r.randomizer.sample_aggregate(h, rng), int(h.sum()))
        return out

    def _sliced(self, t: _Task, counter: Callable[..., Counts]) -> SlicedUsers:
        """The users of task ``t`` (one aggregate on one cell) as one value-count table, from which each
        sub-interval round draws its users without replacement (disjoint rounds reach disjoint users)."""
        base = t.round.encoding.base
        users = self._users.get((t.agg, t.cell))
        if users is None:
            values, counts = counter(base).get(t.cell, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            rng = self._users_rng or np.random.default_rng(np.random.SeedSequence(self._entropy,
                                                                                  spawn_key=(1, t.agg, t.cell)))
            users = self._users[(t.agg, t.cell)] = SlicedUsers(base, values, counts, rng, self._exact_positions)
        elif users.base != base:   # another base for the same users would need their joint counts
            raise InternalError("a protocol asked sub-intervals of its users about two different encodings")
        return users

    def _per_user(self, users: Slice, rounds: dict[int, Round], rng: np.random.Generator, label: str,
                  step: int) -> dict[int, Reply]:
        """Stream the users' inputs in batches and randomize every user, PARTS slices of a batch in parallel.

        Slice p of every batch draws from its own Generator, spawned from the round's: the draws depend only on
        the seed, the row order and the backend's batch size, not on thread timing. The backend reads ahead in
        a thread of its own (bounded), and worker threads randomize (numpy releases the GIL).
        """
        remote = getattr(self.backend, "randomized", None)
        if remote is not None and not self.seeded:   # its draws follow the partitioning: unseeded runs only
            seq = rng.bit_generator.seed_seq
            got = remote(self._pop, self._cells, next(iter(rounds.values())).encoding.expr, users,
                         {c: r.randomizer for c, r in rounds.items()}, seq.entropy, tuple(seq.spawn_key))
            return {c: Reply(s, n) for c, (s, n) in got.items()}
        seeds = rng.bit_generator.seed_seq.spawn(PARTS)
        gens = [np.random.Generator(np.random.SFC64(s)) for s in seeds]
        sums: dict[int, np.ndarray] = {}
        counts = dict.fromkeys(rounds, 0)
        total = sum(self._cells[c].n for c in rounds) or 1
        done = 0
        enc = next(iter(rounds.values())).encoding

        def work(part: int, items: list[tuple[int, np.ndarray]]) -> list[tuple[int, np.ndarray]]:
            return [(c, _randomize_sum(rounds[c].randomizer, xs, gens[part])) for c, xs in items]

        def collect(futures) -> None:
            for f in futures:
                for c, s in f.result():
                    sums[c] = s if c not in sums else sums[c] + s

        pending = []
        only = next(iter(rounds))
        with ThreadPoolExecutor(max_workers=max(1, min(PARTS, os.cpu_count() or 1))) as pool:
            try:
                rows = (self._from_counts(enc.expr, users) if self.canonical else
                        self.backend.batches(self._pop, self._cells, enc.expr, users))
                for cell_of, xs in rows:
                    items = [(only, xs)] if cell_of is None else list(_split_by_cell(cell_of, xs, rounds))
                    collect(pending)  # the previous batch: each Generator is used by one slice at a time
                    pending = [pool.submit(work, p, [(c, x[len(x) * p // PARTS:len(x) * (p + 1) // PARTS])
                                                     for c, x in items]) for p in range(PARTS)]
                    for c, x in items:
                        counts[c] += len(x)
                    done += len(xs)
                    self._report(f"{label}: round {step + 1} (per user)", done / total)
                collect(pending)
            finally:
                for f in pending:
                    f.cancel()
        return {c: Reply(sums[c] if c in sums else _randomize_sum(rounds[c].randomizer, np.zeros(0, np.int64),
                                                                  gens[0]), counts[c]) for c in rounds}

    def _from_counts(self, x: E.Expr, users: Slice):
        """The users' inputs rebuilt from their value counts, cell by cell and value by value: what a seeded run
        randomizes, so that its answer depends on the data and the seed alone, not on the order in which a
        backend reads or partitions the rows (the same answer on every backend). Read once per run (across
        EVALUATE's runs where the users are everyone), as the exact path reads them."""
        counts = self._counter(users)(x)
        for cell in sorted(counts):
            values, n = counts[cell]
            xs = np.repeat(values, n, axis=0)   # (the rows of a Vector encoding stay rows)
            for i in range(0, len(xs), CANONICAL_ROWS):
                part = xs[i:i + CANONICAL_ROWS]
                yield (np.full(len(part), cell, dtype=np.int64) if self._pop.group_by else None), part

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
    """Rounds that can share one backend read: same aggregate, same encoding, same users."""
    out: dict[tuple, list[_Task]] = {}
    for t in pending:
        out.setdefault((t.agg, t.round.encoding.expr, t.round.users), []).append(t)
    return out


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
