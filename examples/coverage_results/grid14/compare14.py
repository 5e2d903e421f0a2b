"""Session 14: grid14 (+ recheck14) against the committed latest rows (audit9/done_when.py's ``latest()``).

    python compare14.py NEW_DIR RECHECK_DIR COMMITTED_DIR  -> markdown on stdout

Non-quantile statements only (quantile / median statements and quantile+mean are excluded on both sides).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "audit9"))
import done_when  # noqa: E402

RUNS = ("seam", "minimax", "regret8", "topk8")   # as examples/audit9/done_when.py
KEY = ["cell", "output", "group", "label", "what"]
TOL = 0.02


def latest(grid: Path, kind: str) -> pd.DataFrame:   # done_when.py's latest() over the committed runs of its day
    return done_when.latest(kind, RUNS, grid)


def nonquantile(df: pd.DataFrame) -> pd.DataFrame:
    st = df["statement"].astype(str)
    q = st.str.contains("LDP_QUANTILE") | st.str.contains("LDP_MEDIAN")
    return df[~q].copy()


def norm(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for k in ("group", "label"):
        df[k] = df[k].astype(object).where(df[k].notna(), "").astype(str)
    return df


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return norm(df[(df["status"] == "ok") & df["coverage"].notna()])


def md(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    if df.empty:
        return "(none)"
    def cell(v):
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else format(v, floatfmt)
        return str(v).replace("|", "\\|")
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def family_table(ok: pd.DataFrame) -> pd.DataFrame:
    ok = ok.copy()
    ok["below"] = ok["coverage"] < ok["nominal"] - TOL - 1e-12
    ok["above"] = ok["coverage"] > ok["nominal"] + TOL + 1e-12
    ok["sig_below"] = ok["cov_high"] < ok["nominal"]
    return (ok.groupby(["family", "what", "nominal"])
              .agg(cells=("cell", "nunique"), rows=("coverage", "size"), below=("below", "sum"),
                   significantly_below=("sig_below", "sum"), above=("above", "sum"),
                   min_coverage=("coverage", "min"), mean_coverage=("coverage", "mean"))
              .reset_index())


def main(new_dir: str, recheck_dir: str, committed: str) -> None:
    new_dir, recheck_dir, committed = Path(new_dir), Path(recheck_dir), Path(committed)
    new = nonquantile(pd.read_csv(new_dir / "coverage.csv"))
    newreg = nonquantile(pd.read_csv(new_dir / "regret.csv")) if (new_dir / "regret.csv").exists() else None
    old = nonquantile(latest(committed, "coverage"))
    oldreg = nonquantile(latest(committed, "regret"))
    out = []

    # --- errors / refusals / no-interval rows ---
    bad = new[new["status"] != "ok"]
    refused = bad[bad["status"].astype(str).str.startswith("refused")]
    nocheck = bad[~bad["status"].astype(str).str.startswith("refused")]
    out += ["## Status", "",
            f"grid14: {new['cell'].nunique()} cells, {len(new)} rows; status ok: {int((new['status'] == 'ok').sum())}; "
            f"refused cells: {refused['cell'].nunique()}; rows without an interval check: {len(nocheck)} "
            f"({', '.join(sorted(nocheck['status'].astype(str).unique())) or '-'})", ""]
    if len(refused):
        out += [md(refused[["cell", "status"]]), ""]

    # --- per family (new) ---
    okn, oko = ok_rows(new), ok_rows(old)
    out += ["## Coverage per family, grid14 (300 runs per cell, all cells run)", "", md(family_table(okn)), ""]
    # new vs old on the common rows
    both = okn.merge(oko, on=KEY, how="inner", suffixes=("", "_old"))
    out += [f"## Coverage per family on the {len(both)} rows both grid14 and the committed latest rows have "
            f"({both['cell'].nunique()} cells)", ""]
    t_new = family_table(both).set_index(["family", "what", "nominal"])
    old_part = both[[c for c in both.columns if c.endswith("_old")] + KEY].copy()
    old_part.columns = [c[:-4] if c.endswith("_old") else c for c in old_part.columns]
    t_old = family_table(old_part).set_index(["family", "what", "nominal"])
    t = pd.DataFrame({"rows": t_new["rows"],
                      "below band (committed -> grid14)": t_old["below"].astype(str) + " -> " + t_new["below"].astype(str),
                      "sig. below": t_old["significantly_below"].astype(str) + " -> " + t_new["significantly_below"].astype(str),
                      "min coverage": t_old["min_coverage"].map("{:.3f}".format) + " -> " + t_new["min_coverage"].map("{:.3f}".format),
                      "mean coverage": t_old["mean_coverage"].map("{:.3f}".format) + " -> " + t_new["mean_coverage"].map("{:.3f}".format)}
                     ).reset_index()
    out += [md(t), ""]
    only_new = okn[~okn.set_index(KEY).index.isin(oko.set_index(KEY).index)]
    out += [f"rows only in grid14 (no committed counterpart): {len(only_new)} in {only_new['cell'].nunique()} cells; "
            f"committed rows with no grid14 counterpart: "
            f"{len(oko[~oko.set_index(KEY).index.isin(okn.set_index(KEY).index)])}", ""]

    # identical vs changed (same seeds: crc32 of the cell id, offset 0, in both)
    both["delta"] = both["coverage"] - both["coverage_old"]
    same = np.isclose(both["coverage"], both["coverage_old"]) & np.isclose(both["rmse"], both["rmse_old"], rtol=1e-9)
    out += [f"same seeds as the committed runs: {int(same.sum())} of {len(both)} common rows reproduce the committed "
            f"coverage and RMSE exactly; {int((~same).sum())} differ. |Δcoverage|: mean "
            f"{both['delta'].abs().mean() * 100:.2f} points, max {both['delta'].abs().max() * 100:.1f} points.", ""]
    per = both.assign(changed=~same).groupby(["family"]).agg(rows=("changed", "size"), changed=("changed", "sum"))
    out += [md(per.reset_index()), ""]
    mech = both[both["mechanism"].astype(str) != both["mechanism_old"].astype(str)]
    mc = mech.drop_duplicates("cell")[["cell", "mechanism_old", "mechanism"]]
    out += [f"cells whose chosen mechanism changed: {len(mc)}", "", md(mc), ""]

    big = both[both["delta"].abs() > 0.03].sort_values("delta")
    out += [f"## Rows whose coverage moved by more than 3 points ({len(big)})", "",
            "(with 300 runs on both sides and an unchanged mechanism, the sd of a difference of two independent "
            "coverages near 95% is ~1.8 points; but the seeds are the same, so an unchanged estimator reproduces "
            "the committed row exactly)", "",
            md(big[KEY + ["nominal", "coverage_old", "coverage", "delta", "mechanism_old", "mechanism"]]), ""]

    newly_low = both[(both["coverage"] < both["nominal"] - TOL - 1e-12) & ~(both["coverage_old"] < both["nominal"] - TOL - 1e-12)]
    low_all = okn[okn["coverage"] < okn["nominal"] - TOL - 1e-12].sort_values(["cell"])
    lown = low_all.merge(oko[KEY + ["coverage"]], on=KEY, how="left", suffixes=("", "_old"))
    out += [f"## Rows below nominal − 2 points in grid14 ({len(low_all)}; of the common rows, newly below: {len(newly_low)})", ""]

    # recheck
    if (recheck_dir / "coverage.csv").exists():
        again = norm(pd.read_csv(recheck_dir / "coverage.csv"))
        m = lown.merge(again[KEY + ["coverage", "cov_low", "cov_high", "reps"]], on=KEY, how="left", suffixes=("", "_again"))
        m["holds"] = ((m["coverage_again"] >= m["nominal"] - TOL) & (m["cov_high_again"] >= m["nominal"]) & (m["reps_again"] >= 1000))
        m["holds"] = m["holds"].astype(object).where(m["coverage_again"].notna(), "not rechecked")
        out += [md(m[KEY + ["nominal", "mechanism", "coverage_old", "coverage", "coverage_again", "cov_low_again",
                            "cov_high_again", "reps_again", "holds"]]), "",
                "holds: at 1,000 fresh runs (--seed-offset 1) within 2 points of nominal and the exact 95% range "
                "reaching nominal (done_when.py's recheck criterion); blank: not rechecked", "",
                f"rechecked: {int(m['coverage_again'].notna().sum())} of {len(m)}; holding: "
                f"{int((m['holds'] == True).sum())}; not holding: {int((m['holds'] == False).sum())}", ""]
        m.to_csv(new_dir / "recheck_vs_grid14.csv", index=False)
    else:
        out += [md(lown[KEY + ["nominal", "mechanism", "coverage_old", "coverage"]]), ""]

    # regret
    if newreg is not None:
        r = newreg.merge(oldreg[["cell", "chosen", "best", "regret", "run"]], on="cell", how="left", suffixes=("", "_old"))
        r["delta"] = r["regret"] - r["regret_old"]
        fam = (r.assign(over=r["regret"] > 1.25, over_old=r["regret_old"] > 1.25)
                 .groupby("family").agg(cells=("regret", "size"), over_125=("over", "sum"), over_125_committed=("over_old", "sum"),
                                        max_regret=("regret", "max"), max_regret_committed=("regret_old", "max"),
                                        mean_regret=("regret", "mean")).reset_index())
        out += ["## Regret (confidence 0.95 cells)", "", md(fam), ""]
        over = r[(r["regret"] > 1.25) | (r["regret_old"] > 1.25)].sort_values("regret", ascending=False)
        out += [f"cells over 1.25 in grid14 or in the committed runs ({len(over)})", "",
                md(over[["cell", "chosen_old", "best_old", "regret_old", "run", "chosen", "chosen_error", "best",
                         "best_error", "regret", "candidates", "skipped"]], floatfmt=".4g"), ""]
        moved = r[(r["delta"].abs() > 0.05) | (r["chosen"] != r["chosen_old"])].sort_values("delta")
        out += [f"regret cells whose regret moved by more than 0.05 or whose choice changed ({len(moved)})", "",
                md(moved[["cell", "chosen_old", "regret_old", "chosen", "best", "regret", "delta"]], floatfmt=".3f"), ""]
        sk = newreg[newreg["skipped"].fillna("") != ""]
        if len(sk):
            out += [f"regret cells with skipped candidates ({len(sk)})", "", md(sk[["cell", "skipped"]]), ""]
    print("\n".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
