"""The frequency oracles beside k-SS (seed 002 §3-4, §6): BRR, OLH, Hadamard response, with GRR and OUE reused.

For each: the sampler draws the audited channel, the estimator is unbiased with its closed-form variance
(fixed seeds, |z| < 5, and broken variants that fail), exact and per-user paths agree in distribution; the
mutual information of every oracle equals brute-force enumeration on small d; the planner's ℓ2 ranking;
post-processing onto the simplex.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.linalg import hadamard

from ldpql.audit import audit
from ldpql.mechanisms import REGISTRY
from ldpql.mechanisms.base import debiased_total_variance
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.hadamard import HadamardResponse, parity
from ldpql.mechanisms.information import (channel_information, grr_information, hadamard_information,
                                          information_bound, local_hashing_information, mutual_information,
                                          subset_information, unary_information, walsh_hadamard)
from ldpql.mechanisms.ksubset import KSubset, subset_size, total_risk
from ldpql.mechanisms.olh import OLH, PRIME, collision_probability
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.rr import RandomizedResponse
from ldpql.mechanisms.unary import BRR
from ldpql.planner.histogram import ORACLES, postprocess, project_simplex

NEW = ("brr", "hadamard", "ksubset", "olh")


# ---- privacy: registered, audited exactly, tight, and the samplers draw the audited channel -------------------

def test_new_randomizers_are_registered_for_the_audit():
    assert set(NEW) <= set(REGISTRY)
    for name in NEW:
        cases = list(REGISTRY[name].audit_cases())
        assert len(cases) >= 10, name


@pytest.mark.parametrize("r", [r for name in NEW for r in REGISTRY[name].audit_cases()], ids=repr)
def test_audit_is_tight_from_both_sides(r):
    worst = audit(r).max_log_ratio
    assert worst <= r.epsilon + 1e-9 and worst > r.epsilon * (1 - 1e-3)


def _olh_index(reports: np.ndarray, r: OLH) -> np.ndarray:
    a, b, y = reports.T
    return ((a - 1) * r.prime + b) * r.g + y


def _brr_index(reports: np.ndarray) -> np.ndarray:
    d = reports.shape[1]
    return reports.astype(np.int64) @ (1 << np.arange(d)[::-1])  # itertools.product order: first bit is the MSB


@pytest.mark.parametrize("make, index", [
    (lambda: BRR(1.0, 3), _brr_index),
    (lambda: BRR(3.0, 4), _brr_index),
    (lambda: HadamardResponse(1.0, 5), lambda rep: rep),
    (lambda: HadamardResponse(2.5, 3), lambda rep: rep),
    (lambda: OLH(1.0, 4, prime=5), None),
    (lambda: GRR(1.0, 4), lambda rep: rep),
    (lambda: GRR(25.0, 3), lambda rep: rep),     # GRR's other branch: the redraw dominates when e^ε is huge
    (lambda: RandomizedResponse(0.7), lambda rep: rep.astype(np.int64)),
    (lambda: OUE(1.0, 3), _brr_index),
])
def test_samplers_draw_the_audited_channel(make, index):
    r, rng = make(), np.random.default_rng(31)
    for x in range(r.input_size):
        reports = r.randomize(np.full(30_000, x), rng)
        idx = _olh_index(reports, r) if index is None else index(reports)
        probs = r.output_distribution(x)
        observed = np.bincount(idx, minlength=len(probs))
        keep = probs > 0
        assert stats.chisquare(observed[keep], probs[keep] * len(reports)).pvalue > 1e-4, (r, x)


def test_sampler_check_catches_a_hadamard_response_without_the_flip():
    class NoFlip(HadamardResponse):
        def randomize(self, x, rng):
            return rng.integers(0, self.size, len(x))  # forgets to move j to the wanted side

    r, rng = NoFlip(2.0, 3), np.random.default_rng(32)
    observed = np.bincount(r.randomize(np.full(30_000, 1), rng), minlength=r.size)
    assert stats.chisquare(observed, HadamardResponse(2.0, 3).output_distribution(1) * 30_000).pvalue < 1e-6


# ---- estimators: unbiased, closed-form variance, broken variants fail ------------------------------------------

N, R = 2000, 1200


def _data(d: int, rng) -> np.ndarray:
    probs = np.arange(1, d + 1, dtype=float)
    return rng.choice(d, N, p=probs / probs.sum())


def _estimates(r, x, rng, path="per_user", estimator=None, runs=R) -> np.ndarray:
    est = estimator or r
    counts = np.bincount(x, minlength=r.input_size)
    draw = (lambda: r.sample_aggregate(counts, rng)) if path == "exact" else (lambda: r.aggregate(r.randomize(x, rng)))
    return np.array([est.estimate(draw(), len(x)) for _ in range(runs)])


def _z(r, x, est) -> tuple[float, float]:
    truth = np.bincount(x, minlength=r.input_size) / len(x)
    closed = r.variance(truth, len(x))
    z_mean = np.max(np.abs(est.mean(axis=0) - truth) / np.sqrt(closed / len(est)))
    z_var = np.max(np.abs(est.var(axis=0, ddof=1) - closed) / (closed * math.sqrt(2 / (len(est) - 1))))
    return float(z_mean), float(z_var)


ORACLE_CASES = [pytest.param(lambda: BRR(1.0, 5), id="brr"), pytest.param(lambda: BRR(4.0, 3), id="brr-large-eps"),
                pytest.param(lambda: OLH(1.0, 6), id="olh"), pytest.param(lambda: OLH(3.0, 8), id="olh-g21"),
                pytest.param(lambda: HadamardResponse(1.0, 6), id="hadamard"),
                pytest.param(lambda: HadamardResponse(3.0, 3), id="hadamard-large-eps"),
                pytest.param(lambda: KSubset(2.0, 9, 2), id="ksubset")]


@pytest.mark.parametrize("make", ORACLE_CASES)
def test_per_user_estimates_are_unbiased_with_closed_form_variance(make):
    r, rng = make(), np.random.default_rng(33)
    x = _data(r.input_size, rng)
    z_mean, z_var = _z(r, x, _estimates(r, x, rng))
    assert z_mean < 5 and z_var < 5


@pytest.mark.parametrize("make", [lambda: BRR(1.0, 5), lambda: HadamardResponse(1.0, 6), lambda: OUE(1.0, 5)])
def test_exact_path_agrees_with_per_user_in_distribution(make):
    r, rng = make(), np.random.default_rng(34)
    x = _data(r.input_size, rng)
    exact, per_user = _estimates(r, x, rng, "exact", runs=600), _estimates(r, x, rng, runs=600)
    assert _z(r, x, exact)[0] < 5 and _z(r, x, exact)[1] < 5
    assert min(stats.ks_2samp(exact[:, j], per_user[:, j]).pvalue for j in range(r.input_size)) > 1e-4


def test_hadamard_exact_path_replays_users_when_the_domain_is_large():
    r, rng = HadamardResponse(1.0, 40), np.random.default_rng(35)
    counts = np.bincount(rng.integers(0, 40, 100), minlength=40)  # d·K > 4n: users are replayed
    draws = np.array([r.sample_aggregate(counts, rng) for _ in range(3000)])
    expected = sum(c * r.output_distribution(x) for x, c in enumerate(counts))
    assert draws.sum(axis=1).tolist() == [100] * 3000
    assert stats.chisquare(draws.sum(axis=0), expected * 3000).pvalue > 1e-4


@pytest.mark.parametrize("make, wrong", [(lambda: OLH(1.0, 6), lambda: OLH(1.25, 6)),
                                         (lambda: HadamardResponse(1.0, 6), lambda: HadamardResponse(1.25, 6)),
                                         (lambda: BRR(1.0, 5), lambda: BRR(1.25, 5))])
def test_checks_catch_a_wrong_epsilon_in_the_estimator(make, wrong):
    r, rng = make(), np.random.default_rng(36)
    x = _data(r.input_size, rng)
    assert _z(r, x, _estimates(r, x, rng, estimator=wrong(), runs=400))[0] > 5


def test_checks_catch_a_dropped_debias():
    r, rng = OLH(1.0, 6), np.random.default_rng(37)
    x = _data(6, rng)
    raw = np.array([r.aggregate(r.randomize(x, rng)) / len(x) for _ in range(300)])
    assert _z(r, x, raw)[0] > 5


# ---- OLH's hash family and Hadamard's transform ----------------------------------------------------------

def test_olh_hash_is_plain_integer_arithmetic():
    r = OLH(1.0, 10)
    assert r.prime == PRIME == 2 ** 31 - 1 and r.g == 4
    a, b = np.array([3, 2 ** 31 - 2]), np.array([5, 2 ** 31 - 2])
    assert r.hash(a, b, np.array([7, 99_999])).tolist() == [26 % 4, ((2 ** 31 - 2) * 100_000 % PRIME) % 4]


@pytest.mark.parametrize("g, prime", [(2, 5), (3, 7), (4, 11), (5, 13), (20, 7)])
def test_olh_collision_probability_matches_enumeration(g, prime):
    hits = [((a * 1 + b) % prime) % g == ((a * 2 + b) % prime) % g
            for a, b in itertools.product(range(1, prime), range(prime))]
    assert collision_probability(g, prime) == pytest.approx(np.mean(hits))


def test_olh_aggregate_counts_every_supported_value():
    r, rng = OLH(2.0, 7), np.random.default_rng(38)
    reports = r.randomize(rng.integers(0, 7, 500), rng)
    brute = [sum(((a * v + b) % r.prime) % r.g == y for a, b, y in reports) for v in range(7)]
    assert r.aggregate(reports).tolist() == brute


def test_hadamard_transform_and_hits():
    for K in (2, 4, 16, 256):
        v = np.random.default_rng(K).random(K)
        assert np.allclose(walsh_hadamard(v), hadamard(K) @ v)
    r = HadamardResponse(1.0, 5)
    H = hadamard(r.size)
    assert np.array_equal(parity(np.arange(64) & 13), (hadamard(64)[13] < 0).astype(int))
    counts = np.random.default_rng(39).integers(0, 50, r.size)
    direct = [counts[H[x + 1] == 1].sum() for x in range(5)]
    assert np.allclose(r.hits(counts), direct)
    # every C_x has K/2 outputs and two of them share K/4: hence q = 1/2 exactly
    inside = H[1:6] == 1
    assert np.all(inside.sum(axis=1) == r.size // 2)
    assert np.all((inside[:, None] & inside[None]).sum(axis=2)[~np.eye(5, dtype=bool)] == r.size // 4)


# ---- mutual information (spec §4) ------------------------------------------------------------------------

def _channel(r) -> np.ndarray:
    return np.array([r.output_distribution(x) for x in range(r.input_size)])


@pytest.mark.parametrize("make", [lambda: KSubset(1.0, 5, 2), lambda: KSubset(3.0, 6, 1), lambda: KSubset(0.2, 6, 4),
                                  lambda: GRR(0.5, 5), lambda: BRR(1.0, 4), lambda: BRR(5.0, 3), lambda: OUE(1.0, 4),
                                  lambda: OUE(6.0, 3), lambda: HadamardResponse(1.0, 5),
                                  lambda: HadamardResponse(2.0, 3)])
def test_closed_form_information_equals_brute_force(make):
    r = make()
    assert mutual_information(r) == pytest.approx(channel_information(_channel(r)), rel=1e-9, abs=1e-12)


def test_local_hashing_information_equals_enumerating_every_hash_function():
    for d, g, eps in ((4, 3, 1.0), (3, 2, 0.5), (5, 2, 2.0)):
        e = math.exp(eps)
        p, q = e / (e + g - 1), 1 / (e + g - 1)
        funcs = list(itertools.product(range(g), repeat=d))
        channel = np.array([[(p if f[x] == y else q) / len(funcs) for f in funcs for y in range(g)]
                            for x in range(d)])
        assert local_hashing_information(d, eps, g) == pytest.approx(channel_information(channel), rel=1e-9)


@pytest.mark.parametrize("eps, d, i_mrr, i_brr, i_mi, k_mi, i_l2, k_l2", [
    (0.1, 64, 0.00008, 0.00123, 0.00125, 31, 0.00125, 30), (0.5, 16, 0.00977, 0.02912, 0.03109, 7, 0.03090, 6),
    (1, 2, 0.11094, 0.05880, 0.11094, 1, 0.11094, 1), (1, 64, 0.01487, 0.12046, 0.12329, 22, 0.11979, 17),
    (2, 16, 0.32408, 0.42782, 0.47315, 3, 0.44001, 2), (3, 64, 0.46425, 0.93144, 1.00725, 7, 0.85178, 3),
    (5, 256, 1.38468, 2.10052, 2.41772, 7, 1.92813, 2)])
def test_reference_information_values_of_the_spec(eps, d, i_mrr, i_brr, i_mi, k_mi, i_l2, k_l2):
    brr = BRR(eps, d)
    assert grr_information(d, eps) == pytest.approx(i_mrr, abs=1e-5)
    assert unary_information(d, brr.p, brr.q) == pytest.approx(i_brr, abs=1e-5)
    assert (subset_size(d, eps, "mi"), subset_size(d, eps, "l2")) == (k_mi, k_l2)
    assert subset_information(d, k_mi, eps) == pytest.approx(i_mi, abs=1e-5)
    assert subset_information(d, k_l2, eps) == pytest.approx(i_l2, abs=1e-5)


def test_information_is_bounded_and_k_subset_attains_the_bound():
    for eps in (0.1, 0.5, 1.0, 3.0, 6.0):
        bound = information_bound(eps)
        for d in (2, 3, 10, 64, 500):
            best = subset_information(d, subset_size(d, eps, "mi"), eps)
            assert best <= bound + 1e-12
            for r in (o.make(eps, d) for o in ORACLES):
                assert mutual_information(r) <= best + 1e-12
            brr = BRR(eps, d)
            assert unary_information(d, brr.p, brr.q) < best  # BRR is strictly dominated
    assert information_bound(1.0) == pytest.approx(0.12330, abs=1e-5)
    assert subset_information(2, 1, 1.0) <= 1 / 8


def test_hadamard_information_scales_to_large_domains():
    assert 0 < hadamard_information(50_000, 1.0) < information_bound(1.0)


# ---- the ℓ2 ranking the planner uses (spec §7) -----------------------------------------------------------

def test_l2_optimal_k_subset_is_never_worse_than_oue_or_brr():
    worst = 0.0
    for d in (3, 4, 6, 10, 32, 100, 1000, 20_000):
        for eps in np.geomspace(0.05, 8, 30):
            eps = float(eps)
            ss = total_risk(d, subset_size(d, eps, "l2"), eps)
            for r in (OUE(eps, d), BRR(eps, d)):
                worst = max(worst, ss / debiased_total_variance(d, 1, r.p, r.q))
    assert worst <= 1.0


def test_l2_choice_degenerates_to_grr_exactly_at_the_threshold():
    for d in (4, 8, 16, 64, 256, 1024):
        threshold = 0.5 * math.log((d - 1) * (d - 2) / 2)
        for eps, expect_grr in ((threshold * 1.001, True), (threshold * 0.99, False)):
            risks = {o.name: debiased_total_variance(d, 1, o.make(eps, d).p, o.make(eps, d).q) for o in ORACLES}
            best = min(risks.values())
            chosen = next(name for name, v in risks.items() if v == best)  # the planner takes the first minimum
            assert (chosen == "grr") == expect_grr, (d, eps, risks)
            assert risks["ksubset_l2"] == best


# ---- post-processing (spec §6) ---------------------------------------------------------------------------

def test_simplex_projection_is_on_the_simplex_idempotent_and_the_qp_solution():
    rng = np.random.default_rng(40)
    for _ in range(20):
        v = rng.normal(0.2, 0.4, 6)
        p = project_simplex(v)
        assert np.all(p >= 0) and p.sum() == pytest.approx(1)
        assert np.allclose(project_simplex(p), p)
        qp = optimize.minimize(lambda w, v=v: np.sum((w - v) ** 2), np.full(6, 1 / 6), method="SLSQP",
                               bounds=[(0, 1)] * 6, constraints={"type": "eq", "fun": lambda w: w.sum() - 1},
                               options={"ftol": 1e-14, "maxiter": 500})
        assert np.allclose(p, qp.x, atol=1e-6)
    rows = rng.normal(0.1, 0.3, (50, 8))
    assert np.allclose(project_simplex(rows), [project_simplex(r) for r in rows])


def test_projection_is_a_single_shift_when_the_raw_estimate_sums_to_one():
    raw = np.array([0.5, 0.3, 0.25, -0.05])
    out = project_simplex(raw)
    assert out[3] == 0 and np.allclose(out[:3] - raw[:3], out[0] - raw[0])


def test_other_post_processing_options():
    raw = np.array([0.6, -0.1, 0.3, 0.3])
    assert np.array_equal(postprocess(raw, "none"), raw)
    assert postprocess(raw, "base_pos").tolist() == [0.6, 0.0, 0.3, 0.3]
    assert postprocess(raw, "clip") == pytest.approx([0.5, 0.0, 0.25, 0.25])
    assert postprocess(np.array([-0.1, -0.2]), "clip").tolist() == [0.5, 0.5]
    assert np.isnan(postprocess(np.array([np.nan, 0.5]), "simplex")).any()  # no users: nothing to project
