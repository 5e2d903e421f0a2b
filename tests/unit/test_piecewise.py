"""The discretized Piecewise Mechanism (Wang et al., ICDE 2019): one output lattice for every input (against the
floating-point attack of Mironov, CCS 2012), exact privacy audits tight from both sides, an unbiased estimator
and its variance checked exactly on the enumerated output distribution and statistically on the sampler."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ldpql.audit import audit, realised_audit
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise

EPSILONS = (0.1, 0.5, 1.0, 4.0, 8.0, 20.0)


def _continuous_variance(eps: float, x2: float) -> float:
    """Wang et al.'s per-user variance of the continuous PM."""
    t = math.exp(eps / 2)
    return x2 / (t - 1) + (t + 3) / (3 * (t - 1) ** 2)


def _moments(r: Piecewise, x: float) -> tuple[float, float, float]:
    """E[y], E[y²] and E[(y − E y)^4] of one report, from the realised (as drawn) output distribution."""
    p = np.array([float(v) for v in r.realised_distribution(x)])
    mean = float(p @ r.values)
    return mean, float(p @ r.values ** 2), float(p @ (r.values - mean) ** 4)


@pytest.mark.parametrize("eps", EPSILONS)
def test_every_input_draws_from_the_same_finite_set_and_reaches_all_of_it(eps):
    """The reports of −1, 0.3 and 1 are all among the M fixed values, and every value has positive probability
    under every input (so no report rules an input out, whatever its low bits)."""
    r, rng = Piecewise(eps), np.random.default_rng(41)
    for x in (-1.0, 0.3, 1.0):
        y = r.randomize(np.full(20_000, x), rng)
        assert np.isin(y, r.values).all()
        assert min(r.realised_distribution(x)) > 0
    assert len(np.unique(r.values)) == r.cells


@pytest.mark.parametrize("eps", EPSILONS)
def test_both_audits_pass_at_the_claim_and_fail_slightly_below_it(eps):
    """The formula's audit and the sampler's: the worst ratio is at most ε, and claiming ε(1 − 1e-3) would fail."""
    for r in (Piecewise(eps), Hybrid(eps)):
        for check in (audit, realised_audit):
            result = check(r)
            assert result.passed, (r, check)
            assert not replace(result, epsilon=eps * (1 - 1e-3)).passed, (r, check)


@pytest.mark.parametrize("eps", EPSILONS)
def test_reports_are_unbiased_and_the_variance_bound_holds_exactly(eps):
    """On the enumerated distribution: E[y] = x; E[y²] = a + g·E[x_j²]; the per-user variance is at most the
    bound :meth:`Piecewise.variance` uses, and above it by no more than the rounding allowance g·Δ²/4."""
    r = Piecewise(eps)
    for x in (-1.0, -0.77, 0.0, 0.3, 0.123456789, 1.0):
        mean, second, _ = _moments(r, x)
        assert mean == pytest.approx(x, abs=1e-9)
        j, up = r._grid(np.array([x]))
        grid = -1 + 2 * (j[0] + np.array([0, 1])) / r.steps
        q = (1 - up[0]) * grid[0] ** 2 + up[0] * grid[1] ** 2   # E[x_j²] of the rounded input
        assert second == pytest.approx(r.floor + r.g * q, rel=1e-9)
        bound = float(r.variance(np.array([x]), 1, second_moment=x * x)[0])
        assert bound - r.rounding - 1e-12 * bound <= second - mean ** 2 <= bound * (1 + 1e-9)


@pytest.mark.parametrize("eps, x", [(0.5, 0.3), (1.0, -0.77), (4.0, 0.123456789), (8.0, 1.0)])
def test_sampler_mean_and_variance_match_the_enumerated_distribution(eps, x):
    """400,000 reports: the sample mean within 5 standard errors of x, the sample variance within 5 of its own
    standard errors (from the exact fourth central moment) of the exact variance."""
    r, rng, n = Piecewise(eps), np.random.default_rng(42), 400_000
    y = r.randomize(np.full(n, x), rng)
    mean, second, fourth = _moments(r, x)
    var = second - mean ** 2
    assert abs(y.mean() - x) < 5 * math.sqrt(var / n)
    assert abs(y.var(ddof=1) - var) < 5 * math.sqrt((fourth - var ** 2) / n)


def test_the_sampler_check_catches_a_biased_scale():
    """The same mean check fails for a sampler whose reports miss the 1/s scale by 2% (a broken estimator)."""
    r, rng, n = Piecewise(1.0), np.random.default_rng(43), 400_000
    y = r.randomize(np.full(n, 0.9), rng) * 0.98
    _, second, _ = _moments(r, 0.9)
    assert abs(y.mean() - 0.9) > 5 * math.sqrt((second - 0.81) / n)


@pytest.mark.parametrize("eps", (0.5, 1.0, 4.0, 8.0))
def test_variance_is_within_one_percent_of_the_continuous_mechanism(eps):
    """Measured (module docstring): ratios 1.00001-1.00045 at ε ≤ 4, 0.996 at ε = 8, at x = 0 and |x| = 1."""
    r = Piecewise(eps)
    for x2 in (0.0, 1.0):
        ratio = float(r.variance(np.zeros(1), 1, second_moment=x2)[0]) / _continuous_variance(eps, x2)
        assert abs(ratio - 1) < 0.01, (eps, x2, ratio)


def test_hybrid_reports_come_from_one_finite_set_for_every_input():
    r, rng = Hybrid(2.0), np.random.default_rng(44)
    allowed = np.concatenate([r.pm.values, [-r.duchi.C, r.duchi.C]])
    for x in (-1.0, 0.3, 1.0):
        out = r.randomize(np.full(20_000, x), rng)
        assert np.isin(out[out[:, 1] == 1, 0], r.pm.values).all() and np.isin(out[:, 0], allowed).all()
