"""Coverage of the conditional mean's interval (SQL AVG over a nullable column), before (delta method, the standard
error capped at half the range) and after (Fieller's interval, ldpql.mechanisms.conditional.ratio_interval), at 95%
and 90%, through the mechanisms directly (the same estimators a statement runs, without the SQL layer).

Grid (not the cells the tests were tuned on): n 500 / 5,000 / 50,000; NULL share 0 / 50 / 80 / 95 / 99%;
ε 0.5 / 2 / 8; data every value at hi, uniform on [lo, hi], a two-point mix (30% at lo, 70% at hi); R runs per cell.
Paths: 'collision' (CollisionMean, one report), 'split' (Duchi et al. at 0.7ε on x with NULL as the midpoint and
randomized response at 0.3ε on "has a value"), 'vector' (column 1 of a d = 2 Collision joint release, column 2
uniform and NOT NULL). Writes examples/fieller/coverage.csv. Run from the repository root:
``nice python examples/fieller/coverage.py [R]`` (about 10 minutes on one core at R = 300).
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms.base import Reply
from ldpql.mechanisms.conditional import MISSING, CollisionMean, answer, covariance, split_protocol, with_interval
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.rr import RandomizedResponse
from ldpql.mechanisms.vector import VectorMeans, column, vector_round

LO, HI = 0.0, 10.0
SHAPES = {"hi": lambda rng, n: np.full(n, 1.0), "uniform": lambda rng, n: rng.uniform(-1, 1, n),
          "twopoint": lambda rng, n: np.where(rng.random(n) < 0.3, -1.0, 1.0)}


def delta_interval(r: CollisionMean, summary, n: int, z: float) -> tuple[float, float]:
    """The interval before this change: value ± z·min(se, half), se the delta method at the clipped f̂±."""
    f = r.estimate(summary, n)
    plug = np.clip(f, 0, 1)
    cov = covariance(r.p_true, r.p_false, plug) / n
    present = max(float(plug.sum()), 1 / n)
    grad = (HI - LO) / 2 * np.array([2 * plug[1], -2 * plug[0]]) / present ** 2
    se = min(math.sqrt(max(float(grad @ cov @ grad), 0.0)), (HI - LO) / 2)
    value = 5 + 5 * float(np.clip((f[0] - f[1]) / max(f[0] + f[1], 1 / n), -1, 1))
    return max(value - z * se, LO), min(value + z * se, HI)


def run_protocol(gen, replies):
    """Drive a protocol generator with precomputed replies."""
    rnd = next(gen)
    try:
        for reply in replies:
            rnd = gen.send(reply(rnd))
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("protocol asked for more rounds")


def releases(path: str, x: np.ndarray, null: np.ndarray, eps: float, runs: int, rng):
    """``runs`` Estimates (at 95%) of the conditional mean, and for 'collision' the delta-method intervals."""
    n = len(x)
    out, deltas = [], []
    if path == "collision":
        r = CollisionMean(eps)
        xs = np.where(null, MISSING, x)
        for _ in range(runs):
            summary = r.inner.simulate(r.elements(xs, rng), rng)
            out.append(answer(r, summary, n, "mean", LO, HI))
            deltas.append({c: delta_interval(r, summary, n, NormalDist().inv_cdf(0.5 + c / 2)) for c in (0.95, 0.9)})
    elif path == "split":
        mean_r, bit = Duchi(0.7 * eps), RandomizedResponse(0.3 * eps)
        value, has = np.where(null, 0.0, x), (~null).astype(np.int64)
        for _ in range(runs):
            gen = split_protocol(mean_r, bit, None, None, LO, HI)
            out.append(run_protocol(gen, [lambda rnd: Reply(mean_r.aggregate(mean_r.randomize(value, rng)), n),
                                          lambda rnd: Reply(bit.aggregate(bit.randomize(has, rng)), n)]))
    else:
        r = VectorMeans(eps, 2, "collision")
        data = np.stack([np.where(null, np.nan, x), rng.uniform(-1, 1, n)], axis=1)
        halves, mids = np.full(2, 5.0), np.full(2, 5.0)
        for _ in range(runs):
            gen = vector_round(r, None, halves, mids, np.array([True, False]))
            out.append(run_protocol(gen, [lambda rnd: Reply(r.simulate(data, rng), n)]))
    return out, deltas


def main(runs: int = 300) -> None:
    rows = [("path,shape,n,null,eps,runs,truth,flagged,whole,cov95,cov90,delta95,delta90,unflagged95,unflagged_n,"
             "delta_unflagged95,width95,delta_width95,width95_both,delta_width95_both")]
    grid = [("collision", s, n, p, e) for s, n, p, e in itertools.product(SHAPES, (500, 5000, 50000),
                                                                           (0.0, 0.5, 0.8, 0.95, 0.99), (0.5, 2, 8))]
    grid += [(path, s, n, p, e) for path in ("split", "vector") for s, n, p, e in
             itertools.product(("hi", "twopoint"), (500, 5000), (0.5, 0.8, 0.95), (0.5, 2, 8))]
    t0 = time.time()
    for k, (path, shape, n, share, eps) in enumerate(grid):
        rng = np.random.default_rng(10_000 + k)
        x, null = SHAPES[shape](rng, n), rng.random(n) < share
        if null.all():
            null[0] = False
        truth = 5 + 5 * float(x[~null].mean())
        ests, deltas = releases(path, x, null, eps, runs, rng)
        fit = {c: [(path == "vector" and column(e, 0, c)) or with_interval(e, c) for e in ests] for c in (0.95, 0.9)}
        cover = {c: np.array([e.interval[0][0] <= truth <= e.interval[1][0] for e in fit[c]]) for c in fit}
        flag = np.array([bool(e.note) for e in fit[0.95]])
        whole = np.array([e.interval[0][0] == LO and e.interval[1][0] == HI for e in fit[0.95]])
        width = np.array([e.interval[1][0] - e.interval[0][0] for e in fit[0.95]])
        row = [path, shape, n, share, eps, runs, f"{truth:.4f}", f"{flag.mean():.3f}", f"{whole.mean():.3f}",
               f"{cover[0.95].mean():.3f}", f"{cover[0.9].mean():.3f}"]
        un = f"{cover[0.95][~flag].mean():.3f}" if (~flag).any() else ""
        if deltas:
            dcov = {c: np.array([d[c][0] <= truth <= d[c][1] for d in deltas]) for c in (0.95, 0.9)}
            dwidth = np.array([d[0.95][1] - d[0.95][0] for d in deltas])
            both = cover[0.95] & dcov[0.95]
            dun = f"{dcov[0.95][~flag].mean():.3f}" if (~flag).any() else ""
            row += [f"{dcov[0.95].mean():.3f}", f"{dcov[0.9].mean():.3f}", un, int((~flag).sum()), dun,
                    f"{width.mean():.4g}", f"{dwidth.mean():.4g}", f"{width[both].mean():.4g}",
                    f"{dwidth[both].mean():.4g}"]
        else:
            row += ["", "", un, int((~flag).sum()), "", f"{width.mean():.4g}", "", "", ""]
        rows.append(",".join(map(str, row)))
        print(f"{k + 1}/{len(grid)} {time.time() - t0:.0f}s", rows[-1], flush=True)
    with open("examples/fieller/coverage.csv", "w") as fh:
        fh.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
