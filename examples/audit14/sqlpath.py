"""Audit 14: helpers that run quantile statements through the public SQL API and read back what the result shows.

``Spy`` wraps ``ldpql.connection.select_result`` to keep each result's answers (the Estimates whose
``extra['rank_error']`` the engine computed); ``shown`` reads a result's notes the way a reader does: the cell note's
rank error where there is one, otherwise the statement's predicted rank error for that output. Used by
``sql_checks.py`` and tests/system/test_audit14_quantile.py.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

import ldpql
from ldpql import connection

CELL = re.compile(r"^the ([\d.e-]+)-quantile of (\w+) \(([^)]*)\)(?: in the group (.*?))?: rank error ±([\d.e+-]+) "
                  r"\((\d+)%\)")
PREDICTED = re.compile(r"^(.*?): predicted rank error \(fraction of users\) ±([\d.e+-]+) \((\d+)%, calibrated\)")


@contextmanager
def spy():
    """Yields a list; every SELECT result run inside appends (plan, cells, answers) with the derived answers."""
    seen: list = []
    original = connection.select_result

    def wrapped(p, cells, estimates, *args, **kwargs):
        seen.append((p, cells, p.answers(estimates)))
        return original(p, cells, estimates, *args, **kwargs)
    connection.select_result = wrapped
    try:
        yield seen
    finally:
        connection.select_result = original


def connect(columns: dict, private: dict, public: tuple = (), budget: float = 1e6, **kw) -> ldpql.Connection:
    con = ldpql.connect(evaluation=True, **kw)
    con.register("t", pa.table(columns), private=private, public=list(public), budget=budget)
    return con


def declaration(shape) -> dict:
    return {"between": (shape.low, shape.high)} | ({"integer": True} if shape.integer else {})


def coin_of(shape, value: float) -> int:
    """The coin whose reported value is ``value`` (an integer column's value, a DOUBLE bucket's midpoint)."""
    if shape.integer:
        return round(value - shape.low)
    return round((value - shape.low - shape.step / 2) / shape.step)


def displayed(result, plan) -> dict:
    """{(output, group or ''): the rank error the result's notes show for it}: a cell note where there is one,
    otherwise the predicted one of the statement (which names the outputs it is for)."""
    predicted: dict[str, float] = {}
    for note in result.notes:
        m = PREDICTED.match(note)
        if m:
            for out in m.group(1).split(", "):
                predicted[out] = float(m.group(2))
    taus = {a.output: getattr(a.target, "tau", None) for a in plan.aggregates}
    cells: dict[tuple, float] = {}
    for note in result.notes:
        m = CELL.match(note)
        if m:
            cells[(float(m.group(1)), m.group(4) or "")] = float(m.group(5))
    out = {}
    for name, tau in taus.items():
        if tau is None:
            continue
        groups = {g for (t, g) in cells if t == tau} | {""}
        out[name] = {"predicted": predicted.get(name),
                     "cells": {g: cells[(tau, g)] for g in groups if (tau, g) in cells}}
    return out


def rank_error(cdf: np.ndarray, v: int, tau: float) -> float:
    return max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v])
