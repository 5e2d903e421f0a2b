"""Rendering: turns results, plans and errors into styled text fragments, with no I/O and no privacy logic.

- :func:`render_result` is what the REPL prints for one statement's :class:`ldpql.Result` in a mode;
- :func:`render_table` draws an aligned box table: estimates as ``41.7 ± 3.2 (95%)`` (:func:`format_estimate`
  rounds them to their interval's precision), histogram columns with inline bars, too-wide text columns cut;
- :func:`render_plan` marks the chosen mechanism and the rejected candidates in the EXPLAIN tree;
- :func:`render_error` and :func:`problem` format errors and their hints.

Fragments are ``(style, text)`` pairs whose ``class:`` styles the REPL's ``STYLE`` defines; a plain-text sink
just joins the texts.

>>> format_estimate(41.734, (38.53, 44.93, 0.95))
('41.7', '± 3.2', '(95%)')
>>> problem("unknown mode `html`", "choose one of table, csv")
[('class:error', 'unknown mode `html`'), ('', '\\n'), ('class:hint', 'Hint: choose one of table, csv')]
"""

from __future__ import annotations

import math
import re
from typing import Any

from prompt_toolkit.utils import get_cwidth

import ldpql
from ldpql.grammar import ast

Fragments = list[tuple[str, str]]
BAR_WIDTH = 24


def _plain(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else format(v, ",.6g")
    return str(v)


def format_estimate(value: float | None, iv: tuple | None) -> tuple[str, str, str]:
    """(estimate, interval, confidence) texts: ``('41.7', '± 3.2', '(95%)')``, rounded to the interval's
    precision; an asymmetric interval is shown as ``[low, high]``."""
    if value is None or iv is None:
        return _plain(value), "", ""
    low, high, conf = iv
    half = (high - low) / 2
    decimals = min(10, max(0, 1 - math.floor(math.log10(half)))) if 0 < half < math.inf else None
    num = (lambda x: _plain(float(x))) if decimals is None else (lambda x: f"{x:,.{decimals}f}")
    # symmetric when the two sides differ by less than the displayed precision
    symmetric = abs((value - low) - (high - value)) < (0.5 * 10.0 ** -decimals if decimals is not None else 1e-12)
    ci = f"± {num(half)}" if symmetric else f"[{num(low)}, {num(high)}]"
    return num(value), ci, f"({conf * 100:.3g}%)"


def _bar(value: float | None, top: float) -> str:
    """An inline horizontal bar, eighth-block resolution, ``BAR_WIDTH`` cells for the largest value."""
    if value is None or top <= 0 or value <= 0 or math.isnan(value):
        return ""
    eighths = round(min(value / top, 1.0) * BAR_WIDTH * 8)
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


def histogram_columns(res: ldpql.Result) -> set[str]:
    """Output columns of histogram-like (table-valued) aggregates, read from the plan that ran."""
    return {a.output for a in getattr(res.plan, "aggregates", []) or [] if getattr(a, "table_valued", False)}


def _column_cells(res: ldpql.Result, j: int, bars: bool) -> list[Fragments]:
    rows, ivs = res.fetchall(), res.intervals()
    values = [r[j] for r in rows]
    if not any(iv[j] for iv in ivs):
        return [[("class:null" if v is None else "", _plain(v))] for v in values]
    parts = [format_estimate(v, iv[j]) for v, iv in zip(values, ivs)]
    w = [max(get_cwidth(p[k]) for p in parts) for k in range(3)]
    top = max((v for v in values if isinstance(v, (int, float)) and not math.isnan(v)), default=0.0)
    cells = []
    for v, (est, ci, conf) in zip(values, parts):
        cell = [("class:null" if v is None else "", est.rjust(w[0]))]
        if w[1]:
            cell.append(("class:interval", f" {ci.ljust(w[1])} {conf.ljust(w[2])}"))
        if bars:
            cell.append(("class:bar", "  " + _bar(v, top).ljust(BAR_WIDTH)))
        cells.append(cell)
    return cells


def _width(fragments: Fragments) -> int:
    return sum(get_cwidth(t) for _, t in fragments)


def _fit(headers: list[Fragments], columns: list[list[Fragments]], widths: list[int], limit: int,
         allowed: set[int] | None = None) -> None:
    """Shrink the widest plain-text columns (of ``allowed`` ones, when given), cutting their cells with '…', until
    the table fits ``limit``."""
    while (excess := sum(widths) + 3 * len(widths) + 1 - limit) > 0:
        plain = [j for j, col in enumerate(columns) if widths[j] > 12 and all(len(c) == 1 for c in col)
                 and (allowed is None or j in allowed)]
        if not plain:
            return
        j = max(plain, key=lambda k: widths[k])   # the widest first, never below the next widest (balanced)
        widths[j] = max(12, widths[j] - excess, min(widths[j] - 1, max([widths[k] for k in plain if k != j] + [0])))
        for cell in [headers[j]] + columns[j]:
            style, text = cell[0]
            if get_cwidth(text) > widths[j]:
                text = text[:widths[j]]
                while get_cwidth(text) > widths[j] - 1:
                    text = text[:-1]
                cell[0] = (style, text + "…")


def render_table(res: ldpql.Result, width: int | None = None) -> Fragments:
    """An aligned box table, at most ``width`` columns wide if it can; estimates with their intervals,
    histogram columns with inline bars."""
    hist = histogram_columns(res)
    headers = [[("class:header", c)] for c in res.columns]
    columns = [_column_cells(res, j, c in hist) for j, c in enumerate(res.columns)]
    widths = [max([get_cwidth(c)] + [_width(cell) for cell in col]) for c, col in zip(res.columns, columns)]
    if width:
        _fit(headers, columns, widths, width, {j for j, c in enumerate(res.columns) if c in res.cut} or None)
    numeric = [all(isinstance(r[j], (int, float)) or r[j] is None for r in res.fetchall())
               for j in range(len(res.columns))]

    def rule(left: str, mid: str, right: str) -> Fragments:
        return [("class:frame", left + mid.join("─" * (w + 2) for w in widths) + right + "\n")]

    def line(cells: list[Fragments], align: list[bool]) -> Fragments:
        out: Fragments = [("class:frame", "│")]
        for cell, w, right in zip(cells, widths, align):
            pad = " " * (w - _width(cell))
            left, trail = (pad, "") if right else ("", pad)
            out += [("", " " + left)] + cell + [("", trail + " "), ("class:frame", "│")]
        return out + [("", "\n")]

    out = rule("┌", "┬", "┐") + line(headers, [False] * len(widths))
    out += rule("├", "┼", "┤")
    for i in range(len(res)):
        out += line([col[i] for col in columns], numeric)
    out += rule("└", "┴", "┘")
    if not len(res):
        out.insert(len(out) - 1, ("class:null", "(no rows)\n"))
    out[-1] = (out[-1][0], out[-1][1].rstrip("\n"))
    return out


def render_plan(text: str) -> Fragments:
    """The EXPLAIN tree (``str(plan)``), with the chosen mechanism and the rejected candidates marked."""
    out: Fragments = []
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"^([│├└─ ]*)(.*)$", line)
        tree, rest = m.group(1), m.group(2)
        style = "class:title" if i == 0 else "class:chosen" if rest.startswith("mechanism *") else \
            "class:rejected" if rest.startswith("rejected") else ""
        out += [("class:frame", tree), (style, rest), ("", "\n")]
    return out[:-1]


def render_result(res: ldpql.Result, mode: str = "table", stmt: Any = None, width: int | None = None) -> Fragments:
    """What the REPL prints for one statement's result in ``mode``."""
    if mode != "table":
        return [("", res.render(mode))]
    if res.view is not None and not isinstance(stmt, ast.Explain):   # EXPLAIN is drawn as a tree below
        res = res.view                                                 # the table display's own shape (SHOW LEDGER)
    out: Fragments = []
    if res.message:
        out.append(("class:warning" if "NOT private" in res.message else "class:message", res.message + "\n"))
    if isinstance(stmt, ast.Explain) and res.plan is not None:
        out += render_plan(str(res.plan)) + [("", "\n")]
    elif res.columns:
        out += render_table(res, width) + [("", "\n")]
    out += [("class:warning" if "NOT private" in n else "class:note", n + "\n") for n in res.notes]
    if res.footer:
        out.append(("class:footer", res.footer + "\n"))
    if out:
        out[-1] = (out[-1][0], out[-1][1].rstrip("\n"))
    return out


def problem(message: str, hint: str | None = None) -> Fragments:
    """A problem the REPL reports itself (bad command, unknown topic): the message in red, then the hint."""
    return [("class:error", message)] + ([("", "\n"), ("class:hint", f"Hint: {hint}")] if hint else [])


def render_error(e: BaseException, where: str = "") -> Fragments:
    """An error: its first line in red, the statement with the caret, the hint, and where the input stopped."""
    lines = str(e).splitlines() or [type(e).__name__]
    out: Fragments = [("class:error", lines[0])]
    for line in lines[1:]:
        out += [("", "\n"), ("class:hint" if line.startswith("Hint:") else "", line)]
    if where:
        out += [("", "\n"), ("class:note", where)]
    return out
