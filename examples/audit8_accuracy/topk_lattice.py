"""LDP_TOPK's intervals near the lattice fallback (a report's step about the standard error): GRR over 13 bins (five
values within 0.2 point at ~0.10, seven exactly tied at 0.0714, one empty), the ranks 1-6 (rank 6 is the top of the
tied block), n = 2,000 / 5,000 / 20,000 and ε from 4 to 12, at 95% and 90%. Target: the true frequency of the value
the engine found at each rank (``winners.rank``: exact ties by the release-seeded jitter). Columns: se/step at rank
6, coverage per rank, its mean and minimum, the mean width in lattice steps (rank 6).

    nice python examples/audit8_accuracy/topk_lattice.py [reps]   -> topk_lattice.csv (reps = 600: about 5 minutes)
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from ldpql.mechanisms.base import debiased_skewness
from ldpql.planner.histogram import ORACLES
from ldpql.planner.winners import correlations, rank, winners_interval

FREQ = [0.101, 0.1005, 0.1, 0.0995, 0.099] + [0.5 / 7] * 7
CELLS = [(2000, 7.0), (2000, 8.0), (2000, 9.0), (2000, 10.0), (2000, 12.0), (5000, 8.0), (5000, 9.0), (5000, 10.0),
         (20_000, 4.0), (20_000, 10.0), (20_000, 11.0)]
K = 6


def counts_of(n: int) -> np.ndarray:
    f = np.asarray(FREQ) / np.sum(FREQ)
    c = np.floor(f * n).astype(np.int64)
    c[: n - c.sum()] += 1
    return np.append(c, 0)


def main(reps: int = 600) -> None:
    rows = []
    for n, eps in CELLS:
        counts = counts_of(n)
        truth = counts / counts.sum()
        r = next(o for o in ORACLES if o.name == "grr").make(eps, len(counts))
        rng = np.random.default_rng([n, int(eps * 10)])
        hits = {c: np.zeros(K) for c in (0.95, 0.9)}
        width, ratio = {c: 0.0 for c in hits}, []
        for _ in range(reps):
            m = int(counts.sum())
            raw = r.estimate(r.sample_aggregate(counts, rng), m)
            se, step = np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), m)), r.step(m)
            rho = correlations(raw, (r.p, r.q, *r.pair_hits(), m, 0.0))
            skew = debiased_skewness(np.clip(raw, 0.0, 1.0), m, r.p, r.q)
            top = rank(raw, step)[:K]
            ratio.append(se[top[-1]] / step)
            for c in hits:
                lo, hi = winners_interval(raw, se, K, c, step, rho, skew)
                hits[c] += (lo <= truth[top]) & (truth[top] <= hi)
                width[c] += (hi[-1] - lo[-1]) / step / reps
        for c, h in hits.items():
            cov = h / reps
            rows.append({"n": n, "epsilon": eps, "confidence": c, "reps": reps, "se_over_step": round(np.mean(ratio), 2),
                         **{f"rank{j + 1}": round(v, 3) for j, v in enumerate(cov)}, "mean": round(cov.mean(), 3),
                         "min": round(cov.min(), 3), "width6_steps": round(width[c], 2)})
            print(rows[-1], flush=True)
    with open(Path(__file__).with_name("topk_lattice.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 600)
