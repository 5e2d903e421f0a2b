"""The unflagged conditional mean's interval given a rare selection (issue 11, audit9b): jointly normal (num, den),
the model ``conditional.selected_ratio_interval`` is derived under, with the covariance of a nullable LDP_AVG's
ratio parts; coverage of r over the draws that are not flagged (den >= 3·sd(den)), their width, and the share of
them whose interval is the whole range (flagged "too uncertain" by ``with_interval``). Own cells (not the audit's):
E den chosen so that the answer is unflagged in 1%, 3%, 10%, 50% and 98% of releases, two correlations.

    nice python examples/tails2/ratio_rare.py [want]
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy.stats import norm

from ldpql.mechanisms import conditional

# (Var num, Var den, Cov): a share with a value near 0.1 at n ~ 2,000, ε 1 (own choice, not an audit cell)
COVS = {"rho0.1": (2.0e-3, 2.1e-3, 2.1e-4), "rho0.6": (2.0e-3, 2.1e-3, 1.2e-3)}
SELECT = (0.01, 0.03, 0.1, 0.5, 0.98)


def run(cov, r_true, p_sel, confidence, want, seed):
    vn, vd, cv = cov
    sd = math.sqrt(vd)
    cut = conditional.LOW_CONFIDENCE * sd
    mu = cut + sd * norm.ppf(p_sel)   # P(den >= cut) = p_sel
    rng = np.random.default_rng(seed)
    kept = np.empty((0, 2))
    while len(kept) < want:
        draws = rng.multivariate_normal([r_true * mu, mu], [[vn, cv], [cv, vd]], 200_000)
        kept = np.vstack([kept, draws[draws[:, 1] >= cut]])
    ivs = np.array([conditional.selected_ratio_interval(a, b, vn, vd, cv, confidence, cut) for a, b in kept[:want]])
    cover = np.mean((ivs[:, 0] - 1e-9 <= r_true) & (r_true <= ivs[:, 1] + 1e-9))
    whole = np.mean((ivs[:, 0] <= -1 + 1e-12) & (ivs[:, 1] >= 1 - 1e-12))
    return cover, float(np.mean(ivs[:, 1] - ivs[:, 0])), whole


def main(want: int = 400) -> None:
    print("cov r p_sel conf cover width whole")
    for name, cov in COVS.items():
        for r in (1.0, 0.5, 0.0):
            for p in SELECT:
                for conf in (0.95, 0.9):
                    c, w, h = run(cov, r, p, conf, want, [int(r * 10), int(p * 100), int(conf * 100)])
                    print(f"{name} {r} {p} {conf} {c:.3f} {w:.3f} {h:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
