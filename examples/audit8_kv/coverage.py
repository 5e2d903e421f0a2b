"""Hostile-review accuracy grid for key-value statements (Wang, Li, Li, Li, Yang, Yan, "Differentially Private
Numerical Vector Analyses in the Local and Shuffle Model", 2023): coverage of the per-key count, mean and sum
intervals at 95% and 90%, bias, realised RMSE against EXPLAIN's predicted standard error, and the low-confidence
flags, on a grid the builder did not use. Runs the mechanism layer directly (assemble, the randomizer's elements,
Collision's fast path, key_answers), ε = 1. Writes coverage.csv next to this file.

Scenarios: 'skew' (Zipf key popularity, 1..s keys per user, 10% NULL values), 'bound' (every value at the upper
bound, half of them NULL), 'many' (every user holds 2s keys: subsampled; the target is the subsampled truth, and
the raw truth's ratio is reported as the measured subsampling factor).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms.kv import KVCollision, assemble, exact_answers, key_answers, merge, predicted_se

LOW, HIGH, EPS = 1.0, 5.0, 1.0


def data(scenario: str, n: int, d: int, s: int, rng: np.random.Generator):
    pop = 1 / np.arange(1, d + 1) ** 1.1
    pop /= pop.sum()
    if scenario == "many":
        per = np.full(n, min(2 * s, d))
    else:
        per = rng.integers(1, s + 1, n)
    users = np.repeat(np.arange(n, dtype=np.uint64), per)
    keys = np.concatenate([rng.choice(d, size=k, replace=False, p=pop) for k in per]) if n <= 20_000 else \
        _fast_keys(per, d, pop, rng)
    if scenario == "bound":
        values = np.ones(len(keys))
        values[rng.random(len(keys)) < 0.5] = np.nan
    else:
        values = np.clip((keys % 5) / 2 - 1 + rng.uniform(-0.3, 0.3, len(keys)), -1, 1)
        values[rng.random(len(keys)) < 0.1] = np.nan
    return users, keys, values


def _fast_keys(per, d, pop, rng):
    """Distinct keys per user by Gumbel top-k on log popularity (the same law as choice without replacement)."""
    out = []
    top = int(per.max())
    g = np.log(pop)[None, :] + rng.gumbel(size=(len(per), d))
    best = np.argsort(-g, axis=1)[:, :top]
    for k in np.unique(per):
        out.append((np.flatnonzero(per == k), best[per == k, :k]))
    keys = np.empty(int(per.sum()), np.int64)
    start = np.r_[0, np.cumsum(per)[:-1]]
    for rows, ks in out:
        for c in range(ks.shape[1]):
            keys[start[rows] + c] = ks[:, c]
    return keys


def cell(scenario: str, n: int, d: int, s: int, runs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    users, keys, values = data(scenario, n, d, s, rng)
    r = KVCollision(EPS, d, s, 3)
    _, mk, mv = merge(users, keys, values)
    raw = exact_answers(mk, mv, d, n, LOW, HIGH)
    _, k0, v0 = assemble(users, keys, values, s, rng)
    sub_truth = None if scenario == "many" else exact_answers(k0, v0, d, n, LOW, HIGH)
    per_user = min(2 * s, d)
    if scenario == "many":   # rows are grouped by user already, 2s per user
        kmat, vmat = keys.reshape(n, per_user), values.reshape(n, per_user)
    z95, z90 = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.95)
    acc = {w: {"est": [], "se": [], "iv": [], "flag": [], "truth": []} for w in ("count", "mean", "sum")}
    for _ in range(runs):
        if scenario == "many":
            if n <= 20_000:   # the engine's own assembly
                _, k0, v0 = assemble(users, keys, values, s, rng)
            else:   # (speed) every user has exactly 2s distinct keys, one row each: a uniform s of the 2s columns
                pick = np.argsort(rng.random((n, per_user)), axis=1)[:, :s]
                k0, v0 = (np.take_along_axis(a, pick, axis=1) for a in (kmat, vmat))
            truth = exact_answers(k0, v0, d, n, LOW, HIGH)
        else:
            truth = sub_truth
        summary = r.inner.simulate(r.elements(k0, v0, rng), rng)
        ans = key_answers(r, summary, n, LOW, HIGH)
        for w in acc:
            acc[w]["est"].append(ans[w].values)
            acc[w]["se"].append(ans[w].stderr)
            acc[w]["truth"].append(truth[w].values)
            if w == "mean":
                acc[w]["flag"].append(np.array([bool(x) for x in ans[w].extra["notes"]]))
                acc[w]["iv"].append(np.array([[np.nan, np.nan] if iv is None else [iv[0][0], iv[1][0]]
                                              for iv in ans[w].extra["intervals"]]))
    pred = predicted_se(EPS, d, s, 3, n, LOW, HIGH)
    row = {"scenario": scenario, "n": n, "d": d, "s": s, "runs": runs}
    for w, a in acc.items():
        est, se, tru = (np.array(a[x]) for x in ("est", "se", "truth"))
        ok = ~np.isnan(tru) & ~np.isnan(est)
        lo, hi = {"count": (0, n), "mean": (LOW, HIGH), "sum": (n * min(LOW, 0), n * max(HIGH, 0))}[w]
        given = np.array(a["iv"]) if w == "mean" else np.full(est.shape + (2,), np.nan)
        a95 = np.where(np.isnan(given[..., 0]), est - z95 * se, given[..., 0])
        b95 = np.where(np.isnan(given[..., 1]), est + z95 * se, given[..., 1])
        v = np.clip(est, lo, hi)   # as the engine's result cell: value and interval clipped to the feasible range
        hit95 = (np.minimum(np.maximum(a95, lo), v) <= tru) & (tru <= np.maximum(np.minimum(b95, hi), v))
        hit90 = (np.minimum(np.maximum(est - z90 * se, lo), v) <= tru) & (tru <= np.maximum(np.minimum(est + z90 * se, hi), v))
        est = v
        flag = np.array(a["flag"]) if w == "mean" else np.zeros_like(ok)
        per_key95 = np.array([hit95[:, j][ok[:, j]].mean() if ok[:, j].any() else np.nan for j in range(d)])
        rmse = np.sqrt(np.nanmean(np.where(ok, (est - tru) ** 2, np.nan), axis=0))
        bias = np.nanmean(np.where(ok, est - tru, np.nan), axis=0)
        row[f"{w}_cov95"] = round(float(hit95[ok].mean()), 4)
        row[f"{w}_cov90"] = round(float(hit90[ok].mean()), 4)
        row[f"{w}_worst_key_cov95"] = round(float(np.nanmin(per_key95)), 4)
        row[f"{w}_max_abs_bias_over_rmse"] = round(float(np.nanmax(np.abs(bias) / rmse)), 3)
        row[f"{w}_max_rmse"] = float(np.nanmax(rmse))
        row[f"{w}_explain_se"] = pred[w]
        row[f"{w}_rmse_over_explain"] = round(float(np.nanmax(rmse) / pred[w]), 3)
        if w == "mean":
            unflagged = ok & ~flag.astype(bool)
            row["mean_cov95_unflagged"] = round(float(hit95[unflagged].mean()), 4) if unflagged.any() else None
            row["mean_cov95_flagged"] = round(float(hit95[ok & flag.astype(bool)].mean()), 4) \
                if (ok & flag.astype(bool)).any() else None
            row["mean_flagged_share"] = round(float(flag[ok].mean()), 4)
    if scenario == "many":   # the subsampling factor: subsampled truth over the raw truth, counts and sums
        sub = exact_answers(k0, v0, d, n, LOW, HIGH)
        top = raw["count"].values > 0.02 * n
        row["count_factor"] = round(float(np.mean(sub["count"].values[top] / raw["count"].values[top])), 4)
        row["sum_factor"] = round(float(np.nanmean(sub["sum"].values[top] / raw["sum"].values[top])), 4)
        row["documented_factor"] = round(s / min(2 * s, d), 4)
    return row


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rows = []
    out = Path(__file__).with_name("coverage.csv")
    for n in (2_000, 20_000, 200_000):
        for d in (5, 50):
            for s in (1, 4):
                for scenario in ("skew", "bound", "many"):
                    rows.append(cell(scenario, n, d, s, runs, seed=hash((n, d, s, scenario)) % 2**32))
                    print({k: rows[-1][k] for k in rows[-1] if "cov95" in k or k in ("scenario", "n", "d", "s")},
                          flush=True)
                    with out.open("w", newline="") as f:
                        w = csv.DictWriter(f, fieldnames=list(rows[0]) + [k for k in ("count_factor", "sum_factor",
                                                                                   "documented_factor")
                                                                          if k not in rows[0]])
                        w.writeheader()
                        w.writerows(rows)


if __name__ == "__main__":
    main()
