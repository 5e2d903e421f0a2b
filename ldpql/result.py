"""Result: rows, an interval for every estimated cell, the plan that ran and the ε it spent.

A Result is computed once; reading it (``fetchall``, ``df``, ``show``...) never runs or charges the statement
again. ``fetchall()`` returns every row each time; ``fetchone()`` walks the rows like a DuckDB cursor.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Sequence

Interval = tuple[float, float, float]   # (low, high, confidence)


class Result:
    """The answer to one statement."""

    def __init__(self, columns: Sequence[str], rows: Sequence[tuple], intervals: Sequence[Sequence] | None = None,
                 plan: Any = None, epsilon_spent: float = 0.0, message: str = "", notes: Sequence[str] = (),
                 footer: str = "", elapsed: float = 0.0, view: Result | None = None, cut: Sequence[str] = ()):
        self.columns = list(columns)
        # display only: ``view`` is what the 'table' display shows instead (fewer or shorter columns; SHOW LEDGER),
        # ``cut`` the columns that display may shorten with '…' to fit its width. csv, json and markdown, like
        # fetchall(), always give every column in full.
        self.view = view
        self.cut = tuple(cut)
        self._rows = [tuple(r) for r in rows]
        self._intervals = [list(i) for i in intervals] if intervals is not None else \
            [[None] * len(self.columns) for _ in self._rows]
        self.plan = plan
        self.epsilon_spent = epsilon_spent
        self.message = message
        self.notes = list(notes)
        self.footer = footer
        self.elapsed = elapsed
        self._cursor = 0

    # -- DuckDB-style accessors -------------------------------------------------------------------------------
    def fetchall(self) -> list[tuple]:
        """Every row, as a list of tuples (the same list on every call)."""
        return list(self._rows)

    def fetchone(self) -> tuple | None:
        """The next row, or None after the last one."""
        if self._cursor >= len(self._rows):
            return None
        self._cursor += 1
        return self._rows[self._cursor - 1]

    def intervals(self) -> list[list[Interval | None]]:
        """Per row, per column: (low, high, confidence) for an estimated cell, None for any other cell."""
        return [list(i) for i in self._intervals]

    def arrow(self):
        """The rows as a pyarrow Table."""
        import pyarrow as pa

        return pa.table({c: [r[i] for r in self._rows] for i, c in enumerate(self.columns)})

    def df(self):
        """The rows as a pandas DataFrame (needs the optional pandas extra)."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            from ldpql.errors import Error
            raise Error("Result.df() needs pandas", hint="pip install 'ldpql[pandas]', or use Result.arrow()") from None
        frame = pd.DataFrame(self._rows, columns=self.columns)
        for i in _estimated(self):   # each estimate's interval beside it, as <col>_low / <col>_high
            at = frame.columns.get_loc(self.columns[i]) + 1
            lows, highs = zip(*[(iv[i][0], iv[i][1]) if iv[i] else (None, None) for iv in self._intervals]) \
                if self._rows else ((), ())
            frame.insert(at, f"{self.columns[i]}_low", pd.Series(lows, dtype="float64"))
            frame.insert(at + 1, f"{self.columns[i]}_high", pd.Series(highs, dtype="float64"))
        return frame

    def show(self, fmt: str = "table") -> None:
        """Print the rows (estimates with their intervals), then the footer."""
        print(self.render(fmt))

    def render(self, fmt: str = "table", width: int | None = None) -> str:
        """The result as text: 'table' (aligned, intervals as ±; its ``view`` if it has one, at most ``width``
        characters wide where columns may be cut), 'csv', 'json' or 'markdown'."""
        if fmt == "csv":
            return _csv(self)
        if fmt == "json":
            return _json(self)
        if fmt == "table" and self.view is not None:
            return self.view.render(fmt, width)
        body = _table(self, markdown=fmt == "markdown", width=width if fmt == "table" else None) if self.columns else ""
        parts = [p for p in (self.message, body, *self.notes, self.footer) if p]
        return "\n".join(parts)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return self.render()


def _fmt_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return f"{v:.6g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def _fmt_cell(v: Any, iv: Interval | None) -> str:
    """``v ± half`` for an interval centred on v; ``v [low, high]`` for any other (clipped, one-sided)."""
    if iv is None or v is None or not isinstance(v, (int, float)):
        return _fmt_value(v)
    half = (iv[1] - iv[0]) / 2
    if abs((iv[0] + iv[1]) / 2 - v) <= 1e-9 * max(1.0, abs(v), half):
        return f"{_fmt_value(v)} ± {half:.3g}"
    return f"{_fmt_value(v)} [{_fmt_value(iv[0])}, {_fmt_value(iv[1])}]"


CUT_MIN = 9   # a cut column keeps at least this many characters


def _fit(header: list[str], cells: list[list[str]], widths: list[int], cut: list[int], limit: int) -> None:
    """Shorten the widest of the ``cut`` columns, with '…', until the plain table fits ``limit`` characters."""
    while (excess := sum(widths) + 2 * (len(widths) - 1) - limit) > 0:
        wide = [j for j in cut if widths[j] > CUT_MIN]
        if not wide:
            return
        j = max(wide, key=lambda k: widths[k])   # the widest first, never below the next widest (balanced)
        widths[j] = max(CUT_MIN, widths[j] - excess, min(widths[j] - 1, max([widths[k] for k in wide if k != j] + [0])))
        for row in [header] + cells:
            if len(row[j]) > widths[j]:
                row[j] = row[j][:widths[j] - 1] + "…"


def _table(r: Result, markdown: bool = False, width: int | None = None) -> str:
    confidences = {iv[2] for row in r._intervals for iv in row if iv}
    header = list(r.columns)
    if confidences:
        conf = f" ({max(confidences):.0%})"
        header = [c + (conf if any(row[i] for row in r._intervals) else "") for i, c in enumerate(header)]
    cells = [[_fmt_cell(v, iv) for v, iv in zip(row, ivs)] for row, ivs in zip(r._rows, r._intervals)]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(header)]
    if width and r.cut:
        _fit(header, cells, widths, [i for i, c in enumerate(r.columns) if c in r.cut], width)
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in r._rows) for i in range(len(header))]

    def line(vals):
        padded = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)]
        return ("| " + " | ".join(padded) + " |") if markdown else "  ".join(padded).rstrip()

    rule = ("|" + "|".join("-" * (w + 2) for w in widths) + "|") if markdown else "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule] + [line(c) for c in cells])


def _estimated(r: Result) -> list[int]:
    """The columns that hold estimates (some cell has an interval)."""
    return [i for i in range(len(r.columns)) if any(row[i] for row in r._intervals)]


def _said(r: Result) -> list[str]:
    """What a result says beside its rows: its message, notes (the NOT private label among them) and footer."""
    return [p for p in (r.message, *r.notes, r.footer) if p]


def _csv(r: Result) -> str:
    """CSV with every interval as <col>_low, <col>_high; the notes come first as '#' comment lines (read them
    with pandas.read_csv(..., comment='#')), so the NOT private label travels with the numbers."""
    out = io.StringIO()
    for line in _said(r):
        out.write("".join(f"# {part}\n" for part in line.splitlines()))
    w = csv.writer(out, lineterminator="\n")
    est = _estimated(r)
    w.writerow(r.columns + [x for i in est for x in (f"{r.columns[i]}_low", f"{r.columns[i]}_high")])
    for row, ivs in zip(r._rows, r._intervals):
        w.writerow(list(row) + [x for i in est for x in ((ivs[i][0], ivs[i][1]) if ivs[i] else ("", ""))])
    return out.getvalue().rstrip("\n")


def _json(r: Result) -> str:
    rows = []
    for row, ivs in zip(r._rows, r._intervals):
        obj = {}
        for c, v, iv in zip(r.columns, row, ivs):
            obj[c] = v if not (isinstance(v, float) and math.isnan(v)) else None
            if iv:
                obj[f"{c}_interval"] = {"low": iv[0], "high": iv[1], "confidence": iv[2]}
        rows.append(obj)
    private = not any("NOT private" in line for line in _said(r))
    return json.dumps({"columns": r.columns, "rows": rows, "epsilon_spent": r.epsilon_spent, "private": private,
                       **({"message": r.message} if r.message else {}), "notes": r.notes, "footer": r.footer},
                      default=str)
