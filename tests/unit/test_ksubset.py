"""The k-subset mechanism (seed 002, spec §2 and §8): channel, sampler, estimator, risk, choice of k, Table 1.

Statistical checks use fixed seeds and |z| < 5 style thresholds; each is paired with a deliberately broken
variant (a wrong ε, a dropped debias, the wrong simulation model) that the same check rejects.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldpql.audit import audit
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.information import subset_information
from ldpql.mechanisms.ksubset import KSubset, hit_rates, independent_counts, subset_size, total_risk
from ldpql.mechanisms.unary import BRR

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _paper_module():
    spec = importlib.util.spec_from_file_location("ksubset_paper", EXAMPLES / "ksubset_paper.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _subset_index(reports: np.ndarray, d: int, k: int) -> np.ndarray:
    """Each bitmap report's position in itertools.combinations(range(d), k) order."""
    position = {sum(1 << i for i in z): j for j, z in enumerate(itertools.combinations(range(d), k))}
    codes = reports.astype(np.int64) @ (1 << np.arange(d))
    return np.array([position[c] for c in codes])


# ---- the channel and the worked example (spec §2.1, §2.5) ---------------------------------------------------

def test_worked_example_of_the_spec():
    d, eps, k = 4, math.log(3), 2
    p, q = hit_rates(d, k, eps)
    assert (p, q) == pytest.approx((3 / 4, 5 / 12))
    assert total_risk(d, k, eps) == pytest.approx(8.25)
    assert subset_information(d, k, eps) == pytest.approx(math.log(0.5) + 0.75 * math.log(3))
    probs = KSubset(eps, d, k).output_distribution(0)
    assert sorted(set(np.round(probs, 12))) == pytest.approx([1 / 12, 1 / 4])
    assert total_risk(d, 1, eps) == pytest.approx(6.0)  # MRR, d = 4, e^ε = 3


@pytest.mark.parametrize("d", [2, 3, 5, 7])
def test_channel_rows_sum_to_one_and_the_ratio_is_exactly_e_eps(d):
    for k in range(1, d):
        for eps in (0.05, 1.0, 3.0):
            r = KSubset(eps, d, k)
            table = np.array([r.output_distribution(x) for x in range(d)])
            assert np.allclose(table.sum(axis=1), 1.0)
            assert np.log(table.max(axis=0) / table.min(axis=0)).max() == pytest.approx(eps, abs=1e-12)
            result = audit(r)
            assert result.passed and result.max_log_ratio > eps - 1e-9


def test_hit_rates_match_the_channel():
    for d, k, eps in ((5, 2, 1.0), (6, 3, 0.3), (7, 1, 2.0)):
        r = KSubset(eps, d, k)
        subsets = list(itertools.combinations(range(d), k))
        probs = r.output_distribution(0)
        assert sum(pr for z, pr in zip(subsets, probs) if 0 in z) == pytest.approx(r.p)
        assert sum(pr for z, pr in zip(subsets, probs) if 1 in z) == pytest.approx(r.q)
    assert hit_rates(10, 3, 800.0) == pytest.approx((1.0, 2 / 9))  # large ε stays finite


# ---- the sampler (spec §2.3) -------------------------------------------------------------------------------

@pytest.mark.parametrize("d, k, x", [(5, 2, 3), (5, 2, 0), (5, 4, 4), (6, 1, 2), (7, 3, 6)])
def test_sampler_draws_the_audited_channel(d, k, x):
    r, rng = KSubset(1.0, d, k), np.random.default_rng(d * 10 + k)
    reports = r.randomize(np.full(40_000, x), rng)
    assert np.all(reports.sum(axis=1) == k)
    observed = np.bincount(_subset_index(reports, d, k), minlength=math.comb(d, k))
    assert stats.chisquare(observed, r.output_distribution(x) * len(reports)).pvalue > 1e-4


def test_sampler_check_catches_a_wrong_inclusion_probability():
    class Overinclusive(KSubset):
        def __init__(self, eps, d, k):
            super().__init__(eps, d, k)
            self.miss_threshold = KSubset(1.3 * eps, d, k).miss_threshold  # includes x as if ε were 30% larger

    r, rng = Overinclusive(1.0, 5, 2), np.random.default_rng(3)
    reports = r.randomize(np.full(40_000, 1), rng)
    observed = np.bincount(_subset_index(reports, 5, 2), minlength=10)
    assert stats.chisquare(observed, KSubset(1.0, 5, 2).output_distribution(1) * 40_000).pvalue < 1e-6


def test_sampler_handles_many_users_and_large_domains():
    rng = np.random.default_rng(4)
    r = KSubset(1.0, 300, 80)
    x = rng.integers(0, 300, 20_000)  # more than one block of users
    reports = r.randomize(x, rng)
    assert reports.shape == (20_000, 300) and np.all(reports.sum(axis=1) == 80)
    inside = reports[np.arange(len(x)), x].mean()
    assert abs(inside - r.p) < 5 * math.sqrt(r.p * (1 - r.p) / len(x))
    others = (reports.sum() - reports[np.arange(len(x)), x].sum()) / (len(x) * 299)
    assert abs(others - r.q) < 5 * math.sqrt(r.q * (1 - r.q) / (len(x) * 299)) * 3
    # the others are uniform: users holding 0, by category 1..299, against equal counts (Floyd favouring
    # low or high categories would show here; the line above follows from the row sums alone)
    zero = r.randomize(np.zeros(20_000, dtype=np.int64), rng)[:, 1:].sum(axis=0)
    assert stats.chisquare(zero).pvalue > 1e-4


# ---- the estimator (spec §2.4-2.5) -------------------------------------------------------------------------

N, R = 2000, 1500


def _data(d: int, rng) -> np.ndarray:
    probs = np.arange(1, d + 1, dtype=float)
    return rng.choice(d, N, p=probs / probs.sum())


def _per_user_estimates(r, x, rng, estimator=None):
    est = estimator or r
    return np.array([est.estimate(r.aggregate(r.randomize(x, rng)), len(x)) for _ in range(R)])


def _z_mean(r, x, est) -> float:
    truth = np.bincount(x, minlength=r.input_size) / len(x)
    return float(np.max(np.abs(est.mean(axis=0) - truth) / np.sqrt(r.variance(truth, len(x)) / len(est))))


def _z_variance(r, x, est) -> float:
    closed = r.variance(np.bincount(x, minlength=r.input_size) / len(x), len(x))
    return float(np.max(np.abs(est.var(axis=0, ddof=1) - closed) / (closed * math.sqrt(2 / (len(est) - 1)))))


@pytest.fixture(scope="module")
def ksubset_runs():
    r, rng = KSubset(1.0, 6, 2), np.random.default_rng(21)
    x = _data(6, rng)
    return r, x, _per_user_estimates(r, x, rng)


def test_estimator_is_unbiased_with_the_closed_form_variance(ksubset_runs):
    r, x, est = ksubset_runs
    assert _z_mean(r, x, est) < 5 and _z_variance(r, x, est) < 5


def test_estimates_sum_to_one_exactly(ksubset_runs):
    _, _, est = ksubset_runs
    assert np.max(np.abs(est.sum(axis=1) - 1)) < 1e-12


def test_total_risk_matches_the_closed_form(ksubset_runs):
    _, x, est = ksubset_runs
    truth = np.bincount(x, minlength=6) / len(x)
    per_run = np.sum((est - truth) ** 2, axis=1)
    z = (per_run.mean() - total_risk(6, 2, 1.0) / len(x)) / (per_run.std(ddof=1) / math.sqrt(len(per_run)))
    assert abs(z) < 5


def test_checks_catch_a_wrong_epsilon_and_a_dropped_debias(ksubset_runs):
    r, x, _ = ksubset_runs
    rng = np.random.default_rng(22)
    wrong = _per_user_estimates(r, x, rng, estimator=KSubset(1.2, 6, 2))
    assert _z_mean(r, x, wrong) > 5
    raw = np.array([r.aggregate(r.randomize(x, rng)) / len(x) for _ in range(300)])  # c/n, not debiased
    assert _z_mean(r, x, raw) > 5


def test_least_squares_estimator_equals_the_remapping_estimator():
    """Spec §2.4: (AᵀA)⁻¹Aᵀŷ over all C(d,k) subsets equals the cheap remapping estimator, for any ŷ."""
    d, k, eps = 5, 2, 0.7
    r = KSubset(eps, d, k)
    A = np.array([r.output_distribution(x) for x in range(d)]).T          # subsets x inputs
    members = np.array([[i in z for i in range(d)] for z in itertools.combinations(range(d), k)], dtype=float)
    for seed in range(3):
        y = np.random.default_rng(seed).dirichlet(np.ones(len(A)))
        assert np.allclose(np.linalg.lstsq(A, y, rcond=None)[0], r.estimate(members.T @ y, 1))


def test_independent_counts_are_the_per_item_marginal_model():
    rng = np.random.default_rng(23)
    counts = np.array([[100, 300, 600], [0, 0, 1000]])
    draws = np.array([independent_counts(counts, 0.6, 0.2, rng) for _ in range(4000)])
    assert draws.shape == (4000, 2, 3)
    mean = counts * 0.6 + (1000 - counts) * 0.2
    var = counts * 0.24 + (1000 - counts) * 0.16
    assert np.max(np.abs(draws.mean(axis=0) - mean) / np.sqrt(var / 4000)) < 5


# ---- choosing k (spec §2.6) --------------------------------------------------------------------------------

def _brute_k(d: int, eps: float, objective: str) -> int:
    if d == 2:
        return 1
    if objective == "l2":
        return min(range(1, d), key=lambda k: (total_risk(d, k, eps), k))
    return min(range(1, d), key=lambda k: (-subset_information(d, k, eps), k))


@pytest.mark.parametrize("objective", ["l2", "mi"])
def test_floor_ceil_rule_equals_the_brute_force_optimum(objective):
    for d in (2, 3, 4, 5, 7, 10, 16, 33, 64, 100, 257):
        for eps in np.geomspace(0.005, 9, 23):
            assert subset_size(d, float(eps), objective) == _brute_k(d, float(eps), objective), (d, eps)


def test_all_table_1_subset_sizes_are_reproduced():
    rows = _paper_module().paper_table()
    assert len(rows) == 41
    for row in rows:
        assert (subset_size(row["d"], row["epsilon"], "mi"), subset_size(row["d"], row["epsilon"], "l2")) == \
            (row["k_MI"], row["k_L2"]), row


@pytest.mark.parametrize("d, l2_threshold, mi_threshold", [(4, 0.549, 0.822), (8, 1.522, 2.246), (16, 2.327, 3.370),
                                                           (64, 3.789, 5.283), (256, 5.193, 7.001)])
def test_k_becomes_one_at_the_stated_thresholds(d, l2_threshold, mi_threshold):
    exact = math.log(math.sqrt((d - 1) * (d - 2) / 2))
    assert exact == pytest.approx(l2_threshold, abs=5e-4)
    assert subset_size(d, exact * (1 + 1e-9), "l2") == 1 and subset_size(d, exact * (1 - 1e-4), "l2") == 2
    assert subset_size(d, mi_threshold + 2e-3, "mi") == 1 and subset_size(d, mi_threshold - 2e-3, "mi") == 2


def test_mi_optimal_k_is_never_below_the_l2_optimal_k():
    for d in (3, 8, 40, 300):
        for eps in np.geomspace(0.01, 8, 15):
            assert subset_size(d, float(eps), "mi") >= subset_size(d, float(eps), "l2")


def test_no_hybrid_subset_mechanism_beats_the_l2_optimal_one():
    """Thm 3.2 (spec §4.4): any mixture over |Z| = k of k-subset channels has risk ≥ min_k risk(k)."""
    rng = np.random.default_rng(24)
    for _ in range(300):
        d, eps = int(rng.integers(3, 30)), float(rng.uniform(0.05, 6))
        w = rng.dirichlet(np.full(d + 1, 0.3))
        p, q = np.array([hit_rates(d, k, eps) for k in range(d + 1)]).T
        alpha, beta = w @ p, w @ q
        hybrid = (alpha * (1 - alpha) + (d - 1) * beta * (1 - beta)) / (alpha - beta) ** 2
        assert hybrid >= total_risk(d, subset_size(d, eps, "l2"), eps) * (1 - 1e-9)


def test_brr_is_the_hybrid_with_binomial_sizes():
    d, eps = 9, 1.3
    r = BRR(eps, d)
    sizes = np.arange(d + 1)
    w = r.p * stats.binom.pmf(sizes - 1, d - 1, r.q) + (1 - r.p) * stats.binom.pmf(sizes, d - 1, r.q)
    p, q = np.array([hit_rates(d, k, eps) for k in sizes]).T
    assert (w @ p, w @ q) == pytest.approx((r.p, r.q))


def test_subset_size_one_is_grr():
    for d, eps in ((4, 1.0), (10, 0.3)):
        assert hit_rates(d, 1, eps) == pytest.approx((GRR(eps, d).p, GRR(eps, d).q))


# ---- Table 1, reduced (spec §5.3-5.4; the full run is examples/reproduce_ksubset.py) ------------------------

def test_table_1_reduced_reproduction_in_the_papers_model():
    kp = _paper_module()
    chosen = [r for r in kp.paper_table() if (r["d"], r["epsilon"]) in
              {(32, 1.0), (32, 3.0), (64, 0.5), (64, 2.0), (128, 3.0), (256, 1.0), (256, 5.0)}]
    records = kp.reproduce(chosen, repeats=300, sim="marginal", seed=5)
    ratios = kp.ratios(records, (32, 256))
    assert len(ratios) == 7 * 8
    assert np.all(np.abs(ratios - 1) < 0.10) and abs(np.median(ratios) - 1) < 0.03


def test_per_user_model_gives_d_over_d_minus_1_times_the_papers_error():
    """Spec §5.2: the paper's per-item counts hide the dependence inside one report; with real reports the
    projected error of MRR and k-SS is about d/(d−1) times larger, while BRR (independent bits) is unchanged."""
    kp = _paper_module()
    marginal = kp.errors(4, 1.0, repeats=1000, sim="marginal", seed=6)
    per_user = kp.errors(4, 1.0, repeats=1000, sim="per_user", seed=6)
    ratio = {name: per_user[name][0] / marginal[name][0] for name in kp.MECHANISMS}
    # at d = 4, ε = 1 both k's are 1: MRR, MI-SS and L2-SS are one mechanism, three independent runs of it
    assert 1.2 < np.mean([ratio["MRR"], ratio["MI-SS"], ratio["L2-SS"]]) < 1.55  # d/(d-1) = 1.33, projected
    assert abs(ratio["BRR"] - 1) < 0.1
