"""Audit 9: issue 11's "Done when" read off the committed coverage grid (examples/coverage_results/).

The latest result per cell: the full grid on the backend seam (``seam``, 300 runs per cell), overridden cell by
cell by the later re-runs (``minimax``: means; ``regret8``: quantile cells and min_m; ``topk8``: TOPK; session 14,
on the code of its day: ``grid14``, every fast statement at every n, ε and confidence and the extremes' standard
cells; ``shown14``, the histogram, TOPK and histogram+mean cells again once EVALUATE scored the interval a result
shows; ``quant14``, the quantile cells of the standard grid after the zoom; session 15: ``grid15``, every mean, sum
and multi-aggregate cell with a mean at ε = 16 once the few-far-reports interval (ldpql/mechanisms/rare.py) replaced
est ± z·se there and the planner ran PM at n = 1,000). Per (family, what, confidence): rows,
rows below nominal − 2 points, rows above nominal + 2 points, the lowest coverage, and how many rows are
significantly below (their exact 95% range, cov_high, under nominal: with 300 runs a correct 95% interval lands
below nominal − 2 points in ~6% of rows by chance); regret cells over 1.25.

The rows below nominal − 2 points were re-run with fresh seeds at 1,000 runs on the code of the run that found
them (``RECHECK``; ``coverage_grid.py --grid full --only <their cells> --reps 1000 --seed-offset 1``).

    python examples/audit9/done_when.py   -> done_when_coverage.csv, done_when_regret.csv, done_when_recheck.csv
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
GRID = HERE.parent / "coverage_results"
RUNS = ("seam", "minimax", "regret8", "topk8", "grid14", "shown14", "quant14", "grid15")   # oldest first: a later run
# replaces a cell's rows
# run -> its low rows' re-run
RECHECK = {"seam": "recheck12", "minimax": "recheck12", "regret8": "recheck12", "topk8": "recheck12",
           "grid14": "recheck14", "shown14": "recheck14s", "quant14": "recheck14q", "grid15": "recheck15"}


def latest(kind: str, runs: tuple[str, ...] = RUNS, grid: Path = GRID) -> pd.DataFrame:
    """The rows of ``kind`` ("coverage" or "regret") of the latest of ``runs`` that holds each cell."""
    frames = []
    for run in runs:
        path = grid / run / f"{kind}.csv"
        if path.exists():
            frames.append(pd.read_csv(path).assign(run=run))
    df = pd.concat(frames, ignore_index=True)
    last = df.groupby("cell")["run"].agg(lambda r: max(r, key=runs.index))
    return df[df["run"] == df["cell"].map(last)]


def coverage_table(cov: pd.DataFrame) -> pd.DataFrame:
    ok = cov[(cov["status"] == "ok") & cov["coverage"].notna()].copy()
    ok["below"] = ok["coverage"] < ok["nominal"] - 0.02
    ok["above"] = ok["coverage"] > ok["nominal"] + 0.02
    ok["sig_below"] = ok["cov_high"] < ok["nominal"]   # the exact 95% range of the coverage excludes nominal
    return (ok.groupby(["family", "what", "nominal"])
              .agg(rows=("coverage", "size"), min_reps=("reps", "min"), below=("below", "sum"),
                   significantly_below=("sig_below", "sum"),
                   above=("above", "sum"), min_coverage=("coverage", "min"), mean_coverage=("coverage", "mean"))
              .round(3).reset_index())


KEY = ["cell", "output", "group", "label", "what"]


def recheck(cov: pd.DataFrame) -> pd.DataFrame:
    """Every row below nominal − 2 points in ``cov`` beside the same row re-run with fresh seeds (``RECHECK`` of the
    run it came from: the grid's --seed-offset 1 at 1,000 repetitions), and whether it holds there: within 2 points
    of nominal and not significantly under it. At 300 runs a correct 95% interval lands 2 points low in ~6% of rows
    by chance, so the literal "every row within 2 points" cannot be met by any engine; a low row that holds on 1,000
    fresh runs was chance, one that does not is a defect."""
    ok = cov[(cov["status"] == "ok") & cov["coverage"].notna()].copy()
    low = ok[ok["coverage"] < ok["nominal"] - 0.02].copy()
    low["recheck"] = low["run"].map(RECHECK)
    again = pd.concat([pd.read_csv(GRID / r / "coverage.csv").assign(recheck=r)
                       for r in sorted(set(low["recheck"])) if (GRID / r / "coverage.csv").exists()], ignore_index=True)
    for df in (low, again):
        for k in ("group", "label"):
            df[k] = df[k].astype(object).where(df[k].notna(), "").astype(str)
    both = low.merge(again, on=KEY + ["recheck"], how="left", suffixes=("", "_again"), validate="m:1")
    both["holds"] = ((both["coverage_again"] >= both["nominal"] - 0.02) & (both["cov_high_again"] >= both["nominal"])
                     & (both["reps_again"] >= 1000))
    return both[KEY + ["run", "nominal", "coverage", "reps", "recheck", "coverage_again", "cov_low_again",
                       "cov_high_again", "reps_again", "holds"]]


EXPECTED = ("ok", "no interval check", "refused:")   # statuses a row may have; anything else is a failed run


def unexpected(cov: pd.DataFrame) -> pd.DataFrame:
    """Rows whose status is none of ``EXPECTED`` (an errored cell would otherwise drop its rows from both tables,
    audit 18 L2)."""
    return cov[~cov["status"].astype(str).str.startswith(EXPECTED)]


def regret_table(reg: pd.DataFrame) -> pd.DataFrame:
    return (reg.assign(over=reg["regret"] > 1.25).groupby("family")
               .agg(cells=("regret", "size"), over_125=("over", "sum"), max_regret=("regret", "max"))
               .round(3).reset_index())


def main() -> None:
    cov, reg = coverage_table(latest("coverage")), regret_table(latest("regret"))
    again = recheck(latest("coverage"))
    cov.to_csv(HERE / "done_when_coverage.csv", index=False)
    reg.to_csv(HERE / "done_when_regret.csv", index=False)
    again.to_csv(HERE / "done_when_recheck.csv", index=False)
    print(cov.to_string(index=False))
    print(reg.to_string(index=False))
    print(f"rows below nominal - 2 points: {len(again)}; holding on 1,000 fresh runs: {int(again['holds'].sum())}")


if __name__ == "__main__":
    main()
