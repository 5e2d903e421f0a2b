"""Sources and column metadata: which columns are public, the declared domains, privacy unit and budget.

Domains are declared, never read from the data (DESIGN 2.1). The catalog turns a declared domain into the
DuckDB expression every user applies locally before randomizing: clamping to the range, mapping unknown
categories to OTHER, replacing NULL/NaN with the declared default. These are deterministic local maps, so
they cost no privacy, and the data treatment is the same whatever the data holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import duckdb

from ldpql.errors import CatalogError, did_you_mean
from ldpql.grammar import ast
from ldpql.grammar.ast import quote_name, quote_string

OTHER = "OTHER"
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL")


def _sql_literal(v: Any) -> str:
    return quote_string(v) if isinstance(v, str) else repr(v)


@dataclass(frozen=True)
class NumericDomain:
    """``BETWEEN low AND high``: values are clamped into it; NULL/NaN become ``default`` (midpoint if unset)."""

    low: float
    high: float
    integer: bool = False
    default: float | None = None

    @property
    def null_value(self) -> float:
        """What a NULL or NaN stands for: the declared DEFAULT, else the midpoint of the range."""
        mid = (self.low + self.high) / 2
        return self.default if self.default is not None else (round(mid) if self.integer else mid)

    @property
    def size(self) -> int | None:
        """Number of values of an integer domain, None for a continuous one."""
        return int(self.high - self.low) + 1 if self.integer else None

    def clamped_sql(self, col: str) -> str:
        """DuckDB expression: the value each user randomizes, clamped to [low, high]."""
        x = f"CAST({quote_name(col)} AS DOUBLE)"
        v = f"CASE WHEN {x} IS NULL OR isnan({x}) THEN {self.null_value!r} ELSE {x} END"
        if self.integer:
            v = f"round({v})"
        return f"least(greatest({v}, {self.low!r}), {self.high!r})"

    def describe(self) -> str:
        kind = "INTEGER " if self.integer else ""
        return f"{kind}BETWEEN {self.low:g} AND {self.high:g}; NULL -> {self.null_value:g}; clamped"


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

    def index_sql(self, col: str) -> str:
        """DuckDB expression: the 0-based category index of each row (OTHER = d - 1)."""
        items = ", ".join(_sql_literal(v) for v in self.values)
        x = quote_name(col) if self.default is None else f"coalesce({quote_name(col)}, {_sql_literal(self.default)})"
        return f"coalesce(list_position([{items}], {x}), {self.size}) - 1"

    def describe(self) -> str:
        shown = ", ".join(map(str, self.values[:6])) + (", ..." if len(self.values) > 6 else "")
        return f"IN ({shown}) + OTHER; {self.size} categories"


@dataclass(frozen=True)
class BooleanDomain:
    """``BOOLEAN``: true/false; NULL is false unless a DEFAULT says otherwise."""

    default: bool = False

    size = 2

    def index_sql(self, col: str) -> str:
        return f"CASE WHEN coalesce(CAST({quote_name(col)} AS BOOLEAN), {str(self.default).upper()}) THEN 1 ELSE 0 END"

    def describe(self) -> str:
        return f"BOOLEAN; NULL -> {str(self.default).upper()}"


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
    identity: "SourceIdentity | None" = None

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


def _domain(cdef: ast.ColumnDef, dtype: str, table: str) -> Domain | None:
    d, default = cdef.domain, cdef.default.value if cdef.default is not None else None
    where = f"column `{cdef.name}` of `{table}`"
    base = dtype.split("(")[0].upper()
    if isinstance(d, ast.RangeDomain):
        if base not in NUMERIC_TYPES:
            raise CatalogError(f"{where} is {dtype}, but BETWEEN declares a numeric range",
                               hint="declare categories with IN (...), or cast the column in a FROM (SELECT ...) query")
        if not d.low < d.high:
            raise CatalogError(f"{where}: the range BETWEEN {d.low:g} AND {d.high:g} is empty",
                               hint="write the lower bound first")
        if default is not None and not isinstance(default, (int, float)):
            raise CatalogError(f"{where}: DEFAULT must be a number")
        return NumericDomain(float(d.low), float(d.high), d.integer, default)
    if isinstance(d, ast.SetDomain):
        values = tuple(v.value for v in d.values)
        if len(set(values)) != len(values):
            raise CatalogError(f"{where}: a category is listed twice in IN (...)")
        strings = all(isinstance(v, str) for v in values)
        if not strings and not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise CatalogError(f"{where}: categories must be all strings or all numbers")
        if strings != (base in ("VARCHAR", "STRING", "TEXT", "ENUM")):
            raise CatalogError(f"{where} is {dtype}, but its categories are {'strings' if strings else 'numbers'}",
                               hint="write the categories with the column's type")
        if OTHER in values:
            raise CatalogError(f"{where}: `{OTHER}` is the bucket for undeclared values and cannot be declared")
        return CategoricalDomain(values, default)
    if isinstance(d, ast.BooleanDomain):
        return BooleanDomain(bool(default) if default is not None else False)
    return None


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
    """Check a CREATE TABLE against DuckDB's schema of the source and return the Table. Reads no values,
    except the privacy-unit column (an identifier, not private) to refuse duplicated units."""
    from_sql, source_id = source_sql(stmt.source)
    schema = describe_source(from_sql, stmt.source, duck)
    return make_table(stmt.name, stmt.source.kind, stmt.source.text, from_sql, source_id, schema, stmt, duck, text)


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
               stmt: ast.CreateTable, duck: duckdb.DuckDBPyConnection, text: str = "") -> Table:
    """Combine a source's schema with the declarations of ``stmt`` into a Table, checking each one."""
    columns = {c: Column(c, t) for c, t in schema.items()}
    lowered = {c.lower(): c for c in schema}
    for cdef in stmt.columns:
        real = lowered.get(cdef.name.lower())
        if real is None:
            raise CatalogError(f"column `{cdef.name}` is declared but the source has no such column",
                               hint=did_you_mean(cdef.name, list(schema)) or f"columns are: {', '.join(schema)}"
                               ).with_position(text, cdef.pos.line or None, cdef.pos.column or None, len(cdef.name))
        if cdef.public and cdef.domain is not None:
            raise CatalogError(f"column `{cdef.name}` is PUBLIC; a domain is only declared for private columns")
        columns[real] = Column(real, schema[real], cdef.public, _domain(cdef, schema[real], name))
    unit = None
    if stmt.privacy_unit:
        unit = lowered.get(stmt.privacy_unit.lower())
        if unit is None:
            raise CatalogError(f"privacy unit column `{stmt.privacy_unit}` is not in the source",
                               hint=did_you_mean(stmt.privacy_unit, list(schema)))
        columns[unit] = Column(unit, schema[unit], True, None)
        _check_unique_units(from_sql, unit, duck)
    eps = stmt.budget_epsilon if stmt.budget_epsilon is not None else 1.0
    delta = stmt.budget_delta or 0.0
    check_budget(eps, delta)
    if stmt.rounds is not None and stmt.rounds < 1:
        raise CatalogError("ROUNDS must be at least 1")
    return Table(name, kind, source_text, from_sql, source_id, columns, unit, float(eps), float(delta), stmt.rounds,
                 SourceIdentity(frozenset([source_id]), "", kind in ("file", "frame", "table")))


def check_budget(eps: float, delta: float) -> None:
    """A budget must be a positive finite ε and a δ in [0, 1)."""
    if not (0 < eps < float("inf")):
        raise CatalogError(f"BUDGET EPSILON must be finite and positive, but is {eps:g}")
    if not (0 <= delta < 1):
        raise CatalogError(f"BUDGET DELTA must be in [0, 1), but is {delta:g}")


def _check_unique_units(from_sql: str, unit: str, duck: duckdb.DuckDBPyConnection) -> None:
    dup = duck.execute(f"SELECT count(*) FROM (SELECT {quote_name(unit)} FROM {from_sql} "
                       f"GROUP BY ALL HAVING count(*) > 1)").fetchall()[0][0]
    if dup:
        raise CatalogError(f"{dup} privacy unit(s) of `{unit}` appear on more than one row; each unit must be one user",
                           hint=f"pre-aggregate each unit's rows first: FROM (SELECT {unit}, avg(x) AS x "
                                f"FROM ... GROUP BY {unit})")


# ---- TEMPORARY stand-ins until the catalog branch lands --------------------------------------------------------
@dataclass(frozen=True)
class SourceIdentity:
    keys: frozenset
    fingerprint: str
    stable_rows: bool


def declaration(table: Table) -> dict:
    return {"columns": {c.name: {"public": c.public, "domain": repr(c.domain)} for c in table.columns.values()},
            "unit": table.privacy_unit}


def check_tightens(held: dict, new: dict, table: str) -> None:
    for name, col in held["columns"].items():
        if not col["public"] and new["columns"].get(name, {}).get("public"):
            raise CatalogError(f"`{name}` is private in the declaration bound to this data")


def fingerprint(table: Table, duck) -> str:
    return ""
