"""Sources and column metadata: which columns are public, the declared domains, privacy unit and budget.

Domains are declared, never read from the data (DESIGN 2.1). The catalog turns a declared domain into the
DuckDB expression every user applies locally before randomizing: clamping to the range, mapping unknown
categories to OTHER, replacing NULL/NaN with the declared default. These are deterministic local maps, so
they cost no privacy, and the data treatment is the same whatever the data holds. Every such expression is
total (it never raises on a value), and a domain that does not fit its column's type is refused at declaration.

A declaration is bound to the data it describes (:func:`declaration`, :func:`check_tightens`): declaring the
same data again may keep or tighten it, never loosen it; loosening is the owner's ALTER (:func:`apply_alter`).
Which data a source reads is :mod:`ldpql.sources`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import duckdb

from ldpql import expr as E
from ldpql.errors import CatalogError, did_you_mean
from ldpql.grammar import ast
from ldpql.grammar.ast import quote_name, quote_string
from ldpql.sources import SourceIdentity, identify, refuse_directory

OTHER = "OTHER"
INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "UHUGEINT")
NUMERIC_TYPES = INTEGER_TYPES + ("FLOAT", "DOUBLE", "REAL", "DECIMAL")
STRING_TYPES = ("VARCHAR", "STRING", "TEXT", "ENUM")


def type_kind(dtype: str) -> str:
    """What a DuckDB column type holds: 'integer', 'numeric' (other numbers), 'string', 'boolean', 'temporal'
    or 'other' (lists, structs, blobs, ...). Read from the declared schema, never from values.

    >>> type_kind("DECIMAL(18,3)"), type_kind("VARCHAR[]"), type_kind("TIMESTAMP WITH TIME ZONE")
    ('numeric', 'other', 'temporal')
    """
    base = dtype.split("(")[0].strip().upper()
    if base in INTEGER_TYPES:
        return "integer"
    if base in NUMERIC_TYPES:
        return "numeric"
    if base in STRING_TYPES:
        return "string"
    if base in ("BOOLEAN", "BOOL"):
        return "boolean"
    if base.split(" ")[0].split("_")[0] in ("DATE", "TIME", "TIMESTAMP", "TIMETZ", "TIMESTAMPTZ", "INTERVAL"):
        return "temporal"
    return "other"


def is_number(v: Any) -> bool:
    """A finite int or float (a bool is not a number here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _sql_literal(v: Any) -> str:
    return quote_string(v) if isinstance(v, str) else repr(v)


def _canon(v: float) -> str:
    """A number as written in a canonical declaration: 60 for 60.0, else the shortest exact repr."""
    return repr(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


# Every encoding below is total: whatever a row holds (a string where a number was expected, NULL, NaN, ±inf,
# a value far outside the domain), it yields an index or value inside the declared domain and never raises.
# An error raised while rows are encoded would depend on a private value (DESIGN 4.5), so conversions are
# TRY_CAST (a failed conversion is NULL, which takes the documented NULL treatment) and indices are clamped
# in the SQL itself rather than trusted to follow from the declaration.

MAX_SPARSITY = 1024   # keys per user a key-value report may hold (a Collision report's hash range is about s·e^ε)

@dataclass(frozen=True)
class NumericDomain:
    """``BETWEEN low AND high [NOT NULL] [DEFAULT v]``: values are clamped into it. Which semantics a NULL (or NaN, or
    a value that does not convert) takes is declared, never read from data: a ``DEFAULT v`` says it stands for v;
    ``NOT NULL`` promises there are none (one that appears anyway counts as the midpoint: the promise, like a
    declared distribution, is never checked); otherwise the column is nullable and means skip NULLs, as SQL's
    AVG does (:attr:`skips_nulls`)."""

    low: float
    high: float
    integer: bool = False
    default: float | None = None
    # DISTRIBUTION GAUSSIAN (SIGMA ...): (σ_min, σ_max), equal when σ is declared; public metadata the planner may
    # use (the Gaussian mean protocols), never checked against the data, and bound like the range itself
    gaussian: tuple[float, float] | None = None
    not_null: bool = False   # NOT NULL: declared to hold no NULL (never checked)

    @property
    def skips_nulls(self) -> bool:
        """True for a nullable column (neither NOT NULL nor a DEFAULT): its mean is over the users with a value."""
        return not self.not_null and self.default is None

    @property
    def null_value(self) -> float:
        """What a NULL or NaN stands for: the declared DEFAULT, else the midpoint of the range."""
        mid = (self.low + self.high) / 2
        return self.default if self.default is not None else (round(mid) if self.integer else mid)

    @property
    def size(self) -> int | None:
        """Number of values of an integer domain, None for a continuous one."""
        return int(self.high - self.low) + 1 if self.integer else None

    def clamped(self, col: str, null: float | None = None) -> E.Expr:
        """The value each user randomizes, clamped to [low, high], NULL as ``null`` (default :attr:`null_value`);
        never raises."""
        v: E.Expr = E.null_to(E.number(col), self.null_value if null is None else null)
        if self.integer:
            v = E.call("round", v)
        return E.clamp(v, self.low, self.high)

    def scaled(self, col: str, null: float | None = None) -> E.Expr:
        """The clamped value mapped onto [-1, 1]: (x - mid) / half."""
        half, mid = (self.high - self.low) / 2, (self.high + self.low) / 2
        return E.op("/", E.op("-", self.clamped(col, null), mid), half)

    def scaled_or(self, col: str, missing: float) -> E.Expr:
        """:meth:`scaled` where the row has a value, ``missing`` (outside [-1, 1]) where it is NULL, NaN or does not
        convert: the input of a randomizer that tells a missing value from every real one (a nullable mean)."""
        x = E.number(col)
        return E.Case(E.Logic("OR", (E.IsNull(x), E.call("isnan", x))), E.double(missing), self.scaled(col))

    def index(self, col: str) -> E.Expr:
        """The 0-based value index of an INTEGER domain (low -> 0), clamped to [0, size)."""
        return E.index(E.op("-", self.clamped(col), self.low), self.size)

    def describe(self) -> str:
        kind = "INTEGER " if self.integer else ""
        nulls = (f"NOT NULL (a NULL would count as {self.null_value:g})" if self.not_null else
                 f"NULL -> {self.null_value:g}" if self.default is not None else
                 f"nullable (means and sums skip NULL; other aggregates count it as {self.null_value:g})")
        text = f"{kind}BETWEEN {self.low:g} AND {self.high:g}; {nulls}; clamped"
        if self.gaussian is not None:
            lo, hi = self.gaussian
            sigma = f"σ = {lo:g}" if lo == hi else f"σ between {lo:g} and {hi:g}"
            text += f"; declared Gaussian, {sigma} (assumed, never checked)"
        return text

    def canonical(self) -> str:
        """The domain as one exact, comparable declaration (what the ledger binds, and what a later connection
        parses back): the range, a declared distribution (changing it is the owner's ALTER, like changing the
        range), then the NULL semantics as declared: nothing (nullable: NULLs skipped), NOT NULL, DEFAULT v."""
        kind = "INTEGER " if self.integer else ""
        text = f"{kind}BETWEEN {_canon(self.low)} AND {_canon(self.high)}"
        if self.gaussian is not None:
            lo, hi = self.gaussian
            sigma = _canon(lo) if lo == hi else f"BETWEEN {_canon(lo)} AND {_canon(hi)}"
            text += f" DISTRIBUTION GAUSSIAN (SIGMA {sigma})"
        return text + (" NOT NULL" if self.not_null else "") + (
            f" DEFAULT {_canon(self.default)}" if self.default is not None else "")

    def effective(self) -> str:
        """What statements can release from the column, as one comparable string: the range, the value a NULL
        stands for when it is not skipped, the distribution. Any statement may skip NULLs (nulls => 'skip') or count
        them as this value (nulls => 'default'), so two declarations with the same effective domain release the same
        things; it is also the form ledgers bound before the NULL semantics was written (:meth:`canonical`)."""
        text = f"{'INTEGER ' if self.integer else ''}BETWEEN {_canon(self.low)} AND {_canon(self.high)} DEFAULT " \
               f"{_canon(self.null_value)}"
        if self.gaussian is not None:
            lo, hi = self.gaussian
            text += f" DISTRIBUTION GAUSSIAN (SIGMA {_canon(lo) if lo == hi else f'BETWEEN {_canon(lo)} AND {_canon(hi)}'})"
        return text


@dataclass(frozen=True)
class CategoricalDomain:
    """``IN (v1, ...)``: categories, plus an OTHER bucket that takes anything else, NULL included."""

    values: tuple
    default: Any = None

    @property
    def labels(self) -> tuple:
        """The d categories reported, OTHER last."""
        return self.values + (OTHER,)

    @property
    def size(self) -> int:
        return len(self.values) + 1

    @property
    def strings(self) -> bool:
        """True for string categories, False for numbers."""
        return isinstance(self.values[0], str)

    def index(self, col: str) -> E.Expr:
        """The 0-based category index of each row (OTHER = d - 1); never raises."""
        x: E.Expr = E.TryCast(E.Column(col), "VARCHAR" if self.strings else "DOUBLE")
        values = self.values if self.strings else tuple(float(v) for v in self.values)
        if self.default is not None:
            x = E.call("coalesce", x, self.default if self.strings else E.double(self.default))
        return E.clamp(E.op("-", E.call("coalesce", E.Position(values, x), self.size), 1), 0, self.size - 1)

    def describe(self) -> str:
        shown = ", ".join(map(str, self.values[:6])) + (", ..." if len(self.values) > 6 else "")
        return f"IN ({shown}) + OTHER; {self.size} categories"

    def canonical(self) -> str:
        """The domain as one exact, comparable declaration; a DEFAULT outside the categories is OTHER, as none."""
        values = ", ".join(_sql_literal(v) if self.strings else _canon(v) for v in self.values)
        default = self.default if self.default in self.values else None
        shown = "" if default is None else f" DEFAULT {_sql_literal(default) if self.strings else _canon(default)}"
        return f"IN ({values}){shown}"


@dataclass(frozen=True)
class BooleanDomain:
    """``BOOLEAN``: true/false (on an integer column, any non-zero value is true); NULL is false unless a
    DEFAULT says otherwise."""

    default: bool = False

    size = 2

    def index(self, col: str) -> E.Expr:
        """1 for true, 0 for false; never raises."""
        return E.indicator(E.call("coalesce", E.TryCast(E.Column(col), "BOOLEAN"), bool(self.default)))

    def describe(self) -> str:
        return f"BOOLEAN; NULL -> {str(self.default).upper()}"

    def canonical(self) -> str:
        """The domain as one exact, comparable declaration."""
        return f"BOOLEAN DEFAULT {str(self.default).upper()}"


Domain = NumericDomain | CategoricalDomain | BooleanDomain


@dataclass(frozen=True)
class Column:
    """One column of a table: its DuckDB type, whether it is public, and its declared domain."""

    name: str
    dtype: str
    public: bool = False
    domain: Domain | None = None


@dataclass
class Table:
    """A declared table: where its rows come from and what is public about them."""

    name: str
    source_kind: str          # 'file' | 'table' | 'query' | 'frame'
    source_text: str          # as declared
    from_sql: str             # what DuckDB reads (after FROM)
    source_id: str            # identity of the data for the ledger
    columns: dict[str, Column] = field(default_factory=dict)
    privacy_unit: str | None = None
    budget_epsilon: float = 1.0
    budget_delta: float = 0.0
    rounds: int | None = None
    identity: SourceIdentity | None = None   # what the source reads (ldpql.sources); None in hand-built tests
    sparsity: int | None = None   # PRIVACY UNIT u SPARSITY s: a unit may have several rows (key-value statements only)

    @property
    def ledger_key(self) -> str:
        """The source's id in the ledger: what it reads (never shown to an analyst), else its spelling."""
        return self.identity.ledger_id() if self.identity is not None else self.source_id

    def column(self, name: str, pos: ast.Pos | None = None, text: str | None = None) -> Column:
        """The column named ``name`` (case-insensitive), or a CatalogError with a suggestion."""
        for c in self.columns.values():
            if c.name.lower() == name.lower():
                return c
        err = CatalogError(f"column `{name}` does not exist in table `{self.name}`",
                           hint=did_you_mean(name, list(self.columns)) or
                           f"columns are: {', '.join(self.columns)}")
        if pos is not None and text is not None:
            err.with_position(text, pos.line, pos.column, len(name))
        raise err


def _domain(cdef: ast.ColumnDef, dtype: str, table: str, text: str = "") -> Domain | None:
    """The catalog domain of a column declaration, checked against the column's DuckDB type (public), so that
    its encoding fits every value the column can hold."""
    d, default = cdef.domain, cdef.default.value if cdef.default is not None else None
    where = f"column `{cdef.name}` of `{table}`"
    try:
        if cdef.not_null and not isinstance(d, ast.RangeDomain):
            raise CatalogError(f"{where}: NOT NULL is declared on a numeric BETWEEN column, where it says means need "
                               "not skip NULLs", hint="drop NOT NULL here; a NULL category counts as OTHER, a NULL "
                               "boolean as its DEFAULT")
        if isinstance(d, ast.RangeDomain):
            return _range_domain(d, default, dtype, where, cdef.not_null)
        if isinstance(d, ast.SetDomain):
            return _set_domain(d, default, dtype, where)
        if isinstance(d, ast.BooleanDomain):
            return _boolean_domain(default, dtype, where)
        if cdef.default is not None:
            raise CatalogError(f"{where} has a DEFAULT but no domain",
                               hint="declare a domain first, e.g. PRIVATE BETWEEN 0 AND 100 DEFAULT 50")
        return None
    except CatalogError as e:
        pos = (d.pos if d is not None else cdef.pos)
        raise e.with_position(text, pos.line or None, pos.column or None) from None


MAX_BOUND = 1e150   # |bounds| of a BETWEEN domain: (x - low)·2^52/width stays finite for any value inside it


def _range_domain(d: ast.RangeDomain, default: Any, dtype: str, where: str, not_null: bool = False) -> NumericDomain:
    if type_kind(dtype) not in ("integer", "numeric"):
        raise CatalogError(f"{where} is {dtype}, but BETWEEN declares a numeric range",
                           hint="declare categories with IN (...), or cast the column in a FROM (SELECT ...) query")
    if not (is_number(d.low) and is_number(d.high)):
        raise CatalogError(f"{where}: the bounds of BETWEEN must be finite numbers", hint="for example BETWEEN 0 AND 1e6")
    if max(abs(d.low), abs(d.high)) > MAX_BOUND:
        # beyond it, the arithmetic that maps a value to its bucket or lattice point overflows to inf and NaN
        raise CatalogError(f"{where}: bounds beyond ±{MAX_BOUND:g} are not supported, not {d.low:g} and {d.high:g}",
                           hint="declare the range the data can really take, or rescale the column in a query")
    if not d.low < d.high:
        raise CatalogError(f"{where}: the range BETWEEN {d.low:g} AND {d.high:g} is empty",
                           hint="write the lower bound first")
    if d.integer and not (float(d.low).is_integer() and float(d.high).is_integer()):
        # a fractional bound makes the last value index fall outside the domain for exactly the values beyond it
        raise CatalogError(f"{where}: an INTEGER domain needs whole-number bounds, not {d.low:g} and {d.high:g}",
                           hint=f"write INTEGER BETWEEN {math.ceil(d.low)} AND {math.floor(d.high)}, "
                                "or drop INTEGER for a continuous range")
    if default is not None and not is_number(default):
        raise CatalogError(f"{where}: DEFAULT must be a number", hint="the value a NULL stands for, e.g. DEFAULT 0")
    return NumericDomain(float(d.low), float(d.high), d.integer, default, _gaussian(d, where), not_null)


def _gaussian(d: ast.RangeDomain, where: str) -> tuple[float, float] | None:
    """The declared Gaussian's (σ_min, σ_max), checked: a known family, 0 < σ_min ≤ σ_max, at most 2^40 scales
    between σ_min and the range (the protocols use one group of users per power of two in between)."""
    dist = d.distribution
    if dist is None:
        return None
    if dist.family.lower() != "gaussian":
        raise CatalogError(f"{where}: unknown distribution `{dist.family}`", hint="the known distribution is "
                           "GAUSSIAN, e.g. DISTRIBUTION GAUSSIAN (SIGMA 1) or (SIGMA BETWEEN 0.5 AND 8)")
    lo, hi = dist.sigma_low, dist.sigma_high
    if not (is_number(lo) and is_number(hi) and 0 < lo <= hi <= MAX_BOUND):
        raise CatalogError(f"{where}: SIGMA must be positive and finite" + (", the smaller bound first" if
                           is_number(lo) and is_number(hi) and 0 < hi < lo else f", not {lo:g} and {hi:g}"),
                           hint="for example SIGMA 1 (known) or SIGMA BETWEEN 0.25 AND 16 (unknown, within bounds)")
    if math.log2(max(d.high - d.low, hi) / lo) > 40:
        raise CatalogError(f"{where}: SIGMA {lo:g} is too small for the range BETWEEN {d.low:g} AND {d.high:g}",
                           hint="the Gaussian protocols need fewer than 40 powers of two between σ and the range")
    return float(lo), float(hi)


def _set_domain(d: ast.SetDomain, default: Any, dtype: str, where: str) -> CategoricalDomain:
    values = tuple(v.value for v in d.values)
    if len(set(values)) != len(values):
        raise CatalogError(f"{where}: a category is listed twice in IN (...)")
    strings = all(isinstance(v, str) for v in values)
    if not strings and not all(is_number(v) for v in values):
        raise CatalogError(f"{where}: categories must be all strings or all numbers",
                           hint="for example IN ('Lyon', 'Nice') or IN (1, 2, 3)")
    kinds = ("string",) if strings else ("integer", "numeric")
    if type_kind(dtype) not in kinds:
        raise CatalogError(f"{where} is {dtype}, but its categories are {'strings' if strings else 'numbers'}",
                           hint="write the categories with the column's type, or cast the column in a "
                                "FROM (SELECT ...) query")
    if OTHER in values:
        raise CatalogError(f"{where}: `{OTHER}` is the bucket for undeclared values and cannot be declared")
    if default is not None and not (isinstance(default, str) if strings else is_number(default)):
        raise CatalogError(f"{where}: DEFAULT must be a {'string' if strings else 'number'} like the categories")
    return CategoricalDomain(values, default)


def _boolean_domain(default: Any, dtype: str, where: str) -> BooleanDomain:
    # integer columns are accepted as 0/1 flags (any non-zero value is true, as DuckDB casts them); text such as
    # 'yes' is not: which strings mean true is a choice the owner makes in a FROM (SELECT ...) query
    if type_kind(dtype) not in ("boolean", "integer"):
        raise CatalogError(f"{where} is {dtype}, but BOOLEAN declares a true/false column",
                           hint="BOOLEAN takes BOOLEAN or integer (0/1) columns; map other values in a "
                                "FROM (SELECT ..., flag = 'yes' AS flag ...) query, or declare IN (...)")
    if default is not None and not isinstance(default, bool):
        raise CatalogError(f"{where}: DEFAULT of a BOOLEAN column must be TRUE or FALSE")
    return BooleanDomain(bool(default) if default is not None else False)


class Catalog:
    """The declared tables of one connection, and the current default table (``USE``)."""

    def __init__(self) -> None:
        self.tables: dict[str, Table] = {}
        self.current: str | None = None

    def get(self, name: str | None, pos: ast.Pos | None = None, text: str | None = None) -> Table:
        """The table ``name``, or the default table when ``name`` is None."""
        if name is None:
            if self.current:
                return self.tables[self.current]
            if len(self.tables) == 1:
                return next(iter(self.tables.values()))
            raise CatalogError("the statement has no FROM and there is no default table",
                               hint="add FROM <table>, or choose one with USE <table>" +
                               (f" (tables: {', '.join(self.tables)})" if self.tables else ""))
        key = name.lower()
        if key not in self.tables:
            err = CatalogError(f"table `{name}` does not exist",
                               hint=did_you_mean(name, [t.name for t in self.tables.values()]) or
                               ("declare it with CREATE TABLE ... FROM" if not self.tables else
                                f"tables are: {', '.join(t.name for t in self.tables.values())}"))
            if pos is not None and text is not None:
                err.with_position(text, pos.line, pos.column, len(name))
            raise err
        return self.tables[key]

    def add(self, table: Table) -> None:
        """Declare ``table``; declaring a name again replaces the declaration (never the spend)."""
        self.tables[table.name.lower()] = table

    def drop(self, name: str) -> Table:
        table = self.get(name)
        del self.tables[name.lower()]
        if self.current == name.lower():
            self.current = None
        return table

    def use(self, name: str) -> None:
        self.current = self.get(name).name.lower()


def source_sql(src: ast.Source) -> tuple[str, str]:
    """(what DuckDB reads after FROM, the ledger identity of the data) for a declared source."""
    if src.kind == "file":
        path = os.path.abspath(os.path.expanduser(src.text))
        return quote_string(path), f"file:{path}"
    if src.kind == "table":
        return src.text, f"duckdb:{src.text}"
    return src.text, "query:" + " ".join(src.text.split())


def build_table(stmt: ast.CreateTable, duck: duckdb.DuckDBPyConnection, text: str = "") -> Table:
    """Check a CREATE TABLE against DuckDB's schema of the source and return the Table, with the identity of
    the data it reads (:func:`ldpql.sources.identify`). Reads no private value: only the schema, file
    metadata, row counts and the privacy-unit column (an identifier, public) to refuse duplicated units."""
    from_sql, source_id = source_sql(stmt.source)
    if stmt.source.kind == "file":
        try:
            refuse_directory(stmt.source.text)
        except CatalogError as e:
            raise e.with_position(text or stmt.sql(), stmt.source.pos.line or None, stmt.source.pos.column or None,
                                  len(stmt.source.sql())) from None
    schema = describe_source(from_sql, stmt.source, duck)
    identity = identify(stmt.source, from_sql, duck)
    source_text = stmt.source.text
    if stmt.source.kind == "file":   # kept by its absolute path, so that any process reads the same file
        source_text = os.path.abspath(os.path.expanduser(stmt.source.text))
        if CSV_FILE.search(source_text):
            from_sql = total_csv_sql(from_sql, schema, duck)
        elif JSON_FILE.search(source_text):
            from_sql = total_json_sql(from_sql, schema)
    return make_table(stmt.name, stmt.source.kind, source_text, from_sql, source_id, schema, stmt, duck, text,
                      identity=identity)


CSV_FILE = re.compile(r"\.(csv|tsv|txt)(\.gz|\.zst)?$", re.IGNORECASE)


def total_csv_sql(path_sql: str, schema: dict[str, str], duck: duckdb.DuckDBPyConnection) -> str:
    """A CSV read that cannot fail on a value: DuckDB types CSV columns from a sample, so one malformed value far
    down a file would make every read of its column fail (a noiseless bit about one user). Every field is read as
    text and TRY_CAST to the type DuckDB inferred: a value that does not convert is NULL, treated as declared."""
    first = duck.execute(f"SELECT file FROM glob({path_sql}) ORDER BY file LIMIT 1").fetchone()
    header = duck.execute("SELECT HasHeader FROM sniff_csv(?)", [first[0]]).fetchone()[0] if first else True
    cols = ", ".join(f"TRY_CAST({quote_name(c)} AS {t}) AS {quote_name(c)}" for c, t in schema.items())
    return f"(SELECT {cols} FROM read_csv({path_sql}, all_varchar = true, header = {bool(header)}))"


JSON_FILE = re.compile(r"\.(json|jsonl|ndjson)(\.gz)?$", re.IGNORECASE)


def total_json_sql(path_sql: str, schema: dict[str, str]) -> str:
    """A JSON read that cannot fail on a value, as :func:`total_csv_sql` for CSV: DuckDB types JSON fields from a
    sample, so a string far down a file in a numeric field failed every read of it (a noiseless bit about one
    user, found by the Spark audit). Every field is read as its JSON text and TRY_CAST to the inferred type."""
    text = ", ".join(f"{quote_string(c)}: 'VARCHAR'" for c in schema)
    cols = ", ".join(f"TRY_CAST({quote_name(c)} AS {t}) AS {quote_name(c)}" for c, t in schema.items())
    return f"(SELECT {cols} FROM read_json({path_sql}, columns = {{{text}}}))"


def describe_source(from_sql: str, src: ast.Source | None, duck: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Column name -> DuckDB type of a source, or a CatalogError saying why it cannot be read."""
    try:
        rows = duck.execute(f"DESCRIBE SELECT * FROM {from_sql}").fetchall()
    except duckdb.Error as e:
        first = str(e).splitlines()[0]
        hint = None
        if src is not None and src.kind == "file":
            hint = ("check the path (globs such as 'data/*.parquet' work); CSV, parquet and JSON are read"
                    if not os.path.exists(os.path.expanduser(src.text)) else
                    "DuckDB could not read this file; check its format and extension")
        raise CatalogError(f"cannot read the source: {first}", hint=hint) from None
    return {r[0]: r[1] for r in rows}


def make_table(name: str, kind: str, source_text: str, from_sql: str, source_id: str, schema: dict[str, str],
               stmt: ast.CreateTable, duck: duckdb.DuckDBPyConnection, text: str = "", *,
               identity: SourceIdentity | None = None) -> Table:
    """Combine a source's schema with the declarations of ``stmt`` into a Table, checking each one.
    ``identity`` (from :func:`ldpql.sources.identify`) is kept on the Table for the ledger."""
    columns = {c: Column(c, t) for c, t in schema.items()}
    lowered = {c.lower(): c for c in schema}
    seen: set[str] = set()
    for cdef in stmt.columns:
        real = _declared_column(cdef, lowered, seen, text)
        if cdef.public and cdef.domain is not None:
            raise CatalogError(f"column `{cdef.name}` is PUBLIC; a domain is only declared for private columns",
                               hint=f"write {quote_name(cdef.name)} PRIVATE {cdef.domain.sql()}, or drop the domain"
                               ).with_position(text, cdef.pos.line or None, cdef.pos.column or None, len(cdef.name))
        columns[real] = Column(real, schema[real], cdef.public, _domain(cdef, schema[real], name, text))
    unit = _privacy_unit(stmt, lowered, name)
    sparsity = getattr(stmt, "sparsity", None)
    if sparsity is not None and (isinstance(sparsity, bool) or not isinstance(sparsity, int) or sparsity < 1):
        raise CatalogError(f"SPARSITY must be a whole number of keys per unit, at least 1, not {sparsity}",
                           hint="for example PRIVACY UNIT user_id SPARSITY 8")
    if sparsity is not None and sparsity > MAX_SPARSITY:
        raise CatalogError(f"SPARSITY {sparsity} is above {MAX_SPARSITY}: each report's hash range grows with s, and "
                           "so do the memory and time of a release", hint="declare a smaller cap; a user with more "
                           "keys sends a random s of them")
    if sparsity is not None and unit is None:
        raise CatalogError(f"SPARSITY needs a privacy unit: without one each row of `{name}` is its own user, so no "
                           "user has several rows", hint="add PRIVACY UNIT <user id column> before SPARSITY")
    if unit is not None:
        columns[unit] = Column(unit, schema[unit], True, None)
        check_unique_units(from_sql, unit, duck, repeats=sparsity is not None)
    eps = stmt.budget_epsilon if stmt.budget_epsilon is not None else 1.0
    delta = stmt.budget_delta or 0.0
    check_budget(eps, delta)
    if stmt.rounds is not None and stmt.rounds < 1:
        raise CatalogError("ROUNDS must be at least 1")
    return Table(name, kind, source_text, from_sql, source_id, columns, unit, float(eps), float(delta), stmt.rounds,
                 identity, sparsity)


def _declared_column(cdef: ast.ColumnDef, lowered: dict[str, str], seen: set[str], text: str) -> str:
    """The source's spelling of a declared column; a column declared twice is refused (the second declaration
    would silently replace the first, e.g. PRIVATE then PUBLIC)."""
    real = lowered.get(cdef.name.lower())
    if real is None:
        raise CatalogError(f"column `{cdef.name}` is declared but the source has no such column",
                           hint=did_you_mean(cdef.name, list(lowered.values())) or
                           f"columns are: {', '.join(lowered.values())}"
                           ).with_position(text, cdef.pos.line or None, cdef.pos.column or None, len(cdef.name))
    if real.lower() in seen:
        raise CatalogError(f"column `{cdef.name}` is declared twice", hint="declare each column once"
                           ).with_position(text, cdef.pos.line or None, cdef.pos.column or None, len(cdef.name))
    seen.add(real.lower())
    return real


def _privacy_unit(stmt: ast.CreateTable, lowered: dict[str, str], table: str) -> str | None:
    """The privacy-unit column: a public identifier. Naming a column the statement declares private (or gives a
    domain) is refused, since making it the unit would make it public; an undeclared one becomes public."""
    if not stmt.privacy_unit:
        return None
    unit = lowered.get(stmt.privacy_unit.lower())
    if unit is None:
        raise CatalogError(f"privacy unit column `{stmt.privacy_unit}` is not in the source",
                           hint=did_you_mean(stmt.privacy_unit, list(lowered.values())))
    cdef = next((c for c in stmt.columns if c.name.lower() == unit.lower()), None)
    if cdef is not None and not cdef.public:
        raise CatalogError(f"the privacy unit `{unit}` of `{table}` is declared private; the unit identifies users "
                           "and is public", hint=f"declare {quote_name(unit)} PUBLIC, or name another column as the "
                           "PRIVACY UNIT")
    return unit


def check_budget(eps: float, delta: float) -> None:
    """A budget must be a positive finite ε and a δ in [0, 1)."""
    if not (0 < eps < float("inf")):
        raise CatalogError(f"BUDGET EPSILON must be finite and positive, but is {eps:g}")
    if not (0 <= delta < 1):
        raise CatalogError(f"BUDGET DELTA must be in [0, 1), but is {delta:g}")


def check_unique_units(from_sql: str, unit: str, duck: duckdb.DuckDBPyConnection, repeats: bool = False) -> None:
    """Refuse a privacy-unit column that is NULL on some row or (unless ``repeats``: a table declared with
    SPARSITY, whose units may have several rows) whose value repeats on several rows. The message says only that
    some unit does, never how many (a number computed from the data); the unit is public."""
    missing = duck.execute(f"SELECT EXISTS (SELECT 1 FROM {from_sql} WHERE {quote_name(unit)} IS NULL)").fetchall()[0][0]
    if missing:   # a NULL unit names nobody: its user would have no key, in no slice and no ledger row
        raise CatalogError(f"some privacy units of `{unit}` are NULL; each user needs a unit",
                           hint=f"drop or label those rows in a query source: FROM (SELECT * FROM ... WHERE "
                                f"{quote_name(unit)} IS NOT NULL)")
    if repeats:
        return
    dup = duck.execute(f"SELECT EXISTS (SELECT 1 FROM {from_sql} GROUP BY {quote_name(unit)} "
                       f"HAVING count(*) > 1)").fetchall()[0][0]
    if dup:
        raise CatalogError(f"some privacy units of `{unit}` appear on more than one row; each unit must be one user",
                           hint=f"pre-aggregate each unit's rows first: FROM (SELECT {quote_name(unit)}, avg(x) AS x "
                                f"FROM ... GROUP BY {quote_name(unit)}); or, for key-value rows (several keys per "
                                f"unit), declare PRIVACY UNIT {quote_name(unit)} SPARSITY s (s: a public cap on keys "
                                "per unit) and query them with GROUP BY the key")


# ---- declarations bound to the data ------------------------------------------------------------------------
# The ledger keeps, per source, what was declared about it. A later declaration of the same data may keep or
# tighten it, never loosen it: otherwise declaring the file again with `income PUBLIC` would release income
# without noise. Loosening is the owner's explicit, logged act: ALTER TABLE ... SET COLUMN / SET PRIVACY UNIT.

def declaration(table: Table) -> dict:
    """What ``table`` declares about its data, JSON-able, for the ledger to hold and :func:`check_tightens`.

    >>> t = Table("t", "file", "t.csv", "'t.csv'", "file:t.csv",
    ...           {"age": Column("age", "BIGINT", False, NumericDomain(0, 120, True))})
    >>> declaration(t)["columns"]["age"]["domain"]
    'INTEGER BETWEEN 0 AND 120'
    """
    return {"columns": {c.name: _column_declaration(c) for c in table.columns.values()},
            "unit": table.privacy_unit,
            **({"sparsity": table.sparsity} if table.sparsity is not None else {}),
            "source": {"kind": table.source_kind, "text": table.source_text}}


def _column_declaration(c: Column) -> dict:
    out = {"public": c.public, "domain": c.domain.canonical() if c.domain else None}
    if isinstance(c.domain, NumericDomain):
        out["effective"] = c.domain.effective()
    return out


def _domain_changed(before: dict, after: dict) -> bool:
    """Whether ``after`` changes what the declared domain ``before`` lets statements release: the range, or the value
    a NULL may stand for (:meth:`NumericDomain.effective`). Flipping between nullable, NOT NULL and DEFAULT <the
    same value> only changes which of the two a statement gets without a nulls => argument. (A ledger bound before
    the NULL semantics was written holds the effective form as its domain.)"""
    return after.get("effective", after["domain"]) != before.get("effective", before["domain"])


def _shown(spec: dict) -> str:
    """A bound domain as the messages show it: a numeric range declared with no NULL semantics says so."""
    text = spec["domain"]
    nullable = text.startswith(("BETWEEN ", "INTEGER BETWEEN ")) and not text.endswith(" NOT NULL") \
        and " DEFAULT " not in text
    return text + " (nullable: NULLs skipped)" if nullable else text


def check_tightens(held: dict, new: dict, table: str) -> None:
    """Refuse (CatalogError) a declaration ``new`` that loosens the declaration ``held`` of the same data.

    Allowed: a public column becoming private; a domain added to a private column that had none, or left out
    (the column is then unusable). Refused: a private column becoming public; a declared domain changing; the
    privacy unit changing
    (added, removed or renamed). The hint names the owner-only ALTER that does it on purpose.
    """
    problems = list(_loosenings(held, new, table))
    if problems:
        message, hint = problems[0]
        raise CatalogError(message, hint=hint, context={"loosenings": [m for m, _ in problems]})


def _loosenings(held: dict, new: dict, table: str) -> Iterator[tuple[str, str]]:
    now = {name.lower(): spec for name, spec in new.get("columns", {}).items()}
    for name, before in held.get("columns", {}).items():
        after = now.get(name.lower())
        if after is None:
            continue   # the source no longer has the column: nothing about it can be released
        col, alter = quote_name(name), f"ALTER TABLE {quote_name(table)} SET COLUMN {quote_name(name)}"
        if not before["public"] and after["public"]:
            yield (f"`{name}` is declared private for this data, and declaring `{table}` again cannot make it public",
                   f"declare it {col} PRIVATE{_domain_text(before)} as before; to publish it on purpose, the data "
                   f"owner runs {alter} PUBLIC (logged)")
        elif None not in (before["domain"], after["domain"]) and _domain_changed(before, after):
            # (leaving a domain out only makes the column unusable: allowed)
            yield (f"the domain of `{name}` is declared {_shown(before)} for this data; declaring `{table}` "
                   f"again cannot change it to {_shown(after)}",
                   f"declare {col} PRIVATE {before['domain']} as before; to change it on purpose, the data owner "
                   f"runs {alter} PRIVATE <domain> (logged)")
    yield from _unit_loosening(held.get("unit"), new.get("unit"), table)


def _domain_text(spec: dict) -> str:
    return f" {spec['domain']}" if spec.get("domain") else ""


def _unit_loosening(before: str | None, after: str | None, table: str) -> Iterator[tuple[str, str]]:
    if (before or "").lower() == (after or "").lower():
        return
    alter = f"ALTER TABLE {quote_name(table)} SET PRIVACY UNIT {quote_name(after or before)}"
    if before is None:
        yield (f"this data is declared with one user per row; declaring `{table}` again cannot add PRIVACY UNIT "
               f"{after}", f"declare it without PRIVACY UNIT as before; to change it on purpose, the data owner "
                           f"runs {alter} (logged)")
    elif after is None:
        yield (f"this data is declared with PRIVACY UNIT {before}; declaring `{table}` again cannot drop it",
               f"declare it with PRIVACY UNIT {quote_name(before)} as before")
    else:
        yield (f"this data is declared with PRIVACY UNIT {before}; declaring `{table}` again cannot change it "
               f"to {after}", f"declare it with PRIVACY UNIT {quote_name(before)} as before; to change it on "
                              f"purpose, the data owner runs {alter} (logged)")


def apply_alter(table: Table, stmt: ast.AlterColumn | ast.AlterUnit, text: str = "",
                duck: duckdb.DuckDBPyConnection | None = None) -> Table:
    """The table as the owner's ``ALTER TABLE t SET COLUMN ...`` or ``SET PRIVACY UNIT u`` leaves it, checked
    like a declaration. Returns a new Table; ``table`` is unchanged. With ``duck``, a new privacy unit is also
    checked for duplicates (one row per unit)."""
    if isinstance(stmt, ast.AlterUnit):
        return _alter_unit(table, stmt, text, duck)
    cdef = stmt.column
    col = table.column(cdef.name, cdef.pos, text)
    where = (text, cdef.pos.line or None, cdef.pos.column or None, len(cdef.name))
    if not cdef.public and table.privacy_unit and col.name.lower() == table.privacy_unit.lower():
        raise CatalogError(f"`{col.name}` is the privacy unit of `{table.name}`, which identifies users and stays "
                           "public", hint=f"name another unit first: ALTER TABLE {quote_name(table.name)} SET "
                                          "PRIVACY UNIT <column>").with_position(*where)
    if cdef.public and cdef.domain is not None:
        raise CatalogError(f"column `{col.name}` is made PUBLIC; a domain is only declared for private columns",
                           hint=f"write ALTER TABLE {quote_name(table.name)} SET COLUMN {quote_name(col.name)} "
                                "PUBLIC").with_position(*where)
    domain = _domain(dataclasses.replace(cdef, name=col.name), col.dtype, table.name, text)
    columns = {**table.columns, col.name: Column(col.name, col.dtype, cdef.public, domain)}
    return dataclasses.replace(table, columns=columns)


def _alter_unit(table: Table, stmt: ast.AlterUnit, text: str, duck: duckdb.DuckDBPyConnection | None) -> Table:
    col = table.column(stmt.unit, stmt.unit_pos, text)
    if not col.public:
        # the unit is public: making a private column the unit would publish it; that is a separate, explicit act
        raise CatalogError(f"`{col.name}` is private; the privacy unit identifies users and must be public",
                           hint=f"make it public first, on purpose: ALTER TABLE {quote_name(table.name)} SET COLUMN "
                                f"{quote_name(col.name)} PUBLIC").with_position(
            text, stmt.unit_pos.line or None, stmt.unit_pos.column or None, len(stmt.unit))
    if duck is not None:
        check_unique_units(table.from_sql, col.name, duck, repeats=table.sparsity is not None)
    return dataclasses.replace(table, privacy_unit=col.name)
