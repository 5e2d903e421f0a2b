"""Audit 9: the held-out grid's table (examples/audit9/quantile_heldout.py's CSVs merged).

Per run set (the planner's choice; each search forced) and n: cells, how many are under nominal − 2 points at 95%
and at 90% (and how many significantly: the exact 95% range of the coverage under nominal), the lowest coverage,
and the over-wide cells (coverage > 0.995 with a shown rank error more than 2x z·σ on average).

    python examples/audit9/heldout_summary.py   -> quantile_heldout.csv (merged), heldout_summary.csv,
                                                   heldout_flags.csv (every flagged row)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import beta

HERE = Path(__file__).parent


def load() -> pd.DataFrame:
    parts = sorted(HERE.glob("quantile_heldout_*.csv"))
    if parts:
        pd.concat([pd.read_csv(p) for p in parts], ignore_index=True).to_csv(HERE / "quantile_heldout.csv", index=False)
    df = pd.read_csv(HERE / "quantile_heldout.csv")
    return df[df["cov95"].notna()].copy()


def flags(df: pd.DataFrame) -> pd.DataFrame:
    for q in (95, 90):
        k = (df[f"cov{q}"] * df["reps"]).round()
        df[f"under{q}"] = df[f"cov{q}"] < q / 100 - 0.02
        high = np.where(k < df["reps"], beta.ppf(0.975, k + 1, np.maximum(df["reps"] - k, 1)), 1.0)
        df[f"sig_under{q}"] = high < q / 100
        df[f"overwide{q}"] = (df[f"cov{q}"] > 0.995) & (df[f"width{q}"] > 2)
        df[f"short{q}"] = (q / 100 - df[f"cov{q}"]).clip(lower=0).round(3)
    return df


def table(df: pd.DataFrame) -> pd.DataFrame:
    sets = [("planner's choice", df[df["chosen"]])] + [(f"{m} forced", df[df["mechanism"] == m])
                                                      for m in ("bayess", "naive_nbs", "shuffle_nbs")]
    rows = []
    for name, d in sets:
        for n, g in d.groupby("n"):
            rows.append({"runs": name, "n": n, "cells": len(g),
                         "under95": int(g["under95"].sum()), "sig_under95": int(g["sig_under95"].sum()),
                         "min95": g["cov95"].min(), "under90": int(g["under90"].sum()),
                         "sig_under90": int(g["sig_under90"].sum()), "min90": g["cov90"].min(),
                         "overwide95": int(g["overwide95"].sum()), "mean_width95": round(g["width95"].mean(), 2),
                         "before_under95": int((g["before95"] < 0.93).sum())})
    return pd.DataFrame(rows)


def main() -> None:
    df = flags(load())
    t = table(df)
    t.to_csv(HERE / "heldout_summary.csv", index=False)
    cols = ["shape", "B", "n", "eps", "tau", "max_share", "mechanism", "chosen", "cov95", "before95", "width95",
            "cov90", "before90", "width90"]
    df[df["under95"] | df["under90"] | df["overwide95"]][cols].to_csv(HERE / "heldout_flags.csv", index=False)
    print(t.to_string(index=False))


if __name__ == "__main__":
    main()
