"""Key-value statements: bias, RMSE and 95% interval coverage of the per-key answers (count, conditional mean, sum)
from one Collision report per user (Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses
in the Local and Shuffle Model", IJCAI 2021 journal version), over a grid of ε and n, REPS runs per cell.

The data: n users, d = 10 keys of skewed popularity, each user holding 1 to 3 of them (so s = 3 never subsamples),
values on [1, 5] with key-specific means, 10% of the values NULL, 20% of the rows of a key repeated (averaged on
the device). Each run is the engine's own assembly, randomizer and estimators (:mod:`ldpql.mechanisms.kv`), as
``SELECT key, LDP_COUNT(*), LDP_AVG(v), LDP_SUM(v) ... GROUP BY key EPSILON ε`` runs them; the truth is the exact
answer on the assembled rows. A last row per ε measures the subsampling bias: every user holds 2s = 6 keys.
Writes a CSV, one row per (ε, n, aggregate), averaged over the keys.

    nice python examples/kv_coverage.py [--reps 200] [--out examples/kv_results]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from ldpql.mechanisms.kv import KVCollision, assemble, exact_answers, key_answers, merge

LOW, HIGH, D, S = 1.0, 5.0, 10, 3
Z = 1.959964


def data(n: int, rng: np.random.Generator, keys_per_user=(1, 2, 3)):
    """Rows (user, key, value on [−1, 1] or NaN) of n users (see the module docstring)."""
    counts = rng.choice(keys_per_user, n)
    pop = np.linspace(2, 1, D) / np.linspace(2, 1, D).sum()
    users = np.repeat(np.arange(n, dtype=np.uint64), counts)
    keys = np.concatenate([rng.choice(D, size=c, replace=False, p=pop) for c in counts])
    values = np.clip((keys % 5) / 4 * 1.6 - 0.8 + rng.uniform(-0.2, 0.2, len(keys)), -1, 1)
    values[rng.random(len(keys)) < 0.1] = np.nan
    dup = rng.random(len(keys)) < 0.2
    return np.r_[users, users[dup]], np.r_[keys, keys[dup]], np.r_[values, np.clip(values[dup] + 0.1, -1, 1)]


def cell(eps: float, n: int, reps: int, seed: int, keys_per_user=(1, 2, 3)) -> list[dict]:
    rng = np.random.default_rng(seed)
    users, keys, values = data(n, rng, keys_per_user)
    _, k, v = merge(users, keys, values)
    truth = exact_answers(k, v, D, n, LOW, HIGH)
    r = KVCollision(eps, D, S, 3)
    runs = []
    for _ in range(reps):
        _, k, v = assemble(users, keys, values, S, rng)
        runs.append(key_answers(r, r.summary(k, v, rng), n, LOW, HIGH))
    rows = []
    for kind in ("count", "mean", "sum"):
        est = np.array([g[kind].values for g in runs])
        se = np.array([g[kind].stderr for g in runs])
        want = truth[kind].values
        err = est - want
        rows.append({"epsilon": eps, "n": n, "keys_per_user": "-".join(map(str, keys_per_user)), "aggregate": kind,
                     "reps": reps, "mean_truth": float(np.nanmean(want)),
                     "mean_abs_bias_over_se": float(np.nanmean(np.abs(err.mean(axis=0)) / (se.mean(axis=0) /
                                                                                           np.sqrt(reps)))),
                     "rmse": float(np.sqrt(np.nanmean(err ** 2))), "mean_se": float(np.nanmean(se)),
                     "coverage": float(np.mean(np.abs(err) <= Z * se)),
                     "worst_key_coverage": float(np.min(np.mean(np.abs(err) <= Z * se, axis=0))),
                     "estimate_over_truth": float(np.nansum(est.mean(axis=0)) / np.nansum(want))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", default="examples/kv_results")
    args = ap.parse_args()
    rows = []
    for i, eps in enumerate((0.5, 1.0, 2.0)):
        for j, n in enumerate((5000, 20000, 50000)):
            rows += cell(eps, n, args.reps, 100 * i + j)
            print(rows[-3:], flush=True)
        rows += cell(eps, 20000, max(args.reps // 4, 10), 1000 + i, keys_per_user=(2 * S,))   # the subsampling bias
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "coverage.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out / 'coverage.csv'}")


if __name__ == "__main__":
    main()
