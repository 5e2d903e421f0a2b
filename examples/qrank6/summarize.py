"""qrank6: the tables of README.md from compare.py's CSVs.

    python examples/qrank6/summarize.py examples/qrank6/planner_compare.csv examples/qrank6/audit14_compare.csv \
        > examples/qrank6/tables.md
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

Z_SIG = 3.0   # a change called real: |after - before| >= 3 standard errors of the difference


def fmt(x, nd=4):
    if pd.isna(x):
        return ""
    if isinstance(x, (float, np.floating)):
        return f"{x:.{nd}g}" if abs(x) < 1e4 else f"{x:.3g}"
    return str(x)


def table(d: pd.DataFrame, cols: list[str], names: list[str] | None = None) -> str:
    names = names or cols
    out = ["| " + " | ".join(names) + " |", "|" + "---|" * len(cols)]
    for _, r in d.iterrows():
        out.append("| " + " | ".join(fmt(r[c]) if c != "z_diff" else
                                     (f"{r[c]:.1f}" if abs(r[c]) < 100 else (">100" if r[c] > 0 else "<-100"))
                                     for c in cols) + " |")
    return "\n".join(out)


def summary(name: str, d: pd.DataFrame) -> str:
    d = d[d["mean_before"].notna()].copy()
    d["chosen_hist"] = d["chosen_after"] == "histogram"
    lines = [f"## {name}: {len(d)} cells, {int(d['reps'].iloc[0])} runs per cell and version", ""]
    z = d["zoom_after"]
    same = d[d["identical_runs"]]
    unz = d[(z == 0) & ~d["identical_runs"]]
    lines += [f"- cells with one coin per bin (no zoom possible; runs identical before/after): {len(same)}",
              (f"- cells with bins wider than one coin that never zoomed: {len(unz)}; their z_diff (a pure Monte "
              f"Carlo difference, same protocol in distribution): mean {unz['z_diff'].mean():.2f}, sd "
              f"{unz['z_diff'].std():.2f}, |z| >= 3 in {int((unz['z_diff'].abs() >= 3).sum())}"),
              (f"- cells that zoomed in some run: {int((z > 0).sum())}; in >= 50% of runs: {int((z >= 0.5).sum())}; "
              f"in every run: {int((z == 1).sum())}"),
              (f"- choice changed before -> after: {int((d['chosen_before'] != d['chosen_after']).sum())} cells; "
              f"histogram chosen in {int(d['chosen_hist'].sum())}"), ""]
    np.log(d["ratio"])
    lines.append("| cells | n cells | geo. mean after/before | > 1.10 | < 0.90 | > 1.10 and z >= 3 | < 0.90 and "
                 "z <= -3 |")
    lines.append("|---|---|---|---|---|---|---|")
    for label, m in (("all", np.ones(len(d), bool)), ("zoom rate > 0", z > 0), ("zoom rate 0", z == 0),
                     ("histogram chosen", d["chosen_hist"]),
                     ("histogram chosen, zoom rate > 0", d["chosen_hist"] & (z > 0))):
        s = d[m]
        lines.append(f"| {label} | {len(s)} | {np.exp(np.log(s['ratio']).mean()) if len(s) else float('nan'):.3f} | "
                     f"{int((s['ratio'] > 1.1).sum())} | {int((s['ratio'] < 0.9).sum())} | "
                     f"{int(((s['ratio'] > 1.1) & (s['z_diff'] >= Z_SIG)).sum())} | "
                     f"{int(((s['ratio'] < 0.9) & (s['z_diff'] <= -Z_SIG)).sum())} |")
    lines += ["", "Coverage of the shown rank error at 95% (share of runs with rank error <= shown_rank_error):", "",
              ("| cells | before: mean / min / under 0.93 | after: mean / min / under 0.93 | after, zoomed runs only: "
              "cells with >= 20 zoomed runs, mean / min |"), "|---|---|---|---|"]
    for label, m in (("all", np.ones(len(d), bool)), ("zoom rate > 0", z > 0), ("histogram chosen", d["chosen_hist"])):
        s = d[m]
        zz = s[(s["zoom_after"] * s["reps"] >= 20)]
        lines.append(f"| {label} ({len(s)}) | {s['cov95_before'].mean():.4f} / {s['cov95_before'].min():.3f} / "
                     f"{int((s['cov95_before'] < 0.93).sum())} | {s['cov95_after'].mean():.4f} / "
                     f"{s['cov95_after'].min():.3f} / {int((s['cov95_after'] < 0.93).sum())} | "
                     f"{len(zz)}: {zz['cov95_after_zoomed'].mean():.4f} / {zz['cov95_after_zoomed'].min():.3f} |")
    lines += ["", ("Width of the shown rank error, after / before (mean shown value, cells with zoom rate > 0.5): "
              f"median {np.median(d[z > 0.5]['shown_after'] / d[z > 0.5]['shown_before']):.3f}, "
              f"range {np.min(d[z > 0.5]['shown_after'] / d[z > 0.5]['shown_before']):.3f}-"
              f"{np.max(d[z > 0.5]['shown_after'] / d[z > 0.5]['shown_before']):.3f}"), ""]
    ch = d[d["chosen_hist"]]
    if "regret_after" in d:
        reg = d[d["regret_after"].notna() & d["regret_before"].notna()]
        chr_ = ch[ch["regret_after"].notna()]
        lines += ["Cells where the planner chooses the histogram:", "",
                  "| | before | after |", "|---|---|---|",
                  (f"| mean over cells of the mean rank error | {ch['mean_before'].mean():.5f} | "
                  f"{ch['mean_after'].mean():.5f} |"),
                  f"| median over cells | {ch['mean_before'].median():.5f} | {ch['mean_after'].median():.5f} |",
                  (f"| cov95: mean / min | {ch['cov95_before'].mean():.4f} / {ch['cov95_before'].min():.3f} | "
                  f"{ch['cov95_after'].mean():.4f} / {ch['cov95_after'].min():.3f} |"),
                  (f"| regret vs best forced ({len(chr_)} cells with the others' errors): median / mean / max | "
                  f"{chr_['regret_before'].median():.2f} / {chr_['regret_before'].mean():.2f} / "
                  f"{chr_['regret_before'].max():.1f} | {chr_['regret_after'].median():.2f} / "
                  f"{chr_['regret_after'].mean():.2f} / {chr_['regret_after'].max():.1f} |"),
                  (f"| ... cells with regret > 1.25 | {int((chr_['regret_before'] > 1.25).sum())} | "
                  f"{int((chr_['regret_after'] > 1.25).sum())} |"),
                  (f"| all cells' chosen regret ({len(reg)}): median / mean / max / > 1.25 | "
                  f"{reg['regret_before'].median():.2f} / {reg['regret_before'].mean():.2f} / "
                  f"{reg['regret_before'].max():.1f} / {int((reg['regret_before'] > 1.25).sum())} | "
                  f"{reg['regret_after'].median():.2f} / {reg['regret_after'].mean():.2f} / "
                  f"{reg['regret_after'].max():.1f} / {int((reg['regret_after'] > 1.25).sum())} |"), ""]
        moved = chr_[(chr_["regret_after"] / chr_["regret_before"] - 1).abs() > 0.10]
        lines += [f"Chosen-histogram cells whose regret moved by more than 10% ({len(moved)}):", "",
                  table(moved, ["shape", "n", "eps", "tau", "width", "zoom_after", "mean_before", "mean_after",
                                "best_other", "best_other_error", "regret_before", "regret_after"]), ""]
    cols = ["shape", "n", "eps", "tau", "width", "zoom_after", "chosen_after", "mean_before", "mean_after", "ratio",
            "z_diff", "cov95_before", "cov95_after"]
    worse = d[d["ratio"] > 1.1].sort_values("ratio", ascending=False)
    better = d[d["ratio"] < 0.9].sort_values("ratio")
    for label, s in (("worse (after/before > 1.10)", worse), ("better (after/before < 0.90)", better)):
        sig = s[s["z_diff"].abs() >= Z_SIG]
        lines += [f"### Cells {label}: {len(s)}, of which |z_diff| >= {Z_SIG:g}: {len(sig)}", "",
                  table(s, cols) if name.startswith("planner") else table(sig, cols), ""]
        if not name.startswith("planner"):
            rest = s[s["z_diff"].abs() < Z_SIG]
            lines += [(f"The other {len(rest)} (|z_diff| < {Z_SIG:g}; zoom rate > 0.1 in "
                      f"{int((rest['zoom_after'] > 0.1).sum())}) are in the CSV."), ""]
    low = d[d["cov95_after"] < 0.93]
    lines += [f"### Cells with coverage under 0.93 after: {len(low)}", ""]
    if len(low):
        lines += [table(low, cols), ""]
    return "\n".join(lines)


def main() -> None:
    for path, name in zip(sys.argv[1:], ("planner grid (examples/quantile_grid.py)",
                                         "audit 14 grid (examples/audit14/quantile_grid14.py)")):
        print(summary(name, pd.read_csv(path)))
        print()


if __name__ == "__main__":
    main()
