"""Every mechanism's estimator, tested statistically with fixed seeds (DESIGN §5).

For each randomizer: the mean of R estimates is within 5 standard errors of the truth (unbiasedness), the
empirical variance is within 5 of its own standard errors of the closed form, the exact-aggregate path agrees
with the per-user path in distribution, and a deliberately broken variant (a wrong ε in the estimator, a
dropped debias) fails the same checks, so the checks can catch a broken mechanism.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldpql.mechanisms.base import Randomizer
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.hybrid import Hybrid, pm_share
from ldpql.mechanisms.oue import OUE, column_counts
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.rr import RandomizedResponse, flip, keep_probability

N, R = 2000, 2000


def _finite_data(d: int, rng) -> np.ndarray:
    probs = np.arange(1, d + 1, dtype=float)
    return rng.choice(d, N, p=probs / probs.sum())


def _estimates(r: Randomizer, x: np.ndarray, runs: int, rng, path: str, estimator: Randomizer | None = None):
    est = estimator or r
    counts = np.bincount(x, minlength=r.input_size) if path == "exact" else None
    out = []
    for _ in range(runs):
        summary = r.sample_aggregate(counts, rng) if path == "exact" else r.aggregate(r.randomize(x, rng))
        out.append(est.estimate(summary, len(x)))
    return np.array(out)


def _truth(r: Randomizer, x: np.ndarray) -> np.ndarray:
    if r.estimates == "histogram":
        return np.bincount(x, minlength=r.input_size) / len(x)
    if r.estimates == "ones":
        return np.array([np.mean(x)])
    return np.array([np.mean(x)])


def _closed_variance(r: Randomizer, x: np.ndarray) -> np.ndarray:
    truth = _truth(r, x)
    if r.estimates == "mean":
        return r.variance(truth, len(x), second_moment=float(np.mean(x ** 2)))
    return r.variance(truth, len(x))


def max_abs_z(r, x, est, estimator=None) -> float:
    """Largest |z| of the mean estimate against the truth, using the closed-form standard error."""
    se = np.sqrt(_closed_variance(estimator or r, x) / len(est))
    return float(np.max(np.abs(est.mean(axis=0) - _truth(r, x)) / se))


def max_variance_z(r, x, est) -> float:
    """Largest |z| of the empirical variance against the closed form (sample variance sd ≈ σ²·sqrt(2/(R-1)))."""
    closed = _closed_variance(r, x)
    empirical = est.var(axis=0, ddof=1)
    return float(np.max(np.abs(empirical - closed) / (closed * math.sqrt(2 / (len(est) - 1)))))


FINITE = [pytest.param(lambda: RandomizedResponse(1.0), id="rr"),
          pytest.param(lambda: GRR(1.0, 5), id="grr-d5"),
          pytest.param(lambda: GRR(3.0, 20), id="grr-d20"),
          pytest.param(lambda: OUE(1.0, 5), id="oue-d5"),
          pytest.param(lambda: OUE(8.0, 4), id="oue-d4-large-eps")]
CONTINUOUS = [pytest.param(lambda: Duchi(1.0), id="duchi"), pytest.param(lambda: Duchi(0.3), id="duchi-small"),
              pytest.param(lambda: Piecewise(1.0), id="piecewise"),
              pytest.param(lambda: Piecewise(4.0), id="piecewise-large"),
              pytest.param(lambda: Hybrid(0.3), id="hybrid-below-threshold"), pytest.param(lambda: Hybrid(1.0), id="hybrid"),
              pytest.param(lambda: Hybrid(4.0), id="hybrid-large")]


def _data(r: Randomizer, rng):
    if r.input_size is None:
        return rng.uniform(-0.9, 0.6, N)
    return _finite_data(r.input_size, rng)


@pytest.mark.parametrize("make", FINITE + CONTINUOUS)
def test_per_user_unbiased_with_closed_form_variance(make):
    r, rng = make(), np.random.default_rng(7)
    x = _data(r, rng)
    est = _estimates(r, x, R, rng, "per_user")
    assert max_abs_z(r, x, est) < 5
    assert max_variance_z(r, x, est) < 5


@pytest.mark.parametrize("make", FINITE)
def test_exact_path_unbiased_and_agrees_with_per_user(make):
    r, rng = make(), np.random.default_rng(8)
    x = _data(r, rng)
    exact = _estimates(r, x, R, rng, "exact")
    per_user = _estimates(r, x, R, rng, "per_user")
    assert max_abs_z(r, x, exact) < 5 and max_variance_z(r, x, exact) < 5
    for j in range(exact.shape[1]):
        assert stats.ks_2samp(exact[:, j], per_user[:, j]).pvalue > 1e-4


class _WrongEpsilon(GRR):
    """GRR whose estimator believes ε is 20% larger than the randomizer used (a classic bug)."""

    def __init__(self, eps, d):
        super().__init__(eps * 1.2, d)


def test_checks_catch_a_wrong_epsilon_in_the_estimator():
    r, rng = GRR(1.0, 5), np.random.default_rng(9)
    x = _data(r, rng)
    est = _estimates(r, x, R, rng, "exact", estimator=_WrongEpsilon(1.0, 5))
    assert max_abs_z(r, x, est) > 5


def test_checks_catch_a_dropped_debias_factor():
    r, rng = OUE(1.0, 5), np.random.default_rng(10)
    x = _data(r, rng)
    raw = np.array([r.sample_aggregate(np.bincount(x, minlength=5), rng) / N for _ in range(R)])
    assert max_abs_z(r, x, raw) > 5


def test_checks_catch_a_wrong_variance_formula():
    r, rng = Duchi(1.0), np.random.default_rng(11)
    x = _data(r, rng)
    est = _estimates(r, x, R, rng, "per_user")
    broken = Duchi(1.5)  # its closed form is that of another ε
    closed = broken.variance(_truth(r, x), N, second_moment=float(np.mean(x ** 2)))
    z = abs(est.var(ddof=1) - closed) / (closed * math.sqrt(2 / (R - 1)))
    assert z > 5


def test_variance_matches_closed_form_at_n_1e5():
    """At n = 10^5 the empirical variance matches the closed form (the 10% figure of the issue is measured
    with more runs by examples/variance_check.py; here the tolerance is 5 sd of the sample variance)."""
    rng = np.random.default_rng(12)
    n, runs = 100_000, 600
    for r in (GRR(1.0, 10), OUE(1.0, 10), RandomizedResponse(1.0)):
        x = rng.choice(r.input_size, n)
        counts = np.bincount(x, minlength=r.input_size)
        est = np.array([r.estimate(r.sample_aggregate(counts, rng), n) for _ in range(runs)])
        ratio = est.var(axis=0, ddof=1) / r.variance(_truth(r, x), n)
        assert np.all(np.abs(ratio - 1) < 0.3)  # 600 runs: 5 sd of a sample variance is 0.29
    for r in (Duchi(1.0), Piecewise(1.0)):
        x = rng.uniform(-1, 1, n)
        est = np.array([r.estimate(r.aggregate(r.randomize(x, rng)), n) for _ in range(200)])[:, 0]
        closed = r.variance(np.array([x.mean()]), n, second_moment=float(np.mean(x ** 2)))[0]
        assert abs(est.var(ddof=1) / closed - 1) < 0.5  # 200 runs: 5 sd of a sample variance is 0.5


def test_rr_flip_keeps_with_the_stated_probability():
    rng = np.random.default_rng(13)
    bits = np.ones(200_000, dtype=np.int8)
    kept = flip(bits, 1.0, rng).mean()
    p = keep_probability(1.0)
    assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / len(bits))


def test_oue_uses_the_rounded_up_q_everywhere():
    r = OUE(1.0, 10)
    assert r.q >= 1 / (math.e + 1) and r.q - 1 / (math.e + 1) < 2 ** -16
    assert (1 - r.q) / r.q <= math.e


def test_oue_column_counts_match_numpy_sum():
    bits = np.random.default_rng(14).integers(0, 2, (1000, 7), dtype=np.uint8)
    assert np.array_equal(column_counts(bits), bits.sum(axis=0))


def test_piecewise_outputs_stay_in_range_and_mean_is_unbiased_at_the_edges():
    r, rng = Piecewise(2.0), np.random.default_rng(15)
    for value in (-1.0, 1.0, 0.0):
        y = r.randomize(np.full(200_000, value), rng)
        assert np.all(np.abs(y) <= r.C + 1e-12)
        se = math.sqrt(r.variance(np.array([value]), len(y), second_moment=value ** 2)[0])
        assert abs(y.mean() - value) < 5 * se


def test_randomizers_validate_their_parameters():
    for bad in (lambda: GRR(0, 5), lambda: GRR(1, 1), lambda: OUE(-1, 5), lambda: Duchi(0), lambda: Piecewise(0),
                lambda: RandomizedResponse(0)):
        with pytest.raises(ValueError):
            bad()


# ---- Hybrid Mechanism and the second moment of the release (issue 11) -------------------------------------------

def test_hybrid_variance_is_the_same_for_every_input_above_the_threshold_and_below_both_worst_cases():
    """Wang et al. (ICDE 2019): β = 1 − e^{−ε/2} cancels the x² terms; here β = 1/g does so for the discretized
    PM that runs, and the variance stays within 0.05% of Wang et al.'s closed form up to ε = 4 (0.5% at ε = 8; at
    ε = 16, where the band is one cell, it is 1.37× it); it is below the worst case of both PM and Duchi; at or
    below ε* ≈ 0.61 it is Duchi's mechanism."""
    for eps, rel in ((0.7, 5e-4), (1.0, 5e-4), (2.0, 5e-4), (4.0, 5e-4), (8.0, 5e-3), (16.0, None)):
        r = Hybrid(eps)
        per_x = [float(r.variance(np.array([x]), 1, second_moment=x * x)[0]) for x in np.linspace(-1, 1, 21)]
        assert max(per_x) - min(per_x) < 1e-9 * max(per_x)
        t = math.exp(eps / 2)
        if rel is not None:
            assert per_x[0] == pytest.approx((t + 3) / (3 * t * (t - 1)) + Duchi(eps).C ** 2 / t, rel=rel)
        assert per_x[0] < Duchi(eps).C ** 2 and per_x[0] < Piecewise(eps).variance(np.ones(1), 1)[0]
    assert pm_share(0.6) == 0 and pm_share(0.62) == pytest.approx(1 - math.exp(-0.31))


def test_hybrid_runs_each_branch_at_its_share_and_reports_the_branch():
    r, rng = Hybrid(2.0), np.random.default_rng(16)
    reports = r.randomize(np.full(100_000, 0.3), rng)
    pm = reports[:, 1] == 1
    assert abs(pm.mean() - r.beta) < 5 * math.sqrt(r.beta * (1 - r.beta) / len(pm))
    assert np.allclose(np.abs(reports[~pm, 0]), r.duchi.C)              # the Duchi branch: ±C_D
    assert np.all(np.abs(reports[pm, 0]) <= r.pm.C + 1e-12)
    summary = r.aggregate(reports)
    assert summary[2] == pm.sum() and summary[1] == pytest.approx(np.square(reports[pm, 0]).sum())


@pytest.mark.parametrize("make", [lambda: Piecewise(1.0), lambda: Piecewise(4.0), lambda: Hybrid(2.0)],
                         ids=["piecewise", "piecewise-large", "hybrid"])
def test_second_moment_of_the_release_is_unbiased(make):
    """E[x²] estimated from the reports: the mean of 400 estimates is within 5 standard errors of the truth, on
    data whose E[x²] is far from PM's worst case of 1."""
    r, rng = make(), np.random.default_rng(17)
    x = np.concatenate([rng.uniform(-0.2, 0.3, 1500), np.full(500, -0.9)])
    m2 = np.array([r.second_moment(r.aggregate(r.randomize(x, rng)), len(x)) for _ in range(400)])
    assert abs(m2.mean() - np.mean(x ** 2)) < 5 * m2.std(ddof=1) / math.sqrt(len(m2))


def test_second_moment_check_catches_a_wrong_floor():
    """The same check fails when the estimator forgets PM's constant term (E[y²] = x²·t/(t−1) + floor)."""
    r, rng = Piecewise(1.0), np.random.default_rng(18)
    x = rng.uniform(-0.5, 0.5, 2000)
    sums = np.array([r.aggregate(r.randomize(x, rng)) for _ in range(200)])
    naive = sums[:, 1] / len(x) * (r.t - 1) / r.t
    assert abs(naive.mean() - np.mean(x ** 2)) > 5 * naive.std(ddof=1) / math.sqrt(len(naive))


def test_duchi_release_has_no_second_moment():
    """Every Duchi report is ±C whatever x is: the release says nothing about E[x²]."""
    r = Duchi(1.0)
    assert r.second_moment(r.aggregate(r.randomize(np.zeros(10), np.random.default_rng(0))), 10) is None
