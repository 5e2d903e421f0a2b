"""Audit 8: LDP_TOPK's hybrid (inference-on-winners) intervals on cells off the builder's grid: other d (12 to
500), k up to 10, near-ties at large n, the oracles the planner picks there (GRR, k-subset, OUE, OLH, Hadamard),
at 95% and 90%. Target: the true frequency of the value found at rank j. Also counts intervals that are inverted,
outside [0, 1] or that do not hold the shown (projected) point, and checks that the interval is a function of the
release (same raw estimate -> same interval).

    nice python examples/audit8_accuracy/topk_cells.py [reps]   -> topk_cells.csv (reps = 300: a few minutes)
"""

from __future__ import annotations

import csv
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from ldpql.planner.histogram import ORACLES, project_simplex
from ldpql.planner.winners import rank, winners_interval

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("tsc", HERE.parent / "topk_selection_coverage.py")
tsc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tsc)

K = 10


def shape(name: str) -> list[float]:
    if name == "neartie12":   # twelve values, the top five within 0.1 point of each other
        f = [0.101, 0.1005, 0.1, 0.0995, 0.099] + [0.5 / 7] * 7
    elif name == "zipf50":
        z = 1 / np.arange(1, 51) ** 0.8
        f = list(z / z.sum())
    elif name == "plateau200":   # ten values tied at 2%, 190 sharing the rest
        f = [0.02] * 10 + [0.8 / 190] * 190
    elif name == "steps500":
        f = [0.05, 0.04, 0.04, 0.03, 0.03, 0.03, 0.02, 0.02, 0.02, 0.02] + [0.7 / 490] * 490
    return list(np.asarray(f) / np.sum(f))


CELLS = [("neartie12", 1_000_000, 1.0, None), ("neartie12", 200_000, 4.0, None), ("zipf50", 100_000, 1.0, None),
         ("zipf50", 20_000, 4.0, None), ("plateau200", 100_000, 2.0, None), ("steps500", 200_000, 1.0, None),
         ("zipf50", 100_000, 1.0, "oue"), ("zipf50", 100_000, 1.0, "olh"), ("zipf50", 100_000, 1.0, "hadamard"),
         ("neartie12", 200_000, 1.0, "ksubset_l2")]


def oracle(name, labels, n, eps, forced):
    if forced is None:
        return tsc.chosen_oracle(labels, n, eps)
    return next(o for o in ORACLES if o.name == forced).make(eps, len(labels) + 1)


def run(shape_name, n, eps, forced, reps, seed):
    freq = shape(shape_name)
    labels = [f"v{i:03d}" for i in range(len(freq))]
    counts = tsc.counts_of(freq, n)
    truth = counts / n
    r = oracle(shape_name, labels, n, eps, forced)
    rng = np.random.default_rng(seed)
    hits = {c: np.zeros(K) for c in (0.95, 0.9)}
    bad = {"inverted": 0, "outside01": 0, "point_out": 0, "nondeterministic": 0, "nan": 0}
    t0 = time.process_time()
    for i in range(reps):
        raw, se, step, rho = tsc.release(r, counts, rng)
        top = rank(raw, step)[:K]   # the engine's ranking (exact ties by the release-seeded jitter)
        shown = project_simplex(raw)[top]
        for c in (0.95, 0.9):
            lo, hi = winners_interval(raw, se, K, c, step, rho)
            hits[c] += (lo <= truth[top]) & (truth[top] <= hi)
            if c == 0.95:
                bad["nan"] += int((~np.isfinite(lo) | ~np.isfinite(hi)).sum())
                bad["inverted"] += int((hi < lo).sum())
                bad["outside01"] += int(((lo < 0) | (hi > 1)).sum())
                bad["point_out"] += int(((shown < lo - 1e-12) | (shown > hi + 1e-12)).sum())
                if i < 5:
                    lo2, hi2 = winners_interval(raw.copy(), se.copy(), K, c, step, rho)
                    bad["nondeterministic"] += int(not (np.array_equal(lo, lo2) and np.array_equal(hi, hi2)))
    secs = (time.process_time() - t0) / reps
    rows = []
    for c in (0.95, 0.9):
        for j in range(K):
            rows.append({"shape": shape_name, "d": len(freq) + 1, "n": n, "eps": eps, "oracle": r.name,
                         "forced": forced or "", "confidence": c, "rank": j + 1, "reps": reps,
                         "coverage": round(hits[c][j] / reps, 4), **bad, "cpu_s_per_release": round(secs, 4)})
    return rows


def main(reps: int = 300) -> None:
    rows = []
    for k, (s, n, eps, forced) in enumerate(CELLS):
        out = run(s, n, eps, forced, reps, 4242 + k)
        rows += out
        cov = {c: [r["coverage"] for r in out if r["confidence"] == c] for c in (0.95, 0.9)}
        print(s, n, eps, out[0]["oracle"], "min95", min(cov[0.95]), "min90", min(cov[0.9]),
              {key: out[0][key] for key in ("inverted", "outside01", "point_out", "nondeterministic", "nan")},
              out[0]["cpu_s_per_release"], flush=True)
    with open(HERE / "topk_cells.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
