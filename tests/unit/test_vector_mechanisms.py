"""Collision, CoCo and the key-value baselines (Wang et al., "Differentially Private Numerical Vector Analyses in
the Local and Shuffle Model"; spec seed-003 §2–4, §7.4): the worked examples, the rates and closed-form errors
the spec computed, Monte-Carlo agreement of the estimators with their closed forms, the fast and the full-hashing
paths agreeing in distribution, variable sparsity, post-processing and the input adaptation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ks_2samp

from ldpql.mechanisms import coco, collision
from ldpql.mechanisms.coco import CoCo
from ldpql.mechanisms.collision import Collision
from ldpql.mechanisms.keyvalue import PCKVGRR, PCKVUE, PrivKV, Succinct, clip_factor, privkv_level
from ldpql.mechanisms.ternary import (conditional_mean, denormalise_mean, elements_from_ternary, item_frequencies,
                                      means_from_items, project_capped_simplex, random_sparse, subsample,
                                      ternary_from_bounded)


def _frequencies(draws: np.ndarray, t: int) -> np.ndarray:
    return np.bincount(draws, minlength=t) / len(draws)


# ---- worked examples (spec §2.2 Fig. 1, §3.2 Fig. 3) --------------------------------------------------------------

def test_collision_fig1_without_and_with_a_conflict():
    """d=6, s=2, t=4, ε=ln 2, Ω=6: hashed cells 1/3 each, others 1/6; one shared cell 1/3, the other three 2/9."""
    c, rng, n = Collision(math.log(2), 6, 2, 4), np.random.default_rng(1), 400_000
    apart = _frequencies(c._draw(np.tile([0, 1], (n, 1)), rng), 4)
    shared = _frequencies(c._draw(np.tile([2, 2], (n, 1)), rng), 4)
    se = math.sqrt(0.25 / n)
    assert np.allclose(apart, [1 / 3, 1 / 3, 1 / 6, 1 / 6], atol=5 * se)
    assert np.allclose(shared, [2 / 9, 2 / 9, 1 / 3, 2 / 9], atol=5 * se)


def test_coco_fig3_without_and_with_an_overwrite():
    """d=10, s=3, t=8, ε=ln 2, Ω=11: three pairs hold {2, 1}, the free pair 1 each; with an overwrite (m = 2)
    the four free cells weigh 5/4."""
    c, rng, n = CoCo(math.log(2), 10, 3, 8), np.random.default_rng(2), 400_000
    pairs = np.tile([0, 1, 2], (n, 1))
    upper = np.tile([True, False, True], (n, 1))
    apart = _frequencies(c._draw(pairs, upper, rng), 8)   # winners: cells 4, 1, 6
    assert np.allclose(apart, np.array([1, 2, 1, 1, 2, 1, 2, 1]) / 11, atol=5 * math.sqrt(0.25 / n))
    shared = _frequencies(c._draw(np.tile([0, 0, 2], (n, 1)), np.tile([True, False, True], (n, 1)), rng), 8)
    # pair 0 is won by either key (1/2 each): cells 0 and 4 get (2 + 1)/2 each; pair 2 holds {2 at 6, 1 at 2}
    expect = np.array([1.5, 1.25, 1, 1.25, 1.5, 1.25, 2, 1.25]) / 11
    assert np.allclose(shared, expect, atol=5 * math.sqrt(0.25 / n))


# ---- rates, t rules and closed forms (spec §2.6, §3.3, §3.6, §7.3) ----------------------------------------------

def test_coco_rates_of_fig_4():
    pt, po, pf = coco.rates(0.5, 8, 24)
    assert (round(pt, 4), round(po, 4), round(pf, 4)) == (0.0537, 0.0370, 0.0417)
    assert coco.overwrite_probability(8, 24) == pytest.approx(0.248, abs=1e-3)
    assert pt + po == pytest.approx((math.exp(0.5) + 1) / collision.omega(0.5, 8, 24))   # spec §8.5
    assert po < pf


@pytest.mark.parametrize("t, coll, minus, plus", [(20, 51_387, 38_194, 435_469), (22, 48_655, 38_150, 250_838),
                                                  (28, 45_755, 39_343, 121_799), (30, 45_679, 40_009, 108_409),
                                                  (52, 53_205, 50_574, 77_691)])
def test_fig_5_closed_forms(t, coll, minus, plus):
    assert collision.total_variance(0.5, 128, 8, t) == pytest.approx(coll, abs=1)
    assert coco.mean_mse(0.5, 128, 8, t) == pytest.approx(minus, abs=1)
    assert coco.plus_mse(0.5, 128, 8, t) == pytest.approx(plus, abs=1)


def test_t_rules():
    assert collision.paper_t(0.5, 8) == 28 and collision.optimal_t(0.5, 128, 8) == 30
    assert coco.optimal_t(0.5, 128, 8) == 22 and coco.paper_t(0.5, 8) % 2 == 0
    assert collision.paper_t(1.0, 4) == 17   # ⌊4e + 7⌋ (spec §2.9)


def test_total_mean_errors_of_spec_7_3():
    n, d = 10 ** 5, 256
    assert collision.total_variance(1.0, d, 4, collision.paper_t(1.0, 4), n) == pytest.approx(0.0942, abs=1e-4)
    assert coco.mean_mse(1.0, d, 4, coco.optimal_t(1.0, d, 4), n) == pytest.approx(0.0831, abs=1e-4)
    assert collision.total_variance(0.4, d, 8, collision.paper_t(0.4, 8), n) == pytest.approx(1.470, abs=1e-3)
    assert coco.mean_mse(0.4, d, 8, coco.optimal_t(0.4, d, 8), n) == pytest.approx(1.198, abs=1e-3)


def test_coco_to_collision_ratio_table():
    for s, eps, ratio in [(4, 0.1, 0.749), (8, 0.4, 0.815), (16, 1.0, 0.912), (32, 2.0, 0.955)]:
        mine = coco.mean_mse(eps, 256, s, coco.optimal_t(eps, 256, s))
        assert mine / collision.total_variance(eps, 256, s, collision.paper_t(eps, s)) == pytest.approx(ratio, abs=2e-3)


# ---- estimators against their closed forms (spec §7.4 item 2) -----------------------------------------------------

N, D, S = 40_000, 32, 4
REPS = 30


def _data(seed=7):
    x = random_sparse(N, D, S, np.random.default_rng(seed))
    return x, item_frequencies(x, D)


def _ratio(errors: list[float], predicted: float) -> float:
    return float(np.mean(errors)) / predicted


def test_collision_is_unbiased_and_matches_its_closed_form_on_both_paths():
    x, f = _data()
    c, rng = Collision(1.0, D, S), np.random.default_rng(11)
    fast = np.array([c.estimate(c.simulate(x, rng), N) for _ in range(REPS * 4)])
    full = np.array([c.estimate(c.aggregate(c.randomize(x, rng)), N) for _ in range(REPS)])
    sd = np.sqrt(c.variance(f, N))
    assert np.all(np.abs(fast.mean(0) - f) < 5 * sd / math.sqrt(len(fast)))
    for est in (fast, full):   # 64 coordinates × reps: the total squared error is within ~3 standard errors
        assert _ratio(((est - f) ** 2).sum(1), c.total_variance(N)) == pytest.approx(1, abs=0.15)
    means = fast[:, :D] - fast[:, D:]
    assert _ratio(((means - means_from_items(f)[0]) ** 2).sum(1), c.mean_variance(means_from_items(f)[1], N).sum()) \
        == pytest.approx(1, abs=0.1)


def test_coco_is_unbiased_and_matches_eqs_8_and_9():
    x, f = _data()
    mean, present = means_from_items(f)
    c, rng = CoCo(1.0, D, S, 18), np.random.default_rng(12)
    sums = [c.simulate(x, rng) for _ in range(REPS * 4)]
    est = np.array([c.estimate(sm, N) for sm in sums])
    plus = np.array([c.present(sm, N) for sm in sums])
    assert np.all(np.abs(est.mean(0) - mean) < 5 * np.sqrt(c.variance(present, N) / len(est)))
    assert _ratio(((est - mean) ** 2).sum(1), c.total_variance(N)) == pytest.approx(1, abs=0.1)
    assert _ratio(((plus - present) ** 2).sum(1), coco.plus_mse(1.0, D, S, 18, N)) == pytest.approx(1, abs=0.1)
    full = np.array([c.estimate(c.aggregate(c.randomize(x, rng)), N) for _ in range(REPS)])
    assert _ratio(((full - mean) ** 2).sum(1), c.total_variance(N)) == pytest.approx(1, abs=0.15)


@pytest.mark.parametrize("mech", ["collision", "coco"])
def test_fast_and_full_hashing_paths_agree_in_distribution(mech):
    """KS test (spec §7.4 item 3) on the estimate of a held element and of an unheld one, 400 runs each path."""
    n, d, s = 3000, 8, 2
    gen = np.random.default_rng(3)   # everyone holds 0₊ and one random other signed key: 0₊ is held, 0₋ never
    x = np.column_stack([np.zeros(n, np.int64), gen.integers(1, d, n) + d * gen.integers(0, 2, n)])
    m = Collision(1.0, d, s) if mech == "collision" else CoCo(1.0, d, s)
    rng = np.random.default_rng(4)
    fast = np.array([m.simulate(x, rng) for _ in range(400)])
    full = np.array([m.aggregate(m.randomize(x, rng)) for _ in range(400)])
    held, rare = 0, d
    for y in (held, rare):
        assert ks_2samp(fast[:, y], full[:, y]).pvalue > 1e-3
    assert ks_2samp(fast[:, held], full[:, rare]).pvalue < 1e-6   # the test has power to tell two laws apart


def test_variable_sparsity_stays_unbiased_with_and_without_padding():
    """Users with fewer than s non-zeros: Collision sends them as they are (§2.8), CoCo pads with dummies (§1.3)."""
    x, _ = _data(9)
    x[: N // 2, 2:] = -1   # half the users hold 2 of the 4
    f = item_frequencies(x, D)
    for m in (Collision(1.0, D, S), CoCo(1.0, D, S)):
        rng = np.random.default_rng(13)
        sums = [m.simulate(x, rng) for _ in range(REPS * 4)]
        est = np.array([m.estimate(sm, N) if isinstance(m, Collision) else m.items(sm, N) for sm in sums])
        assert np.abs(est.mean(0) - f).max() < 5 * est.std(0).max() / math.sqrt(len(est))


BASELINES = [lambda: PrivKV.nominal(1.0, D, S), lambda: PrivKV(1.0, D, S), lambda: PCKVUE(1.0, D, S),
             lambda: PCKVGRR.nominal(1.0, D, S), lambda: PCKVGRR(1.0, D, S)]


@pytest.mark.parametrize("make", BASELINES, ids=["privkv-nominal", "privkv", "pckv_ue", "pckv_grr", "pckv_agrr"])
def test_baselines_match_their_closed_forms(make):
    x, f = _data()
    m, rng = make(), np.random.default_rng(14)
    est = np.array([m.estimate(m.aggregate(m.randomize(x, rng)), N) for _ in range(REPS)])
    assert np.all(np.abs(est.mean(0) - f) < 5 * np.sqrt(m.variance(f, N) / REPS))
    assert _ratio(((est - f) ** 2).sum(1), m.variance(f, N).sum()) == pytest.approx(1, abs=0.12)
    means = est[:, :D] - est[:, D:]
    assert _ratio(((means - means_from_items(f)[0]) ** 2).sum(1), m.mean_variance(f, N).sum()) == pytest.approx(
        1, abs=0.12)


def test_succinct_matches_its_biased_closed_form_on_both_paths():
    x, f = _data()
    mean, present = means_from_items(f)
    m, rng = Succinct(1.0, D, S, N), np.random.default_rng(15)
    for est in (np.array([m.estimate(m.simulate(x, rng), N) for _ in range(REPS * 2)]),
                np.array([m.estimate(m.aggregate(m.randomize(x, rng)), N) for _ in range(REPS // 3)])):
        assert _ratio(((est - mean) ** 2).sum(1), m.mse(mean, present, N).sum()) == pytest.approx(1, abs=0.2)
    assert clip_factor(1, 10.0) == 1.0 and clip_factor(64, 2.0) < 0.5   # heavy clipping shrinks the estimate


def test_baselines_levels():
    """PrivKV at ε₁ = ε₂ = ε/2 spends less than ε; the amplified PCKV-GRR spends exactly ε (spec §8.17–8.18)."""
    assert privkv_level(0.5, 0.5) == pytest.approx(0.7191, abs=1e-4)
    assert PrivKV.nominal(1.0, 8, 2).epsilon == pytest.approx(0.7191, abs=1e-4)
    assert PCKVGRR.nominal(1.0, 8, 4).epsilon == pytest.approx(math.log(1 + (math.e - 1) / 4))
    assert PCKVGRR(1.0, 8, 4).grr.epsilon == pytest.approx(math.log(4 * (math.e - 1) + 1))


# ---- post-processing and input adaptation (spec §1.3, §7.1) -------------------------------------------------------

def test_capped_simplex_projection():
    rng = np.random.default_rng(5)
    f = rng.normal(0.1, 0.5, 64)
    p = project_capped_simplex(f, 4)
    assert p.sum() == pytest.approx(4) and p.min() >= 0 and p.max() <= 1
    assert np.allclose(project_capped_simplex(p, 4), p, atol=1e-9)
    for _ in range(20):   # the projection is the nearest feasible point: no random feasible point is nearer
        q = project_capped_simplex(rng.random(64), 4)
        assert np.linalg.norm(f - p) <= np.linalg.norm(f - q) + 1e-9


def test_ternary_adaptation_is_unbiased_and_denormalises():
    rng = np.random.default_rng(6)
    values = np.column_stack([rng.uniform(20, 60, 50_000), rng.uniform(0, 1, 50_000)])
    values[::3, 1] = np.nan   # NULLs become 0
    tern = ternary_from_bounded(values, np.array([20.0, 0.0]), np.array([60.0, 1.0]), rng)
    assert set(np.unique(tern)) <= {-1, 0, 1} and np.all(tern[::3, 1] == 0)
    x = elements_from_ternary(tern, 2)
    f = item_frequencies(x, 2)
    mean, present = means_from_items(f)
    assert denormalise_mean(mean[0], 20, 60) == pytest.approx(values[:, 0].mean(), abs=0.3)
    assert present[1] == pytest.approx(2 / 3, abs=1e-4)
    cond = conditional_mean(mean, present, len(x))
    assert denormalise_mean(cond[1], 0, 1) == pytest.approx(np.nanmean(values[:, 1]), abs=0.01)


def test_elements_round_trip_and_subsampling():
    tern = np.array([[1, 0, -1, 0], [0, 0, 0, 0], [-1, 1, 1, -1]])
    with pytest.raises(ValueError, match="sparsity"):
        elements_from_ternary(tern, 2)
    sub = subsample(tern, 2, np.random.default_rng(0))
    assert np.count_nonzero(sub, axis=1).tolist() == [2, 0, 2]
    x = elements_from_ternary(sub, 2)
    assert sorted(x[0].tolist()) == [0, 4 + 2] and x[1].tolist() == [-1, -1]


def test_conditional_mean_over_a_column_with_44_percent_nulls_is_within_its_interval():
    """SQL semantics for a nullable column (spec §1.3 item 3, §8.22): the mean over the users who have a value,
    estimated from one Collision report per user, covers the true non-NULL mean at the stated standard error;
    NULL-as-midpoint would be biased toward the midpoint. Three dense columns, the first 44% NULL."""
    rng = np.random.default_rng(21)
    n = 200_000
    values = np.column_stack([rng.beta(5, 2, n) * 100, rng.uniform(0, 10, n), rng.normal(50, 5, n).clip(0, 100)])
    values[rng.random(n) < 0.44, 0] = np.nan
    lo, hi = np.array([0.0, 0.0, 0.0]), np.array([100.0, 10.0, 100.0])
    x = elements_from_ternary(ternary_from_bounded(values, lo, hi, rng), 3)
    c = Collision(1.0, 3, 3, collision.optimal_t(1.0, 3, 3))
    covered = []
    for rep in range(20):
        est, se, low = c.conditional(c.simulate(x, np.random.default_rng(rep)), n)
        truth = 2 * (np.nanmean(values, axis=0) - lo) / (hi - lo) - 1
        assert not low.any()
        covered.append(np.abs(est - truth) <= 1.96 * se)
    assert np.mean(covered) >= 0.85   # 60 intervals at 95%: fewer than 85% covering is a broken se
    midpoint = 2 * (np.nan_to_num(values[:, 0], nan=50.0).mean() - 0) / 100 - 1
    assert abs(midpoint - truth[0]) > 5 * se[0]   # the old default is off by ~8 standard errors here


def test_harmony_is_unbiased_with_its_closed_form_variance():
    from ldpql.mechanisms.harmony import Harmony
    rng = np.random.default_rng(22)
    x = np.column_stack([rng.uniform(-1, 1, 50_000), np.full(50_000, 0.5), rng.choice([-1.0, 1.0], 50_000)])
    h = Harmony(1.0, 3)
    est = np.array([h.estimate(h.aggregate(h.randomize(x, rng)), len(x)) for _ in range(60)])
    var = h.variance(x.mean(0), len(x), second_moment=(x ** 2).mean(0))
    assert np.all(np.abs(est.mean(0) - x.mean(0)) < 5 * np.sqrt(var / 60))
    assert est.var(0, ddof=1) / var == pytest.approx(np.ones(3), abs=0.4)
