"""Audit 16: summary of sim16.csv (mechanism level) and sql16.csv / sql16_old.csv (SQL).  python summarize16.py -> summary16.txt"""
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
out = []


def say(s=""):
    print(s)
    out.append(s)


d = pd.read_csv(HERE / "sim16.csv")
d["cp_hi_new"] = d.cp_new.str.split("-").str[1].astype(float)
d["cp_hi_old"] = d.cp_old.str.split("-").str[1].astype(float)
say(f"sim16: {len(d)} rows (cell x q x confidence), {d.runs.iloc[0]} runs each")
for mech, part in d.groupby("mech"):
    for conf in (0.9, 0.95):
        p = part[part.conf == conf]
        un_new, un_old = p[p.cov_new < conf - 0.02], p[p.cov_old < conf - 0.02]
        sig_new, sig_old = p[p.cp_hi_new < conf], p[p.cp_hi_old < conf]
        say(f"  {mech} at {conf:.0%}: {len(p)} rows; under nominal - 2 points: new {len(un_new)} (significantly "
            f"under: {len(sig_new)}), old {len(un_old)} (significantly: {len(sig_old)}); lowest new "
            f"{p.cov_new.min():.3f}, old {p.cov_old.min():.3f}")
    p = part[part.conf == 0.95]
    ratio = (p.mean_err_new + 1e-3) / (p.mean_err_old + 1e-3)
    say(f"  {mech} mean rank error new/old (+1e-3): geometric mean {np.exp(np.log(ratio).mean()):.3f}; worse by >1.2x "
        f"in {(ratio > 1.2).sum()}, >2x in {(ratio > 2).sum()}; better by >1.2x in {(ratio < 1 / 1.2).sum()}, >2x in "
        f"{(ratio < 0.5).sum()} (of {len(p)})")
    say(f"  {mech} shown rank error over max(q, 1-q): {int(p.shown_over_cap.sum())} runs; non-finite: "
        f"{int(p.shown_nonfinite.sum())}")
say()
say("sim16 tree rows under nominal - 2 points with the new read-out and floor:")
t = d[(d.mech == "hierarchical") & (d.cov_new < d.conf - 0.02)]
for _, r in t.iterrows():
    say(f"  {r['shape']:9s} n={r.n:<6d} eps={r.eps:g} K={r.K} q={r.tau} at {r.conf:.0%}: new {r.cov_new:.3f} "
        f"[{r.cp_new}] (no floor {r.cov_new_nofloor:.3f}), old {r.cov_old:.3f} [{r.cp_old}]")
say()
say("sim16 rows where the new read-out's mean rank error is > 2x the old's (95% rows; both read the same releases):")
p = d[d.conf == 0.95].copy()
p["ratio"] = (p.mean_err_new + 1e-3) / (p.mean_err_old + 1e-3)
for _, r in p[p.ratio > 2].sort_values("ratio", ascending=False).iterrows():
    say(f"  {r['mech']:12s} {r['shape']:9s} n={r.n:<6d} eps={r.eps:g} q={r.tau}: mean {r.mean_err_old:.4f} -> "
        f"{r.mean_err_new:.4f}, p95 {r.p95_err_old:.4f} -> {r.p95_err_new:.4f}, max {r.max_err_old:.4f} -> "
        f"{r.max_err_new:.4f}; coverage new {r.cov_new:.3f}")
say()
a, b = pd.read_csv(HERE / "sql16.csv"), pd.read_csv(HERE / "sql16_old.csv")
m = a.merge(b, on=["cell", "group", "tau", "conf"], suffixes=("", "_old"))
m["hi"] = m.cp_extra.str.split("-").str[1].astype(float)
say(f"sql16: {len(m)} rows, 200 runs each (same seeds new/old)")
for conf in (0.9, 0.95):
    p = m[m.conf == conf]
    say(f"  at {conf:.0%}: under nominal - 2 points, extra['rank_error']: new {(p.cov_extra < conf - 0.02).sum()}, "
        f"old {(p.cov_extra_old < conf - 0.02).sum()}; displayed notes: new {(p.cov_displayed < conf - 0.02).sum()}; "
        f"significantly under (CP upper < nominal): new {(p.hi < conf).sum()}")
for _, r in m[(m.cov_extra < m.conf - 0.02) | (m.cov_extra_old < m.conf - 0.02)].iterrows():
    say(f"  {r.cell} {'' if pd.isna(r.group) else r.group} n={r.n} K={r.K} q={r.tau} eps={r.eps} at {r.conf:.0%} "
        f"({r.mech}{', ' + r.args if isinstance(r.args, str) else ''}): new {r.cov_extra:.3f} [{r.cp_extra}], old "
        f"{r.cov_extra_old:.3f} [{r.cp_extra_old}]")
say("  mean rank error old -> new where they differ by > 1.5x:")
m["ratio"] = (m.mean_err + 1e-4) / (m.mean_err_old + 1e-4)
for _, r in m[(m.conf == 0.95) & ((m.ratio > 1.5) | (m.ratio < 1 / 1.5))].iterrows():
    say(f"    {r.cell} {'' if pd.isna(r.group) else r.group} n={r.n} q={r.tau} eps={r.eps} ({r.mech}): mean "
        f"{r.mean_err_old:.4f} -> {r.mean_err:.4f}, p95 {r.p_err_old:.4f} -> {r.p_err:.4f}")
say(f"  shown over cap: {int(m.shown_over_cap.sum())}, non-finite: {int(m.shown_nonfinite.sum())}")
(HERE / "summary16.txt").write_text("\n".join(out) + "\n")
