"""Issue 11's "done when" for quantile rank errors, on a grid no rule was chosen on: audit 15's held-out shapes
(examples/audit15/common15.py: dmass, dwide, dnarrow, ibuck, iodd, ipois; n 200 / 2,000; ε 0.1 / 1 / 10;
τ 0.01-0.99; the planner's choice and every search forced), re-run at 300 runs per cell with the engine of this
commit (examples/audit15/grid15.py, seeds [1515, t]; the harness scores the value the result reports, and declares
the coins as the planner does). Summarises the shown rank error's coverage of the coin's and of the reported value's
rank error at 80 / 90 / 95% per mechanism, and plots coverage against nominal.

    python examples/qrank4/heldout15.py   (reads heldout15_300.csv) -> heldout15_summary.csv, heldout15.png
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
CONFS = (80, 90, 95)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for mech, part in [("chosen", df[df["chosen"]])] + list(df.groupby("mechanism")):
        for c in CONFS:
            nominal = c / 100
            for what, col, cp in (("coin", f"cov{c}", f"cp{c}"), ("value", f"vcov{c}", f"vcp{c}")):
                cov = part[col]
                high = part[cp].str.split("-").str[1].astype(float)
                rows.append({"mechanism": mech, "confidence": nominal, "rank error of": what, "cells": len(part),
                             "under nominal - 2 pts": int((cov < nominal - 0.02).sum()),
                             "significantly under": int((high < nominal).sum()),
                             "lowest": round(float(cov.min()), 3), "mean": round(float(cov.mean()), 3),
                             "median width / z·σ": round(float(part[f"width{c}"].median()), 2)})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, c in zip(axes, CONFS):
        for mech, part in df.groupby("mechanism"):
            ax.scatter(part[f"width{c}"].clip(upper=20), part[f"vcov{c}"], s=10, label=mech, alpha=0.7)
        ax.axhline(c / 100, color="k", lw=1)
        ax.axhline(c / 100 - 0.02, color="r", lw=1, ls="--")
        ax.set(title=f"confidence {c}%", xlabel="shown / z·σ (clipped at 20)", xscale="log")
    axes[0].set_ylabel("coverage over 300 runs")
    axes[0].legend(fontsize=8)
    fig.suptitle("Audit 15's held-out quantile cells: the reported value's rank error within the shown one (300 runs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    df = pd.read_csv(HERE / "heldout15_300.csv")
    df = df[df["refused"].isna()] if "refused" in df else df
    out = summary(df)
    out.to_csv(HERE / "heldout15_summary.csv", index=False)
    plot(df, HERE / "heldout15.png")
    print(out.to_string(index=False))


if __name__ == "__main__":
    main()
