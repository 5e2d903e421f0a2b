"""ldpql: a declarative query engine for local differential privacy.

>>> import ldpql
>>> con = ldpql.connect(seed=1)
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

__all__ = ["connect", "Connection", "Result", "Error", "ParseError", "CatalogError", "PrivacyError",
           "BudgetExceededError", "PlanError", "ExecuteError", "InternalError", "__version__"]
