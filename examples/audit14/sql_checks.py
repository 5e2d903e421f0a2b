"""Audit 14: the shown rank error through the public SQL API (``ldpql.connect(evaluation=True)``, ``OPTIONS (seed = t)``
per run), beside the simulation grid's cells, and the statement shapes the grid cannot reach: GROUP BY, several
quantiles of one column in one statement, a quantile beside a mean under ``split = 'users'``, the statement's
confidence, quantile_mode => 'padding', interval => 'calibrated'.

Per run the rank error of the answer (against the cell's own users' CDF) is compared with (a) the engine's
``answer.extra['rank_error']`` and (b) what the result's notes DISPLAY for it (its cell note, else the statement's
predicted rank error). Fixed before any of its results were seen (the cells reuse quantile_grid14.py's shapes).

    nice python examples/audit14/sql_checks.py [reps] [part]   -> sql_checks.csv (rows appended per part)
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import quantile_grid14 as grid
import sqlpath


def cdf_of(shape, coins: np.ndarray) -> np.ndarray:
    return np.cumsum(np.bincount(coins, minlength=shape.size)) / len(coins)


def statement_runs(con, sql: str, reps: int, head: int = 1414):
    """(result, plan, cells, answers) of ``reps`` runs of ``sql`` with OPTIONS (seed = head*1000 + t)."""
    with sqlpath.spy() as seen:
        for t in range(reps):
            seed = head * 1000 + t
            text = sql.replace("OPTIONS (", f"OPTIONS (seed = {seed}, ") if " OPTIONS (" in sql else \
                f"{sql} OPTIONS (seed = {seed})"
            res = con.sql(text)
            p, cells, answers = seen[-1]
            yield res, p, cells, answers


def score(name: str, rows: list, errs: list, extra: list, disp: list, nominal: float, **info) -> dict:
    e, a, d = np.array(errs), np.array(extra), np.array(disp)
    k = int(np.sum(e <= a + 1e-12))
    lo, hi = grid.clopper(k, len(e))
    row = {"check": name, "runs": len(e), "nominal": nominal, "cov_extra": round(k / len(e), 4),
           "cp_lo": round(lo, 4), "cp_hi": round(hi, 4), "cov_displayed": round(float(np.mean(e <= d + 1e-12)), 4),
           "mean_error": round(float(e.mean()), 5), "mean_extra": round(float(a.mean()), 5),
           "mean_displayed": round(float(d.mean()), 5), **info}
    rows.append(row)
    print(row, flush=True)
    return row


def single(shape, tau: float, eps: float, reps: int, rows: list, options: str = "", args: str = "",
           conf: float = 0.95, label: str = "sql") -> None:
    """One aggregate on the whole table: the SQL path's coverage (extra and displayed)."""
    con = sqlpath.connect({"x": shape.x}, {"x": sqlpath.declaration(shape)})
    sql = f"SELECT LDP_QUANTILE(x, {tau}{shape.sql_args}{args}) FROM t EPSILON {eps}"
    if options:
        sql += f" OPTIONS ({options})"
    errs, extra, disp, mechs = [], [], [], set()
    for res, p, cells, answers in statement_runs(con, sql, reps):
        a = answers[(0, 0)]
        v = int(a.extra["coin"])
        value = res.fetchall()[0][0]
        assert v == sqlpath.coin_of(shape, value), (v, value)
        errs.append(shape.coin_error(v, tau))
        extra.append(a.extra["rank_error"])
        shown = sqlpath.displayed(res, p)[p.aggregates[0].output]
        disp.append(shown["cells"].get("", shown["predicted"]))
        mechs.add(a.extra.get("search", p.aggregates[0].chosen.mechanism))
    score(label, rows, errs, extra, disp, conf, shape=shape.name, n=len(shape.x), tau=tau, eps=eps,
          mechanism="/".join(sorted(mechs)), options=options + args)


def group_by(reps: int, rows: list) -> None:
    """Two groups of very different sizes (public g): each group's answer against its own users' CDF, the rank
    error the engine computed for it, and what the notes display for it."""
    big, small = grid.shapes(20_000)["gamma"], grid.shapes(500)["gamma"]
    x = np.concatenate([big.x, small.x])
    g = np.array(["big"] * len(big.x) + ["small"] * len(small.x))
    con = sqlpath.connect({"g": g, "x": x}, {"x": sqlpath.declaration(big)}, ("g",))
    for tau, eps in ((0.9, 1.0), (0.5, 0.25)):
        out = {k: ([], [], []) for k in ("big", "small")}
        mechs = set()
        sql = f"SELECT g, LDP_QUANTILE(x, {tau}) FROM t GROUP BY g EPSILON {eps}"
        for res, p, cells, answers in statement_runs(con, sql, reps):
            shown = sqlpath.displayed(res, p)[p.aggregates[0].output]
            for ci, cell in enumerate(cells):
                key = cell.key[0]
                a = answers[(0, ci)]
                sh = big if key == "big" else small
                v = int(a.extra["coin"])
                out[key][0].append(sh.coin_error(v, tau))
                out[key][1].append(a.extra["rank_error"])
                out[key][2].append(shown["cells"].get(f"g = {key}", shown["predicted"]))
                mechs.add(a.extra.get("search", p.aggregates[0].chosen.mechanism))
        for key, (e, a, d) in out.items():
            score(f"group_by:{key}", rows, e, a, d, 0.95, shape="gamma", n=len((big if key == "big" else small).x),
                  tau=tau, eps=eps, mechanism="/".join(sorted(mechs)))


def several(reps: int, rows: list) -> None:
    """LDP_QUANTILE(x, 0.05), LDP_MEDIAN(x), LDP_QUANTILE(x, 0.95) in one statement: one release, users split."""
    shape = grid.shapes(20_000)["gap05"]
    con = sqlpath.connect({"x": shape.x}, {"x": sqlpath.declaration(shape)})
    taus = (0.05, 0.5, 0.95)
    for eps in (1.0, 0.25):
        sql = f"SELECT LDP_QUANTILE(x, 0.05), LDP_MEDIAN(x), LDP_QUANTILE(x, 0.95) FROM t EPSILON {eps}"
        out = {t: ([], [], []) for t in taus}
        mechs = set()
        for res, p, cells, answers in statement_runs(con, sql, reps):
            shown = sqlpath.displayed(res, p)
            for i, (agg, tau) in enumerate(zip(p.aggregates, taus)):
                a = answers[(i, 0)]
                v = int(a.extra["coin"])
                out[tau][0].append(shape.coin_error(v, tau))
                out[tau][1].append(a.extra["rank_error"])
                s = shown[agg.output]
                out[tau][2].append(s["cells"].get("", s["predicted"]))
                mechs.add(p.aggregates[0].chosen.mechanism)
        for tau, (e, a, d) in out.items():
            score("several", rows, e, a, d, 0.95, shape="gap05", n=len(shape.x), tau=tau, eps=eps,
                  mechanism="/".join(sorted(mechs)))


def beside_mean(reps: int, rows: list) -> None:
    """LDP_QUANTILE(x, 0.9) beside LDP_MEAN(y) with OPTIONS (split = 'users'): the quantile asks half the users and
    its answer stands for all of them (rank error against every user's CDF)."""
    shape = grid.shapes(20_000)["zipf"]
    rng = np.random.default_rng(5)
    con = sqlpath.connect({"x": shape.x, "y": rng.integers(0, 100, len(shape.x))},
                          {"x": sqlpath.declaration(shape), "y": {"between": (0, 99), "integer": True}})
    for tau, eps in ((0.9, 1.0), (0.98, 1.0), (0.5, 0.25)):
        sql = f"SELECT LDP_QUANTILE(x, {tau}), LDP_MEAN(y) FROM t EPSILON {eps} OPTIONS (split = 'users')"
        e, a, d, mechs = [], [], [], set()
        for res, p, cells, answers in statement_runs(con, sql, reps):
            ans = answers[(0, 0)]
            v = int(ans.extra["coin"])
            e.append(shape.coin_error(v, tau))
            a.append(ans.extra["rank_error"])
            s = sqlpath.displayed(res, p)[p.aggregates[0].output]
            d.append(s["cells"].get("", s["predicted"]))
            mechs.add(p.aggregates[0].chosen.mechanism)
        score("beside_mean_users", rows, e, a, d, 0.95, shape="zipf", n=len(shape.x), tau=tau, eps=eps,
              mechanism="/".join(sorted(mechs)))


def padding(reps: int, rows: list) -> None:
    """quantile_mode => 'padding' (BayeSS on padded data): coverage and width of the shown rank error."""
    for name, n in (("gamma", 20_000), ("wideunif", 20_000)):
        shape = grid.shapes(n)[name]
        for tau in (0.1, 0.3, 0.9):
            for mode in ("padding", "direct"):
                single(shape, tau, 1.0, reps, rows, args=f", quantile_mode => '{mode}', mechanism => 'bayess'",
                       label=f"mode:{mode}")


def calibrated(reps: int, rows: list) -> None:
    """interval => 'calibrated': how often the value interval holds a value of rank error 0 (a true quantile),
    overall and in the runs where the shown rank error held."""
    cases = [("gap05", 2_000, 0.05, 1.0, ""), ("zipf", 20_000, 0.9, 1.0, ""), ("narrow1k", 20_000, 0.5, 8.0, ""),
             ("bounds", 2_000, 0.3, 1.0, ""), ("gamma", 20_000, 0.1, 1.0, ", quantile_mode => 'padding'"),
             ("gamma", 20_000, 0.9, 1.0, ", quantile_mode => 'padding'")]
    for name, n, tau, eps, args in cases:
        shape = grid.shapes(n)[name]
        con = sqlpath.connect({"x": shape.x}, {"x": sqlpath.declaration(shape)})
        sql = f"SELECT LDP_QUANTILE(x, {tau}{shape.sql_args}, interval => 'calibrated'{args}) FROM t EPSILON {eps}"
        zero = np.array([shape.coin_error(v, tau) == 0 for v in range(shape.size)])
        held = hit = hit_held = 0
        e, a, d, mechs = [], [], [], set()
        for res, p, cells, answers in statement_runs(con, sql, reps):
            ans = answers[(0, 0)]
            v = int(ans.extra["coin"])
            lo_v, hi_v = float(ans.interval[0][0]), float(ans.interval[1][0])
            lo_c, hi_c = sqlpath.coin_of(shape, lo_v), sqlpath.coin_of(shape, hi_v)
            inside = bool(zero[max(lo_c, 0):min(hi_c, shape.size - 1) + 1].any())
            err = shape.coin_error(v, tau)
            ok = err <= ans.extra["rank_error"] + 1e-12
            held += ok
            hit += inside
            hit_held += ok and inside
            e.append(err)
            a.append(ans.extra["rank_error"])
            s = sqlpath.displayed(res, p)[p.aggregates[0].output]
            d.append(s["cells"].get("", s["predicted"]))
            mechs.add(p.aggregates[0].chosen.mechanism)
        score("calibrated_interval", rows, e, a, d, 0.95, shape=name, n=n, tau=tau, eps=eps,
              mechanism="/".join(sorted(mechs)), options=args.strip(", "),
              interval_cov=round(hit / reps, 4), interval_miss_when_held=round((held - hit_held) / reps, 4))


def main(reps: int = 200, part: str = "all") -> None:
    rows: list = []
    if part in ("all", "single"):
        for name, n, tau, eps in (("gap05", 2_000, 0.05, 1.0), ("zipf", 20_000, 0.9, 1.0),
                                  ("gamma", 20_000, 0.98, 0.25), ("narrow1k", 20_000, 0.5, 8.0),
                                  ("wideunif", 100_000, 0.5, 1.0), ("bounds", 500, 0.95, 8.0)):
            shape = grid.shapes(n)[name]
            single(shape, tau, eps, reps, rows)
        shape = grid.shapes(2_000)["gamma"]
        for conf in (0.8, 0.99):
            single(shape, 0.9, 1.0, reps, rows, options=f"confidence = {conf}", conf=conf, label="confidence")
    if part in ("all", "group_by"):
        group_by(reps, rows)
    if part in ("all", "several"):
        several(reps, rows)
    if part in ("all", "beside_mean"):
        beside_mean(reps, rows)
    if part in ("all", "padding"):
        padding(reps, rows)
    if part in ("all", "calibrated"):
        calibrated(reps, rows)
    path = HERE / "sql_checks.csv"
    new = not path.exists()
    keys = ["check", "shape", "n", "tau", "eps", "mechanism", "options", "nominal", "runs", "cov_extra", "cp_lo",
            "cp_hi", "cov_displayed", "mean_error", "mean_extra", "mean_displayed", "interval_cov",
            "interval_miss_when_held"]
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        if new:
            w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, sys.argv[2] if len(sys.argv) > 2 else "all")
