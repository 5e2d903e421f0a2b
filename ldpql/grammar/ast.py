"""The AST: frozen dataclasses named after the grammar rules of ``ldpql.lark``.

Every node carries ``pos`` (line, column, and the statement's character span for top-level nodes), so
semantic errors can point at the source. ``node.sql()`` is the canonical unparse: parsing it again gives an
equal node (the round trip that ``tests/fixtures/identity.sql`` checks).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True)
class Pos:
    """Where a node starts (1-based line/column) and its character span in the script."""

    line: int = 0
    column: int = 0
    start: int = 0
    end: int = 0


def _pos() -> Pos:
    return field(default_factory=Pos, compare=False, repr=False)


# Unquoted identifiers as DuckDB's scanner (PostgreSQL's) reads them: a letter, '_' or any non-ASCII character,
# then those, digits or '$' (`größe`, `café`, `名前`, `x$1`). DuckDB first turns the Unicode spaces below into
# blanks, so they separate words and belong to no name. ldpql.lark spells the same classes (a test keeps them equal).
UNICODE_SPACES = "\u00a0\u2000-\u200b\u202f\u205f\u2060\u3000\ufeff"
# written as negated classes (every character but ASCII punctuation and those spaces), which lark's strict-mode
# collision check (interegular) handles at once, where spelt-out Unicode ranges take it minutes
IDENT_START = "^\\x00-\\x40\\x5b-\\x5e\\x60\\x7b-\\x7f" + UNICODE_SPACES
IDENT_CONT = "^\\x00-\\x23\\x25-\\x2f\\x3a-\\x40\\x5b-\\x5e\\x60\\x7b-\\x7f" + UNICODE_SPACES
IDENT = f"[{IDENT_START}][{IDENT_CONT}]*"
_BARE = re.compile(IDENT + r"\Z")

# How deeply an expression may nest (parentheses, NOT, an AND inside an OR ...). A chain of one operator
# (a OR b OR c ...) counts as one level however long it is. The limit keeps every walk over an expression
# (unparse, planner, DuckDB's parser) far below Python's and DuckDB's recursion limits.
MAX_NESTING = 100

RESERVED = ("EPSILON", "DELTA", "OPTIONS", "EXPLAIN", "EVALUATE")
KEYWORDS = ("SELECT", "FROM", "WHERE", "GROUP", "BY", "AS", "AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL",
            "TRUE", "FALSE", "CREATE", "TABLE", "PUBLIC", "PRIVATE", "INTEGER", "BOOLEAN", "DEFAULT", "PRIVACY",
            "UNIT", "BUDGET", "ROUNDS", "INF", "REPEAT", "SHOW", "TABLES", "LEDGER", "DESCRIBE", "DESC", "USE",
            "SET", "ALTER", "DROP", "COLUMN", "ACCURACY", "SPARSITY") + RESERVED


def quote_name(name: str) -> str:
    """An identifier as written in SQL: bare when possible, else double-quoted (keywords too)."""
    if _BARE.match(name) and name.upper() not in KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_string(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


# ---- expressions ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Literal:
    """A constant: str, int, float (math.inf for INF), bool or None (NULL)."""

    value: str | int | float | bool | None
    pos: Pos = _pos()

    def sql(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return quote_string(v)
        if isinstance(v, float) and math.isinf(v):
            return "INF"
        return repr(v)


@dataclass(frozen=True)
class ColumnRef:
    """A column name."""

    name: str
    pos: Pos = _pos()

    def sql(self) -> str:
        return quote_name(self.name)


@dataclass(frozen=True)
class Comparison:
    """``left op right`` with op one of = <> != < <= > >=."""

    left: "Expr"
    op: str
    right: "Expr"
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"{self.left.sql()} {self.op} {self.right.sql()}"


@dataclass(frozen=True)
class InList:
    """``operand [NOT] IN (v, ...)``."""

    operand: "Expr"
    values: tuple[Literal, ...]
    negated: bool = False
    pos: Pos = _pos()

    def sql(self) -> str:
        vals = ", ".join(v.sql() for v in self.values)
        return f"{self.operand.sql()} {'NOT ' if self.negated else ''}IN ({vals})"


@dataclass(frozen=True)
class Between:
    """``operand [NOT] BETWEEN low AND high``."""

    operand: "Expr"
    low: "Expr"
    high: "Expr"
    negated: bool = False
    pos: Pos = _pos()

    def sql(self) -> str:
        neg = "NOT " if self.negated else ""
        return f"{self.operand.sql()} {neg}BETWEEN {self.low.sql()} AND {self.high.sql()}"


@dataclass(frozen=True)
class IsNull:
    """``operand IS [NOT] NULL``."""

    operand: "Expr"
    negated: bool = False
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"{self.operand.sql()} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True)
class Not:
    """``NOT operand``."""

    operand: "Expr"
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"NOT {_paren(self.operand)}"


@dataclass(frozen=True)
class BoolOp:
    """``left AND right`` or ``left OR right``."""

    op: str
    left: "Expr"
    right: "Expr"
    pos: Pos = _pos()

    def sql(self) -> str:
        return f" {self.op} ".join(_paren(e, self.op) for e in operands(self))

    # Equality, hash and repr walk a chain iteratively (the generated ones recurse once per operand, and a
    # WHERE of thousands of ORs would exhaust the stack). AND and OR are associative, so two chains are
    # equal when their operands are: `(a OR b) OR c` == `a OR (b OR c)`, both unparsed as `a OR b OR c`.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BoolOp):
            return NotImplemented
        mine, theirs = operands(self), operands(other)
        return self.op == other.op and len(mine) == len(theirs) and all(a == b for a, b in zip(mine, theirs))

    def __hash__(self) -> int:
        return hash((self.op, *operands(self)))

    def __repr__(self) -> str:
        return f"BoolOp({self.op!r}, {operands(self)!r})"


def operands(e: BoolOp) -> list["Expr"]:
    """The operands of a chain of ``e``'s operator (``a OR b OR c``), left to right. Iterative: a generated
    WHERE of thousands of ORs is one chain, and must not exhaust Python's stack."""
    out, todo = [], [e]
    while todo:
        node = todo.pop()
        if isinstance(node, BoolOp) and node.op == e.op:
            todo += [node.right, node.left]
        else:
            out.append(node)
    return out


def _paren(e: "Expr", parent_op: str | None = None) -> str:
    """Parenthesise a boolean sub-expression unless it binds at least as tightly as its parent."""
    if isinstance(e, BoolOp) and not (parent_op == e.op == "AND" or (parent_op == "OR" and e.op in ("AND", "OR"))):
        return f"({e.sql()})"
    return e.sql()


Expr = Union[Literal, ColumnRef, Comparison, InList, Between, IsNull, Not, BoolOp]


_CHILDREN = {Comparison: ("left", "right"), InList: ("operand",), Between: ("operand", "low", "high"),
             IsNull: ("operand",), Not: ("operand",), BoolOp: ("left", "right")}


def children(e: Expr) -> list[Expr]:
    """The direct sub-expressions of ``e``, left to right ([] for a column or a literal)."""
    return [getattr(e, name) for name in _CHILDREN.get(type(e), ())]


def columns_of(e: Expr) -> list[ColumnRef]:
    """Every column reference inside an expression, in order (iteratively, however long the expression)."""
    found, todo = [], [e]
    while todo:
        node = todo.pop()
        if isinstance(node, ColumnRef):
            found.append(node)
        todo += reversed(children(node))
    return found


def nesting(e: Expr) -> int:
    """How deeply ``e`` nests, counting a chain of one operator (``a OR b OR c``) as one level."""
    deepest, todo = 0, [(e, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        for child in children(node):
            chained = isinstance(node, BoolOp) and isinstance(child, BoolOp) and child.op == node.op
            todo.append((child, depth if chained else depth + 1))
    return deepest


# ---- SELECT -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NamedArg:
    """``name => value`` inside an aggregate call."""

    name: str
    value: Literal
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"{self.name} => {self.value.sql()}"


@dataclass(frozen=True)
class Call:
    """A function call in the select list: ``NAME(args, name => value)`` or ``NAME(*)``."""

    name: str
    args: tuple[Expr, ...] = ()
    named: tuple[NamedArg, ...] = ()
    star: bool = False
    pos: Pos = _pos()

    def sql(self) -> str:
        inner = "*" if self.star else ", ".join([a.sql() for a in self.args] + [n.sql() for n in self.named])
        return f"{self.name.upper()}({inner})"


@dataclass(frozen=True)
class SelectItem:
    """One output of a SELECT: an aggregate call or a (public, grouped) column, with an optional alias."""

    expr: Call | ColumnRef
    alias: str | None = None
    pos: Pos = _pos()

    def sql(self) -> str:
        return self.expr.sql() + (f" AS {quote_name(self.alias)}" if self.alias else "")


@dataclass(frozen=True)
class Option:
    """``name = value`` inside OPTIONS (...)."""

    name: str
    value: Literal
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"{self.name} = {self.value.sql()}"


@dataclass(frozen=True)
class Select:
    """``SELECT items [FROM t] [WHERE e] [GROUP BY cols] [EPSILON e | EPSILON IN (e, ...) | ACCURACY ±a]
    [DELTA d] [OPTIONS (...)]``.

    At most one of ``epsilon``, ``sweep`` (EXPLAIN's side-by-side predictions at each listed ε) and
    ``accuracy`` (the planner picks the smallest ε whose predicted error is within ±a) is set; the parser
    refuses two of them with a caret."""

    items: tuple[SelectItem, ...]
    table: str | None = None
    where: Expr | None = None
    group_by: tuple[ColumnRef, ...] = ()
    epsilon: Literal | None = None
    delta: Literal | None = None
    options: tuple[Option, ...] = ()
    accuracy: Literal | None = None
    sweep: tuple[Literal, ...] = ()
    pos: Pos = _pos()
    sparsity: int | None = None   # GROUP BY key SPARSITY s: the statement's cap on keys per user (key-value data)

    def sql(self) -> str:
        parts = ["SELECT " + ", ".join(i.sql() for i in self.items)]
        if self.table:
            parts.append(f"FROM {quote_name(self.table)}")
        if self.where is not None:
            parts.append(f"WHERE {self.where.sql()}")
        if self.group_by:
            parts.append("GROUP BY " + ", ".join(c.sql() for c in self.group_by)
                         + (f" SPARSITY {self.sparsity}" if self.sparsity is not None else ""))
        delta = f" DELTA {self.delta.sql()}" if self.delta else ""
        if self.epsilon is not None:
            parts.append(f"EPSILON {self.epsilon.sql()}{delta}")
        elif self.sweep:
            parts.append(f"EPSILON IN ({', '.join(e.sql() for e in self.sweep)}){delta}")
        elif self.accuracy is not None:
            parts.append(f"ACCURACY ±{self.accuracy.sql()}{delta}")
        if self.options:
            parts.append("OPTIONS (" + ", ".join(o.sql() for o in self.options) + ")")
        return " ".join(parts)

    def option(self, name: str) -> Literal | None:
        """The value of OPTIONS key ``name`` (case-insensitive), or None."""
        return next((o.value for o in self.options if o.name.lower() == name.lower()), None)


@dataclass(frozen=True)
class Explain:
    """``EXPLAIN select``: the plan, spending nothing."""

    select: Select
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"EXPLAIN {self.select.sql()}"


@dataclass(frozen=True)
class Evaluate:
    """``EVALUATE select [REPEAT n]``: error statistics against the true answer (evaluation mode only)."""

    select: Select
    repeat: int = 100
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"EVALUATE {self.select.sql()} REPEAT {self.repeat}"


# ---- CREATE TABLE -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Distribution:
    """``DISTRIBUTION family (SIGMA s)`` or ``(SIGMA BETWEEN a AND b)``: what the owner declares the values'
    distribution to be (public metadata, never checked against the data)."""

    family: str
    sigma_low: float
    sigma_high: float
    ranged: bool = False
    pos: Pos = _pos()

    def sql(self) -> str:
        sigma = f"BETWEEN {_num(self.sigma_low)} AND {_num(self.sigma_high)}" if self.ranged else _num(self.sigma_low)
        return f"DISTRIBUTION {self.family.upper()} (SIGMA {sigma})"


@dataclass(frozen=True)
class RangeDomain:
    """``[INTEGER] BETWEEN low AND high [DISTRIBUTION ...]``."""

    low: float
    high: float
    integer: bool = False
    pos: Pos = _pos()
    distribution: Distribution | None = None

    def sql(self) -> str:
        dist = f" {self.distribution.sql()}" if self.distribution is not None else ""
        return f"{'INTEGER ' if self.integer else ''}BETWEEN {_num(self.low)} AND {_num(self.high)}{dist}"


@dataclass(frozen=True)
class SetDomain:
    """``IN (v1, v2, ...)``: the declared categories."""

    values: tuple[Literal, ...]
    pos: Pos = _pos()

    def sql(self) -> str:
        return "IN (" + ", ".join(v.sql() for v in self.values) + ")"


@dataclass(frozen=True)
class BooleanDomain:
    """``BOOLEAN``: a private true/false column."""

    pos: Pos = _pos()

    def sql(self) -> str:
        return "BOOLEAN"


Domain = Union[RangeDomain, SetDomain, BooleanDomain]


def _num(x: float) -> str:
    if isinstance(x, int):  # exact, and no float() of an integer too large for a float
        return repr(x)
    return repr(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


@dataclass(frozen=True)
class ColumnDef:
    """``name [PUBLIC|PRIVATE] [domain] [NOT NULL] [DEFAULT v]``; a column is private unless declared PUBLIC."""

    name: str
    public: bool = False
    explicit: bool = False
    domain: Domain | None = None
    default: Literal | None = None
    pos: Pos = _pos()
    not_null: bool = False

    def sql(self) -> str:
        parts = [quote_name(self.name)]
        if self.explicit:
            parts.append("PUBLIC" if self.public else "PRIVATE")
        if self.domain is not None:
            parts.append(self.domain.sql())
        if self.not_null:
            parts.append("NOT NULL")
        if self.default is not None:
            parts.append(f"DEFAULT {self.default.sql()}")
        return " ".join(parts)


@dataclass(frozen=True)
class Source:
    """Where a table's rows come from: a file path or glob, a DuckDB table, or a DuckDB query."""

    kind: str  # 'file' | 'table' | 'query'
    text: str
    pos: Pos = _pos()

    def sql(self) -> str:
        return quote_string(self.text) if self.kind == "file" else self.text


@dataclass(frozen=True)
class CreateTable:
    """``CREATE TABLE name FROM source (columns) [PRIVACY UNIT c] [BUDGET EPSILON e [DELTA d]] [ROUNDS k]``."""

    name: str
    source: Source
    columns: tuple[ColumnDef, ...] = ()
    privacy_unit: str | None = None
    budget_epsilon: float | None = None
    budget_delta: float | None = None
    rounds: int | None = None
    pos: Pos = _pos()
    sparsity: int | None = None   # PRIVACY UNIT u SPARSITY s: a unit may have several rows, at most s keys used

    def sql(self) -> str:
        parts = [f"CREATE TABLE {quote_name(self.name)} FROM {self.source.sql()}"]
        if self.columns:
            parts.append("(" + ", ".join(c.sql() for c in self.columns) + ")")
        if self.privacy_unit:
            parts.append(f"PRIVACY UNIT {quote_name(self.privacy_unit)}"
                         + (f" SPARSITY {self.sparsity}" if self.sparsity is not None else ""))
        if self.budget_epsilon is not None:
            delta = f" DELTA {_num(self.budget_delta)}" if self.budget_delta is not None else ""
            parts.append(f"BUDGET EPSILON {_num(self.budget_epsilon)}{delta}")
        if self.rounds is not None:
            parts.append(f"ROUNDS {self.rounds}")
        return " ".join(parts)


# ---- small statements -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShowTables:
    """``SHOW TABLES``."""

    pos: Pos = _pos()

    def sql(self) -> str:
        return "SHOW TABLES"


@dataclass(frozen=True)
class ShowBudget:
    """``SHOW BUDGET [t]``."""

    table: str | None = None
    pos: Pos = _pos()

    def sql(self) -> str:
        return "SHOW BUDGET" + (f" {quote_name(self.table)}" if self.table else "")


@dataclass(frozen=True)
class ShowLedger:
    """``SHOW LEDGER [t]``."""

    table: str | None = None
    pos: Pos = _pos()

    def sql(self) -> str:
        return "SHOW LEDGER" + (f" {quote_name(self.table)}" if self.table else "")


@dataclass(frozen=True)
class Describe:
    """``DESCRIBE t``."""

    table: str
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"DESCRIBE {quote_name(self.table)}"


@dataclass(frozen=True)
class Use:
    """``USE t``: the default table of later statements."""

    table: str
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"USE {quote_name(self.table)}"


@dataclass(frozen=True)
class SetOption:
    """``SET name = value``: a session default (seed, confidence, model, ...)."""

    name: str
    value: Literal
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"SET {self.name} = {self.value.sql()}"


@dataclass(frozen=True)
class AlterBudget:
    """``ALTER TABLE t SET BUDGET EPSILON e [DELTA d]``: the only way to raise a budget; logged."""

    table: str
    epsilon: float
    delta: float | None = None
    pos: Pos = _pos()

    def sql(self) -> str:
        delta = f" DELTA {_num(self.delta)}" if self.delta is not None else ""
        return f"ALTER TABLE {quote_name(self.table)} SET BUDGET EPSILON {_num(self.epsilon)}{delta}"


@dataclass(frozen=True)
class AlterColumn:
    """``ALTER TABLE t SET COLUMN c PUBLIC`` or ``... SET COLUMN c PRIVATE [domain] [DEFAULT v]``: the data
    owner's explicit change of a column's declaration (the only way to loosen it); logged."""

    table: str
    column: ColumnDef
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"ALTER TABLE {quote_name(self.table)} SET COLUMN {self.column.sql()}"


@dataclass(frozen=True)
class AlterUnit:
    """``ALTER TABLE t SET PRIVACY UNIT u``: the data owner's explicit change of the privacy unit; logged."""

    table: str
    unit: str
    unit_pos: Pos = _pos()
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"ALTER TABLE {quote_name(self.table)} SET PRIVACY UNIT {quote_name(self.unit)}"


@dataclass(frozen=True)
class DropTable:
    """``DROP TABLE t``: forgets the declaration, never the spend."""

    table: str
    pos: Pos = _pos()

    def sql(self) -> str:
        return f"DROP TABLE {quote_name(self.table)}"


Statement = Union[CreateTable, Select, Explain, Evaluate, ShowTables, ShowBudget, ShowLedger, Describe, Use,
                  SetOption, AlterBudget, AlterColumn, AlterUnit, DropTable]
