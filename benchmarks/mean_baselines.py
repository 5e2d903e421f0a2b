"""The mean baselines against their closed forms: the discrete Laplace mechanism and the discretized Square Wave
(linear estimator, and Li et al.'s EMS reconstruction), beside Duchi et al., PM and HM, at n = 10^5.

For each ε and mechanism: the measured MSE of the mean of n users' reports (x' on [-1, 1]) over ``--runs`` runs,
the closed-form variance, their ratio, the measured bias in units of its own standard error, and the coverage of the
95% interval the engine would give (estimate ± 1.96·se from the release, as :func:`ldpql.mechanisms.one_round`).
EMS has no closed form: its row shows the MSE, the bias, and the coverage of the normal interval with the linear
estimator's se (what a "95%" claim for it would cover).

    python benchmarks/mean_baselines.py [--runs 200] [--n 100000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from ldpql.mechanisms import Encoding, Reply, one_round
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.laplace import LaplaceMean
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.square_wave import SquareWave, ems

BUCKETS = 64    # EMS: input buckets of [-1, 1]
OUTPUTS = 256   # and groups of consecutive output cells (Li et al. bucket both)


def data(n: int, rng: np.random.Generator) -> np.ndarray:
    """A skewed data set on [-1, 1] (Beta(2, 5) rescaled): mean −0.43, E[x²] ≈ 0.24."""
    return rng.beta(2, 5, n) * 2 - 1


def run(make, eps: float, x: np.ndarray, runs: int, rng: np.random.Generator, ems_runs: int) -> dict:
    r = make(eps)
    truth = float(x.mean())
    est, se, em = [], [], []
    tr = r.transition(BUCKETS, OUTPUTS) if isinstance(r, SquareWave) else None
    for _ in range(runs):
        summary = r.aggregate(r.randomize(x, rng))
        proto = one_round(r, Encoding(None), population=None)
        next(proto)
        try:
            proto.send(Reply(summary, len(x)))
        except StopIteration as stop:
            e = stop.value
        est.append(float(e.values[0]))
        se.append(float(e.stderr[0]))
        if tr is not None and len(em) < ems_runs:
            f = ems(r.groups(summary, OUTPUTS), tr)
            em.append(float(f @ r.bucket_centres(BUCKETS)))
    est, se = np.array(est), np.array(se)
    closed = float(r.variance(np.array([truth]), len(x), second_moment=float(np.mean(x ** 2)))[0])
    out = {"mse": float(np.mean((est - truth) ** 2)), "closed": closed,
           "bias_z": float((est.mean() - truth) / math.sqrt(closed / runs)),
           "coverage": float(np.mean(np.abs(est - truth) <= 1.96 * se))}
    if em:
        em = np.array(em)
        out["ems"] = {"mse": float(np.mean((em - truth) ** 2)), "bias": float(em.mean() - truth),
                      "sd": float(em.std()), "coverage": float(np.mean(np.abs(em - truth) <= 1.96 * se[:len(em)])),
                      "runs": len(em)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--eps", type=float, nargs="*", default=[0.5, 1.0, 4.0])
    ap.add_argument("--ems-runs", type=int, default=100, help="runs that also reconstruct by EMS (slow at small ε)")
    args = ap.parse_args()
    rng = np.random.default_rng(20261125)
    x = data(args.n, rng)
    print(f"n = {args.n:,}, {args.runs} runs, data Beta(2,5) on [-1, 1]: mean {x.mean():.4f}, E[x²] {np.mean(x**2):.4f}")
    print("| ε | mechanism | MSE (measured) | Var (closed form) | ratio | bias / its se | coverage of 95% |")
    print("|---|---|---|---|---|---|---|")
    for eps in args.eps:
        for name, make in (("duchi", Duchi), ("piecewise", Piecewise), ("hybrid", Hybrid), ("laplace", LaplaceMean),
                           ("square_wave", SquareWave)):
            t = time.time()
            m = run(make, eps, x, args.runs, rng, args.ems_runs)
            print(f"| {eps:g} | {name} | {m['mse']:.4g} | {m['closed']:.4g} | {m['mse'] / m['closed']:.3f} | "
                  f"{m['bias_z']:+.2f} | {m['coverage']:.3f} |  ({time.time() - t:.0f} s)", flush=True)
            if "ems" in m:
                e = m["ems"]
                print(f"| {eps:g} | square_wave, EMS mean ({BUCKETS}×{OUTPUTS} buckets, {e['runs']} runs) | "
                      f"{e['mse']:.4g} | none | "
                      f"{e['mse'] / m['closed']:.3f} | bias {e['bias']:+.4f} (sd {e['sd']:.4f}) | "
                      f"{e['coverage']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
