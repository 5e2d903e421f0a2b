"""Tables of audit 14's held-out grid (grid14_<code>.csv, from quantile_grid14.py): under-coverage and width, per
search family, n and confidence; the flagged cells; over-wide cells.

    python examples/audit14/summarize.py CODE   -> prints markdown tables; writes flags14_<code>.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
CONFS = (80, 90, 95, 99)


def md(df: pd.DataFrame) -> str:
    """A markdown table (no tabulate dependency)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join("" if pd.isna(v) else f"{v:g}" if isinstance(v, float) else str(v)
                                       for v in row) + " |")
    return "\n".join(lines)


def load(code: str) -> pd.DataFrame:
    df = pd.read_csv(HERE / f"grid14_{code}.csv")
    df = df[df["refused"].isna()].copy()
    df["chosen"] = df["chosen"].astype(str) == "True"
    return df


def flags(df: pd.DataFrame) -> pd.DataFrame:
    """Cells under nominal - 2 points at some confidence (sig: the exact 95% range is under nominal)."""
    out = []
    for q in CONFS:
        nominal = q / 100
        under = df[df[f"cov{q}"] < nominal - 0.02]
        for _, r in under.iterrows():
            out.append({"conf": q, "shape": r["shape"], "n": r["n"], "eps": r["eps"], "tau": r["tau"],
                        "mechanism": r["mechanism"], "chosen": r["chosen"], "cov": r[f"cov{q}"],
                        "cp_hi": r[f"cp_hi{q}"], "sig": r[f"cp_hi{q}"] < nominal, "disp_cov": r[f"disp_cov{q}"],
                        "width": r[f"width{q}"], "mean_error": r["mean_error"], "sigma": r["sigma"]})
    return pd.DataFrame(out)


def table(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    rows = []
    for key, g in df.groupby(by):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row["cells"] = len(g)
        for q in CONFS:
            nominal = q / 100
            row[f"under{q}"] = int((g[f"cov{q}"] < nominal - 0.02).sum())
            row[f"sig{q}"] = int((g[f"cp_hi{q}"] < nominal).sum())
            row[f"min{q}"] = round(g[f"cov{q}"].min(), 3)
        row["dispunder95"] = int((g["disp_cov95"] < 0.93).sum())
        row["width95_med"] = round(g["width95"].median(), 2)
        row["width95_max"] = round(g["width95"].max(), 2)
        eff = g["eff95"].replace([float("inf")], pd.NA).dropna()
        row["eff95_med"] = round(float(eff.median()), 2) if len(eff) else None
        row["over995"] = int((g["cov95"] > 0.995).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def main(code: str) -> None:
    df = load(code)
    searches = df[df["mechanism"].isin(["bayess", "naive_nbs", "shuffle_nbs"])]
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.max_rows", 400)
    print("## every search forced, by mechanism and n\n")
    print(md(table(searches, ["mechanism", "n"])))
    print("\n## the planner's own choice, by chosen mechanism\n")
    print(md(table(df[df["chosen"]], ["mechanism"])))
    print("\n## the planner's own choice, by n\n")
    print(md(table(df[df["chosen"]], ["n"])))
    print("\n## searches by shape\n")
    print(md(table(searches, ["shape"])))
    f = flags(df)
    f.to_csv(HERE / f"flags14_{code}.csv", index=False)
    print(f"\n## flagged (cov < nominal - 0.02): {len(f)} cell-confidences, {int(f['sig'].sum()) if len(f) else 0} "
          "significant\n")
    if len(f):
        print(md(f.sort_values(["sig", "cov"], ascending=[False, True]).head(60)))
    cont = df[df["vcov95"].notna()] if "vcov95" in df else df.iloc[:0]
    if len(cont):
        print("\n## DOUBLE columns: coverage of the reported value's rank error (bucket midpoint)\n")
        t = cont.groupby(["shape", "mechanism"]).agg(cells=("cov95", "size"),
                                                    coin_under=("cov95", lambda s: int((s < 0.93).sum())),
                                                    value_under=("vcov95", lambda s: int((s < 0.93).sum())),
                                                    value_min=("vcov95", "min")).reset_index()
        print(md(t))
    print("\n## widest cells (searches, width95 = mean shown / z·σ)\n")
    print(md(searches.sort_values("width95", ascending=False)[["shape", "n", "eps", "tau", "mechanism", "cov95",
                                                                "width95", "eff95", "mean_error", "shown95"]].head(15)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
