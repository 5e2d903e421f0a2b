"""qrank8: per-cell comparison of the histogram candidate before the zoom (856d265), with the reworked zoom
(24b4b7a, qrank7's HEAD) and at HEAD (bf28472: 0d1235b's zoom_error, no residual term for cells of one coin).
Copied from examples/qrank7/compare.py; "after" is HEAD, and the columns ending in _prev are 24b4b7a, read from
qrank7's run pickles (qrank7's _eb4 slot now holds 24b4b7a; eb4b888 is not compared here).

    python examples/qrank8/compare.py planner BEFORE.pkl PREV.pkl HEAD.pkl OUT.csv
    python examples/qrank8/compare.py audit14 BEFORE.pkl PREV.pkl HEAD.pkl OUT.csv

A HEAD pickle may hold a subset of the grid's cells (audit14 cut for time): the other pickles are matched by cell.

The pickles are hist_grid.py's. Ratio: (after + 1/n) / (before + 1/n) of the mean rank errors, as the grid's regret.
z_diff: (after - before) / sqrt(var_a/R + var_b/R), the two means' difference in standard errors (the versions draw
different randomness wherever bins are wider than one coin: the zoom splits the users in two halves even when it
then pools them; with one coin per bin the runs are identical). cov95: share of runs with rank error <= the shown
rank error at 95%. within95: share with rank error <= 1.96 σ (σ the planner's prediction).
Regret (the chosen histogram's mean error + 1/n over the best forced candidate's + 1/n) uses the histogram's first
runs on the same seeds as the committed CSV with the other candidates' errors:
  planner: examples/qrank5/quantile_grid_after.csv (068a6e2, 300 runs, seeds [23, t]; the searches, the tree and
           the histogram answer identically at 856d265: checked for the histogram, whose first 300 runs here
           reproduce its mean_error in all 124 cells)
  audit14: examples/audit14/grid14_71ea9e8.csv (200 runs, seeds [1414, t]; BayeSS and NaiveNBS forced in every
           cell, 'bound' where chosen; its shuffled NaiveNBS is left out: another trust model, which the local
           planner does not choose)
"""

from __future__ import annotations

import csv
import math
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
REF = {"planner": (ROOT / "examples/qrank5/quantile_grid_after.csv", 300),
       "audit14": (ROOT / "examples/audit14/grid14_71ea9e8.csv", 200)}


def key(c: dict) -> tuple:
    return c["shape"], int(c["n"]), float(c["eps"]), float(c["tau"])


def others(grid: str) -> dict:
    """Per cell: {mechanism: mean rank error} of every candidate but the histogram, from the committed CSV."""
    path, _ = REF[grid]
    out: dict = {}
    with open(path) as fh:
        rows_ = list(csv.DictReader(fh))
    for r in rows_:
        if r["mechanism"] in ("histogram", "shuffle_nbs") or not r.get("mean_error"):
            continue
        eps = r["epsilon"] if grid == "planner" else r["eps"]
        out.setdefault((r["shape"], int(r["n"]), float(eps), float(r["tau"])), {})[r["mechanism"]] = \
            float(r["mean_error"])
    return out


def rows(grid: str, before: list, eb4: list, after: list) -> list[dict]:
    ref, ref_runs = others(grid), REF[grid][1]
    out = []
    for b, e, a in zip(before, eb4, after):
        assert key(a) == key(b) == key(e)
        n = a["n"]
        row = {"shape": a["shape"], "n": n, "eps": a["eps"], "tau": a["tau"], "coins": a["coins"],
               "bins": a.get("bins"), "width": -(-a["coins"] // a["bins"]) if a.get("bins") else None,
               "chosen_before": b["chosen"], "chosen_prev": e["chosen"], "chosen_after": a["chosen"]}
        if "max_share" in a:
            row["max_share"] = round(a["max_share"], 4)
        if "errors" not in a or "errors" not in b or "errors" not in e:
            out.append(row | {"refused": a.get("refused") or b.get("refused")})
            continue
        eb, ea, R = b["errors"], a["errors"], len(a["errors"])
        se = math.sqrt(ea.var(ddof=1) / R + eb.var(ddof=1) / R) if R > 1 else 0.0
        z95 = 1.959963984540054 * a["sigma"]
        row |= {"reps": R, "sigma": round(a["sigma"], 6),
                "mean_before": round(float(eb.mean()), 6), "mean_after": round(float(ea.mean()), 6),
                "ratio": float(f"{(ea.mean() + 1 / n) / (eb.mean() + 1 / n):.6g}"),
                "z_diff": round(float((ea.mean() - eb.mean()) / se), 2) if se > 0 else 0.0,
                "identical_runs": bool(np.array_equal(ea, eb)),
                "zoom_after": float(a["zoomed"].mean()),
                "mean_after_zoomed": round(float(ea[a["zoomed"]].mean()), 6) if a["zoomed"].any() else None,
                "mean_after_pooled": round(float(ea[~a["zoomed"]].mean()), 6) if (~a["zoomed"]).any() else None,
                "cov95_before": round(float(np.mean(eb <= b["shown"] + 1e-12)), 4),
                "cov95_after": round(float(np.mean(ea <= a["shown"] + 1e-12)), 4),
                "cov95_after_zoomed": (round(float(np.mean(ea[a["zoomed"]] <= a["shown"][a["zoomed"]] + 1e-12)), 4)
                                       if a["zoomed"].any() else None),
                "within95_before": round(float(np.mean(eb <= z95)), 4),
                "within95_after": round(float(np.mean(ea <= z95)), 4),
                "shown_before": round(float(b["shown"].mean()), 5), "shown_after": round(float(a["shown"].mean()), 5),
                "shown_over_zsigma_after": round(float(a["shown"].mean() / z95), 3) if z95 > 0 else None}
        ee = e["errors"]
        se_e = math.sqrt(ea.var(ddof=1) / R + ee.var(ddof=1) / len(ee))
        se_eb = math.sqrt(ee.var(ddof=1) / len(ee) + eb.var(ddof=1) / R)
        row |= {"mean_prev": round(float(ee.mean()), 6), "identical_runs_prev": bool(np.array_equal(ea, ee)),
                "ratio_prev": float(f"{(ee.mean() + 1 / n) / (eb.mean() + 1 / n):.6g}"),
                "z_diff_prev": round(float((ee.mean() - eb.mean()) / se_eb), 2) if se_eb > 0 else 0.0,
                "ratio_after_vs_prev": float(f"{(ea.mean() + 1 / n) / (ee.mean() + 1 / n):.6g}"),
                "z_after_vs_prev": round(float((ea.mean() - ee.mean()) / se_e), 2) if se_e > 0 else 0.0,
                "zoom_prev": float(e["zoomed"].mean()),
                "cov95_prev": round(float(np.mean(ee <= e["shown"] + 1e-12)), 4),
                "within95_prev": round(float(np.mean(ee <= z95)), 4),
                "shown_prev": round(float(e["shown"].mean()), 5)}
        other = ref.get(key(a), {})
        if other:
            best_mech = min(other, key=other.get)
            hb, ha = eb[:ref_runs].mean(), ea[:ref_runs].mean()
            he = ee[:ref_runs].mean()
            best_b, best_a, best_e = min(other[best_mech], hb), min(other[best_mech], ha), min(other[best_mech], he)
            row |= {"best_other": best_mech, "best_other_error": round(other[best_mech], 6),
                    "hist_regret_before": round(float((hb + 1 / n) / (best_b + 1 / n)), 3),
                    "hist_regret_prev": round(float((he + 1 / n) / (best_e + 1 / n)), 3),
                    "hist_regret_after": round(float((ha + 1 / n) / (best_a + 1 / n)), 3)}
            for tag, err, best in (("before", hb, best_b), ("prev", he, best_e), ("after", ha, best_a)):
                ch = row[f"chosen_{tag}"]
                chosen_err = err if ch == "histogram" else other.get(ch)
                if chosen_err is not None:
                    row[f"regret_{tag}"] = round(float((chosen_err + 1 / n) / (best + 1 / n)), 3)
        out.append(row)
    return out


def write(rs: list[dict], path: Path) -> None:
    keys = list(dict.fromkeys(k for r in rs for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rs)


def main() -> None:
    grid, bp, ep, ap, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5])
    before, eb4, after = (pickle.loads(p.read_bytes()) for p in (bp, ep, ap))
    assert ("qr6_before" in before["ldpql"] and "qr7_head" in eb4["ldpql"] and "qr8_head" in after["ldpql"]), \
        (before["ldpql"], eb4["ldpql"], after["ldpql"])
    assert before["reps"] == eb4["reps"] == after["reps"], (before["reps"], eb4["reps"], after["reps"])
    keep = {key(c): c for c in after["cells"]}   # HEAD may hold a subset of the cells, in another order
    bc, ec = ([c for c in x["cells"] if key(c) in keep] for x in (before, eb4))
    assert len(bc) == len(ec) == len(keep) == len(after["cells"]), (len(bc), len(ec), len(after["cells"]))
    write(rows(grid, bc, ec, [keep[key(c)] for c in bc]), out)   # in the grid's order


if __name__ == "__main__":
    main()
