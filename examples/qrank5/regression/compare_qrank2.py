"""Compare examples/qrank2 one_round_check / one_round_share outputs of several code versions.
Usage: compare_qrank2.py check|share OUTCSV TAG=CSV ... (the first tag is the reference "before" for the
down/up counts and the flagged cells; every later tag is compared with it)."""
import csv
import sys

import numpy as np

which, out_path = sys.argv[1], sys.argv[2]
versions = [a.split("=", 1) for a in sys.argv[3:]]
tags = [t for t, _ in versions]
cols = {"check": ("cov95", "cov90", "width95", "width90", "mean_error", "before95", "before90"),
        "share": ("shown_cov95", "shown_cov90", "shown_w95", "shown_w90")}[which]
c95, c90, w95 = cols[0], cols[1], cols[2]


def load(p):
    return {(r["shape"], int(r["n"]), float(r["eps"]), float(r["tau"]), r["mechanism"]): r for r in csv.DictReader(open(p))}


data = {t: load(p) for t, p in versions}
ref = [t for t in tags if t == "before"][0] if "before" in tags else tags[0]
keys = list(data[tags[-1]])
assert all(set(keys) == set(d) for d in data.values())
rows = []
for k in keys:
    row = dict(zip(("shape", "n", "eps", "tau", "mechanism"), k))
    for c in cols:
        for t in tags:
            row[f"{c}_{t}"] = float(data[t][k][c])
    rows.append(row)
with open(out_path, "w", newline="") as fh:
    w = csv.DictWriter(fh, list(rows[0]))
    w.writeheader()
    w.writerows(rows)

for mech in ("all", "hierarchical", "histogram"):
    sel = [r for r in rows if mech == "all" or r["mechanism"] == mech]
    print(f"== {which} {mech}: {len(sel)} cells")
    for t in tags:
        a95 = np.array([r[f"{c95}_{t}"] for r in sel]); a90 = np.array([r[f"{c90}_{t}"] for r in sel])
        w = np.array([r[f"{w95}_{t}"] for r in sel])
        extra = ""
        if which == "check":
            me = np.array([r[f"mean_error_{t}"] for r in sel])
            extra = f"; mean error mean {me.mean():.5f}"
        print(f"  {t:9s}: 95% mean {a95.mean():.3f} min {a95.min():.3f} under .93 {np.sum(a95 < .93)}; 90% mean {a90.mean():.3f} "
              f"min {a90.min():.3f} under .88 {np.sum(a90 < .88)}; median width/zσ {np.median(w):.2f} (mean {w.mean():.2f}); "
              f"over-wide (cov95>.995 & w>2) {np.sum((a95 > .995) & (w > 2))}{extra}")
    for t in tags:
        if t == ref:
            continue
        d95 = np.array([r[f"{c95}_{t}"] - r[f"{c95}_{ref}"] for r in sel])
        d90 = np.array([r[f"{c90}_{t}"] - r[f"{c90}_{ref}"] for r in sel])
        print(f"  {t} vs {ref}: 95% down >2pt {np.sum(d95 < -.02)}, up >2pt {np.sum(d95 > .02)}; "
              f"90% down >2pt {np.sum(d90 < -.02)}, up >2pt {np.sum(d90 > .02)}")
print(f"cells: any version 95% or 90% down > 2 points from {ref}, or under nominal - 2 points in any version:")
for r in rows:
    if (any(r[f"{c95}_{t}"] - r[f"{c95}_{ref}"] < -.02 or r[f"{c90}_{t}"] - r[f"{c90}_{ref}"] < -.02 for t in tags)
            or min(r[f"{c95}_{t}"] for t in tags) < .93 or min(r[f"{c90}_{t}"] for t in tags) < .88):
        print(f"  {r['shape']:36s} {r['n']:6d} {r['eps']:4g} {r['tau']:4g} {r['mechanism']:12s} "
              + "  ".join(f"{t} {r[f'{c95}_{t}']:.3f}/{r[f'{c90}_{t}']:.3f} w{r[f'{w95}_{t}']:.2f}" for t in tags))
if which == "check":
    print(f"cells: mean error / {ref} (+1/n) > 1.2 or < 1/1.2:")
    for r in rows:
        for t in tags:
            ra = (r[f"mean_error_{t}"] + 1 / r["n"]) / (r[f"mean_error_{ref}"] + 1 / r["n"])
            if ra > 1.2 or ra < 1 / 1.2:
                print(f"  {t}: {r['shape']:36s} {r['n']:6d} {r['eps']:4g} {r['tau']:4g} {r['mechanism']:12s} x{ra:.2f}")
