"""Score one EVALUATE twice on the same runs: the raw mechanism interval (before 7b33581) and the shown one
(clipped, widened to hold the point), and count the runs the widening alone rescued (raw misses, shown covers
only because it was widened to the point) and the zero-width shown intervals."""
import collections, math, sys
import numpy as np
import ldpql
import ldpql.reporting as R

LOG = []
_shown, _covers = R._shown, R._covers


def shown(agg, est, j, p, n):
    v, iv = _shown(agg, est, j, p, n)
    raw = R._interval(est, j, p) if isinstance(R._value(est, j), float) else None
    b = R.feasible(agg, n)
    clipped = None
    if raw is not None:
        clipped = (raw[0], raw[1]) if b is None else (max(raw[0], b[0]), min(raw[1], b[1]))
    LOG.append(dict(agg=agg.output, j=j, n=n, v=v, raw=raw, clipped=clipped, shown=iv))
    return v, iv


def covers(iv, t):
    if LOG and "t" not in LOG[-1]:
        LOG[-1]["t"] = t
    return _covers(iv, t)


R._shown, R._covers = shown, covers


def evaluate(con, stmt, reps):
    LOG.clear()
    res = con.sql(f"EVALUATE {stmt} REPEAT {reps}")
    rows = collections.defaultdict(lambda: collections.Counter())
    for e in LOG:
        if "t" not in e:
            continue   # a SELECT's call
        t, raw, cl, sh = e["t"], e["raw"], e["clipped"], e["shown"]
        c = rows[(e["agg"], e["n"], e["j"])]
        c["runs"] += 1
        rh = raw is not None and raw[0] <= t <= raw[1]
        ch = cl is not None and cl[0] <= t <= cl[1]
        sh_ = sh is not None and sh[0] <= t <= sh[1]
        c["raw"] += rh
        c["clipped"] += ch
        c["shown"] += sh_
        c["rescued"] += sh_ and not ch
        c["zero_width"] += sh is not None and sh[1] - sh[0] == 0
        c["nan_truth"] += isinstance(t, float) and math.isnan(t)
    return res, rows


def summary(rows, top=None):
    out = []
    for k, c in rows.items():
        r = c["runs"]
        out.append((k, r, c["raw"] / r, c["shown"] / r, c["rescued"] / r, c["zero_width"] / r, c["nan_truth"]))
    out.sort(key=lambda x: -(x[3] - x[2]))
    for o in out[:top]:
        print(f"  {str(o[0]):45s} runs={o[1]} raw={o[2]:.3f} shown={o[3]:.3f} rescued={o[4]:.3f} "
              f"zero_width={o[5]:.3f} nan_truth={o[6]}")
    return out
