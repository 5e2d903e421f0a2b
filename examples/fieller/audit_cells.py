"""The audit's H2 cells (tests/system/test_audit7_nulls.py): coverage of the unflagged 95% intervals of CollisionMean,
Fieller's against the delta method's on the same 400 releases per cell (seeded differently from the audit's runs).
Run from the repository root: ``nice python examples/fieller/audit_cells.py`` (under a minute); writes
examples/fieller/audit_cells.txt."""

from __future__ import annotations

import sys

import numpy as np
from scipy.stats import beta

sys.path.insert(0, "examples/fieller")
from coverage import releases

SHAPES = {"hi": lambda rng, n: np.full(n, 1.0),
          "lognormal": lambda rng, n: np.clip(np.exp(rng.normal(0, 1, n)), 0, 10) / 5 - 1}
CELLS = [("hi", 5000, 0.8, 0.5), ("hi", 5000, 0.95, 2), ("hi", 20_000, 0.95, 1), ("lognormal", 5000, 0.8, 0.5),
         ("lognormal", 5000, 0.95, 2), ("lognormal", 20_000, 0.5, 0.5)]


def cp(k: int, m: int) -> tuple[float, float]:
    return (beta.ppf(0.025, k, m - k + 1) if k else 0.0, beta.ppf(0.975, k + 1, m - k) if k < m else 1.0)


def main(runs: int = 400) -> None:
    out = []
    for shape, n, share, eps in CELLS:
        rng = np.random.default_rng(7)
        x, null = SHAPES[shape](rng, n), rng.random(n) < share
        truth = 5 + 5 * float(x[~null].mean())
        ests, deltas = releases("collision", x, null, eps, runs, rng)
        flag = np.array([bool(e.note) for e in ests])
        hit = np.array([e.interval[0][0] <= truth <= e.interval[1][0] for e in ests])
        dhit = np.array([d[0.95][0] <= truth <= d[0.95][1] for d in deltas])
        m, k, kd = int((~flag).sum()), int(hit[~flag].sum()), int(dhit[~flag].sum())
        lo, hi = cp(k, m)
        dlo, dhi = cp(kd, m)
        out.append(f"{shape}, n = {n}, {share:.0%} NULL, ε = {eps}: unflagged {m}/{runs}; Fieller {k}/{m} = "
                   f"{k / m:.3f} [{lo:.3f}, {hi:.3f}]; delta {kd}/{m} = {kd / m:.3f} [{dlo:.3f}, {dhi:.3f}]; "
                   f"all releases: Fieller {hit.mean():.3f}, delta {dhit.mean():.3f}")
        print(out[-1], flush=True)
    with open("examples/fieller/audit_cells.txt", "w") as fh:
        fh.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
