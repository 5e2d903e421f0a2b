"""One error class per layer, all under :class:`Error`.

Every message says what went wrong, where (a caret under the statement when there is a position), why, and
what to do (``hint``). Nothing is spent when any of these is raised before a result is released.
"""

from __future__ import annotations

from typing import Any


class Error(Exception):
    """Base class of every error ldpql raises for bad input.

    Attributes:
        message: one sentence saying what is wrong.
        hint: what to do about it, or None.
        line, column: 1-based position in the statement text, or None.
        context: structured facts (numbers, names) for programs; see :meth:`to_dict`.
    """

    label = "Error"

    def __init__(self, message: str, *, hint: str | None = None, line: int | None = None,
                 column: int | None = None, text: str | None = None, width: int = 1,
                 context: dict[str, Any] | None = None):
        self.message = message
        self.hint = hint
        self.line = line
        self.column = column
        self.text = text
        self.width = max(1, width)
        self.context = dict(context or {})
        super().__init__(str(self))

    def with_position(self, text: str, line: int | None, column: int | None, width: int = 1) -> "Error":
        """Attach the statement text and a position, unless one is already set; returns self."""
        if self.line is None and line is not None:
            self.text, self.line, self.column, self.width = text, line, column, max(1, width)
            self.args = (str(self),)
        return self

    def snippet(self) -> str:
        """The offending line with a caret under the position, or '' without a position."""
        if self.text is None or self.line is None or self.column is None:
            return ""
        lines = self.text.splitlines() or [""]
        src, col = _window(lines[max(1, min(self.line, len(lines))) - 1], self.column - 1)
        width = max(1, min(self.width, len(src) - col))
        return f"  {src}\n  {' ' * col}{'^' * width}"

    def __str__(self) -> str:
        where = f" at line {self.line}, column {self.column}" if self.line is not None else ""
        parts = [f"{self.label}: {self.message}{where}"]
        if self.snippet():
            parts.append(self.snippet())
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: class, message, hint, position and context."""
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint,
                "line": self.line, "column": self.column, **({"context": self.context} if self.context else {})}


class ParseError(Error):
    """The statement text does not follow the grammar."""

    label = "Parse Error"


class CatalogError(Error):
    """A table, column, file or declaration is missing, duplicated or inconsistent."""

    label = "Catalog Error"


class PrivacyError(Error):
    """The statement would use private data in a way LDP cannot allow (private WHERE, missing domain)."""

    label = "Privacy Error"


class PlanError(Error):
    """No protocol can answer the statement as asked (unknown mechanism, forbidden model, bad option)."""

    label = "Plan Error"


class BudgetExceededError(Error):
    """The statement needs more per-user budget than remains. Nothing was spent."""

    label = "Budget Error"


class ExecuteError(Error):
    """Running a plan failed (unreadable data, a DuckDB error). Any reservation was refunded."""

    label = "Execute Error"


class InternalError(Error):
    """A bug in ldpql, never the user's fault (an invariant such as a per-user ε cap was violated)."""

    label = "Internal Error"

    def __init__(self, message: str, **kwargs: Any):
        kwargs.setdefault("hint", "this is a bug in ldpql; please report it with the statement that caused it")
        super().__init__(message, **kwargs)


SNIPPET_WIDTH = 100  # characters of a long line shown around the caret (a generated statement can be huge)


def _window(src: str, col: int) -> tuple[str, int]:
    """At most SNIPPET_WIDTH characters of ``src`` around 0-based column ``col``, with '…' where cut, and the
    column of the same character in the window."""
    if len(src) <= SNIPPET_WIDTH:
        return src, col
    start = max(0, min(col - SNIPPET_WIDTH // 3, len(src) - SNIPPET_WIDTH))
    prefix = "…" if start else ""
    suffix = "…" if start + SNIPPET_WIDTH < len(src) else ""
    return prefix + src[start:start + SNIPPET_WIDTH] + suffix, col - start + len(prefix)


def did_you_mean(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """A 'did you mean …?' hint for a misspelt name, or None when nothing is close."""
    import difflib

    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f"did you mean `{lowered[close[0]]}`?" if close else None
