"""Coverage and planner-regret grid (issue 11, "Done when"): does every interval hold, is every plan the best?

    python examples/coverage_grid.py [--reps 300] [--grid standard|full] [--only PATTERN] [--jobs 1]
                                     [--out examples/coverage_results] [--quick]

End to end through the public API only: synthetic tables of fixed shapes and seeds (domains declared, never
read from the data) are registered on ``ldpql.connect(evaluation=True)``, and each cell (a statement at one n,
ε and confidence) is run ``--reps`` times with fresh randomness:

- most cells by ``EVALUATE <select> REPEAT reps`` (truth, mean estimate, RMSE and interval coverage per output,
  group and label);
- cells with a quantile (LDP_QUANTILE, LDP_MEDIAN) by a loop of seeded SELECTs, because the rank error of each
  answer is needed: it gives the value interval's coverage and the coverage of the predicted rank error
  (``|rank error| <= z * predicted σ``, the "±r (95%, calibrated)" of EXPLAIN); truth from the same statement
  at EPSILON INF.

In coverage.csv a "rank error" row holds the mean rank error in ``mean_estimate``, the root mean square one in
``rmse`` and the predicted half-width z·σ in ``predicted``; an "interval" row the plan's predicted value
(``predicts`` says what it is: a standard error, or an E|error| bound for the extremes). LDP_MODE is left out:
its answer is a category with no interval.

Regret cells (means, quantiles, extremes; at confidence 0.95) also run every candidate the plan lists, forced
with ``mechanism => 'name'`` on the same data, reps and seed; regret = the chosen plan's error / the best
forced candidate's error (RMSE in values; for quantiles the root mean square rank error). Candidates are read
from the plan (``res.plan.aggregates[i].candidates``), so new mechanisms join the grid without a change here;
a candidate the engine refuses to force is listed as skipped with the reason.

Writes ``coverage.csv`` and ``regret.csv`` (one row per output/group/label of a cell, one row per regret cell),
``coverage.png`` and ``regret.png`` under ``--out``, and prints a summary to paste into a note. The output is
resumable: cells already in the CSVs (same reps) are skipped, so an interrupted run continues where it stopped.

With R reps a nominal-95% coverage has a binomial sd of sqrt(0.95·0.05/R) (1.3 points at R = 300), so about 1
cell in 9 falls outside ±2 points by chance alone: ``within_2pt`` is the point estimate's test and
``significant_miss`` says the exact (Clopper-Pearson) 95% range of the coverage lies wholly outside the band.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa
from scipy.stats import binomtest

import ldpql

SEED = 20261124
SEED_OFFSET = "LDPQL_GRID_SEED_OFFSET"   # environment variable: the --seed-offset of this run
NS = (1_000, 10_000, 100_000)
EPSILONS = (0.5, 1.0, 4.0, 16.0)
CONFIDENCES = (0.95, 0.90)
TOLERANCE = 0.02
REGRET_LIMIT = 1.25
LONG_TAIL = tuple(f"v{k:02d}" for k in range(30))
CLOSE = ("a", "b", "c", "d", "e")
DISCRETE = (0, 3, 7, 20, 21, 22, 60, 100)
# (the synthetic columns have no NULLs, and say so: their means are the unconditional mechanisms')
DOMAINS = {"u": {"between": (0.0, 100.0), "not_null": True},      # uniform, continuous
           "h": {"between": (0, 20000), "integer": True, "not_null": True},  # heavy-tailed (lognormal), like diamonds
           "d": {"between": (0, 100), "integer": True, "not_null": True},    # discrete with gaps
           "m": {"between": (0.0, 100.0), "not_null": True},      # bimodal
           "c": list(CLOSE),                                      # close leading frequencies
           "l": list(LONG_TAIL),                                  # long tail
           "b": bool}
SHAPES = {"u": "uniform", "h": "heavy", "d": "discrete", "m": "bimodal", "c": "close", "l": "longtail",
          "b": "boolean"}


def make_table(n: int) -> pa.Table:
    """The synthetic table of n users (fixed seed per n): one column per shape and a public group column."""
    rng = np.random.default_rng(SEED + n)
    zipf = 1.0 / np.arange(1, len(LONG_TAIL) + 1) ** 1.2
    mix = rng.random(n) < 0.6
    return pa.table({
        "u": rng.uniform(0, 100, n),
        "h": np.clip(np.rint(rng.lognormal(7.8, 1.0, n)), 0, 20000).astype(np.int64),
        "d": rng.choice(DISCRETE, n, p=[.10, .15, .05, .25, .10, .05, .20, .10]).astype(np.int64),
        "m": np.clip(np.where(mix, rng.normal(25, 6, n), rng.normal(75, 8, n)), 0, 100),
        "c": rng.choice(CLOSE, n, p=[.24, .23, .20, .18, .15]),
        "l": rng.choice(LONG_TAIL, n, p=zipf / zipf.sum()),
        "b": rng.random(n) < 0.3,
        "g": rng.choice(["g1", "g2", "g3"], n, p=[.6, .3, .1]),
    })


@dataclass(frozen=True)
class Statement:
    """One statement of the grid: its select list (``{f}`` marks where a forced mechanism goes), family, the
    columns it reads, whether it is a regret statement and whether it is slow (quantile searches, bisection)."""

    name: str
    items: str
    family: str
    columns: str
    regret: bool = False
    slow: bool = False
    group_by: bool = False

    @property
    def quantile(self) -> bool:
        return "LDP_QUANTILE" in self.items or "LDP_MEDIAN" in self.items

    def select(self, eps: float | str, conf: float, seed: int, mechanism: str | None = None) -> str:
        forced = f", mechanism => '{mechanism}'" if mechanism else ""
        group = " GROUP BY g" if self.group_by else ""
        return (f"SELECT {self.items.format(f=forced)} FROM t{group} EPSILON {eps} "
                f"OPTIONS (confidence = {conf}, seed = {seed})")


S = Statement
STATEMENTS = [
    S("count_b", "LDP_COUNT(b{f})", "count", "b"),
    S("sum_h", "LDP_SUM(h{f})", "sum", "h"),
    S("sum_u", "LDP_SUM(u{f})", "sum", "u"),
    *(S(f"mean_{c}", f"LDP_MEAN({c}{{f}})", "mean", c, regret=True) for c in "uhdm"),
    S("histogram_c", "LDP_HISTOGRAM(c{f})", "histogram", "c"),
    S("histogram_l", "LDP_HISTOGRAM(l{f})", "histogram", "l"),
    S("topk_c", "LDP_TOPK(c, 2{f})", "topk", "c"),
    S("topk_l", "LDP_TOPK(l, 3{f})", "topk", "l"),
    *(S(f"quantile{int(q * 100):02d}_h", f"LDP_QUANTILE(h, {q}{{f}})", "quantile", "h", True, True)
      for q in (0.1, 0.5, 0.9)),
    S("quantile10_u", "LDP_QUANTILE(u, 0.1{f})", "quantile", "u", True, True),
    S("median_m", "LDP_MEDIAN(m{f})", "quantile", "m", True, True),
    S("median_d", "LDP_MEDIAN(d{f})", "quantile", "d", True, True),
    S("min_h", "LDP_MIN(h{f})", "extreme", "h", True, True),
    S("max_h", "LDP_MAX(h{f})", "extreme", "h", True, True),
    S("min_m", "LDP_MIN(m{f})", "extreme", "m", True, True),
    S("count+mean", "LDP_COUNT(b), LDP_MEAN(u)", "multi", "b+u"),
    S("histogram+mean", "LDP_HISTOGRAM(c), LDP_MEAN(h)", "multi", "c+h"),
    S("mean+mean", "LDP_MEAN(u), LDP_MEAN(m)", "multi", "u+m"),
    S("min+max", "LDP_MIN(h), LDP_MAX(h)", "multi", "h", slow=True),
    S("quantile+mean", "LDP_QUANTILE(h, 0.5), LDP_MEAN(h)", "multi", "h", slow=True),
    S("groupby_mean+count", "g, LDP_MEAN(u), LDP_COUNT(b)", "groupby", "u+b", group_by=True),
]


@dataclass(frozen=True)
class Cell:
    statement: Statement
    n: int
    epsilon: float
    confidence: float

    @property
    def id(self) -> str:
        return f"{self.statement.name}/n={self.n}/eps={self.epsilon:g}/conf={self.confidence:g}"

    @property
    def seed(self) -> int:   # (--seed-offset: fresh runs of the same cells, e.g. to re-check a low row)
        return (zlib.crc32(self.id.encode()) + 7_919_993 * int(os.environ.get(SEED_OFFSET, "0"))) % 2 ** 31

    @property
    def regret(self) -> bool:
        return self.statement.regret and self.confidence == 0.95


def grid(kind: str) -> list[Cell]:
    """The cells of a grid. 'full': every statement at every n, ε and confidence (several hours of one core at 300
    reps: the quantile searches cost 0.1-1 s per run). 'standard' (about 25 minutes of one core at 300 reps):
    fast statements at every n and ε, confidence 0.90 at n = 10^4 only; extremes without n = 10^5 (their
    confidence 0.90 at n = 10^4 only); quantiles on the cells of ``QUANTILE_STANDARD`` only. 'quick': a smoke
    subset."""
    cells = []
    for s in STATEMENTS:
        for n in NS:
            for eps in EPSILONS:
                for conf in CONFIDENCES:
                    if kind == "standard" and not _standard(s, n, eps, conf):
                        continue
                    cells.append(Cell(s, n, eps, conf))
    if kind == "quick":
        keep = {"count_b", "mean_h", "histogram_c", "topk_c", "quantile50_h", "min_h", "count+mean"}
        cells = [c for c in cells if c.statement.name in keep and c.n == 1_000 and c.epsilon == 4.0]
    return cells


# The quantile cells of the standard grid: (statement, n) -> (ε at confidence 0.95, ε at 0.90). Heavy-tailed
# data at τ 0.1/0.5/0.9 in both of the planner's regimes (BayeSS at ε = 1, the hierarchical histogram from
# ε ≈ 11), the discrete column, n = 10^3 and one multi-aggregate statement; the rest are in --grid full.
QUANTILE_STANDARD = {("quantile10_h", 10_000): ((1.0, 16.0), ()),
                     ("quantile50_h", 10_000): ((1.0, 16.0), (1.0, 16.0)),
                     ("quantile90_h", 10_000): ((1.0, 16.0), ()),
                     ("median_d", 10_000): ((1.0,), ()),
                     ("quantile10_h", 1_000): ((1.0,), ()),
                     ("quantile50_h", 1_000): ((1.0, 16.0), ()),
                     ("quantile+mean", 10_000): ((1.0, 16.0), ())}


def _standard(s: Statement, n: int, eps: float, conf: float) -> bool:
    if s.quantile:
        at95, at90 = QUANTILE_STANDARD.get((s.name, n), ((), ()))
        return eps in (at95 if conf == 0.95 else at90)
    if s.slow and n == 100_000:
        return False
    return conf == 0.95 or n == 10_000


# ---- running a cell (in a worker process) -------------------------------------------------------------------

_CONNECTIONS: dict[int, tuple] = {}


def _connection(n: int):
    if n not in _CONNECTIONS:
        con = ldpql.connect(evaluation=True, seed=SEED)
        table = make_table(n)
        con.register("t", table, private=DOMAINS, public=["g"], budget=1e12)
        _CONNECTIONS[n] = (con, {k: table.column(k).to_numpy() for k in ("u", "h", "d", "m")})
    return _CONNECTIONS[n]


def _error_text(e: Exception) -> str:
    return " ".join(str(e).split())[:300]


def _predictions(plan) -> dict[str, tuple[str, float, str, str]]:
    """Per output: (mechanism, predicted value, what it predicts, unit) of the plan."""
    out = {}
    for a in plan.aggregates:
        c = a.chosen if a.chosen is not None else (plan.aggregates[a.source].chosen if a.source is not None else None)
        out[a.output] = (c.mechanism if c else "", c.predicted_se if c else math.nan, c.predicts if c else "",
                         a.target.unit)
    return out


def _evaluate(con, cell: Cell, mechanism: str | None = None):
    """EVALUATE the cell's statement: (rows as dicts, plan)."""
    sql = f"EVALUATE {cell.statement.select(cell.epsilon, cell.confidence, cell.seed, mechanism)} REPEAT {REPS}"
    res = con.sql(sql)
    rows = [dict(zip(res.columns, r)) for r in res.fetchall()]
    return [r for r in rows if r["rmse"] is not None], res.plan   # LDP_MODE's category rows have no interval


def _rank_error(values: np.ndarray, estimate: float, tau: float) -> float:
    """How far τ is from the ranks the estimate holds: 0 when a share in [P(x < v), P(x <= v)] is τ."""
    below, upto = np.mean(values < estimate), np.mean(values <= estimate)
    return float(max(0.0, below - tau, tau - upto))


def _tau(call) -> float:
    if call.name.upper() == "LDP_MEDIAN":
        return 0.5
    return float(call.args[1].value)


def _select_loop(con, data: dict, cell: Cell, mechanism: str | None = None):
    """Seeded SELECTs: per output, the truth, estimates, interval coverage and (quantiles) rank errors."""
    s = cell.statement
    truth_res = con.sql(s.select("INF", cell.confidence, cell.seed, mechanism))
    truth = dict(zip(truth_res.columns, truth_res.fetchone()))
    ests, covered, plan = {}, {}, None
    for r in range(REPS):
        res = con.sql(s.select(cell.epsilon, cell.confidence, cell.seed + r, mechanism))
        plan = res.plan
        for col, value, iv in zip(res.columns, res.fetchone(), res.intervals()[0]):
            ests.setdefault(col, []).append(math.nan if value is None else float(value))
            covered.setdefault(col, []).append(iv is not None and iv[0] <= truth[col] <= iv[1])
    out = {}
    for a in plan.aggregates:
        est = np.array(ests[a.output])
        entry = {"truth": float(truth[a.output]), "estimates": est, "covered": np.array(covered[a.output])}
        if a.call.name.upper() in ("LDP_QUANTILE", "LDP_MEDIAN"):
            values = data[a.target.column]
            entry["rank_errors"] = np.array([_rank_error(values, v, _tau(a.call)) for v in est])
        out[a.output] = entry
    return out, plan


def _row(cell: Cell, plan_pred: dict, output: str, group, label, what: str, truth, mean_est, rmse, k: int,
         reps: int, predicted: float, seconds: float) -> dict:
    mech, se, predicts, unit = plan_pred.get(output, ("", math.nan, "", ""))
    cov = k / reps
    ci = binomtest(k, reps).proportion_ci(0.95, method="exact")
    nominal = cell.confidence
    return {"cell": cell.id, "family": cell.statement.family, "statement": cell.statement.items.format(f=""),
            "shape": "+".join(SHAPES[c] for c in cell.statement.columns.split("+")), "n": cell.n,
            "epsilon": cell.epsilon, "confidence": cell.confidence, "output": output,
            "group": "" if group is None else group, "label": "" if label is None else label, "what": what,
            "reps": reps, "truth": truth, "mean_estimate": mean_est, "rmse": rmse, "coverage": cov,
            "cov_low": ci.low, "cov_high": ci.high, "nominal": nominal,
            "within_2pt": abs(cov - nominal) <= TOLERANCE + 1e-12,
            "significant_miss": ci.high < nominal - TOLERANCE or ci.low > nominal + TOLERANCE,
            "mechanism": mech, "predicted": predicted if what == "rank error" else se, "predicts": predicts,
            "unit": unit, "regret": "", "seconds": round(seconds, 2), "status": "ok"}


def _coverage_rows(cell: Cell, con, data) -> tuple[list[dict], dict, object, object]:
    """Run the cell's statement (chosen plan): its coverage rows, its per-output error (for regret) and plan."""
    t0 = time.time()
    if cell.statement.quantile:
        runs, plan = _select_loop(con, data, cell)
        pred, rows, errors = _predictions(plan), [], {}
        z = NormalDist().inv_cdf(0.5 + cell.confidence / 2)
        for out, e in runs.items():
            est = e["estimates"]
            rmse = float(np.sqrt(np.nanmean((est - e["truth"]) ** 2)))
            rows.append(_row(cell, pred, out, None, None, "interval", e["truth"], float(np.nanmean(est)), rmse,
                             int(e["covered"].sum()), REPS, math.nan, 0.0))
            errors[out] = rmse
            if "rank_errors" in e:
                errors[out] = float(np.sqrt(np.mean(e["rank_errors"] ** 2)))   # the error quantiles are planned by
            if "rank_errors" in e and pred[out][2] != "stderr":
                print(f"  {cell.id}: {out} predicts {pred[out][2]!r}, not a standard error: no rank-error coverage")
            elif "rank_errors" in e:
                half = z * pred[out][1]   # what EXPLAIN shows: ±z·σ at the statement's confidence
                re_ = e["rank_errors"]
                rows.append(_row(cell, pred, out, None, None, "rank error", 0.0, float(np.mean(re_)),
                                 float(np.sqrt(np.mean(re_ ** 2))), int(np.sum(re_ <= half + 1e-12)), REPS, half,
                                 0.0))
    else:
        evaluated, plan = _evaluate(con, cell)
        pred, rows, errors = _predictions(plan), [], {}
        for r in evaluated:
            errors.setdefault(r["output"], r["rmse"])
            rows.append(_row(cell, pred, r["output"], r["group"], r["value"], "interval", r["truth"],
                             r["mean_estimate"], r["rmse"], round((r["coverage"] or 0.0) * REPS), REPS, math.nan, 0.0))
            if r["coverage"] is None:   # LDP_MIN/MAX by bucket search: its interval is not for the true extreme
                rows[-1].update(coverage=math.nan, status="no interval check (γ-point, not the extreme)")
            errors.setdefault(r["output"], r["rmse"])
    for r in rows:
        r["seconds"] = round(time.time() - t0, 2)
    return rows, errors, plan


def _forced_error(con, data, cell: Cell, mechanism: str) -> float:
    if cell.statement.quantile:
        runs, _ = _select_loop(con, data, cell, mechanism)
        (e,) = runs.values()
        return float(np.sqrt(np.mean(e["rank_errors"] ** 2)))
    rows, _ = _evaluate(con, cell, mechanism)
    return float(rows[0]["rmse"])


def regret_of(chosen: float, best: float, n: int, rank: bool) -> float:
    """chosen / best error. A rank error below one user's share (1/n) is no error: both are floored there, so an
    exact answer is not "infinitely" better than one a user away."""
    floor = 1.0 / n if rank else 0.0
    top, bottom = max(chosen, floor), max(best, floor)
    return top / bottom if bottom > 0 else (1.0 if top == 0 else math.inf)


def _regret_row(cell: Cell, con, data, plan, errors: dict) -> dict:
    """Force every candidate the plan lists (other than the chosen one) and compare errors."""
    t0 = time.time()
    (a,) = plan.aggregates
    chosen = a.chosen.mechanism
    measured, skipped = {chosen: errors[a.output]}, {}
    for cand in a.candidates:
        if cand.mechanism in measured or cand.mechanism in skipped:
            continue
        try:
            measured[cand.mechanism] = _forced_error(con, data, cell, cand.mechanism)
        except ldpql.Error as e:
            skipped[cand.mechanism] = _error_text(e)
    finite = {k: v for k, v in measured.items() if not math.isnan(v)}
    best = min(finite, key=finite.get)
    regret = regret_of(measured[chosen], finite[best], cell.n, cell.statement.quantile)
    return {"cell": cell.id, "family": cell.statement.family, "statement": cell.statement.items.format(f=""),
            "shape": SHAPES[cell.statement.columns], "n": cell.n, "epsilon": cell.epsilon,
            "confidence": cell.confidence, "output": a.output, "reps": REPS,
            "metric": "rms rank error" if cell.statement.quantile else "rmse",
            "chosen": chosen, "chosen_error": measured[chosen], "best": best, "best_error": finite[best],
            "regret": regret, "over_limit": regret > REGRET_LIMIT,
            "candidates": "; ".join(f"{k}={v:.6g}" for k, v in measured.items()),
            "skipped": "; ".join(f"{k}: {v}" for k, v in skipped.items()), "seconds": round(time.time() - t0, 2)}


REPS = 300


def run_cell(args: tuple[Cell, int]) -> tuple[Cell, list[dict], dict | None, float]:
    """One cell: its coverage rows and (regret cells) its regret row; a refused statement gives one row that
    says so."""
    global REPS
    cell, REPS = args
    t0, c0 = time.time(), time.process_time()
    con, data = _connection(cell.n)
    try:
        rows, errors, plan = _coverage_rows(cell, con, data)
        regret = _regret_row(cell, con, data, plan, errors) if cell.regret else None
    except ldpql.Error as e:
        rows, regret = [_refused_row(cell, _error_text(e))], None
    if regret is not None:
        for r in rows:
            if r["output"] == regret["output"] and r["what"] == "interval":
                r["regret"] = regret["regret"]
    cpu = round(time.process_time() - c0, 2)
    for r in rows:
        r["cpu_seconds"] = cpu
    return cell, rows, regret, time.time() - t0


def _refused_row(cell: Cell, why: str) -> dict:
    row = dict.fromkeys(COVERAGE_COLUMNS, "")
    row.update({"cell": cell.id, "family": cell.statement.family, "statement": cell.statement.items.format(f=""),
                "shape": "+".join(SHAPES[c] for c in cell.statement.columns.split("+")), "n": cell.n,
                "epsilon": cell.epsilon, "confidence": cell.confidence, "reps": REPS, "nominal": cell.confidence,
                "status": f"refused: {why}"})
    return row


COVERAGE_COLUMNS = ["cell", "family", "statement", "shape", "n", "epsilon", "confidence", "output", "group", "label",
                    "what", "reps", "truth", "mean_estimate", "rmse", "coverage", "cov_low", "cov_high", "nominal",
                    "within_2pt", "significant_miss", "mechanism", "predicted", "predicts", "unit", "regret",
                    "seconds", "cpu_seconds", "status"]
REGRET_COLUMNS = ["cell", "family", "statement", "shape", "n", "epsilon", "confidence", "output", "reps", "metric",
                  "chosen", "chosen_error", "best", "best_error", "regret", "over_limit", "candidates", "skipped",
                  "seconds"]


# ---- output ---------------------------------------------------------------------------------------------------

def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _append(path: Path, columns: list[str], rows: list[dict]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, columns)
        if new:
            w.writeheader()
        w.writerows(rows)


def _done(out: Path, reps: int) -> set[str]:
    """Cells already in the CSVs at these reps (a regret cell needs its regret row too)."""
    cov = {r["cell"] for r in _read(out / "coverage.csv") if int(r["reps"]) == reps}
    reg = {r["cell"] for r in _read(out / "regret.csv") if int(r["reps"]) == reps}
    return {c for c in cov if not _is_regret_id(c) or c in reg}


def _is_regret_id(cell_id: str) -> bool:
    name, conf = cell_id.split("/")[0], cell_id.rsplit("=", 1)[1]
    return any(s.name == name and s.regret for s in STATEMENTS) and float(conf) == 0.95


def _f(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def plots(out: Path) -> None:
    """coverage.png (coverage per row with the nominal line and ±2 points band) and regret.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cov = [r for r in _read(out / "coverage.csv") if r["status"] == "ok"]
    fig, axes = plt.subplots(len(CONFIDENCES), 1, figsize=(14, 4.5 * len(CONFIDENCES)), squeeze=False)
    for ax, conf in zip(axes[:, 0], CONFIDENCES):
        _coverage_panel(ax, [r for r in cov if float(r["confidence"]) == conf], conf)
    fig.tight_layout()
    fig.savefig(out / "coverage.png", dpi=110)
    plt.close(fig)

    reg = _read(out / "regret.csv")
    if not reg:
        return
    reg.sort(key=lambda r: (r["family"], r["cell"]))
    fig, ax = plt.subplots(figsize=(14, 4.5))
    fams = sorted({r["family"] for r in reg})
    for r in reg:
        ax.plot(reg.index(r), max(_f(r["regret"]), 1.0), "o", ms=4,
                color=plt.cm.tab10(fams.index(r["family"])), label=r["family"])
    ax.axhline(REGRET_LIMIT, color="red", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(reg)), [r["cell"].replace("/conf=0.95", "") for r in reg], rotation=90, fontsize=5)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    ax.set_title(f"planner regret: chosen plan's error / best forced candidate's (line: {REGRET_LIMIT})")
    fig.tight_layout()
    fig.savefig(out / "regret.png", dpi=110)
    plt.close(fig)


def _coverage_panel(ax, rows: list[dict], conf: float) -> None:
    """One point per cell output (and group): its coverage (mean over a histogram's bins) with the exact 95% range,
    or the min..max over the bins; families in sections; points below the axis drawn as red marks at its edge."""
    keyed: dict[tuple, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["family"], r["what"], r["statement"], int(r["n"]), float(r["epsilon"]))):
        keyed.setdefault((r["family"], r["what"], r["cell"], r["output"], r["group"]), []).append(r)
    floor = max(0.0, conf - 0.25)
    fam_prev = None
    for i, (key, rs) in enumerate(keyed.items()):
        fam = key[0] + (" (rank error)" if key[1] == "rank error" else "")
        if fam != fam_prev:
            ax.axvline(i - 0.5, color="grey", lw=0.5)
            ax.text(i, 1.003, fam, fontsize=7, va="bottom", rotation=20)
            fam_prev = fam
        c = np.array([_f(r["coverage"]) for r in rs])
        lo, hi = (_f(rs[0]["cov_low"]), _f(rs[0]["cov_high"])) if len(rs) == 1 else (c.min(), c.max())
        color = "C3" if abs(c.mean() - conf) > TOLERANCE else "C0"
        ax.vlines(i, max(lo, floor), hi, color=color, lw=0.8)
        ax.plot(i, max(c.mean(), floor), "v" if c.mean() < floor else "o", color=color, ms=3)
    ax.axhline(conf, color="k", lw=1)
    ax.axhspan(conf - TOLERANCE, conf + TOLERANCE, color="green", alpha=0.15)
    ax.set_ylim(floor - 0.01, 1.04)
    ax.set_xlim(-1, len(keyed))
    ax.set_title(f"coverage at nominal {conf:.0%}, one point per cell output (band ±{TOLERANCE * 100:.0f} points; "
                 f"bars: exact 95% range, or min..max over a histogram's bins; red: outside the band; "
                 f"triangles: below {floor:.2f})", fontsize=9)
    ax.set_xlabel("cell output, by family, statement, n, ε")


def _prediction_lines(ok: list[dict]) -> list[str]:
    """How EXPLAIN's predicted standard error compares with the measured RMSE, for scalar answers whose plan
    predicts a standard error (a histogram's prediction is an ℓ2 over its bins; the extremes' an E|error| bound)."""
    rows = [r for r in ok if r["what"] == "interval" and r["predicts"] == "stderr" and not r["label"]
            and _f(r["predicted"]) > 0 and r["family"] not in ("quantile",)
            and not str(r["unit"]).startswith("rank error")]   # (a quantile beside a mean: its σ is in ranks)
    if not rows:
        return []
    lines = ["", "measured RMSE / EXPLAIN's predicted standard error (scalar answers; 1 = the prediction is right):", "",
             "| family | rows | median | min | max | rows with ratio > 1.5 |", "|---|---|---|---|---|---|"]
    for fam in sorted({r["family"] for r in rows}):
        ratio = np.array([_f(r["rmse"]) / _f(r["predicted"]) for r in rows if r["family"] == fam])
        lines.append(f"| {fam} | {len(ratio)} | {np.median(ratio):.2f} | {ratio.min():.2f} | {ratio.max():.3g} | "
                     f"{int(np.sum(ratio > 1.5))} |")
    return lines


def summary(out: Path, worst: int = 12) -> str:
    """A compact markdown summary: rows out of tolerance per family (below the band: intervals too narrow; above:
    too wide, or an answer with no noise left, e.g. a count at ε = 16), the worst rows, regret over the limit."""
    cov = _read(out / "coverage.csv")
    ok = [r for r in cov if r["status"] == "ok"]
    refused = sorted({r["cell"] for r in cov if r["status"].startswith("refused")})
    head = (f"coverage: {len(ok)} output rows in {len({r['cell'] for r in ok})} cells "
            f"({len(refused)} cells refused by the planner); tolerance ±{TOLERANCE * 100:.0f} points")
    lines = [head, "",
             "| family | what | conf | rows | below band | above band | significant | min coverage | mean coverage |",
             "|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["family"], r["what"], r["confidence"]) for r in ok})
    for fam, what, conf in keys:
        rs = [r for r in ok if (r["family"], r["what"], r["confidence"]) == (fam, what, conf)]
        c = np.array([_f(r["coverage"]) for r in rs])
        lines.append(f"| {fam} | {what} | {float(conf):g} | {len(rs)} | "
                     f"{int(np.sum(c < float(conf) - TOLERANCE - 1e-12))} | "
                     f"{int(np.sum(c > float(conf) + TOLERANCE + 1e-12))} | "
                     f"{sum(r['significant_miss'] == 'True' for r in rs)} | {c.min():.3f} | {c.mean():.3f} |")
    bad = sorted(ok, key=lambda r: _f(r["coverage"]) - _f(r["nominal"]))[:worst]
    lines += ["", f"worst {len(bad)} coverage rows (lowest coverage minus nominal):", "",
              "| cell | output | label/group | what | coverage | exact 95% range | mechanism |", "|---|---|---|---|---|---|---|"]
    for r in bad:
        lab = "/".join(x for x in (r["group"], r["label"]) if x)
        lines.append(f"| {r['cell']} | {r['output']} | {lab} | {r['what']} | {_f(r['coverage']):.3f} | "
                     f"[{_f(r['cov_low']):.3f}, {_f(r['cov_high']):.3f}] | {r['mechanism']} |")
    lines += _prediction_lines(ok)
    reg = _read(out / "regret.csv")
    if reg:
        over = sorted((r for r in reg if _f(r["regret"]) > REGRET_LIMIT), key=lambda r: -_f(r["regret"]))
        lines += ["", f"regret: {len(reg)} cells, {len(over)} over {REGRET_LIMIT}"
                  f" (per family: " + ", ".join(
                      f"{f} {sum(1 for r in over if r['family'] == f)}/{sum(1 for r in reg if r['family'] == f)}"
                      for f in sorted({r['family'] for r in reg})) + "; max " +
                  f"{max(_f(r['regret']) for r in reg):.2f})", ""]
        if over:
            lines += ["| cell | metric | chosen | error | best | error | regret |", "|---|---|---|---|---|---|---|"]
            lines += [f"| {r['cell']} | {r['metric']} | {r['chosen']} | {_f(r['chosen_error']):.4g} | {r['best']} | "
                      f"{_f(r['best_error']):.4g} | {_f(r['regret']):.2f} |" for r in over]
    if refused:
        lines += ["", "refused cells: " + ", ".join(refused)]
    return "\n".join(lines)


def compare(before: Path, after: Path) -> str:
    """Before/after tables for a closing note: per family the rows below the band and the coverage, on the cells
    both runs have; per regret family the cells over the limit and the largest regret."""
    def load(d):
        return ({(r["cell"], r["output"], r["group"], r["label"], r["what"]): r for r in _read(d / "coverage.csv")
                 if r["status"] == "ok"}, {r["cell"]: r for r in _read(d / "regret.csv")})
    (cb, rb), (ca, ra) = load(before), load(after)
    common = sorted(set(cb) & set(ca))
    lines = [f"coverage on the {len(common)} output rows both runs have (before -> after)", "",
             "| family | what | conf | rows | below band | min coverage | mean coverage |", "|---|---|---|---|---|---|---|"]
    for fam, what, conf in sorted({(cb[k]["family"], k[4], cb[k]["confidence"]) for k in common}):
        keys = [k for k in common if (cb[k]["family"], k[4], cb[k]["confidence"]) == (fam, what, conf)]
        b = np.array([_f(cb[k]["coverage"]) for k in keys])
        a = np.array([_f(ca[k]["coverage"]) for k in keys])
        low = float(conf) - TOLERANCE - 1e-12
        lines.append(f"| {fam} | {what} | {float(conf):g} | {len(keys)} | {int(np.sum(b < low))} -> "
                     f"{int(np.sum(a < low))} | {b.min():.3f} -> {a.min():.3f} | {b.mean():.3f} -> {a.mean():.3f} |")
    cells = sorted(set(rb) & set(ra))
    lines += ["", f"regret on the {len(cells)} cells both runs have (before -> after)", "",
              f"| family | cells | over {REGRET_LIMIT} | max regret |", "|---|---|---|---|"]
    for fam in sorted({rb[c]["family"] for c in cells}):
        cs = [c for c in cells if rb[c]["family"] == fam]
        b = np.array([_f(rb[c]["regret"]) for c in cs])
        a = np.array([_f(ra[c]["regret"]) for c in cs])
        lines.append(f"| {fam} | {len(cs)} | {int(np.sum(b > REGRET_LIMIT))} -> {int(np.sum(a > REGRET_LIMIT))} | "
                     f"{b.max():.2f} -> {a.max():.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=None, help="repetitions per cell (default 300; 20 with --quick)")
    ap.add_argument("--grid", choices=("standard", "full"), default="standard",
                    help="'standard' (about 25 min of one core at 300 reps) or 'full' (every n, ε, confidence)")
    ap.add_argument("--quick", action="store_true", help="a small smoke subset with few reps")
    ap.add_argument("--only", default=None, help="run only cells whose id matches this regular expression")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "coverage_results"))
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="shift every cell's seed (fresh randomness for the same cells; default 0)")
    ap.add_argument("--list", action="store_true", help="list the cells and exit")
    ap.add_argument("--summary", action="store_true", help="print the summary of the results in --out and exit")
    ap.add_argument("--compare", metavar="BEFORE", default=None,
                    help="print before/after tables of the results in BEFORE and --out, and exit")
    args = ap.parse_args(argv)
    os.environ[SEED_OFFSET] = str(args.seed_offset)   # (read by spawned workers too)
    if args.summary or args.compare:
        print(compare(Path(args.compare), Path(args.out)) if args.compare else summary(Path(args.out)))
        return
    reps = args.reps or (20 if args.quick else 300)
    cells = grid("quick" if args.quick else args.grid)
    if args.only:
        cells = [c for c in cells if re.search(args.only, c.id)]
    if args.list:
        print("\n".join(c.id for c in cells))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = _done(out, reps)
    todo = [c for c in cells if c.id not in done]
    print(f"{len(cells)} cells, {len(cells) - len(todo)} already in {out}, {len(todo)} to run at {reps} reps",
          flush=True)
    t0, cpu = time.time(), 0.0
    work = [(c, reps) for c in todo]
    if args.jobs > 1:
        import multiprocessing
        work.sort(key=lambda w: not w[0].statement.slow)   # the slow cells first, so no worker waits on one at the end
        pool = multiprocessing.get_context("spawn").Pool(args.jobs)
        results = pool.imap_unordered(run_cell, work)
    else:
        pool, results = None, map(run_cell, work)
    for i, (cell, rows, regret, secs) in enumerate(results, 1):
        _append(out / "coverage.csv", COVERAGE_COLUMNS, rows)
        if regret is not None:
            _append(out / "regret.csv", REGRET_COLUMNS, [regret])
        cpu += float(rows[0]["cpu_seconds"])
        print(f"[{i}/{len(todo)}] {cell.id:<44} {_progress(rows, regret)}  {secs:.1f} s "
              f"(cpu {rows[0]['cpu_seconds']:.1f} s)", flush=True)
    if pool is not None:
        pool.close()
        pool.join()
    print(f"ran {len(todo)} cells in {time.time() - t0:.0f} s ({cpu:.0f} s of cpu in the cells)", flush=True)
    plots(out)
    print(summary(out))


def _progress(rows: list[dict], regret: dict | None) -> str:
    if rows and rows[0]["status"] != "ok":
        return rows[0]["status"][:70]
    cov = [r for r in rows if r["what"] == "interval"]
    text = f"{rows[0]['mechanism']:<12} coverage {min(r['coverage'] for r in cov):.3f}"
    text += f"..{max(r['coverage'] for r in cov):.3f}" if len(cov) > 1 else ""
    rank = [r for r in rows if r["what"] == "rank error"]
    text += f"; rank {rank[0]['coverage']:.3f}" if rank else ""
    if regret is not None:
        text += f"; regret {regret['regret']:.2f} ({regret['chosen']} vs {regret['best']})"
    return text


if __name__ == "__main__":
    sys.exit(main())
