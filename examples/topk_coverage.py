"""LDP_HISTOGRAM and LDP_TOPK over a grid: per-bin coverage, and the top values' coverage before and after issue 11.

Superseded for LDP_TOPK by ``examples/topk_selection_coverage.py``: the engine's rank intervals are now the hybrid
intervals for the value found at each rank; the "after" column here is the first fix (Bonferroni over the values
that could hold the rank, for the j-th largest frequency), kept to reproduce the numbers it gave.

Each run releases one histogram through the engine (``SELECT LDP_HISTOGRAM(c, postprocess => 'none')``: the raw,
unbiased frequencies and their per-value intervals, from the oracle the planner picks). From the same release:

- the per-bin coverage of the histogram's intervals (averaged over the bins);
- LDP_TOPK's interval for the j-th largest frequency, Bonferroni over the values that could hold the rank
  (``topk_selection_coverage.bonferroni_interval``, the first fix) and as it was before issue 11
  (the per-value interval of the value ranked j-th), each checked against the j-th largest true frequency;
- whether the top-ranked value is the true mode (LDP_MODE's answer).

    nice python examples/topk_coverage.py          # about 2 minutes

Writes examples/histogram_results/topk_coverage.csv and histogram_coverage.csv.
"""

from __future__ import annotations

import csv
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa
from topk_selection_coverage import (
    bonferroni_interval as ranked_interval,  # (run from examples/ or with it on the path)
)

import ldpql
from ldpql.planner.histogram import ORACLES

OUT = Path(__file__).parent / "histogram_results"
CONFIGS = {   # frequencies of 8 declared values (the rest of the table's values are none)
    "separated": [0.45, 0.25, 0.12, 0.08, 0.05, 0.03, 0.01, 0.01],
    "close_two": [0.30, 0.29, 0.15, 0.10, 0.08, 0.04, 0.02, 0.02],
    "close_three": [0.25, 0.24, 0.23, 0.10, 0.08, 0.05, 0.03, 0.02],
    "tied_four": [0.20, 0.20, 0.20, 0.20, 0.08, 0.06, 0.04, 0.02],
    "tied_six": [0.15, 0.15, 0.15, 0.15, 0.15, 0.15, 0.06, 0.04],
}
CATS = list("abcdefgh")
K, REPS = 3, 400


def runs(freq, n: int, eps: float, seed: int):
    """(truth, [(raw, se)] per run) for one configuration, through the engine."""
    rng = np.random.default_rng(seed)
    data = rng.choice(CATS, n, p=np.array(freq) / sum(freq))
    truth = np.array([np.mean(data == c) for c in CATS] + [0.0])   # OTHER is empty
    con = ldpql.connect(seed=seed, evaluation=True)
    con.register("t", pa.table({"c": data}), private={"c": CATS}, budget=1e12)
    plan = con.explain(f"SELECT LDP_HISTOGRAM(c) FROM t EPSILON {eps}")
    oracle = plan.split("mechanism * ")[1].split(":")[0]
    r = next(o for o in ORACLES if o.name == oracle).make(eps, len(truth))
    out = []
    for _ in range(REPS):
        res = con.sql(f"SELECT LDP_HISTOGRAM(c, postprocess => 'none') FROM t EPSILON {eps}")
        raw = np.array([row[1] for row in res.fetchall()], dtype=float)
        # the standard error the engine computes (one_round: the closed form at the clipped raw estimate); the
        # shown intervals are clipped to [0, 1], so their width does not give it back near 0
        out.append((raw, np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), n))))
    return truth, out, oracle


def per_value_interval(raw, se, k, conf):
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    top = np.lexsort((np.arange(len(raw)), -raw))[:k]
    return raw[top] - z * se[top], raw[top] + z * se[top]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    topk_rows, hist_rows = [], []
    for ci, (name, freq) in enumerate(CONFIGS.items()):
        for n, eps in ((4_000, 1.0), (20_000, 2.0), (100_000, 0.5)):
            truth, rel, oracle = runs(freq, n, eps, 100 + ci)
            ranked_truth = -np.sort(-truth)[:K]
            for conf in (0.90, 0.95):
                z = NormalDist().inv_cdf(0.5 + conf / 2)
                bins = np.mean([np.mean(np.abs(raw - truth) <= z * se) for raw, se in rel])
                hist_rows.append(dict(config=name, n=n, epsilon=eps, oracle=oracle, confidence=conf, reps=REPS,
                                      bin_coverage=float(bins)))
                after = [ranked_interval(raw, se, K, conf) for raw, se in rel]
                before = [per_value_interval(raw, se, K, conf) for raw, se in rel]
                for j in range(K):
                    def cover(ivs, j=j, truth=ranked_truth):
                        return float(np.mean([lo[j] <= truth[j] <= hi[j] for lo, hi in ivs]))

                    def width(ivs, j=j):
                        return float(np.mean([hi[j] - lo[j] for lo, hi in ivs]))

                    top_est = np.mean([-np.sort(-raw)[j] for raw, _ in rel])
                    topk_rows.append(dict(config=name, n=n, epsilon=eps, oracle=oracle, confidence=conf, rank=j + 1,
                                          reps=REPS, truth=float(ranked_truth[j]), bias=float(top_est - ranked_truth[j]),
                                          coverage=cover(after), coverage_before=cover(before),
                                          width=width(after), width_before=width(before)))
            mode = float(np.mean([np.argmax(raw) == np.argmax(truth) for raw, _ in rel]))
            print(f"{name:<12} n={n:>7,} ε={eps:<4g} {oracle:<12} bins95 {hist_rows[-1]['bin_coverage']:.3f} "
                  f"top1@95 {topk_rows[-K]['coverage']:.3f} (before {topk_rows[-K]['coverage_before']:.3f}) "
                  f"width x{topk_rows[-K]['width'] / topk_rows[-K]['width_before']:.2f}; mode found {mode:.2f}",
                  flush=True)
    for path, rows in ((OUT / "topk_coverage.csv", topk_rows), (OUT / "histogram_coverage.csv", hist_rows)):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)


if __name__ == "__main__":
    main()
