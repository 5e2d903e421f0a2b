"""Turn a plan's estimates into a Result: rows in select-list order, intervals, and the footer.

A histogram-like aggregate makes one row per declared value (per group); scalar aggregates in the same
statement repeat on each of those rows. Intervals are estimate ± z·(predicted standard error), computed from
the released estimate and public parameters only (post-processing), at the plan's confidence.
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.executor import Cell
from ldpql.mechanisms import Estimate
from ldpql.planner import Plan
from ldpql.result import Result

NOT_PRIVATE = "EVALUATION ONLY: these figures use the true data and are NOT private; never release them"


def _labels(p: Plan) -> tuple:
    tv = next((a for a in p.aggregates if a.table_valued), None)
    return tv.target.categories if tv else (None,)


def output_columns(p: Plan) -> list[str]:
    """Column names of the result: group columns and aggregates in select-list order, a histogram's value
    column just before its estimate."""
    cols: list[str] = []
    for name, ref in p.items:
        if isinstance(ref, int) and p.aggregates[ref].table_valued:
            label = p.aggregates[ref].target.column
            cols.append(label if label.lower() not in {c.lower() for c in cols} else f"{label}_value")
        cols.append(name)
    return cols


def _cell_rows(p: Plan, cell: Cell, ci: int, estimates: dict[tuple[int, int], Estimate]):
    keys = dict(zip(p.group_by, cell.key))
    for k, label in enumerate(_labels(p)):
        row, ivs = [], []
        for name, ref in p.items:
            if not isinstance(ref, int):
                row.append(keys[ref]), ivs.append(None)
                continue
            agg, est = p.aggregates[ref], estimates.get((ref, ci))
            j = k if agg.table_valued else 0
            if agg.table_valued:
                row.append(label), ivs.append(None)
            value = float(est.values[j]) if est is not None else math.nan
            row.append(None if math.isnan(value) else value)
            ivs.append(None if est is None or math.isnan(value) else _interval(est, j, p))
        yield tuple(row), ivs


def _interval(est: Estimate, j: int, p: Plan):
    if est.interval is not None:
        low, high = float(est.interval[0][j]), float(est.interval[1][j])
        return (low, high, est.interval_confidence or p.confidence)
    value, se = float(est.values[j]), float(est.stderr[j])
    return None if math.isnan(se) else (value - p.z * se, value + p.z * se, p.confidence)


def _covers(iv, truth: float) -> bool:
    return iv is not None and iv[0] <= truth <= iv[1]


def select_result(p: Plan, cells: list[Cell], estimates: dict, spent: float, remaining: float | None,
                  elapsed: float) -> Result:
    """The Result of a SELECT."""
    rows, intervals = [], []
    for ci, cell in enumerate(cells):
        for row, ivs in _cell_rows(p, cell, ci, estimates):
            rows.append(row), intervals.append(ivs)
    mechanisms = ", ".join(dict.fromkeys(a.chosen.mechanism for a in p.aggregates))
    footer = f"-- {mechanisms}; ε spent {spent:g} per user"
    footer += f"; {remaining:.4g} left on {p.table.name}" if remaining is not None else ""
    footer += f"; {p.n:,} users; {elapsed:.2f} s"
    notes = list(p.notes) + list(dict.fromkeys(e.note for e in estimates.values() if e is not None and e.note))
    if math.isinf(p.epsilon):
        notes.append(NOT_PRIVATE + " (EPSILON INF: noise off)")
    return Result(output_columns(p), rows, intervals, plan=p, epsilon_spent=spent, notes=notes, footer=footer,
                  elapsed=elapsed)


def evaluation_result(p: Plan, cells: list[Cell], truth: dict, runs: list[dict]) -> Result:
    """EVALUATE: per output cell, the true answer, the mean estimate, bias, RMSE and interval coverage."""
    rows = []
    for a in p.aggregates:
        for ci, cell in enumerate(cells):
            if (a.index, ci) not in truth:
                continue
            true = truth[(a.index, ci)].values
            est = np.array([r[(a.index, ci)].values for r in runs])
            covered = np.array([[_covers(_interval(r[(a.index, ci)], j, p), true[j]) for j in range(len(true))]
                                for r in runs])
            labels = a.target.categories or (None,)
            for j, label in enumerate(labels):
                rows.append((a.output, ", ".join(map(str, cell.key)) or None, label, float(true[j]),
                             float(np.mean(est[:, j])), float(np.mean(est[:, j]) - true[j]),
                             float(np.sqrt(np.mean((est[:, j] - true[j]) ** 2))), float(np.mean(covered[:, j]))))
    cols = ["output", "group", "value", "truth", "mean_estimate", "bias", "rmse", "coverage"]
    return Result(cols, rows, plan=p, notes=[f"{len(runs)} runs; coverage of the {p.confidence:.0%} intervals",
                                             NOT_PRIVATE], message=NOT_PRIVATE)
