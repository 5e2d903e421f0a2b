"""qrank8: the tables of README.md from compare.py's CSVs (copied from examples/qrank7/summarize.py, eb4b888's
slot renamed to 24b4b7a's).

"before" is 856d265 (no zoom), "prev" is 24b4b7a (the reworked zoom, qrank7's HEAD), "HEAD" is bf28472 (0d1235b's
zoom_error: no residual for cells of one coin; the CSV columns ending in _after).

    python examples/qrank8/summarize.py examples/qrank8/planner_compare.csv examples/qrank8/audit14_compare.csv \
        > examples/qrank8/tables.md
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
        out.append("| " + " | ".join(fmt(r[c]) if not c.startswith("z_") else
                                     (f"{r[c]:.1f}" if abs(r[c]) < 100 else (">100" if r[c] > 0 else "<-100"))
                                     for c in cols) + " |")
    return "\n".join(out)


NAMES3 = ["shape", "n", "eps", "tau", "width", "zoom 24b", "zoom HEAD", "chosen", "mean 856d265", "mean 24b4b7a",
          "mean HEAD", "HEAD/before", "z HEAD-before", "HEAD/24b", "z HEAD-24b", "cov95 before", "cov95 24b",
          "cov95 HEAD"]
COLS3 = ["shape", "n", "eps", "tau", "width", "zoom_prev", "zoom_after", "chosen_after", "mean_before", "mean_prev",
         "mean_after", "ratio", "z_diff", "ratio_after_vs_prev", "z_after_vs_prev", "cov95_before", "cov95_prev",
         "cov95_after"]


def counts(label: str, s: pd.DataFrame, ratio: str, z: str) -> str:
    gm = np.exp(np.log(s[ratio]).mean()) if len(s) else float("nan")
    return (f"| {label} | {len(s)} | {gm:.3f} | {int((s[ratio] > 1.1).sum())} | {int((s[ratio] < 0.9).sum())} | "
            f"{int(((s[ratio] > 1.1) & (s[z] >= Z_SIG)).sum())} | {int(((s[ratio] < 0.9) & (s[z] <= -Z_SIG)).sum())} |")


def cov(s: pd.DataFrame, c: str) -> str:
    return f"{s[c].mean():.4f} / {s[c].min():.3f} / {int((s[c] < 0.93).sum())}"


def summary(name: str, d: pd.DataFrame) -> str:
    d = d[d["mean_before"].notna()].copy()
    d["chosen_hist"] = d["chosen_after"] == "histogram"
    lines = [f"## {name}: {len(d)} cells, {int(d['reps'].iloc[0])} runs per cell and version", ""]
    z, ze = d["zoom_after"], d["zoom_prev"]
    same = d[d["identical_runs"]]
    unz = d[(z == 0) & ~d["identical_runs"]]
    w28 = (d["width"] >= 2) & (d["width"] <= 8)
    lines += [f"- cells with one coin per bin (runs identical 856d265 / HEAD): {len(same)}",
              (f"- runs identical 24b4b7a / HEAD: {int(d['identical_runs_prev'].sum())} cells; bins of 2-8 coins: "
               f"{int(w28.sum())} cells, zoomed in some run at 24b4b7a {int((w28 & (ze > 0)).sum())}, at HEAD "
               f"{int((w28 & (z > 0)).sum())}; bins wider than 8 coins with runs not identical to 24b4b7a: "
               f"{int(((d['width'] > 8) & ~d['identical_runs_prev']).sum())} of {int((d['width'] > 8).sum())}"),
              (f"- cells with bins wider than one coin that never zoomed at HEAD: {len(unz)}; their z HEAD-before: "
               f"mean {unz['z_diff'].mean():.2f}, sd {unz['z_diff'].std():.2f}, |z| >= 3 in "
               f"{int((unz['z_diff'].abs() >= 3).sum())}"),
              (f"- cells that zoomed in some run: 24b4b7a {int((ze > 0).sum())}, HEAD {int((z > 0).sum())}; in >= 50% "
               f"of runs: {int((ze >= 0.5).sum())} / {int((z >= 0.5).sum())}; in every run: {int((ze == 1).sum())} / "
               f"{int((z == 1).sum())}"),
              (f"- choice changed 856d265 -> HEAD: {int((d['chosen_before'] != d['chosen_after']).sum())} cells "
               f"(24b4b7a -> HEAD: {int((d['chosen_prev'] != d['chosen_after']).sum())}); histogram chosen in "
               f"{int(d['chosen_hist'].sum())}"), ""]
    lines += ["| cells | n cells | geo. mean ratio | > 1.10 | < 0.90 | > 1.10 and z >= 3 | < 0.90 and z <= -3 |",
              "|---|---|---|---|---|---|---|"]
    for label, m in (("all", np.ones(len(d), bool)), ("HEAD zoom rate > 0", z > 0), ("HEAD zoom rate 0", z == 0),
                     ("bins of 2-8 coins", w28), ("bins wider than 8 coins", d["width"] > 8),
                     ("histogram chosen", d["chosen_hist"]),
                     ("histogram chosen, HEAD zoom rate > 0", d["chosen_hist"] & (z > 0))):
        s = d[m]
        lines.append(counts(f"HEAD / 856d265, {label}", s, "ratio", "z_diff"))
        lines.append(counts(f"24b4b7a / 856d265, {label}", s, "ratio_prev", "z_diff_prev"))
        lines.append(counts(f"HEAD / 24b4b7a, {label}", s, "ratio_after_vs_prev", "z_after_vs_prev"))
    lines += ["", "Coverage of the shown rank error at 95% (share of runs with rank error <= shown_rank_error):", "",
              ("| cells | 856d265: mean / min / under 0.93 | 24b4b7a | HEAD | HEAD, zoomed runs only: cells with "
               ">= 20 zoomed runs, mean / min |"), "|---|---|---|---|---|"]
    for label, m in (("all", np.ones(len(d), bool)), ("HEAD zoom rate > 0", z > 0),
                     ("histogram chosen", d["chosen_hist"])):
        s = d[m]
        zz = s[(s["zoom_after"] * s["reps"] >= 20)]
        lines.append(f"| {label} ({len(s)}) | {cov(s, 'cov95_before')} | {cov(s, 'cov95_prev')} | "
                     f"{cov(s, 'cov95_after')} | {len(zz)}: {zz['cov95_after_zoomed'].mean():.4f} / "
                     f"{zz['cov95_after_zoomed'].min():.3f} |")
    if (z > 0.5).any():
        r = d[z > 0.5]["shown_after"] / d[z > 0.5]["shown_before"]
        lines += ["", (f"Width of the shown rank error, HEAD / 856d265 (mean shown value, cells with HEAD zoom rate "
                       f"> 0.5): median {np.median(r):.3f}, range {np.min(r):.3f}-{np.max(r):.3f}")]
    lines.append("")
    ch = d[d["chosen_hist"]]
    reg = d[d["regret_after"].notna() & d["regret_before"].notna() & d["regret_prev"].notna()]
    chr_ = ch[ch["regret_after"].notna()]
    lines += ["Cells where the planner chooses the histogram:", "",
              "| | 856d265 | 24b4b7a | HEAD |", "|---|---|---|---|",
              "| mean over cells of the mean rank error | "
              + " | ".join(f"{ch[f'mean_{t}'].mean():.5f}" for t in ("before", "prev", "after")) + " |",
              "| median over cells | " + " | ".join(f"{ch[f'mean_{t}'].median():.5f}"
                                                   for t in ("before", "prev", "after")) + " |",
              "| cov95: mean / min | " + " | ".join(f"{ch[f'cov95_{t}'].mean():.4f} / {ch[f'cov95_{t}'].min():.3f}"
                                                    for t in ("before", "prev", "after")) + " |",
              "| cov95 < 0.93 | " + " | ".join(f"{int((ch[f'cov95_{t}'] < 0.93).sum())}"
                                               for t in ("before", "prev", "after")) + " |",
              "| within95 (±1.96σ): mean / min | " + " | ".join(
                  f"{ch[f'within95_{t}'].mean():.3f} / {ch[f'within95_{t}'].min():.3f}"
                  for t in ("before", "prev", "after")) + " |",
              (f"| regret vs best forced ({len(chr_)} cells with the others' errors): median / mean / max | "
               + " | ".join(f"{chr_[f'regret_{t}'].median():.2f} / {chr_[f'regret_{t}'].mean():.2f} / "
                            f"{chr_[f'regret_{t}'].max():.3g}" for t in ("before", "prev", "after")) + " |"),
              "| ... cells with regret > 1.25 | " + " | ".join(f"{int((chr_[f'regret_{t}'] > 1.25).sum())}"
                                                              for t in ("before", "prev", "after")) + " |",
              (f"| all cells' chosen regret ({len(reg)}): median / mean / max / > 1.25 | "
               + " | ".join(f"{reg[f'regret_{t}'].median():.2f} / {reg[f'regret_{t}'].mean():.2f} / "
                            f"{reg[f'regret_{t}'].max():.3g} / {int((reg[f'regret_{t}'] > 1.25).sum())}"
                            for t in ("before", "prev", "after")) + " |"), ""]
    rc = ["shape", "n", "eps", "tau", "width", "zoom_prev", "zoom_after", "mean_before", "mean_prev", "mean_after",
          "best_other", "best_other_error", "regret_before", "regret_prev", "regret_after"]
    rn = ["shape", "n", "eps", "tau", "width", "zoom 24b", "zoom HEAD", "mean 856d265", "mean 24b4b7a", "mean HEAD",
          "best other", "its error", "regret 856d265", "regret 24b4b7a", "regret HEAD"]
    moved = chr_[((chr_["regret_after"] / chr_["regret_before"] - 1).abs() > 0.10)
                 | ((chr_["regret_after"] / chr_["regret_prev"] - 1).abs() > 0.10)]
    lines += [(f"Chosen-histogram cells whose regret at HEAD differs by more than 10% from 856d265 or 24b4b7a "
               f"({len(moved)}):"), "", table(moved.sort_values("regret_after", ascending=False), rc, rn), ""]
    top = chr_.sort_values("regret_after", ascending=False).head(10)
    lines += ["Chosen-histogram cells with the largest regret at HEAD (10):", "", table(top, rc, rn), ""]
    worse = d[d["ratio"] > 1.1].sort_values("ratio", ascending=False)
    better = d[d["ratio"] < 0.9].sort_values("ratio")
    for label, s in (("worse at HEAD than 856d265 (ratio > 1.10)", worse),
                     ("better at HEAD than 856d265 (ratio < 0.90)", better)):
        sig = s[s["z_diff"].abs() >= Z_SIG]
        lines += [f"### Cells {label}: {len(s)}, of which |z| >= {Z_SIG:g}: {len(sig)}", "",
                  table(s if name.startswith("planner") else sig, COLS3, NAMES3), ""]
        if not name.startswith("planner"):
            rest = s[s["z_diff"].abs() < Z_SIG]
            lines += [(f"The other {len(rest)} (|z| < {Z_SIG:g}; HEAD zoom rate > 0.1 in "
                       f"{int((rest['zoom_after'] > 0.1).sum())}) are in the CSV."), ""]
    eloss = d[(d["ratio_prev"] > 1.1) & (d["z_diff_prev"] >= Z_SIG)].sort_values("ratio_prev", ascending=False)
    lines += [f"### 24b4b7a's real losses against 856d265 ({len(eloss)}), at HEAD", "",
              table(eloss, COLS3, NAMES3), ""]
    egain = d[(d["ratio_prev"] < 0.9) & (d["z_diff_prev"] <= -Z_SIG)]
    kept = egain[(egain["ratio"] < 0.9) & (egain["z_diff"] <= -Z_SIG)]
    lines += [(f"24b4b7a's real gains against 856d265: {len(egain)}; still real gains at HEAD: {len(kept)}; HEAD "
               f"significantly worse than 24b4b7a (z >= 3) in {int((egain['z_after_vs_prev'] >= Z_SIG).sum())} of "
               "them."), ""]
    lost = egain[~egain.index.isin(kept.index)].sort_values("ratio", ascending=False)
    if len(lost):
        lines += ["24b4b7a's real gains that are not real gains at HEAD:", "", table(lost, COLS3, NAMES3), ""]
    ve = d[d["z_after_vs_prev"].abs() >= Z_SIG]
    lines += [(f"### HEAD against 24b4b7a: |z| >= 3 in {len(ve)} cells: HEAD worse in "
               f"{int((ve['z_after_vs_prev'] > 0).sum())}, better in {int((ve['z_after_vs_prev'] < 0).sum())}"), ""]
    hw = ve[ve["z_after_vs_prev"] > 0].sort_values("ratio_after_vs_prev", ascending=False)
    if len(hw):
        lines += ["HEAD worse than 24b4b7a (z >= 3):", "", table(hw, COLS3, NAMES3), ""]
    hb = ve[ve["z_after_vs_prev"] < 0].sort_values("ratio_after_vs_prev")
    if len(hb):
        lines += ["HEAD better than 24b4b7a (z <= -3):", "", table(hb, COLS3, NAMES3), ""]
    ex = d[~d["identical_runs_prev"] & (d["z_after_vs_prev"] == 0) & (d["mean_after"] != d["mean_prev"])]
    moved = d[~d["identical_runs_prev"] & ((d["ratio_after_vs_prev"] > 1.1) | (d["ratio_after_vs_prev"] < 0.9))
              & (d["z_after_vs_prev"].abs() < Z_SIG)]
    lines += [(f"Cells whose runs differ from 24b4b7a's: {int((~d['identical_runs_prev']).sum())}; of them, HEAD / "
               f"24b4b7a over 1.10 or under 0.90 with |z| < 3: {len(moved)}"
               + (f" (z 0 with different means, constant runs: {len(ex)})" if len(ex) else "")), ""]
    if len(moved):
        lines += [table(moved.sort_values("ratio_after_vs_prev"), COLS3, NAMES3), ""]
    for t, tag in (("after", "HEAD"), ("prev", "24b4b7a"), ("before", "856d265")):
        low = d[d[f"cov95_{t}"] < 0.93]
        lines += [f"### Cells with coverage under 0.93 at {tag}: {len(low)}", ""]
        if len(low):
            lines += [table(low, COLS3, NAMES3), ""]
    drop = d[d["cov95_after"] < d["cov95_before"] - 0.02].sort_values("cov95_after")
    lines += [f"Cells whose coverage at HEAD is more than 2 points under 856d265's: {len(drop)}", ""]
    if len(drop):
        lines += [table(drop, COLS3 + ["cov95_after_zoomed"], NAMES3 + ["cov95 HEAD zoomed runs"]), ""]
    return "\n".join(lines)


def main() -> None:
    for path, name in zip(sys.argv[1:], ("planner grid (examples/quantile_grid.py)",
                                         "audit 14 grid (examples/audit14/quantile_grid14.py)")):
        print(summary(name, pd.read_csv(path)))
        print()


if __name__ == "__main__":
    main()
