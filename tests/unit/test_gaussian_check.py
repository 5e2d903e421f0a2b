"""The declared-σ check of the Gaussian protocols (Joseph, Kulkarni, Mao, Wu, "Locally Private Gaussian
Estimation", NeurIPS 2019; audit6 F3): the cell probabilities against a direct sum, the likelihood-ratio test's
false-alarm rate at the declared σ and its power at a σ ten times off, on round-1 counts drawn as the protocol
draws them (4-ary randomized response of ⌊x'/2^j⌋ mod 4), and the profile interval's coverage with σ free."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr

from ldpql.mechanisms import gaussian as G
from ldpql.mechanisms import gaussian_check as C
from ldpql.mechanisms.grr import GRR


def _direct(mu, sigma, shift, width, r):
    cells = np.arange(-5000, 5000)
    mass = ndtr(((cells + 1) * width + shift - mu) / sigma) - ndtr((cells * width + shift - mu) / sigma)
    return np.array([mass[np.mod(cells, r) == a].sum() for a in range(r)])


def test_class_probabilities_match_a_direct_sum_on_both_branches():
    rng = np.random.default_rng(0)
    for _ in range(200):
        width, r = 2.0 ** rng.integers(-2, 4), int(rng.choice([2, 4]))
        mu, shift, sigma = rng.uniform(-40, 40), rng.uniform(-3, 3), width * 2.0 ** rng.uniform(-6, 3)
        got = C.class_probabilities(mu, sigma, shift, width, r)[0]
        assert np.abs(got - _direct(mu, sigma, shift, width, r)).max() < 1e-12, (mu, sigma, shift, width, r)


def _round_one(s: G.Setting, mu: float, sigma: float, k: int, rng):
    """Round 1 as the protocol runs it: k users per level report ⌊x'/2^j⌋ mod 4 through GRR(4)."""
    rr, counts, users = GRR(s.epsilon, 4), {}, {}
    for j in range(s.lmin, s.lmax + 1):
        x = np.clip(rng.normal(mu, sigma, k), s.origin, s.origin + s.width) - s.origin
        counts[j] = rr.sample_aggregate(np.bincount(G.LevelEncoding(None, 4, "", level=j).inputs(x), minlength=4),
                                        rng)
        users[j] = k
    _, _, mu1, stop = G._coarse(s, counts, users)
    return G._level_cells(counts, rr), C.Search(mu1, 2.0 ** stop, 2.0 ** s.lmin / 64, 2.0 ** (s.lmax + 1))


@pytest.mark.parametrize("declared, true, flagged_at_most, flagged_at_least", [
    ((1.0, 1.0), 1.0, 2, 0),        # false alarms at the declared σ: ALPHA = 1% of 36 expected (0.36), 2 allowed
    ((0.25, 16.0), 3.0, 2, 0),      # a σ range holding the true σ
    ((10.0, 10.0), 1.0, 36, 36),    # ten times too large: every run flagged
    ((1.0, 1.0), 10.0, 36, 36),     # ten times too small
])
def test_the_check_flags_a_wrong_sigma_and_rarely_a_right_one(declared, true, flagged_at_most, flagged_at_least):
    rng = np.random.default_rng(17)
    s = G.Setting(-1000, 1000, *declared, 1.0, 0.0125)
    flags = 0
    for _ in range(36):   # (60 before session 12: suite time)
        cells, search = _round_one(s, rng.uniform(-900, 900), true, 4000, rng)
        flags += C.check_sigma(cells, declared, search).flagged
    assert flagged_at_least <= flags <= flagged_at_most


def test_profile_interval_covers_mu_with_sigma_free():
    """Round 1 alone, σ free: the profile-likelihood interval at 95% covers µ (40 runs, σ 10 times the declared)."""
    rng = np.random.default_rng(3)
    s = G.Setting(-1000, 1000, 1.0, 1.0, 1.0, 0.0125)
    hits = 0
    for _ in range(40):
        mu = rng.uniform(-900, 900)
        cells, search = _round_one(s, mu, 10.0, 4000, rng)
        _, low, high, sigma = C.profile_estimate(cells, search, 0.95, selected=False)
        hits += low <= mu - s.origin <= high
        assert 5 < sigma < 20
    assert hits >= 34
