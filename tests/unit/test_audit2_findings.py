"""Findings of the hostile review of the 'means' merge (audit2): each test shows a defect and is marked
``xfail(strict=True)`` so that it starts to fail (XPASS) when the defect is fixed; the lead then unmarks it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise

TWO53 = 2.0 ** 53


def _left(pm: Piecewise, x: float) -> float:
    """ℓ(x) computed with the same float operations as :meth:`Piecewise.randomize`."""
    left = np.clip(np.array([x], dtype=float), -1, 1)
    left *= (pm.C + 1) / 2
    left -= (pm.C - 1) / 2
    return float(left[0])


def _band_reachable(pm: Piecewise, x: float, y: np.ndarray) -> np.ndarray:
    """Whether each float y can come out of the band branch for input x: is there a k in 0..2^53-1 with
    fl(fl(k/2^53 · (C−1)) + ℓ(x)) == y (the sampler's own operations, in its order)?"""
    left, width = _left(pm, x), pm.C - 1
    k0 = np.floor((y - left) / width * TWO53)
    hit = np.zeros(len(y), dtype=bool)
    for d in range(-6, 7):
        k = k0 + d
        hit |= ((k / TWO53) * width + left == y) & (k >= 0) & (k < TWO53)
    return hit


def _distinguishing_ratio(pm_outputs, pm: Piecewise, x1: float, x2: float, n: int, seed: int):
    """P(S | x1) and P(S | x2) for S = the outputs in both bands that x1's band branch can produce and x2's
    cannot. By the density formula the ratio is at most e^ε (both inputs have the high density there)."""
    (l1, r1), (l2, r2) = (pm._interval(np.float64(x)) for x in (x1, x2))
    lo, hi = max(l1, l2), min(r1, r2)
    rng = np.random.default_rng(seed)
    freq = []
    for x in (x1, x2):
        y = pm_outputs(x, n, rng)
        s = (y >= lo) & (y <= hi) & _band_reachable(pm, x1, y) & ~_band_reachable(pm, x2, y)
        freq.append(s.mean())
    return freq


@pytest.mark.xfail(strict=True, reason="audit2 finding 1 (privacy): PM's float outputs u·(C−1)+ℓ(x) lie on a "
                   "lattice that depends on x, so an output's last bits tell inputs apart far beyond e^ε")
@pytest.mark.parametrize("epsilon, x1, x2", [(0.1, 0.0, 0.5), (1.0, 0.0, 0.3), (4.0, 0.0, 0.1)])
def test_piecewise_sampler_is_epsilon_ldp_on_its_float_outputs(epsilon, x1, x2):
    pm = Piecewise(epsilon)
    p1, p2 = _distinguishing_ratio(lambda x, n, rng: pm.randomize(np.full(n, x), rng), pm, x1, x2, 50_000, 5)
    # measured: p1 = 0.35, 0.32, 0.33; p2 = 0 (50,000 draws, not one hit). With 50,000 draws, p2 < e^-ε·p1 / 2 would be
    # rejected if the sampler were ε-LDP: the count under x2 would be ~Binomial(50,000, ≥ e^-ε·p1), i.e. thousands.
    assert p2 >= math.exp(-epsilon) * p1 / 2, (p1, p2)


@pytest.mark.xfail(strict=True, reason="audit2 finding 1 (privacy): the Hybrid Mechanism's PM branch inherits "
                   "PM's input-dependent float lattice; the realised audit covers branch probabilities only")
def test_hybrid_sampler_is_epsilon_ldp_on_its_float_outputs():
    hm = Hybrid(1.0)

    def pm_branch(x, n, rng):   # the reports that carry the PM flag (the flag itself is independent of x)
        out = hm.randomize(np.full(n, x), rng)
        y = out[:, 0].copy()
        y[out[:, 1] != 1] = np.nan   # a Duchi report is not in S
        return y

    p1, p2 = _distinguishing_ratio(pm_branch, hm.pm, 0.0, 0.3, 80_000, 6)
    assert p2 >= math.exp(-1.0) * p1 / 2, (p1, p2)
