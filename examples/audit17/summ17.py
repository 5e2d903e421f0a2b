"""Summarize sim17_*.csv: per (cell, tau, group, arm): runs, share zoomed, mean/95th pct rank error, coverage of the
shown rank error at 95% and 90% (with exact Clopper-Pearson 95% range), certified interval coverage."""
import csv, glob, sys
from collections import defaultdict
import numpy as np
from scipy.stats import beta

def cp(k, n):
    lo = beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return lo, hi

files = sys.argv[1:] or sorted(glob.glob("sim17_*.csv"))
for f in files:
    rows = list(csv.DictReader(open(f)))
    g = defaultdict(list)
    for r in rows:
        g[(r["cell"], float(r["tau"]), r["group"], r["arm"])].append(r)
    print(f"{'cell':5} {'tau':>5} {'grp':3} {'arm':6} {'R':>4} {'zoom%':>6} {'meanerr':>8} {'p95err':>7} "
          f"{'shown95':>8} {'zsig':>7} {'cov95':>6} {'cp95':>13} {'cov90':>6} {'cp90':>13} {'cert':>5}")
    for (c, tau, grp, arm), rs in sorted(g.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1], ["zoom", "one", "bayes"].index(kv[0][3]))):
        err = np.array([float(r["err"]) for r in rs])
        s95 = np.array([float(r["shown95"]) for r in rs]); s90 = np.array([float(r["shown90"]) for r in rs])
        k95, k90 = int((err <= s95 + 1e-12).sum()), int((err <= s90 + 1e-12).sum())
        z = np.mean([int(r["zoomed"]) > 0 for r in rs if r["zoomed"] not in ("", "None")] or [0])
        cert = np.mean([int(r["cert"]) for r in rs])
        n = len(rs)
        print(f"{c:5} {tau:5g} {grp:3} {arm:6} {n:4d} {z:6.2f} {err.mean():8.4f} {np.quantile(err, .95):7.4f} "
              f"{s95.mean():8.4f} {float(rs[0]['zsig95']):7.4f} {k95 / n:6.3f} {'%.3f-%.3f' % cp(k95, n):>13} "
              f"{k90 / n:6.3f} {'%.3f-%.3f' % cp(k90, n):>13} {cert:5.2f}")
