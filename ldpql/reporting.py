"""Turn a plan's estimates into a Result: rows in select-list order, intervals, and the footer.

A histogram-like aggregate makes one row per declared value (per group; LDP_TOPK: one per rank, labelled by
its estimate); scalar aggregates in the same statement repeat on each of those rows. Each aggregate's answer is
its protocol's estimate, or post-processing of a release (:meth:`Plan.answers`: a simplex-projected histogram,
the top k, the mode). Intervals are estimate ± z·(predicted standard error), or the interval the answer states
(a histogram's comes from its raw, unbiased estimate), computed from the released estimate and public
parameters only (post-processing), at the plan's confidence. A value that is not a number (LDP_MODE's
category) has no interval.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpql.executor import Cell
from ldpql.planner import Plan
from ldpql.result import Result

if TYPE_CHECKING:  # reporting only reads estimates; it never needs the mechanisms themselves
    from ldpql.mechanisms import Estimate

NOT_PRIVATE = "EVALUATION ONLY: these figures use the true data and are NOT private; never release them"


def _labels(p: Plan, ci: int, answers: dict[tuple[int, int], Estimate]) -> tuple:
    """The row labels of cell ``ci``: the table-valued aggregate's categories, or the labels its answer
    carries (LDP_TOPK's values, which depend on the estimate); (None,) when every aggregate is scalar."""
    tv = next((a for a in p.aggregates if a.table_valued), None)
    if tv is None:
        return (None,)
    est = answers.get((tv.index, ci))
    labels = est.extra.get("labels") if est is not None else None
    return labels if labels is not None else tv.target.categories


def _value(est: Estimate | None, j: int):
    """Cell j of an answer: a float, a label (LDP_MODE), or None when there is no answer (NaN, no users)."""
    if est is None or j >= len(est.values):
        return None
    v = est.values[j]
    if v is None or isinstance(v, (str, bool, np.bool_)):
        return v
    v = float(v)
    return None if math.isnan(v) else v


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


def feasible(agg, n: int) -> tuple[float, float] | None:
    """The range an answer can take, from public facts only: a count in [0, n], a frequency in [0, 1], a mean in
    its declared domain, a sum in n times it, or n·[min(lo, 0), max(hi, 0)] where NULLs are skipped (any number of
    the n users may add nothing; as key-value sums, ``kvrun.feasible``); None for answers with intervals of their
    own kind."""
    half, mid = agg.target.affine
    if any(a.name == "postprocess" and str(a.value.value).lower() == "none" for a in agg.call.named):
        return None   # the raw unbiased estimates were asked for: shown as they are
    low, high = mid - half, mid + half
    if getattr(agg.target.nulls, "skip", False):   # (audit 18: 50% NULL on [10, 20] was shown as 20000 ± 0)
        low, high = min(low, 0.0), max(high, 0.0)
    return {"count": (0.0, float(n)), "histogram": (0.0, 1.0), "frequency": (0.0, 1.0), "topk": (0.0, 1.0),
            "mean": (mid - half, mid + half), "sum": (n * low, n * high)}.get(agg.kind)


def _bounded(value, iv, bounds):
    """The value clipped to the feasible range (post-processing), and its interval clipped to it and widened to
    hold the value (a projected histogram's point may lie outside the interval of its raw estimate)."""
    if not isinstance(value, float):
        return value, iv
    if bounds is None:   # raw estimates asked for: not clipped, but a selected (TOPK) one may lie outside its interval
        return value, None if iv is None else (min(iv[0], value), max(iv[1], value), iv[2])
    value = min(max(value, bounds[0]), bounds[1])
    if iv is None:
        return value, iv
    if iv[1] < bounds[0] or iv[0] > bounds[1]:
        low, high = _beyond(iv[0], iv[1], bounds)
    else:
        low, high = max(iv[0], bounds[0]), min(iv[1], bounds[1])
    return value, (min(low, value), max(high, value), iv[2])


def _beyond(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """An interval [low, high] wholly beyond a bound b of the feasible range, which clipping would show as "b ± 0":
    the likelihood-ratio set at the bound instead (as :func:`~ldpql.mechanisms.conditional.ratio_interval` does for
    a ratio; Feldman and Cousins, 1998), the μ in range with (x − μ)² ≤ h² + (x − b)², x the midpoint and h the
    half-width. It holds every μ the clipped set holds (so covers at least as often) and is never a point
    (audit 18: a count shown as 0 ± 0 when the noise pushed its interval below 0)."""
    x, h = (low + high) / 2, (high - low) / 2
    if high < bounds[0]:
        return bounds[0], min(x + math.sqrt(h * h + (bounds[0] - x) ** 2), bounds[1])
    return max(x - math.sqrt(h * h + (x - bounds[1]) ** 2), bounds[0]), bounds[1]


def _cell_rows(p: Plan, cell: Cell, ci: int, estimates: dict[tuple[int, int], Estimate]):
    keys = dict(zip(p.group_by, cell.key))
    for k, label in enumerate(_labels(p, ci, estimates)):
        row, ivs = [], []
        for name, ref in p.items:
            if not isinstance(ref, int):
                row.append(keys[ref]), ivs.append(None)
                continue
            agg, est = p.aggregates[ref], estimates.get((ref, ci))
            j = k if agg.table_valued else 0
            if agg.table_valued:
                row.append(label), ivs.append(None)
            value, iv = _shown(agg, est, j, p, cell.n)
            row.append(value)
            ivs.append(iv)
        yield tuple(row), ivs


def _shown(agg, est: Estimate | None, j: int, p: Plan, n: int):
    """(value, interval) of cell j as a result shows them: both clipped to the feasible range, the interval widened
    to hold the value (:func:`_bounded`). EVALUATE scores this interval, the one a SELECT prints."""
    value = _value(est, j)
    return _bounded(value, _interval(est, j, p) if isinstance(value, float) else None, feasible(agg, n))


def _interval(est: Estimate, j: int, p: Plan):
    if est.interval is not None:
        low, high = float(est.interval[0][j]), float(est.interval[1][j])
        return (low, high, est.interval_confidence or p.confidence)
    value, half = float(est.values[j]), p.z * float(est.stderr[j]) + est.step / 2   # (continuity correction)
    return None if math.isnan(half) else (value - half, value + half, p.confidence)


def _covers(iv, truth: float) -> bool:
    return iv is not None and iv[0] <= truth <= iv[1]


def select_result(p: Plan, cells: list[Cell], estimates: dict, spent: float, remaining: float | None,
                  elapsed: float) -> Result:
    """The Result of a SELECT."""
    estimates = p.answers(estimates)
    rows, intervals = [], []
    for ci, cell in enumerate(cells):
        for row, ivs in _cell_rows(p, cell, ci, estimates):
            rows.append(row), intervals.append(ivs)
    mechanisms = ", ".join(dict.fromkeys(a.chosen.mechanism for a in p.aggregates))
    footer = f"-- {mechanisms}; ε spent {spent:g} per user"
    footer += f"; {remaining:.4g} left on {p.table.name}" if remaining is not None else ""
    footer += f"; {p.n:,} users; {elapsed:.2f} s"
    notes = list(p.notes) + list(dict.fromkeys(e.note for e in estimates.values() if e is not None and e.note))
    notes += _cell_notes(p, cells, estimates)
    if p.accuracy is not None:   # why this ε (ACCURACY ±a)
        notes.insert(0, f"ACCURACY ±{p.accuracy.target:g}: ran at {p.accuracy.summary()}")
    if math.isinf(p.epsilon):
        notes.append(NOT_PRIVATE + " (EPSILON INF: noise off)")
    return Result(output_columns(p), rows, intervals, plan=p, epsilon_spent=spent, notes=notes, footer=footer,
                  elapsed=elapsed)


def _cell_notes(p: Plan, cells: list[Cell], estimates: dict) -> list[str]:
    """The notes an answer makes about its own cell (``extra['cell_note']``, a head and a tail), naming the GROUP BY
    group between them so that groups with the same answer get notes a reader can tell apart."""
    out = []
    for (_, ci), est in estimates.items():
        if est is None or not est.extra or "cell_note" not in est.extra:
            continue
        head, tail, *group_only = est.extra["cell_note"]   # (a third, True: said only under GROUP BY)
        if group_only and group_only[0] and not p.group_by:
            continue
        group = " and ".join(f"{c} = {v}" for c, v in zip(p.group_by, cells[ci].key)) if p.group_by else ""
        out.append(f"{head}{f' in the group {group}' if group else ''}: {tail}")
    return list(dict.fromkeys(out))


EXTREMES = ("min", "max")   # aggregate kinds whose answer is a γ-quantile, not the value EVALUATE's truth holds


def evaluation_result(p: Plan, cells: list[Cell], truth: dict, runs: list[dict]) -> Result:
    """EVALUATE: per output cell, the true answer, the mean estimate, bias, RMSE and interval coverage.
    For a category answer (LDP_MODE) the mean estimate is the most frequent answer and coverage the share of
    runs that found the true one."""
    truth, runs = p.answers(truth), [p.answers(r) for r in runs]
    rows, categories = [], False
    for a in p.aggregates:
        for ci, cell in enumerate(cells):
            if (a.index, ci) not in truth:
                continue
            true = truth[(a.index, ci)].values
            if true.dtype == object:
                rows.append(_category_row(a.output, cell, true[0], [r[(a.index, ci)].values[0] for r in runs]))
                categories = True
                continue
            est = np.array([r[(a.index, ci)].values for r in runs])
            target = _targets(truth[(a.index, ci)])
            covered = np.array([[_covers(_shown(a, r[(a.index, ci)], j, p, cell.n)[1], t)
                                 for j, t in enumerate(target(r[(a.index, ci)]))] for r in runs])
            labels = truth[(a.index, ci)].extra.get("labels") or a.target.categories or (None,)
            # the bucket search's interval is for the point with γ of the users beyond it, not the true extreme
            extreme = a.kind in EXTREMES and any("share_beyond" in r[(a.index, ci)].extra for r in runs)
            for j, label in enumerate(labels):
                rows.append((a.output, ", ".join(map(str, cell.key)) or None, label, float(true[j]),
                             float(np.mean(est[:, j])), float(np.mean(est[:, j]) - true[j]),
                             float(np.sqrt(np.mean((est[:, j] - true[j]) ** 2))),
                             None if extreme else float(np.mean(covered[:, j]))))
    cols = ["output", "group", "value", "truth", "mean_estimate", "bias", "rmse", "coverage"]
    notes = [f"{len(runs)} runs; coverage of the {p.confidence:.0%} intervals", NOT_PRIVATE]
    if any(row[7] is None for row in rows):
        notes.insert(1, "LDP_MIN/LDP_MAX by bucket search: truth is the true extreme, but the answer and its interval "
                        "are for the point with about γ of the users beyond it (the result's note gives γ), so no "
                        "coverage is shown")
    if any(a.kind == "topk" for a in p.aggregates):
        notes.insert(1, "LDP_TOPK: truth, bias and RMSE are against the rank's true frequency (the j-th largest: "
                        "the bias shows the winner's curse); coverage is of each run's interval at the true frequency "
                        "of the value that run found at that rank, which the interval is for")
    if categories:
        notes.insert(1, "a category answer (LDP_MODE): mean_estimate is its most frequent answer, coverage the "
                        "share of runs that found the true one")
    return Result(cols, rows, plan=p, notes=notes, message=NOT_PRIVATE)


def _targets(truth: Estimate):
    """What a run's intervals are for: the true answers, or (LDP_TOPK) the true frequencies of the values the run
    found at each rank, which its intervals are for (inference on winners)."""
    if "frequencies" not in truth.extra:
        return lambda run: truth.values
    labels, freq = truth.extra["frequencies"]
    where = {label: float(f) for label, f in zip(labels, freq)}
    return lambda run: [where.get(label, math.nan) for label in run.extra.get("labels") or (None,) * len(truth.values)]


def _category_row(output: str, cell: Cell, true, answers: list) -> tuple:
    values, counts = np.unique(np.array([str(v) for v in answers]), return_counts=True)
    found = sum(1 for v in answers if v == true)
    return (output, ", ".join(map(str, cell.key)) or None, None, true, str(values[np.argmax(counts)]), None, None,
            found / len(answers))
