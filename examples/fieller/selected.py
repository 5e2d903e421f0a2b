"""Unflagged conditional means before and after the selection-aware interval, on the same releases.

A conditional mean (SQL AVG over a nullable column; a key's mean in a key-value GROUP BY) is flagged low-confidence
when the estimated share with a value x̲̂ is below 3 of its standard errors. *Before*: every answer carried Fieller's
interval (``ratio_interval``). *After*: an unflagged answer carries ``selected_ratio_interval``, valid given that it
was not flagged (the flag selects a high x̲̂, and with it the numerator's noise); flagged answers keep Fieller's.
Per cell: the share flagged, the coverage of all answers and of the unflagged ones, and the unflagged answers'
mean width (declared units), at 95% and 90%. Cells: the key-value audit's (every value at the upper bound, 50%
NULL, n = 20,000, d = 50, s = 1) and spread values there, ``examples/kv_coverage.py``'s ordinary cells, and
nullable-column cells through CollisionMean and the split (Duchi et al. + randomized response).

    nice python examples/fieller/selected.py [runs]   -> examples/fieller/selected.csv (runs = 100: about 4 min)
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import kv_coverage as kvc  # the ordinary key-value cells' data
from coverage import SHAPES, releases

from ldpql.mechanisms.base import Estimate
from ldpql.mechanisms.conditional import LOW_CONFIDENCE, answer, ratio_interval, with_interval
from ldpql.mechanisms.kv import Coordinate, KVCollision, assemble, exact_answers

OUT = Path(__file__).with_name("selected.csv")


def kv_parts(users, keys, values, d: int, s: int, eps: float, n: int, runs: int, rng, low=1.0, high=5.0):
    """(ratio parts, scale, truth) of every key's mean with a truth, over ``runs`` releases."""
    r, out = KVCollision(eps, d, s, 3), []
    for _ in range(runs):
        _, k0, v0 = assemble(users, keys, values, s, rng)
        summary = r.summary(k0, v0, rng)
        truth = exact_answers(k0, v0, d, n, low, high)["mean"].values
        for j in np.flatnonzero(~np.isnan(truth)):
            e = answer(Coordinate(r), np.array([summary[j], summary[d + j]]), n, "mean", low, high)
            out.append((e.extra["ratio"], e.extra["scale"], float(truth[j])))
    return out


def audit_cell(scenario: str, runs: int, rng, n=20_000, d=50):
    users = np.arange(n, dtype=np.uint64)
    pop = 1 / np.arange(1, d + 1)
    keys = rng.choice(d, n, p=pop / pop.sum())
    values = np.ones(n) if scenario == "bound" else rng.uniform(-1, 1, n)
    values[rng.random(n) < 0.5] = np.nan
    return kv_parts(users, keys, values, d, 1, 1.0, n, runs, rng)


def ordinary_cell(eps: float, n: int, runs: int, rng):
    users, keys, values = kvc.data(n, rng)
    return kv_parts(users, keys, values, kvc.D, kvc.S, eps, n, runs, rng)


def nullable_cell(path: str, shape: str, n: int, share: float, eps: float, runs: int, rng):
    x, null = SHAPES[shape](rng, n), rng.random(n) < share
    null[0] = False
    truth = 5 + 5 * float(x[~null].mean())
    ests, _ = releases(path, x, null, eps, runs, rng)
    return [(e.extra["ratio"], e.extra["scale"], truth) for e in ests]


def judge(parts: list, confidence: float) -> dict:
    """Before and after on the same releases: (flagged, covers, width) per answer, summarised."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rows = {"before": [], "after": []}
    for ratio, (low, high, n), truth in parts:
        num, den, vn, vd, cv = (float(v) for v in ratio)
        half, mid = (high - low) / 2, (high + low) / 2
        lo, hi = ratio_interval(num, den, vn, vd, cv, z)
        flag = den < LOW_CONFIDENCE * math.sqrt(max(vd, 0.0)) or (lo, hi) == (-1.0, 1.0)
        rows["before"].append((flag, mid + half * lo, mid + half * hi, truth))
        e = with_interval(Estimate(np.zeros(1), np.zeros(1), extra={"ratio": ratio, "scale": (low, high, n)}),
                          confidence)
        rows["after"].append((bool(e.note), e.interval[0][0], e.interval[1][0], truth))
    out = {}
    for name, r in rows.items():
        a = np.array(r, dtype=float)
        flag, cover, width = a[:, 0] == 1, (a[:, 1] - 1e-9 <= a[:, 3]) & (a[:, 3] <= a[:, 2] + 1e-9), a[:, 2] - a[:, 1]
        out[name] = {"answers": len(a), "flagged": flag.mean(), "cover_all": cover.mean(),
                     "unflagged": int((~flag).sum()), "cover_unflagged": cover[~flag].mean() if (~flag).any() else
                     math.nan, "width_unflagged": width[~flag].mean() if (~flag).any() else math.nan}
    return out


def main(runs: int = 100) -> None:
    cells = [("kv audit: every value at hi, 50% NULL, n=20000, d=50, eps=1", lambda g: audit_cell("bound", runs, g)),
             ("kv audit shape, spread values", lambda g: audit_cell("spread", runs, g))]
    cells += [(f"kv_coverage.py ordinary, n={n}, eps={e}", lambda g, e=e, n=n: ordinary_cell(e, n, runs, g))
              for e in (0.5, 1.0, 2.0) for n in (5000, 20_000)]
    cells += [(f"nullable {p}: {s}, n={n}, {share:.0%} NULL, eps={e}",
               lambda g, p=p, s=s, n=n, share=share, e=e: nullable_cell(p, s, n, share, e, 10 * runs, g))
              for p, s, n, share, e in (("collision", "hi", 500, 0.5, 0.5), ("collision", "hi", 50_000, 0.95, 0.5),
                                        ("collision", "hi", 5000, 0.95, 2.0), ("collision", "twopoint", 500, 0.5, 0.5),
                                        ("collision", "uniform", 5000, 0.5, 2.0), ("split", "hi", 5000, 0.8, 2.0),
                                        ("split", "twopoint", 500, 0.5, 0.5))]
    rows = []
    for k, (name, make) in enumerate(cells):
        parts = make(np.random.default_rng(500 + k))
        for conf in (0.95, 0.9):
            for method, res in judge(parts, conf).items():
                rows.append({"cell": name, "confidence": conf, "method": method, **{a: (round(b, 4) if isinstance(
                    b, float) else b) for a, b in res.items()}})
                print(rows[-1], flush=True)
    with open(OUT, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
