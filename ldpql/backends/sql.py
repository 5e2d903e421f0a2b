"""Render :mod:`ldpql.expr` expressions as SQL text, in DuckDB's dialect or another engine's.

The backends are the only place where SQL text is written (DESIGN §4.2). A :class:`Dialect` says how the
few constructs that differ between engines are spelled (identifier quoting, string escapes, type names,
integer division, list position); :func:`render` walks an expression iteratively-enough: AND/OR chains are
flat, so a WHERE of thousands of ORs is one level, and the parser caps every other nesting at 100.
"""

from __future__ import annotations

import math
from typing import Any

from ldpql import expr as E
from ldpql.grammar.ast import quote_name, quote_string


class Dialect:
    """DuckDB's SQL (the default); subclasses override what their engine spells differently."""

    def name(self, column: str) -> str:
        return quote_name(column)

    def string(self, value: str) -> str:
        return quote_string(value)

    def type(self, name: str) -> str:
        return name

    def literal(self, v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, float) and not math.isfinite(v):
            return f"CAST('{v}' AS DOUBLE)"
        return repr(v)

    # binary operators spelled as functions: integer division, exclusive or, shift right
    spelled = {"^": lambda a, b: f"xor({a}, {b})", ">>": lambda a, b: f"({a} >> {b})"}

    def position(self, values: tuple, arg: str) -> str:
        items = ", ".join(self.literal(v) if isinstance(v, str) else f"CAST({float(v)!r} AS DOUBLE)" for v in values)
        return f"list_position([{items}], {arg})"

    def try_cast(self, arg: str, type_name: str) -> str:
        return f"TRY_CAST({arg} AS {self.type(type_name)})"

    def vector(self, items: list[str]) -> str:
        return f"list_value({', '.join(items)})"

    def call(self, func: str, args: list[str]) -> str:
        if func == "isnan":   # DuckDB folds isnan(x) to false from parquet min/max statistics, which leave NaN out
            return f"(NOT (isfinite({args[0]}) OR isinf({args[0]})))"   # (audit5 F9); isfinite is not folded
        return f"{func}({', '.join(args)})"


DUCKDB = Dialect()


def render(e: E.Expr, d: Dialect = DUCKDB) -> str:
    """SQL text of ``e`` in dialect ``d``."""
    r = lambda x: render(x, d)  # noqa: E731
    if isinstance(e, E.Column):
        return d.name(e.name)
    if isinstance(e, E.Literal):
        return d.literal(e.value)
    if isinstance(e, E.TryCast):
        return d.try_cast(r(e.arg), e.type)
    if isinstance(e, E.Cast):
        return f"CAST({r(e.arg)} AS {d.type(e.type)})"
    if isinstance(e, E.Call):
        return d.call(e.func, [r(a) for a in e.args])
    if isinstance(e, E.BinOp):
        if e.op in d.spelled:
            return d.spelled[e.op](r(e.left), r(e.right))
        return f"({r(e.left)} {e.op} {r(e.right)})"
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
    if isinstance(e, E.Position):
        return d.position(e.values, r(e.arg))
    if isinstance(e, E.Vector):
        return d.vector([r(x) for x in e.items])
    raise TypeError(f"cannot render {e!r}")
