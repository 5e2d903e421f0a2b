"""Compare quantile_grid.py CSVs: committed (old read-out, 150 runs, code of 73af7dc), before (63f8643, the parent of
068a6e2, same seeds and runs as after), after (HEAD). Usage: compare_grid.py COMMITTED BEFORE AFTER OUTCSV"""
import csv
import math
import sys

import numpy as np

def load(p):
    out = {}
    for r in csv.DictReader(open(p)):
        k = (r["shape"], int(r["n"]), float(r["epsilon"]), float(r["tau"]), r["mechanism"])
        out[k] = r
    return out

com, bef, aft = (load(p) for p in sys.argv[1:4])
f = lambda r, c: float(r[c]) if r is not None and r.get(c, "") != "" else math.nan
rows = []
for k in aft:
    a, b, c = aft[k], bef.get(k), com.get(k)
    row = {"shape": k[0], "n": k[1], "epsilon": k[2], "tau": k[3], "mechanism": k[4], "sigma": f(a, "sigma")}
    for col in ("mean_error", "within95", "within90", "regret", "chosen"):
        for tag, r in (("committed", c), ("before", b), ("after", a)):
            row[f"{col}_{tag}"] = (r[col] == "True" if r is not None else None) if col == "chosen" else f(r, col)
    rows.append(row)
with open(sys.argv[4], "w", newline="") as fh:
    w = csv.DictWriter(fh, list(rows[0]))
    w.writeheader()
    w.writerows(rows)

# sanity: the searches are the same code before and after
for m in ("bayess", "naive_nbs", "bound"):
    d = [abs(r["mean_error_after"] - r["mean_error_before"]) for r in rows if r["mechanism"] == m]
    print(f"{m}: max |after - before| mean error {max(d) if d else 'n/a'}")

def summarize(sel, label):
    print(f"\n== {label}: {len(sel)} cells")
    for tag in ("committed", "before", "after"):
        me = np.array([r[f"mean_error_{tag}"] for r in sel])
        w95 = np.array([r[f"within95_{tag}"] for r in sel]); w90 = np.array([r[f"within90_{tag}"] for r in sel])
        ok = ~np.isnan(me)
        print(f"  {tag:9s} (n={ok.sum()}): mean of mean err {np.nanmean(me):.5f}, median {np.nanmedian(me):.5f}; "
              f"within95 mean {np.nanmean(w95):.3f} under .93 {np.sum(w95[ok] < 0.93)} within±2pt {np.sum(abs(w95[ok]-.95)<=.02)}; "
              f"within90 mean {np.nanmean(w90):.3f} under .88 {np.sum(w90[ok] < 0.88)} within±2pt {np.sum(abs(w90[ok]-.90)<=.02)}")
    for ref in ("before", "committed"):
        pairs = [(r, (r["mean_error_after"] + 1 / r["n"]) / (r[f"mean_error_{ref}"] + 1 / r["n"])) for r in sel
                 if not math.isnan(r[f"mean_error_{ref}"])]
        ratio = np.array([p for _, p in pairs])
        d95 = np.array([r["within95_after"] - r[f"within95_{ref}"] for r, _ in pairs])
        d90 = np.array([r["within90_after"] - r[f"within90_{ref}"] for r, _ in pairs])
        print(f"  after vs {ref}: (err+1/n) ratio geomean {np.exp(np.mean(np.log(ratio))):.3f}, >1.2x worse {np.sum(ratio > 1.2)}, "
              f">1.2x better {np.sum(ratio < 1 / 1.2)}; within95 down >2pt {np.sum(d95 < -0.02)} up >2pt {np.sum(d95 > 0.02)}; "
              f"within90 down >2pt {np.sum(d90 < -0.02)} up >2pt {np.sum(d90 > 0.02)}")

for m in ("hierarchical", "histogram"):
    summarize([r for r in rows if r["mechanism"] == m], m)
    summarize([r for r in rows if r["mechanism"] == m and r["chosen_after"]], m + " (chosen)")

print("\n== planner's choice per cell")
ch = [r for r in rows if r["chosen_after"]]
for tag in ("committed", "before", "after"):
    reg = np.array([r2[f"regret_{tag}"] for r in ch for r2 in [next((x for x in rows if x["shape"] == r["shape"] and
          x["n"] == r["n"] and x["epsilon"] == r["epsilon"] and x["tau"] == r["tau"] and x[f"chosen_{tag}"]), None)]
          if r2 is not None])
    print(f"  {tag:9s}: {len(reg)} cells, regret median {np.median(reg):.2f}, mean {np.mean(reg):.2f}, max {reg.max():.2f}, "
          f"over 1.25: {np.sum(reg > 1.25)}")
changed = [r for r in ch if not r["chosen_before"]]
print(f"  choice differs after vs before in {len(changed)} cells; vs committed in {sum(1 for r in ch if not r['chosen_committed'])}")
print("  chosen one-round cells, regret before -> after (committed):")
for r in ch:
    if r["mechanism"] in ("hierarchical", "histogram"):
        print(f"    {r['shape']:9s} {r['n']:8d} {r['epsilon']:5g} {r['tau']:4g} {r['mechanism']:13s} "
              f"{r['regret_before']:7.2f} -> {r['regret_after']:7.2f} ({r['regret_committed']:.2f})  "
              f"err {r['mean_error_before']:.5f} -> {r['mean_error_after']:.5f}")
print("  cells whose chosen regret changed by > 10% (any mechanism):")
for r in ch:
    if abs(r["regret_after"] / r["regret_before"] - 1) > 0.1:
        print(f"    {r['shape']:9s} {r['n']:8d} {r['epsilon']:5g} {r['tau']:4g} {r['mechanism']:13s} "
              f"{r['regret_before']:7.2f} -> {r['regret_after']:7.2f}")
