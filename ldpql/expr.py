"""ldpql's own expressions: how a user's row becomes a randomizer's input, rendered by each backend.

An encoding (DESIGN §4.2) is a value of this small, closed expression type, never SQL text: the planner and
the mechanisms build it from the declared schema, and each backend renders it (:mod:`ldpql.backends.sql` for
DuckDB and Spark SQL). Every constructor below is *total*: whatever a row holds (a string where a number was
expected, NULL, NaN, ±inf, a value far outside the domain) the expression yields a value inside the declared
domain and never raises, because an error raised while rows are encoded would depend on a private value
(DESIGN §4.5). Conversions are therefore ``TryCast`` (a failed conversion is NULL, which takes the documented
NULL treatment) and every index is clamped in the expression itself.

The node types mirror a small SQL subset (columns, literals, arithmetic, comparisons, CASE, a few functions)
so that both engines compute the same floating-point arithmetic, in the same order, as numpy does for the
same encoding (the exact-path and per-user tests compare them). The public ``WHERE`` of a statement is a
grammar AST; :func:`ldpql.backends.base.where_expr` turns it into these nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


FUNCTIONS = frozenset({"least", "greatest", "round", "floor", "ceil", "isnan", "coalesce", "abs"})
TYPES = frozenset({"DOUBLE", "BIGINT", "VARCHAR", "BOOLEAN"})   # and a declared temporal type, for TryCast


class Expr:
    """Base of every node. Nodes are frozen dataclasses, hashable, so an encoding can key a cache."""


@dataclass(frozen=True)
class Column(Expr):
    name: str


@dataclass(frozen=True)
class Literal(Expr):
    """None (NULL), a bool, an int, a float or a str."""

    value: Any


@dataclass(frozen=True)
class TryCast(Expr):
    """``arg`` converted to ``type``; NULL where it does not convert (never raises)."""

    arg: Expr
    type: str


@dataclass(frozen=True)
class Cast(Expr):
    """``arg`` converted to ``type`` where the conversion cannot fail (an integral DOUBLE to BIGINT)."""

    arg: Expr
    type: str


@dataclass(frozen=True)
class Call(Expr):
    """One of :data:`FUNCTIONS`, with SQL's NULL rules (least/greatest skip NULLs)."""

    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp(Expr):
    """Arithmetic (+ - * / % and // for integer division), a comparison (= <> < <= > >=), or on BIGINTs
    ``^`` (exclusive or), ``&`` and ``>>`` (shift right)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Logic(Expr):
    """``args[0] op args[1] op ...`` with op AND or OR (a flat chain: no recursion per operand)."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Not(Expr):
    arg: Expr


@dataclass(frozen=True)
class IsNull(Expr):
    arg: Expr
    negated: bool = False


@dataclass(frozen=True)
class In(Expr):
    arg: Expr
    values: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN when THEN then ELSE otherwise END``."""

    when: Expr
    then: Expr
    otherwise: Expr


@dataclass(frozen=True)
class Position(Expr):
    """The 1-based position of ``arg`` among the literal ``values``; NULL when absent."""

    values: tuple[Any, ...]
    arg: Expr


@dataclass(frozen=True)
class Vector(Expr):
    """Several numbers per row, read together (a joint release over d columns): the backends return them as
    an (n, d) array of doubles, and value counts over distinct rows. Its items are total DOUBLE expressions
    (NaN, not NULL, where a value is missing)."""

    items: tuple[Expr, ...]


def lit(v: Any) -> Literal:
    return v if isinstance(v, Expr) else Literal(v)


def call(func: str, *args: Any) -> Call:
    if func not in FUNCTIONS:
        raise ValueError(f"unknown function {func}")
    return Call(func, tuple(lit(a) for a in args))


def op(symbol: str, left: Any, right: Any) -> BinOp:
    return BinOp(symbol, lit(left), lit(right))


def double(v: float) -> Cast:
    """A number literal as a DOUBLE (so integer literals do not turn the arithmetic into integer arithmetic)."""
    return Cast(Literal(float(v)), "DOUBLE")


# ---- the encodings' building blocks ------------------------------------------------------------------------

def number(column: str) -> TryCast:
    """A column read as a number: NULL where the row's value does not convert."""
    return TryCast(Column(column), "DOUBLE")


def null_to(x: Expr, value: float) -> Case:
    """``x``, with NULL and NaN replaced by ``value``."""
    return Case(Logic("OR", (IsNull(x), call("isnan", x))), Literal(value), x)


def clamp(x: Expr, low: Any, high: Any) -> Call:
    """``x`` forced into [low, high] (least/greatest: NULL-free inputs give a value inside)."""
    return call("least", call("greatest", x, low), high)


def index(x: Expr, size: int) -> Cast:
    """A whole-number DOUBLE as a BIGINT index forced into [0, size): clamped *before* the cast, which would
    fail on a huge, infinite or NaN value (SQL engines order NaN above every number, so it lands on the top)."""
    return bounded_index(x, size - 1)


def bounded_index(x: Expr, top: int) -> Cast:
    """A whole-number DOUBLE clamped to [0, top], then cast to BIGINT (see :func:`index`)."""
    return Cast(clamp(x, 0, top), "BIGINT")


def threshold(x: Expr, cut: int) -> Case:
    """The bit ``x <= cut`` as 1/0."""
    return Case(op("<=", x, cut), Literal(1), Literal(0))


def indicator(condition: Expr) -> Case:
    """1 where ``condition`` holds, 0 where it is false or NULL."""
    return Case(condition, Literal(1), Literal(0))


def mixed_radix(parts: list[tuple[Expr, int]]) -> Expr:
    """The joint index of several indices: ((a·d_b + b)·d_c + c) ..."""
    out = parts[0][0]
    for x, size in parts[1:]:
        out = op("+", op("*", out, size), x)
    return out
