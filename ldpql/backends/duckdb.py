"""The embedded default backend: DuckDB reads the source, renders ldpql's expressions as SQL, and streams rows.

Users' keys (DESIGN §4.3): the lower 64 bits of the md5 of the privacy unit's text, or the row position in a
source whose rows keep their order: files, frames and stored tables are scanned in order (DuckDB's
``preserve_insertion_order``, which the connection sets), and a query or view source, whose row order DuckDB
may change from one scan to the next, is read once per statement into a snapshot by the connection. A slice
of the users is the portable :func:`ldpql.backends.base.slice_steps` over the key's 32-bit halves.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

import duckdb
import numpy as np
import pyarrow as pa

from ldpql import expr as E
from ldpql.backends.base import (UNIT_BATCH, Backend, Cell, Counts, Population, Slice, rows_of, slice_steps,
                                 value_order)
from ldpql.backends.sql import render
from ldpql.catalog import Table
from ldpql.errors import ExecuteError, InternalError
from ldpql.grammar.ast import quote_name

BATCH_ROWS = 1 << 20
QUEUE_BATCHES = 4               # Arrow batches read ahead of the randomizers (bounds memory)
CELLS = "__ldpql_cells"


def user_key_sql(table: Table, within_statement: bool = False) -> str | None:
    """ldpql's 64-bit identity of a user: the lower half of the md5 of its privacy unit's text, or its row
    position in a source whose rows keep their order; None when neither names a person. ``within_statement``:
    a key that only has to hold for one statement (a users split), where a query or view source's snapshot
    numbers its rows too (the ledger charges every user of such a source: its positions name nobody)."""
    if table.privacy_unit:
        return f"md5_number_lower(CAST({quote_name(table.privacy_unit)} AS VARCHAR))"
    stable = table.identity is None or table.identity.stable_rows
    return "row_number() OVER () - 1" if stable or (within_statement and table.source_kind == "snapshot") else None


class DuckDBBackend(Backend):
    """Reads declared sources through one DuckDB connection."""

    name = "duckdb"
    errors = (duckdb.Error,)

    def __init__(self, duck: duckdb.DuckDBPyConnection):
        self.duck = duck
        self._registered: tuple | None = None
        self._cell_keys: tuple | None = None

    # -- public facts ------------------------------------------------------------------------------------------
    def cells(self, pop: Population) -> list[Cell]:
        src = self._population(pop)
        if not pop.group_by:
            rows = self._fetch(pop.table, f"SELECT count(*) FROM ({src})")
            return [Cell((), int(rows[0][0]))]
        cols = ", ".join(quote_name(c) for c in pop.group_by)
        sql = f"SELECT {cols}, count(*) AS __n FROM ({src}) GROUP BY ALL ORDER BY ALL NULLS LAST"
        try:
            keys = self.duck.sql(sql).to_arrow_reader(BATCH_ROWS).read_all()
        except duckdb.Error as e:
            raise ExecuteError(f"DuckDB could not read `{pop.table.name}`: {str(e).splitlines()[0]}",
                               hint="check that the source still exists and that WHERE compares columns with "
                                    "values of their type") from None
        cells = [Cell(tuple(r[:-1]), int(r[-1])) for r in zip(*(keys.column(i).to_pylist()
                                                                 for i in range(keys.num_columns)))]
        # the keys as DuckDB typed them (HUGEINT, UBIGINT, ...), for the join of every round
        self._cell_keys = (pop.group_by, tuple(c.key for c in cells), keys.drop_columns(["__n"]))
        return cells

    def covered_users(self, pop: Population) -> np.ndarray | None:
        key = user_key_sql(pop.table)
        if pop.where is None or key is None:
            return None
        sql = (f"SELECT __ldpql_key FROM (SELECT *, {key} AS __ldpql_key FROM {pop.table.from_sql}) AS src "
               f"WHERE {render(pop.where)}")
        try:
            return self.duck.execute(sql).fetchnumpy()["__ldpql_key"].astype(np.uint64)
        except duckdb.Error as e:
            raise ExecuteError(f"DuckDB could not read `{pop.table.name}`: {str(e).splitlines()[0]}") from None

    # -- private reads -----------------------------------------------------------------------------------------
    def value_counts(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice,
                     where: E.Expr | None = None) -> Counts:
        rows = self.rows_sql(pop, cells, x, users, where)
        got = self.duck.execute(f"SELECT cell, x, count(*) AS n FROM ({rows}) GROUP BY ALL").fetchnumpy()
        if np.ma.isMaskedArray(got["x"]) and got["x"].mask.any():
            raise InternalError("an encoding produced NULL: encodings must be total")
        cell_of, xs, ns = np.asarray(got["cell"], dtype=np.int64), rows_of(got["x"]), np.asarray(got["n"], np.int64)
        out: Counts = {}
        for c in np.unique(cell_of):
            mine = cell_of == c
            order = value_order(xs[mine])
            out[int(c)] = (xs[mine][order], ns[mine][order])
        return out

    def keyed_values(self, pop: Population, cells: list[Cell], x: E.Expr,
                     where: E.Expr | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        key = user_key_sql(pop.table, within_statement=True)
        if key is None:
            return None
        rows = self.rows_sql(pop, cells, x, Slice(), where, key=key)
        got = self.duck.execute(rows).fetchnumpy()
        if np.ma.isMaskedArray(got["x"]) and got["x"].mask.any():
            raise InternalError("an encoding produced NULL: encodings must be total")
        return (np.asarray(got["cell"], dtype=np.int64), np.asarray(got["key"], dtype=np.uint64), rows_of(got["x"]))

    def batches(self, pop: Population, cells: list[Cell], x: E.Expr,
                users: Slice) -> Iterator[tuple[np.ndarray | None, np.ndarray]]:
        rows = self.rows_sql(pop, cells, x, users)
        query = rows if pop.group_by else f"SELECT x FROM ({rows})"   # one cell: no cell column to stream
        reader = _ReadAhead(self.duck.sql(query).to_arrow_reader(BATCH_ROWS), QUEUE_BATCHES, self.duck.interrupt)
        try:
            for batch in reader:
                xs = rows_of(batch.column(batch.num_columns - 1))
                yield (batch.column(0).to_numpy(zero_copy_only=False) if pop.group_by else None), xs
        finally:
            reader.close()

    def interrupt(self) -> None:
        self.duck.interrupt()

    # -- key-value statements ----------------------------------------------------------------------------------
    def units(self, pop: Population) -> int:
        unit = quote_name(pop.table.privacy_unit)
        return int(self._fetch(pop.table, f"SELECT count(DISTINCT {unit}) FROM ({self._population(pop)})")[0][0])

    def unit_rows(self, pop: Population, key: E.Expr, value: E.Expr) -> Iterator[tuple[np.ndarray, ...]]:
        """GROUP BY the unit's key with list() of the rows' key and value, streamed in Arrow batches of units."""
        sql = (f"SELECT {user_key_sql(pop.table)} AS u, list(CAST({render(key)} AS BIGINT)) AS k, "
               f"list(CAST({render(value)} AS DOUBLE)) AS v FROM ({self._population(pop)}) AS pop GROUP BY 1")
        reader = _ReadAhead(self.duck.sql(sql).to_arrow_reader(UNIT_BATCH), QUEUE_BATCHES, self.duck.interrupt)
        try:
            for batch in reader:
                keys = batch.column(1)
                sizes = keys.value_lengths().to_numpy(zero_copy_only=False)
                users = batch.column(0).to_numpy(zero_copy_only=False).astype(np.uint64)
                yield (np.repeat(users, sizes), keys.flatten().to_numpy(zero_copy_only=False).astype(np.int64),
                       batch.column(2).flatten().to_numpy(zero_copy_only=False).astype(float))
        finally:
            reader.close()

    # -- SQL -----------------------------------------------------------------------------------------------------
    def rows_sql(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice,
                 where: E.Expr | None = None, key: str | None = None) -> str:
        """``SELECT cell, x`` over the slice's users (and ``where``, over ``x``'s row); with ``key`` (the users' key
        SQL), ``SELECT cell, key, x`` over every user."""
        src = self._population(pop, users) if key is None else self._population(pop, keyed=key)
        cell = "0"
        if pop.group_by:
            self._register_cells(pop, cells)
            on = " AND ".join(f"src.{quote_name(g)} IS NOT DISTINCT FROM c.{quote_name(g)}" for g in pop.group_by)
            src = f"SELECT src.*, c.__cell FROM ({src}) AS src JOIN {CELLS} AS c ON {on}"
            cell = "__cell"
        cond = f" WHERE {render(where)}" if where is not None else ""
        keyed = "" if key is None else "__ldpql_key AS key, "
        return f"SELECT {cell} AS cell, {keyed}{render(x)} AS x FROM ({src}) AS pop{cond}"

    def _population(self, pop: Population, users: Slice = Slice(), keyed: str | None = None) -> str:
        """The users of a statement, the source's rows after the public WHERE, in the slice ``users``; with
        ``keyed`` (the users' key SQL), every user with the key as ``__ldpql_key``."""
        t = pop.table
        src = f"SELECT * FROM {t.from_sql}"
        if keyed is not None:   # numbered before the public WHERE, as a slice's rows are
            src = f"SELECT *, CAST({keyed} AS UBIGINT) AS __ldpql_key FROM {t.from_sql}"
        elif not users.everyone:
            key = user_key_sql(t, within_statement=True)
            if key is None:
                raise InternalError(f"`{t.name}` has no stable row order to key its users by")
            src = (f"SELECT *, CAST(__ldpql_key & 4294967295 AS BIGINT) AS __lo, CAST(__ldpql_key >> 32 AS BIGINT) "
                   f"AS __hi FROM (SELECT *, CAST({key} AS UBIGINT) AS __ldpql_key FROM {t.from_sql})")
            for name, step in slice_steps(users.salt):
                src = f"SELECT *, {render(step)} AS {name} FROM ({src})"
            src = f"SELECT * FROM ({src}) WHERE __u >= {users.u0!r} AND __u < {users.u1!r}"
        return f"SELECT * FROM ({src}) AS src" + (f" WHERE {render(pop.where)}" if pop.where is not None else "")

    def _register_cells(self, pop: Population, cells: list[Cell]) -> None:
        key = (pop.group_by, tuple(c.key for c in cells))
        if self._registered == key:
            return
        if self._cell_keys is not None and self._cell_keys[:2] == key:
            table = self._cell_keys[2]
        else:   # cells that this backend did not list (a caller's own): their keys as Python values
            keys = list(zip(*[c.key for c in cells])) if cells else [[] for _ in pop.group_by]
            table = pa.table({g: pa.array(list(k)) for g, k in zip(pop.group_by, keys)})
        self.duck.register(CELLS, table.append_column("__cell", pa.array(range(len(cells)), pa.int64())))
        self._registered = key

    def _fetch(self, table: Table, sql: str) -> list[tuple]:
        try:
            return self.duck.execute(sql).fetchall()
        except duckdb.Error as e:
            raise ExecuteError(f"DuckDB could not read `{table.name}`: {str(e).splitlines()[0]}",
                               hint="check that the source still exists and that WHERE compares columns with "
                                    "values of their type") from None


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
