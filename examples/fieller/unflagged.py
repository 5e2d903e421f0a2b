"""Coverage of the unflagged conditional means alone (answers whose estimated share with a value is at least 3 of its
standard errors), Fieller's interval against the delta method's, in three cells with every value at the upper bound
and one two-point cell, by how far above the flag the estimated share is. Run from the repository root:
``nice python examples/fieller/unflagged.py`` (about a minute); writes examples/fieller/unflagged.txt."""

from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, "examples/fieller")
from coverage import SHAPES, releases

CELLS = [("hi", 500, 0.5, 0.5, 2000), ("hi", 50_000, 0.95, 0.5, 600), ("hi", 5000, 0.95, 2, 1000),
         ("twopoint", 500, 0.5, 0.5, 2000)]


def main() -> None:
    out = []
    for shape, n, share, eps, runs in CELLS:
        rng = np.random.default_rng(5)
        x, null = SHAPES[shape](rng, n), rng.random(n) < share
        truth = 5 + 5 * float(x[~null].mean())
        ests, deltas = releases("collision", x, null, eps, runs, rng)
        lo, hi = (np.array([e.interval[k][0] for e in ests]) for k in (0, 1))
        dlo, dhi = (np.array([d[0.95][k] for d in deltas]) for k in (0, 1))
        flag = np.array([bool(e.note) for e in ests])
        t = np.array([e.extra["ratio"][1] / np.sqrt(e.extra["ratio"][3]) for e in ests])
        hit, dhit = (lo <= truth) & (truth <= hi), (dlo <= truth) & (truth <= dhi)
        out.append(f"{shape}, n = {n}, {share:.0%} NULL, ε = {eps}, {runs} releases: all {hit.mean():.3f} "
                   f"(delta {dhit.mean():.3f}); unflagged {int((~flag).sum())}: {hit[~flag].mean():.3f} "
                   f"(delta {dhit[~flag].mean():.3f})")
        for a, b in ((3, 3.5), (3.5, 4), (4, 99)):
            m = ~flag & (t >= a) & (t < b)
            if m.any():
                out.append(f"    share/sd in [{a}, {b}): {int(m.sum())} releases, Fieller {hit[m].mean():.3f}, "
                           f"delta {dhit[m].mean():.3f}")
        print(*out[-4:], sep="\n", flush=True)
    with open("examples/fieller/unflagged.txt", "w") as fh:
        fh.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
