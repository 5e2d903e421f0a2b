"""Apache Spark as a backend: the same statements over data that Spark reads (DESIGN §4.2, "Backends").

Sources are files or globs, read by their extension (parquet; CSV, TSV and text as CSV; JSON lines or arrays),
exactly the files DuckDB's glob lists (the files the ledger's identity is); or a frame registered with
:meth:`SparkBackend.register`. Catalog tables are refused: the ledger binds a table source to DuckDB's relation of
that name, which Spark's catalog may not be.
Encodings are :mod:`ldpql.expr` values rendered in Spark SQL (:class:`SparkDialect`); value counts are one Spark
SQL aggregate; per-user rounds run the randomizers on the executors (``mapInArrow``), each partition returning
its partial summaries, which the driver adds up. The planner and the ledger stay on the driver.

Users' keys are DuckDB's, bit for bit (DESIGN §4.3), so that slices, round groups and ledger charges agree:

- with a privacy unit, the key is bytes 8-15 of the md5 digest of the unit's text read little-endian (DuckDB's
  ``md5_number_lower(CAST(unit AS VARCHAR))``); Spark computes its two 32-bit halves from the hex digest;
- without one, the key is the row's position in the source as DuckDB reads it: files in the glob's sorted
  order, rows in file order. Spark splits files into blocks and packs blocks into partitions in its own order,
  so the position is rebuilt: one small aggregate counts the rows of every (file, block) and finds the first
  ``monotonically_increasing_id`` in it (ids are consecutive within a block), the driver turns the counts into
  each block's first position, and a broadcast join adds that offset to every row's id.

A slice of the users is :func:`ldpql.backends.base.slice_steps` over the key's halves, as chained projections.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

import duckdb
import numpy as np

from ldpql import expr as E
from ldpql.backends.base import (UNIT_BATCH, Backend, Cell, Counts, Population, Slice, rows_of, slice_steps,
                                 value_order)
from ldpql.backends.sql import Dialect, render
from ldpql.catalog import Table
from ldpql.errors import ExecuteError, InternalError
from ldpql.sources import matched_files

BATCH_ROWS = 1 << 20            # rows per batch handed to the driver (DuckDB's batch size: same batches, same draws)
CHUNK_USERS = 1 << 16           # users randomized at once on an executor (bounds its memory)
REPORT_CELLS = 1 << 20          # and at most this many report values (wide reports: fewer users at once)
MASK32 = (1 << 32) - 1
_CSV = re.compile(r"\.(csv|tsv|txt)(\.gz|\.zst)?$", re.IGNORECASE)
_JSON = re.compile(r"\.(json|jsonl|ndjson)(\.gz)?$", re.IGNORECASE)
_DUCKDB_COLUMN = re.compile(r"^column\d+$")     # DuckDB's names for the columns of a CSV without a header


# ---- the dialect -------------------------------------------------------------------------------------------------

class SparkDialect(Dialect):
    """Spark SQL's spelling of ldpql's expressions.

    Where Spark's semantics differ from DuckDB's, the rendering restores DuckDB's: CAST to an integer rounds half
    to even (``bround``) as DuckDB does, where Spark would truncate; ``floor``/``ceil`` of a DOUBLE stay DOUBLE
    (Spark returns BIGINT and fails on ±inf); a missing list position is NULL (Spark says 0); TRY_CAST reads
    '1.5' and '1e3' as integers and does not trim text before reading a boolean; ``isnan(NULL)`` is NULL; x/0 is
    ±inf. Integer division and remainder by zero give NULL, where DuckDB raises (never under ANSI mode either:
    encodings divide only by non-zero constants).
    """

    TYPES: ClassVar[dict[str, str]] = {"VARCHAR": "STRING", "TEXT": "STRING", "STRING": "STRING", "INTEGER": "INT", "INT4": "INT",
             "INT8": "BIGINT", "HUGEINT": "DECIMAL(38,0)", "UBIGINT": "DECIMAL(20,0)", "UINTEGER": "BIGINT",
             "USMALLINT": "INT", "UTINYINT": "SMALLINT", "REAL": "FLOAT", "FLOAT4": "FLOAT", "FLOAT8": "DOUBLE",
             "TIMESTAMP": "TIMESTAMP_NTZ", "DATETIME": "TIMESTAMP_NTZ", "TIMESTAMP WITH TIME ZONE": "TIMESTAMP",
             "TIMESTAMPTZ": "TIMESTAMP", "BOOL": "BOOLEAN"}
    INTEGERS: ClassVar[frozenset[str]] = frozenset({"BIGINT", "INT", "SMALLINT", "TINYINT"})
    EXACT = 4503599627370496.0   # 2^52: every DOUBLE at least this large is an integer already

    def name(self, column: str) -> str:
        return "`" + column.replace("`", "``") + "`"

    def string(self, value: str) -> str:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"   # Spark reads backslash escapes

    def type(self, name: str) -> str:
        return self.TYPES.get(" ".join(name.upper().split()), name)

    def literal(self, v: Any) -> str:
        if isinstance(v, float):   # Spark reads 0.5 as a DECIMAL: the D suffix keeps DuckDB's DOUBLE arithmetic
            if math.isfinite(v):
                return f"{v!r}D"
            return f"CAST('{'NaN' if math.isnan(v) else ('Infinity' if v > 0 else '-Infinity')}' AS DOUBLE)"
        return super().literal(v)

    spelled: ClassVar[dict] = {"^": lambda a, b: f"({a} ^ {b})", ">>": lambda a, b: f"shiftright({a}, {b})",
               "//": lambda a, b: f"({a} div nullif({b}, 0))", "/": lambda a, b: SPARK.divide(a, b),
               "%": lambda a, b: f"try_mod({a}, {b})"}

    def position(self, values: tuple, arg: str) -> str:
        items = ", ".join(self.literal(v) if isinstance(v, str) else self.literal(float(v)) for v in values)
        return f"nullif(array_position(array({items}), {arg}), 0)"

    def try_cast(self, arg: str, type_name: str) -> str:
        t = self.type(type_name)
        if t in self.INTEGERS:   # DuckDB reads '1.5' and '1e3' as integers (rounded), and rounds a DOUBLE half-even
            return (f"(CASE WHEN typeof({arg}) = 'string' THEN coalesce(try_cast({arg} AS {t}), "
                    f"try_cast(round(try_cast({arg} AS DOUBLE)) AS {t})) WHEN typeof({arg}) IN ('double', 'float') "
                    f"THEN try_cast(bround({arg}) AS {t}) ELSE try_cast({arg} AS {t}) END)")
        if t == "BOOLEAN":       # Spark trims the text first, DuckDB does not
            return (f"(CASE WHEN typeof({arg}) = 'string' AND {arg} <> trim({arg}) THEN NULL "
                    f"ELSE try_cast({arg} AS BOOLEAN) END)")
        return f"try_cast({arg} AS {t})"

    def cast(self, arg: str, type_name: str) -> str:
        t = self.type(type_name)
        return f"CAST(bround({arg}) AS {t})" if t in self.INTEGERS else f"CAST({arg} AS {t})"

    def divide(self, a: str, b: str) -> str:
        """IEEE division, as DuckDB's: x/0 is ±inf (NaN for 0/0) where Spark gives NULL or fails under ANSI."""
        return f"(CASE WHEN {b} = 0 THEN {a} * CAST('Infinity' AS DOUBLE) ELSE try_divide({a}, {b}) END)"

    def call(self, func: str, args: list[str]) -> str:
        if func in ("floor", "ceil") and len(args) == 1:
            x = args[0]
            return (f"(CASE WHEN typeof({x}) IN ('double', 'float') AND NOT (abs({x}) < {self.EXACT!r}D) THEN {x} "
                    f"WHEN typeof({x}) IN ('double', 'float') THEN CAST({func}({x}) AS DOUBLE) ELSE {func}({x}) END)")
        if func == "isnan" and len(args) == 1:   # Spark's isnan(NULL) is false, DuckDB's NULL; in Spark NaN = NaN
            return f"({args[0]} = CAST('NaN' AS DOUBLE))"
        return f"{func}({', '.join(args)})"


SPARK = SparkDialect()


def render_spark(e: E.Expr) -> str:
    """Spark SQL text of ``e``: :func:`ldpql.backends.sql.render` with :class:`SparkDialect`, except for CAST and
    the function calls, whose semantics the dialect adjusts (the shared renderer spells them verbatim)."""
    r = render_spark
    if isinstance(e, E.Cast):
        return SPARK.cast(r(e.arg), e.type)
    if isinstance(e, E.Call):
        return SPARK.call(e.func, [r(a) for a in e.args])
    if isinstance(e, E.TryCast):
        return SPARK.try_cast(r(e.arg), e.type)
    if isinstance(e, E.Position):
        return SPARK.position(e.values, r(e.arg))
    if isinstance(e, E.Vector):
        return f"array({', '.join(r(x) for x in e.items)})"
    if isinstance(e, E.BinOp):
        left, right = r(e.left), r(e.right)
        if e.op == "/" and _nonzero_constant(e.right):
            return f"try_divide({left}, {right})"
        return SPARK.spelled[e.op](left, right) if e.op in SPARK.spelled else f"({left} {e.op} {right})"
    if isinstance(e, E.Logic):
        return "(" + f" {e.op} ".join(r(a) for a in e.args) + ")"
    if isinstance(e, E.Not):
        return f"(NOT {r(e.arg)})"
    if isinstance(e, E.IsNull):
        return f"({r(e.arg)} IS {'NOT ' if e.negated else ''}NULL)"
    if isinstance(e, E.In):
        return f"({r(e.arg)} {'NOT ' if e.negated else ''}IN ({', '.join(r(v) for v in e.values)}))"
    if isinstance(e, E.Case):
        return f"CASE WHEN {r(e.when)} THEN {r(e.then)} ELSE {r(e.otherwise)} END"
    return render(e, SPARK)   # Column, Literal


def _nonzero_constant(e: E.Expr) -> bool:
    while isinstance(e, E.Cast):
        e = e.arg
    return isinstance(e, E.Literal) and isinstance(e.value, int | float) and not isinstance(e.value, bool) \
        and e.value != 0 and not math.isnan(e.value)


# ---- users' keys -------------------------------------------------------------------------------------------------

KEYABLE_UNITS = SparkDialect.INTEGERS | {   # unit types whose text Spark writes as DuckDB does (and DECIMAL(p, s))
    "INTEGER", "HUGEINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT", "VARCHAR", "TEXT", "STRING", "DATE",
    "TIMESTAMP", "BOOLEAN"}


def _aware(v):
    """A TIMESTAMP WITH TIME ZONE key as DuckDB gives it, time-zone aware: PySpark hands a TimestampType value
    over naive, in the driver's local time."""
    return v.astimezone() if v is not None else None


def _keyable_unit(t: Table) -> str:
    """The privacy unit's column, where Spark writes its values' text as DuckDB does (the key is the md5 of that
    text: another text would be another user, and the per-user budget spent twice across backends, audit5 F3);
    DOUBLE, FLOAT, TIMESTAMP WITH TIME ZONE and BLOB units, whose text differs, are refused."""
    col = next((c for c in t.columns.values() if c.name.lower() == t.privacy_unit.lower()), None)
    dtype = col.dtype.upper() if col is not None else ""
    if dtype not in KEYABLE_UNITS and not dtype.startswith("DECIMAL"):
        raise ExecuteError(f"the Spark backend cannot key `{t.name}`'s users by `{t.privacy_unit}` ({dtype or '?'}): "
                           "Spark writes such values as other text than DuckDB, so users would get other keys",
                           hint="use an integer or text privacy unit, or run this table on DuckDB")
    return t.privacy_unit


def unit_halves_sql(unit: str) -> tuple[str, str, str]:
    """(digest, low half, high half) Spark SQL of a privacy unit's key: the md5 hex digest of its text, then the
    little-endian 32-bit words of digest bytes 8-11 and 12-15 as BIGINTs (``digest`` names the first column). A
    unit Spark reads as NULL where DuckDB read a value (a CSV text the two convert differently, audit5 F5) fails
    the job rather than get a made-up key."""
    name = SPARK.name(unit)
    digest = (f"CASE WHEN {name} IS NULL THEN raise_error('a privacy unit Spark cannot read') "
              f"ELSE md5(CAST({name} AS STRING)) END")

    def word(first_byte: int) -> str:   # hex chars of byte b are at 1-based 2b+1; little-endian: last byte first
        parts = ", ".join(f"substr(__md5, {2 * b + 1}, 2)" for b in range(first_byte + 3, first_byte - 1, -1))
        return f"CAST(conv(concat({parts}), 16, 10) AS BIGINT)"
    return digest, word(8), word(12)


def _local_path(uri: str) -> str:
    """The path of a ``file:`` URI as DuckDB's glob names it (other schemes keep their text)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("", "file") else uri


def _files_state(df) -> tuple:
    """The files a DataFrame reads, with size and modification time where they are local: what the cached
    block offsets of :meth:`SparkBackend._positions` depend on."""
    out = []
    for uri in sorted(df.inputFiles()):
        try:
            st = os.stat(_local_path(uri))
            out.append((uri, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((uri, None, None))
    return tuple(out)


def _json_arrays(table: Table, files: list[str]) -> bool:
    """Whether the files hold one JSON array each (DuckDB reads both; Spark needs to be told), judged by their
    first non-blank byte; refused when a glob mixes the two."""
    def first(f: str) -> bytes:
        with open(f, "rb") as fh:
            return fh.read(4096).lstrip()[:1]
    arrays = {first(f) == b"[" for f in files if os.path.isfile(f)}
    if len(arrays) > 1:
        raise ExecuteError(f"`{table.name}` mixes JSON array files and JSON-lines files, which Spark reads apart",
                           hint="declare each kind as its own table")
    return arrays == {True}


def _check_reads_exactly(table: Table, files: list[str], df) -> None:
    """Refuse when Spark would read other files than the declared ones: it skips names that begin with '_' or
    '.', which DuckDB reads; other rows under this table's budget, or users keyed by other positions, would
    break the ledger's per-user accounting."""
    got = {os.path.realpath(_local_path(u)) for u in df.inputFiles()}
    want = {os.path.realpath(f) for f in files}
    if got != want:
        skipped = sorted(os.path.basename(f) for f in want - got)[:3]
        raise ExecuteError(f"Spark would not read exactly the files `{table.name}` is declared over"
                           + (f" (it skips {', '.join(skipped)})" if skipped else ""),
                           hint="Spark ignores files whose names begin with '_' or '.': rename them, or run "
                                "this table on DuckDB")


# ---- the session -------------------------------------------------------------------------------------------------

def unavailable() -> str | None:
    """Why Spark cannot run here (pyspark missing, or no Java), or None when it can."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'ldpql[spark]')"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "Spark needs Java 17 or later, and neither JAVA_HOME nor `java` on PATH was found"
    return None


def local_session(master: str = "local[2]", driver_memory: str = "1g", java_options: str = ""):
    """A small Spark session for one machine (no web UI, few shuffle partitions, quiet logs). ``java_options``: the
    driver JVM's extra options, e.g. "-XX:TieredStopAtLevel=1" (the quick JIT only: about half the JVM's CPU and
    start-up time on small work such as the test suite's, slower on long jobs)."""
    why = unavailable()
    if why is not None:
        raise ExecuteError(f"the Spark backend cannot start: {why}")
    import signal
    import threading

    from pyspark.sql import SparkSession
    main = threading.current_thread() is threading.main_thread()
    ctrl_c = signal.getsignal(signal.SIGINT) if main else None
    spark = (SparkSession.builder.master(master).appName("ldpql")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", driver_memory)
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.extraJavaOptions", java_options)
             .getOrCreate())
    if main and ctrl_c is not None:   # pyspark installs its own Ctrl-C handler; ldpql's interrupt cancels our jobs
        signal.signal(signal.SIGINT, ctrl_c)
    spark.sparkContext.setLogLevel("FATAL")
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):   # an error is ours to report, once
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return spark


def session_for(master: str = "local[2]"):
    """(a session on ``master``, whether it was started here): an active session in this process is reused (and
    must then be left running), else :func:`local_session` starts one."""
    why = unavailable()
    if why is not None:
        raise ExecuteError(f"the Spark backend cannot start: {why}", hint="pip install 'ldpql[spark]' and Java 17+")
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    return (active, False) if active is not None else (local_session(master), True)


# ---- the backend -------------------------------------------------------------------------------------------------

class SparkBackend(Backend):
    """Reads declared sources through one SparkSession.

    Args:
        spark: the session (see :func:`local_session`).
        partitions: if set, the population is repartitioned into this many partitions after the users' keys are
            computed (more parallelism for the per-user path; answers do not depend on it).
        owns_session: :meth:`stop` stops the session (one the connection started).
    """

    name = "spark"

    def __init__(self, spark, partitions: int | None = None, owns_session: bool = False):
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
        self.spark = spark
        self.partitions, self.owns_session = partitions, owns_session
        self.errors = (PySparkException, Py4JError)
        self._frames: dict[str, Any] = {}
        self._offsets: dict[tuple, Any] = {}
        self._tag = f"ldpql-{id(self):x}"

    # -- sources ---------------------------------------------------------------------------------------------
    def register(self, name: str, data: Any) -> None:
        """Make a pandas DataFrame, an Arrow table or a Spark DataFrame the source of the frame table ``name``.
        A local frame keeps its row order (a row's position is its user's key); a Spark DataFrame has none."""
        import pyarrow as pa
        if hasattr(data, "sparkSession"):
            self._frames[name.lower()] = (data, False)
            return
        table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(data, preserve_index=False)
        table = table.append_column("__ldpql_row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
        self._frames[name.lower()] = (self.spark.createDataFrame(table), True)

    def source(self, table: Table, positions: bool = False):
        """(the declared source's rows as Spark reads them, whether they carry ``__pos``, each row's position as
        DuckDB reads it). Positions cost one more (small) job per source and backend: asked only where needed."""
        kind = table.source_kind
        if kind == "frame":
            got = self._frames.get(table.name.lower())
            if got is None:
                raise ExecuteError(f"frame `{table.name}` is not registered with the Spark backend",
                                   hint="register it with the Spark connection before querying it")
            df, ordered = got
            return (df.withColumnRenamed("__ldpql_row", "__pos"), True) if ordered else (df, False)
        if kind == "file":
            raw = self._read_file(table)
        elif kind == "table":   # the ledger's identity is DuckDB's relation of that name, not Spark's (audit5 F4)
            raise ExecuteError(f"`{table.name}` is declared over a table, which the Spark backend does not read: "
                               "Spark's catalog may name another relation than the one the budget is bound to",
                               hint="declare the table's files by path (spark.table(name).inputFiles() lists them)")
        else:   # a query in DuckDB's SQL, or the snapshot DuckDB made of it
            raise ExecuteError(f"the Spark backend reads files, globs, frames and catalog tables; `{table.name}` is "
                               f"declared from a query", hint="write the query's result to parquet and declare the "
                                                              "table from that file")
        return self._positions(table, raw) if positions else (self._typed(table, raw), False)

    def _read_file(self, table: Table):
        """The declared files, exactly: the list DuckDB's glob gives (the files the ledger's identity is), read by
        name, never by pattern (Spark's globs are not recursive and read the directories they match). CSV is read
        as DuckDB reads it (RFC 4180: a quote escapes a quote, quoted fields may hold newlines); JSON as lines,
        or as one array per file where the files are arrays; a malformed JSON record fails the read."""
        files = matched_files(table.source_text, duckdb.connect())   # DuckDB's glob decides what a pattern names
        reader, path = self.spark.read, table.source_text
        if _CSV.search(path):
            header = not all(_DUCKDB_COLUMN.match(c) for c in table.columns)
            sep = "\t" if re.search(r"\.tsv", path, re.IGNORECASE) else ","
            df = reader.options(header=header, sep=sep, inferSchema=False, multiLine=True, escape='"',
                                quote='"').csv(files)   # text: typed below
        elif _JSON.search(path):
            df = reader.options(multiLine=_json_arrays(table, files), mode="FAILFAST").json(files)
        else:
            df = reader.parquet(*files)
        _check_reads_exactly(table, files, df)
        return df
    def _typed(self, table: Table, df):
        """A CSV's text fields converted to the types DuckDB inferred for them (a value that does not convert is
        NULL, as in DuckDB's total CSV read): the same public columns and the same values on both engines."""
        if not _CSV.search(table.source_text) or table.source_kind != "file":
            return df
        declared = {c.name.lower(): c.dtype for c in table.columns.values()}
        cols = [f"{SPARK.try_cast(SPARK.name(c), declared[c.lower()])} AS {SPARK.name(c)}"
                if c.lower() in declared and not c.startswith("__") else SPARK.name(c) for c in df.columns]
        return df.selectExpr(*cols)

    def _positions(self, table: Table, raw):
        """The source with each row's position as DuckDB reads it (see the module's docstring)."""
        from pyspark.sql import functions as F
        try:
            df = raw.select("*", F.col("_metadata.file_path").alias("__file"),
                            F.col("_metadata.file_block_start").alias("__block"),
                            F.monotonically_increasing_id().alias("__mid"))
        except self.errors:   # not read from files: no row order to key users by
            return self._typed(table, raw), False
        df = self._typed(table, df)
        key = (table.source_kind, table.source_text, _files_state(raw))   # files changed: positions again
        offsets = self._offsets.get(key)
        if offsets is None:
            blocks = (df.groupBy("__file", "__block").agg(F.min("__mid").alias("first"), F.count("*").alias("n"))
                      .collect())
            blocks.sort(key=lambda r: (_local_path(r["__file"]), r["__block"]))
            starts = np.concatenate([[0], np.cumsum([r["n"] for r in blocks])[:-1]]) if blocks else []
            rows = [(r["__file"], r["__block"], int(s) - int(r["first"])) for r, s in zip(blocks, starts)]
            offsets = self._offsets[key] = self.spark.createDataFrame(
                rows, "__file string, __block bigint, __delta bigint")
        joined = df.join(F.broadcast(offsets), ["__file", "__block"])
        return joined.withColumn("__pos", F.col("__mid") + F.col("__delta")).drop("__file", "__block", "__mid",
                                                                                    "__delta"), True

    # -- populations -----------------------------------------------------------------------------------------
    def _population(self, pop: Population, users: Slice | None = None, keys: bool = False,
                    positions: bool = False):
        """The users of a statement: the source's rows after the public WHERE, in the slice ``users``; with
        ``__lo``/``__hi`` (the key's halves) when ``keys``, and ``__pos`` when ``positions`` and the source has
        row positions. Returns (rows, whether they carry ``__pos``)."""
        from pyspark.sql import functions as F
        t, users = pop.table, users or Slice()
        keys = keys or not users.everyone
        by_position = keys and not t.privacy_unit
        df, ordered = self.source(t, positions or by_position)
        if by_position and not (ordered and (t.identity is None or t.identity.stable_rows)):
            raise InternalError(f"`{t.name}` has no stable row order to key its users by")
        if keys and t.privacy_unit:
            digest, lo, hi = unit_halves_sql(_keyable_unit(t))
            df = df.withColumn("__md5", F.expr(digest)).withColumn("__lo", F.expr(lo)).withColumn(
                "__hi", F.expr(hi)).drop("__md5")
        elif keys:
            df = df.withColumn("__lo", F.col("__pos").bitwiseAND(F.lit(MASK32))).withColumn(
                "__hi", F.shiftright(F.col("__pos"), 32))
        if not users.everyone:
            for name, step in slice_steps(users.salt):
                # Each step uses earlier ones twice. Spark pushes a filter through deterministic projections by
                # inlining them, which would copy the chain 2^12 times (a plan of megabytes, heap exhausted);
                # a nondeterministic zero added to the last step (exact: __u >= 0) keeps the filter above it.
                text = render_spark(step) + (" + 0 * spark_partition_id()" if name == "__u" else "")
                df = df.withColumn(name, F.expr(text))
            df = df.where((F.col("__u") >= F.lit(float(users.u0))) & (F.col("__u") < F.lit(float(users.u1))))
        if pop.where is not None:
            df = df.where(F.expr(render_spark(pop.where)))
        if self.partitions:
            df = df.repartition(self.partitions)
        return df, ordered

    def _rows(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice, where: E.Expr | None = None,
              positions: bool = False):
        """``cell, x`` (and ``__pos`` when ``positions`` and the source has them) over the slice's users,
        ``where`` narrowing them."""
        from pyspark.sql import functions as F
        df, ordered = self._population(pop, users, positions=positions)
        cell = F.lit(0).cast("long")
        if pop.group_by:
            df = df.join(F.broadcast(self._cells_frame(pop, cells, df)), F.expr(" AND ".join(
                f"{SPARK.name(g)} <=> `__g{i}`" for i, g in enumerate(pop.group_by))))
            cell = F.col("__cell")
        if where is not None:
            df = df.where(F.expr(render_spark(where)))
        return df.select(cell.alias("cell"), F.expr(render_spark(x)).alias("x"), *(["__pos"] if ordered else [])), ordered

    def _cells_frame(self, pop: Population, cells: list[Cell], df):
        from pyspark.sql.types import LongType, StructField, StructType
        fields = []
        for i, g in enumerate(pop.group_by):
            src = next(f for f in df.schema.fields if f.name.lower() == g.lower())
            fields.append(StructField(f"__g{i}", src.dataType, True))
        schema = StructType([*fields, StructField("__cell", LongType(), False)])
        return self.spark.createDataFrame([(*c.key, i) for i, c in enumerate(cells)], schema)

    # -- public facts ------------------------------------------------------------------------------------------
    def cells(self, pop: Population) -> list[Cell]:
        from pyspark.sql import functions as F
        with self._reading(pop.table):
            df, _ = self._population(pop)
            if not pop.group_by:
                return [Cell((), int(df.count()))]
            cols = [F.col(SPARK.name(g)) for g in pop.group_by]
            grouped = df.groupBy(*cols).count().orderBy(*[c.asc_nulls_last() for c in cols])
            aware = [type(f.dataType).__name__ == "TimestampType" for f in grouped.schema.fields[:-1]]
            return [Cell(tuple(_aware(v) if tz else v for v, tz in zip(r[:-1], aware)), int(r[-1]))
                    for r in grouped.collect()]

    def covered_users(self, pop: Population) -> np.ndarray | None:
        t = pop.table
        if pop.where is None or not (t.privacy_unit or t.identity is None or t.identity.stable_rows):
            return None
        with self._reading(t):
            try:
                df, _ = self._population(pop, keys=True)
            except InternalError:
                return None
            got = df.select("__lo", "__hi").toArrow()
        lo = got.column("__lo").to_numpy().astype(np.uint64)
        hi = got.column("__hi").to_numpy().astype(np.uint64)
        return (hi << np.uint64(32)) | lo

    # -- private reads -----------------------------------------------------------------------------------------
    def value_counts(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice,
                     where: E.Expr | None = None) -> Counts:
        with self._reading(pop.table):
            rows, _ = self._rows(pop, cells, x, users, where)
            got = rows.groupBy("cell", "x").count().toArrow()
        if got.column("x").null_count:
            raise InternalError("an encoding produced NULL: encodings must be total")
        cell_of = got.column("cell").to_numpy().astype(np.int64)
        xs, ns = rows_of(got.column("x")), got.column("count").to_numpy().astype(np.int64)
        out: Counts = {}
        for c in np.unique(cell_of):
            mine = cell_of == c
            order = value_order(xs[mine])
            out[int(c)] = (xs[mine][order], ns[mine][order])
        return out

    def batches(self, pop: Population, cells: list[Cell], x: E.Expr,
                users: Slice) -> Iterator[tuple[np.ndarray | None, np.ndarray]]:
        """The users' ``x`` on the driver in batches of :data:`BATCH_ROWS`, in the source's row order where it
        has one (then batches are DuckDB's, so are seeded per-user draws). Rows cross to the driver one by one:
        unseeded runs take :meth:`randomized` instead, which randomizes on the executors."""
        with self._reading(pop.table):
            rows, ordered = self._rows(pop, cells, x, users, positions=True)
            if ordered:
                rows = rows.orderBy("__pos")
            it = rows.select("cell", "x").toLocalIterator(prefetchPartitions=True)
            buf_c: list = []
            buf_x: list = []
            for r in it:
                buf_c.append(r[0])
                buf_x.append(r[1])
                if len(buf_x) == BATCH_ROWS:
                    yield self._batch(pop, buf_c, buf_x)
                    buf_c, buf_x = [], []
            if buf_x:
                yield self._batch(pop, buf_c, buf_x)

    @staticmethod
    def _batch(pop: Population, cs: list, xs: list) -> tuple[np.ndarray | None, np.ndarray]:
        return (np.asarray(cs, dtype=np.int64) if pop.group_by else None), np.asarray(xs)   # (arrays: lists -> rows)

    def randomized(self, pop: Population, cells: list[Cell], x: E.Expr, users: Slice, randomizers: dict[int, Any],
                   entropy: int, spawn: tuple[int, ...] = ()) -> dict[int, tuple[np.ndarray, int]]:
        """Per cell in ``randomizers``: the sum of its users' randomized summaries and their number, randomized on
        the executors. Each partition draws from its own stream, ``SeedSequence(entropy, spawn + (partition,))``,
        so seeded answers would depend on the partitioning: the driver calls it for unseeded runs only."""
        from pyspark.sql.types import BinaryType, LongType, StructField, StructType
        schema = StructType([StructField("cell", LongType()), StructField("n", LongType()),
                             StructField("summary", BinaryType())])
        job = _PartitionJob(dict(randomizers), int(entropy), tuple(int(s) for s in spawn))
        with self._reading(pop.table):
            rows, _ = self._rows(pop, cells, x, users)
            parts = rows.mapInArrow(job, schema).toArrow()
        sums: dict[int, np.ndarray] = {}
        counts = dict.fromkeys(randomizers, 0)
        for c, n, blob in zip(parts.column("cell").to_pylist(), parts.column("n").to_pylist(),
                              parts.column("summary").to_pylist()):
            s = pickle.loads(blob)
            sums[c] = s if c not in sums else sums[c] + s
            counts[c] += n
        rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(*spawn, 1 << 30)))
        for c, r in randomizers.items():   # a cell without users: the summary's zero, shaped by the randomizer
            if c not in sums:
                sums[c] = r.aggregate(r.randomize(np.zeros(0, dtype=np.int64), rng))
        return {c: (sums[c], counts[c]) for c in randomizers}

    # -- key-value statements ----------------------------------------------------------------------------------
    def units(self, pop: Population) -> int:
        with self._reading(pop.table):
            df, _ = self._population(pop)
            return int(df.select(SPARK.name(pop.table.privacy_unit)).distinct().count())

    def unit_rows(self, pop: Population, key: E.Expr, value: E.Expr) -> Iterator[tuple[np.ndarray, ...]]:
        """groupBy the unit's key with collect_list of the rows' key and value (the expressions are total: no NULL
        to skip), brought to the driver partition by partition in batches of :data:`UNIT_BATCH` units."""
        from pyspark.sql import functions as F
        with self._reading(pop.table):
            df, _ = self._population(pop, keys=True)
            rows = df.select("__lo", "__hi", F.expr(render_spark(key)).cast("long").alias("k"),
                             F.expr(render_spark(value)).cast("double").alias("v"))
            grouped = rows.groupBy("__lo", "__hi").agg(F.collect_list("k").alias("k"), F.collect_list("v").alias("v"))
            buf: list = []
            for r in grouped.toLocalIterator(prefetchPartitions=True):
                buf.append(r)
                if len(buf) == UNIT_BATCH:
                    yield _unit_batch(buf)
                    buf = []
            if buf:
                yield _unit_batch(buf)

    def interrupt(self) -> None:
        """Cancel this backend's running jobs (tagged: other jobs of a shared session keep running)."""
        self.spark.sparkContext.cancelJobsWithTag(self._tag)

    def stop(self) -> None:
        """Stop the Spark session if this backend started it."""
        if self.owns_session:
            self.spark.stop()

    @contextmanager
    def _reading(self, table: Table):
        """Spark's errors as ExecuteError, naming the error's class only: its message may quote a row's value.
        The jobs started meanwhile carry this backend's tag, so that :meth:`interrupt` cancels them only."""
        sc = self.spark.sparkContext
        sc.addJobTag(self._tag)
        try:
            yield
        except self.errors as e:
            logging.getLogger("ldpql").debug("Spark error", exc_info=True)   # the owner's process only, at DEBUG
            cond = getattr(e, "getCondition", lambda: None)() or type(e).__name__
            raise ExecuteError(f"Spark could not read `{table.name}`: {cond}",
                               hint="check that the source still exists and that Spark reads it") from None
        except (KeyboardInterrupt, GeneratorExit):   # Ctrl-C, or a reader dropped: stop this backend's jobs too
            self.interrupt()                          # (audit5 F10; the charge stands, as the caller says)
            raise
        finally:
            sc.removeJobTag(self._tag)


def _unit_batch(rows: list) -> tuple[np.ndarray, ...]:
    """(user id per row, key per row, value per row) of grouped rows (lo, hi, keys, values)."""
    sizes = np.array([len(r[2]) for r in rows], dtype=np.int64)
    ids = np.array([(int(r[1]) << 32) | int(r[0]) for r in rows], dtype=np.uint64)
    keys = np.array([k for r in rows for k in r[2]], dtype=np.int64)
    values = np.array([v for r in rows for v in r[3]], dtype=float)
    return np.repeat(ids, sizes), keys, values


class _PartitionJob:
    """What ``mapInArrow`` runs on one partition: every user's randomizer, summed per cell (picklable)."""

    def __init__(self, randomizers: dict[int, Any], entropy: int, spawn: tuple[int, ...]):
        self.randomizers, self.entropy, self.spawn = randomizers, entropy, spawn

    def __call__(self, batches):
        import pyarrow as pa
        from pyspark import TaskContext
        part = TaskContext.get().partitionId()
        rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence(self.entropy, spawn_key=(*self.spawn, part))))
        sums: dict[int, np.ndarray] = {}
        counts: dict[int, int] = {}
        for batch in batches:
            cell = batch.column(0).to_numpy(zero_copy_only=False)
            xs = rows_of(batch.column(1))
            for c in np.unique(cell):
                r = self.randomizers.get(int(c))
                if r is None:
                    continue
                mine = xs[cell == c]
                step = max(256, min(CHUNK_USERS, REPORT_CELLS // r.report_width))
                for i in range(0, len(mine), step):
                    s = r.aggregate(r.randomize(mine[i:i + step], rng))
                    sums[int(c)] = s if int(c) not in sums else sums[int(c)] + s
                counts[int(c)] = counts.get(int(c), 0) + len(mine)
        cells = sorted(sums)
        yield pa.RecordBatch.from_pydict({"cell": pa.array(cells, pa.int64()),
                                          "n": pa.array([counts[c] for c in cells], pa.int64()),
                                          "summary": pa.array([pickle.dumps(sums[c]) for c in cells], pa.binary())})
