"""ldpql: a declarative query engine for local differential privacy.

>>> import ldpql
>>> con = ldpql.connect(seed=1, evaluation=True)
>>> import pyarrow as pa
>>> con.register("t", pa.table({"x": [1.0, 2.0, 3.0] * 1000}), private={"x": (0, 4)}, budget=2)
>>> round(con.sql("SELECT LDP_MEAN(x) EPSILON 1 FROM t").fetchone()[0])
2
"""

from ldpql.connection import Connection, connect
from ldpql.errors import (BudgetExceededError, CatalogError, Error, ExecuteError, InternalError, ParseError,
                          PlanError, PrivacyError)
from ldpql.result import Result

__version__ = "0.1.0"

__all__ = ["connect", "Connection", "Result", "functions", "function_arguments", "keywords", "options", "Error", "ParseError", "CatalogError", "PrivacyError",
           "BudgetExceededError", "PlanError", "ExecuteError", "InternalError", "__version__"]


def functions() -> list[tuple[str, str, str]]:
    """Every LDP aggregate the language knows: (name, signature, one-line description), aliases included."""
    from ldpql.planner import AGGREGATES

    return [(name, spec.signature.replace(spec.name, name, 1), spec.doc) for name, spec in sorted(AGGREGATES.items())]


def function_arguments(name: str) -> list[tuple[str, str]]:
    """The named arguments (``name => value``) an LDP aggregate takes, and what each takes; [] if unknown."""
    from ldpql.planner import AGGREGATES, COMMON_ARGS

    spec = AGGREGATES.get(name.upper())
    return [] if spec is None else list({**COMMON_ARGS, **spec.named_args}.items())


def keywords() -> tuple[str, ...]:
    """The language's keywords (for completion and highlighting)."""
    from ldpql.grammar import KEYWORDS

    return KEYWORDS


def options() -> dict[str, object]:
    """OPTIONS / SET keys and what they accept: a tuple of choices, or a type."""
    from ldpql.planner import OPTIONS

    return dict(OPTIONS)
