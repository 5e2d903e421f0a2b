"""Minimum and maximum finding (seed 000): the schedules of spec §2.3, Algorithm 2 and its pieces, the mirror
for the maximum, the exact-aggregate path against per-user simulation, the privacy audit of its randomizers,
the one-sided interval, the Laplace baseline, and a reduced reproduction of spec §4 with fixed seeds."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldpql.audit import audit
from ldpql.mechanisms import REGISTRY, Reply
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.simulation import drive
from ldpql.mechanisms.minimum import (
    EXACT_DEPTH,
    Grid,
    GridEncoding,
    LaplaceMin,
    Lattice,
    MinSummary,
    Schedule,
    ThresholdBit,
    laplace_error,
    laplace_protocol,
    min_epsilon,
    min_users,
    schedule,
    search,
)
from ldpql.mechanisms.rr import RandomizedResponse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOMAIN = Lattice(-1.0, 1.0)


def _reproduction():
    spec = importlib.util.spec_from_file_location("reproduce_min", EXAMPLES / "reproduce_min.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


repro = _reproduction()


def encode(grid):
    return GridEncoding("", grid.size, grid=grid)


def run(values, epsilon, alpha=None, seed=0, negate=False, plan=None, grid_depth=8, low=-1.0, high=1.0):
    """One run of the engine's protocol on ``values`` through the exact aggregate (numpy)."""
    lattice = Lattice(-high, -low) if negate else Lattice(low, high)
    v = np.sort(-np.asarray(values) if negate else np.asarray(values))
    plan = plan or schedule(len(v), epsilon, alpha)
    counts = repro.SortedCounts(v, lattice)
    return drive(search(len(v), plan, low, high, encode, negate, grid_depth), counts, np.random.default_rng(seed))


# ---- the schedules (spec §2.3) ------------------------------------------------------------------------------

# log2 N: L (lower), h_N (lower), γ lower ε=1, γ lower ε=4, L (unknown), h_N (unknown), γ unknown ε=1, ε=4
TABLE = {10: (5, 3.466, 0.8656, 0.2544, 6, 3.478, 1.0317, 0.2947),
         11: (6, 3.812, 0.7638, 0.2182, 7, 4.208, 0.9305, 0.2605),
         12: (6, 4.159, 0.5641, 0.1611, 8, 5.008, 0.8166, 0.2253),
         13: (7, 4.505, 0.4814, 0.1348, 9, 5.877, 0.7012, 0.1913),
         14: (7, 4.852, 0.3533, 0.0989, 10, 6.816, 0.5916, 0.1599),
         15: (8, 5.199, 0.2941, 0.0811, 12, 7.825, 0.5356, 0.1428),
         16: (8, 5.545, 0.2148, 0.0593, 13, 8.903, 0.4369, 0.1159),
         17: (9, 5.892, 0.1755, 0.0479, 15, 10.050, 0.3778, 0.0994),
         18: (9, 6.238, 0.1277, 0.0348, 17, 11.268, 0.3199, 0.0837),
         19: (10, 6.585, 0.1028, 0.0278, 19, 12.554, 0.2665, 0.0694),
         20: (10, 6.931, 0.0746, 0.0202, 21, 13.911, 0.2189, 0.0568)}


@pytest.mark.parametrize("k", sorted(TABLE))
def test_schedules_reproduce_the_spec_table(k):
    n, (l_low, h_low, g_low1, g_low4, l_unk, h_unk, g_unk1, g_unk4) = 1 << k, TABLE[k]
    low1, low4, unk1, unk4 = schedule(n, 1, 1.0), schedule(n, 4, 1.0), schedule(n, 1), schedule(n, 4)
    assert (low1.depth, low4.depth, unk1.depth, unk4.depth) == (l_low, l_low, l_unk, l_unk)
    assert (round(low1.h, 3), round(unk1.h, 3)) == (h_low, h_unk)
    assert [round(s.gamma, 4) for s in (low1, low4, unk1, unk4)] == [g_low1, g_low4, g_unk1, g_unk4]
    assert unk1.degenerate == (k == 10) and not low1.degenerate


def test_lower_schedule_generalises_to_any_alpha0():
    s = schedule(1 << 16, 1.0, 2.0)
    assert (s.depth, s.h) == (4, pytest.approx(math.log(1 << 16) / 4))
    assert schedule(1 << 16, 1.0, 0.5).depth == 16


def test_schedule_depends_on_public_n_and_epsilon_only():
    assert schedule(5000, 1.0) == schedule(5000, 1.0)
    assert schedule(5000, 1.0) != schedule(5001, 1.0) and schedule(5000, 1.0) != schedule(5000, 1.1)


@pytest.mark.parametrize("eps, alpha", [(1.0, None), (1.0, 1.0), (0.5, None), (2.0, 0.5), (0.25, 1.0)])
def test_min_users_is_the_first_n_from_which_gamma_stays_below_one(eps, alpha):
    n = min_users(eps, alpha)
    assert schedule(n, eps, alpha).gamma < 1 <= schedule(n - 1, eps, alpha).gamma
    for m in list(range(n, n + 200)) + [int(n * f) for f in (1.5, 2, 3, 10, 100, 1000)]:
        assert schedule(m, eps, alpha).gamma < 1, m


@pytest.mark.parametrize("n, alpha", [(1000, None), (300, 1.0), (5000, 0.5)])
def test_min_epsilon_is_where_gamma_drops_below_one(n, alpha):
    e = min_epsilon(n, alpha)
    assert schedule(n, e, alpha).gamma < 1 <= schedule(n, e * 0.999, alpha).gamma


def test_no_epsilon_helps_when_n_is_tiny():
    assert min_epsilon(3, 0.1) is None


# ---- Algorithm 2's pieces -----------------------------------------------------------------------------------

def test_phi_is_unbiased_and_a_wrong_epsilon_is_caught():
    """Φ' over many exact-aggregate draws averages to F̃(τ) (|z| < 5), and the same test fails for a debias
    factor at the wrong ε (the mechanism broken on purpose)."""
    counts, n, truth, runs = np.array([700, 300]), 1000, 0.3, 20_000
    rng = np.random.default_rng(5)
    r = ThresholdBit(0.1, 0, 2)
    draws = np.array([r.sample_aggregate(counts[::-1], rng)[0] for _ in range(runs)])  # cell 0 = "x ≤ τ"
    phi = r.estimate(draws, n)
    z = (phi.mean() - truth) / math.sqrt(r.variance(np.array([truth]), n)[0] / runs)
    assert abs(z) < 5
    wrong = RandomizedResponse(0.12).estimate(draws, n)
    assert abs((wrong.mean() - truth) / math.sqrt(r.variance(np.array([truth]), n)[0] / runs)) > 5
    assert np.var(phi) == pytest.approx(r.variance(np.array([truth]), n)[0], rel=0.05)


def test_threshold_bit_is_the_engines_rr_on_the_block_bit():
    r = ThresholdBit(0.7, 2, 6)
    assert isinstance(r.inner, RandomizedResponse) and r.epsilon == 0.7
    assert list(r.bits(np.arange(6))) == [1, 1, 1, 0, 0, 0]
    rng = np.random.default_rng(1)
    counts = np.array([5, 0, 7, 100, 3, 9])
    assert r.sample_aggregate(counts, rng)[0] == RandomizedResponse(0.7).sample_aggregate(
        np.array([112, 12]), np.random.default_rng(1))[0]


def test_lattice_and_grid_nest_exactly():
    lat = Lattice(0.0, 120.0)
    ages = np.arange(-5, 130)
    g = lat.index(ages)
    assert np.all(np.diff(g) >= 0) and g[0] == 0 and g[-1] == lat.top
    assert lat.point(lat.top // 2) == 60.0 and lat.index(np.array([60.0]))[0] == lat.top // 2   # a tie is ≤
    grid = Grid(lat, 0, lat.top, 3)
    assert grid.cut(lat.top // 2) == 3
    assert np.array_equal(grid.histogram(np.sort(g)), np.bincount(grid.cell(g), minlength=8))
    sub = Grid(lat, 3 * grid.step, 4 * grid.step, 4)
    assert np.array_equal(sub.histogram(np.sort(g)), np.bincount(sub.cell(g), minlength=16))
    inside = np.sum((g > 3 * grid.step) & (g <= 4 * grid.step))
    assert grid.histogram(np.sort(g))[3] == inside == sub.histogram(np.sort(g)).sum() - np.sum(g <= 3 * grid.step) \
        - np.sum(g > 4 * grid.step)


def test_noise_off_is_algorithm_1_to_the_bisection_resolution():
    rng = np.random.default_rng(3)
    for values in (rng.uniform(-0.7, 0.9, 500), np.array([0.25] * 10), rng.normal(0, 0.2, 50).clip(-1, 1)):
        est = run(values, math.inf)
        assert abs(est.values[0] - values.min()) <= 2.0 ** -EXACT_DEPTH + 1e-12
        top = run(values, math.inf, negate=True)
        assert abs(top.values[0] - values.max()) <= 2.0 ** -EXACT_DEPTH + 1e-12


def test_algorithm_2_at_the_epsilon_cap_and_tiny_gamma_is_algorithm_1():
    """Each round at the per-randomizer cap: a flip is 9.4e-14 likely, so 300 users' answers are exact."""
    values = np.random.default_rng(4).uniform(-0.5, 0.5, 300)
    for depth in (3, 7, 12):
        exact = Schedule(300, math.inf, None, depth, math.inf, 0.0)
        private = Schedule(300, EPSILON_CAP * depth, None, depth, 1.0, 1e-9)
        a1, a2 = run(values, 0, plan=exact), run(values, 0, plan=private, seed=9)
        assert a1.values[0] == a2.values[0]
        assert abs(a1.values[0] - values.min()) <= 2.0 ** -depth


def test_the_max_is_the_mirrored_search_exactly():
    """LDP_MAX(x) = -LDP_MIN(-x) with the same coins (spec §7 item 8)."""
    values = np.random.default_rng(6).beta(2, 5, 2000) * 1.4 - 0.8
    for seed in range(5):
        top = run(values, 1.0, seed=seed, negate=True)
        low = run(-values, 1.0, seed=seed)
        assert top.values[0] == -low.values[0]
        assert (top.interval[0][0], top.interval[1][0]) == (-low.interval[1][0], -low.interval[0][0])


def test_ties_count_as_at_or_below_for_the_min_and_at_or_above_for_the_max():
    """Every user at exactly τ_1 = 0: the noise-off min search keeps the left half at τ_1, the max search
    the right half, so both end at 0 (a strict comparison would end a step away)."""
    values = np.zeros(50)
    plan = Schedule(50, math.inf, None, 1, math.inf, 0.0)
    assert run(values, 0, plan=plan).extra["transcript"][0][2] == "keep left"
    assert run(values, 0, plan=plan, negate=True).extra["transcript"][0][2] == "keep right"


def test_decision_is_non_strict_and_phi_is_not_clipped():
    """Φ' of all-ones reports exceeds 1 (not clipped), and with γ exactly equal to the Φ' a reply gives, the
    search keeps the left half (Φ' ≥ γ), and the right half for γ a hair above it."""
    r = ThresholdBit(1.0, 0, 2)
    assert r.estimate(np.array([100]), 100)[0] > 1
    phi = float(r.estimate(np.array([70]), 100)[0])
    for gamma, kept in ((phi, "keep left"), (math.nextafter(phi, 2), "keep right")):
        gen = search(100, Schedule(100, 1.0, None, 1, 1.0, gamma), -1.0, 1.0, encode)
        next(gen)
        with pytest.raises(StopIteration) as stop:
            gen.send(Reply(np.array([70]), 100))
        assert stop.value.value.extra["transcript"][0][2] == kept


def test_every_round_costs_epsilon_over_L_and_they_add_up_to_epsilon():
    for n, eps, alpha in ((1 << 12, 1.0, None), (1 << 16, 4.0, 1.0), (10**8, 1.0, None)):
        plan = schedule(n, eps, alpha)
        gen = search(n, plan, 0.0, 1.0, encode)
        spent, randomizers, rnd = [], [], next(gen)
        while True:
            spent.append(rnd.randomizer.epsilon)
            randomizers.append(rnd.randomizer)
            assert rnd.users == (0.0, 1.0)   # every user, every round
            try:
                rnd = gen.send(Reply(rnd.randomizer.sample_aggregate(np.r_[n, np.zeros(rnd.encoding.size - 1,
                                                                                            int)], np.random.default_rng(0)), n))
            except StopIteration:
                break
        assert len(spent) == plan.depth and sum(spent) == pytest.approx(eps, rel=1e-12)
        assert all(audit(r).max_log_ratio == pytest.approx(r.epsilon, abs=1e-9) for r in randomizers)


# ---- exact aggregate against per-user simulation (spec §2.7) --------------------------------------------------

def _per_user(values, epsilon, rng):
    """The same protocol, every user randomizing its own block (the per-user path, in numpy)."""
    lat = DOMAIN
    g = lat.index(values)
    gen = search(len(values), schedule(len(values), epsilon), -1.0, 1.0, encode)
    rnd = next(gen)
    try:
        while True:
            r = rnd.randomizer
            summary = r.aggregate(r.randomize(rnd.encoding.grid.cell(g), rng))
            rnd = gen.send(Reply(summary, len(values)))
    except StopIteration as stop:
        return stop.value


def test_exact_aggregate_and_per_user_agree_in_distribution():
    values = np.random.default_rng(7).beta(1, 2, 600) * 0.6 - 0.9
    runs = 400
    rng = np.random.default_rng(8)
    exact = np.array([run(values, 2.0, seed=1000 + i).values[0] for i in range(runs)])
    per_user = np.array([_per_user(values, 2.0, rng).values[0] for _ in range(runs)])
    assert stats.ks_2samp(exact, per_user).pvalue > 1e-3
    # and the test has power: a per-user path at a wrong ε is told apart
    wrong = np.array([_per_user(values, 3.0, rng).values[0] for _ in range(runs)])
    assert stats.ks_2samp(exact, wrong).pvalue < 1e-3


# ---- privacy ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("r", [ThresholdBit(0.3, 2, 5), ThresholdBit(1 / 13, 0, 2), LaplaceMin(0.5, 3), LaplaceMin(3.0, 3)],
                         ids=repr)
def test_randomizers_pass_the_audit_tightly_and_fail_a_smaller_claim(r):
    result = audit(r)
    assert result.passed and result.max_log_ratio > r.epsilon - 1e-3
    r.epsilon *= 1 - 2e-3
    assert not audit(r).passed


def test_both_randomizers_are_registered_for_the_suite_audit():
    assert REGISTRY["threshold_rr"] is ThresholdBit and REGISTRY["laplace_min"] is LaplaceMin


# ---- the one-sided interval --------------------------------------------------------------------------------

def test_wrong_step_probability_is_the_exact_binomial_tail_and_below_lemma_2():
    for n, eps, alpha in ((1000, 1.0, None), (1 << 12, 1.0, 1.0), (1 << 14, 0.5, 1.0)):
        s = schedule(n, eps, alpha)
        p = 1 / (1 + math.exp(-s.round_epsilon))
        c = np.arange(n + 1)
        phi = (c / n - (1 - p)) / (2 * p - 1)
        exact = stats.binom.pmf(c, n, 1 - p)[phi >= s.gamma].sum()
        assert s.wrong_step_probability() == pytest.approx(exact, rel=1e-6, abs=1e-300)
        assert s.wrong_step_probability() <= math.exp(-s.h)
        assert s.confidence() == pytest.approx(1 - s.depth * exact)


def test_one_sided_interval_covers_in_every_run_near_the_degenerate_edge():
    """At N = 2^10, ε = 1 (γ ≈ 0.87 and 1.03): the minimum is never above the interval's top."""
    dist = repro.Beta()
    for alpha in (1.0, None):
        for xmin in dist.shifts()[:3]:
            values = dist.fixed(1 << 10, xmin)
            for seed in range(40):
                est = run(values, 1.0, alpha, seed=seed)
                assert est.interval[0][0] <= values.min() <= est.interval[1][0]
                assert est.interval_confidence > 0.999


def test_theorem_4_bound_holds_on_uniform_data_over_the_whole_domain():
    values = np.linspace(-1, 1, 1 << 14)
    for eps, alpha in ((4.0, 1.0), (8.0, None)):
        s = schedule(len(values), eps, alpha)
        errs = [abs(run(values, eps, alpha, seed=i).values[0] + 1) for i in range(60)]
        assert np.mean(errs) <= s.bound(1.0) < 2


# ---- the Laplace baseline ------------------------------------------------------------------------------------

def test_min_summary_combines_batches_by_min():
    r = LaplaceMin(1.0)
    a, b = r.aggregate(np.array([0.3, -2.0])), r.aggregate(np.array([5.0, -1.0]))
    assert float((a + b)[0]) == -2.0 and float((b + a)[0]) == -2.0
    assert float((0 + a)[0]) == -2.0 and float(r.aggregate(np.array([]))[0]) == math.inf
    assert isinstance((a + b)[0], MinSummary)


def test_laplace_error_matches_monte_carlo():
    rng = np.random.default_rng(11)
    for n, eps in ((100, 1.0), (1000, 4.0)):
        r = LaplaceMin(eps)
        sims = [abs(float(r.estimate(r.aggregate(r.randomize(np.full(n, -1.0), rng)), n)[0]) + 1) for _ in range(2000)]
        assert np.mean(sims) == pytest.approx(laplace_error(n, eps), rel=0.03)


def test_laplace_protocol_returns_the_noisy_minimum_unclamped_with_no_interval():
    gen = laplace_protocol(3, 1.0, None, half=60.0, mid=60.0)
    rnd = next(gen)
    with pytest.raises(StopIteration) as stop:
        gen.send(Reply(rnd.randomizer.aggregate(np.array([-1.7, 0.5, 0.2])), 3))
    est = stop.value.value
    assert est.values[0] == pytest.approx(60 - 1.7 * 60) and est.interval is None and "no interval" in est.note


# ---- reduced reproduction (spec §4.5), fixed seeds --------------------------------------------------------------

def test_reduced_reproduction_has_the_papers_shape():
    """Error falls with N and with ε, saturates near the domain width when γ ≥ 1, and the i.i.d. setting
    is close to the fixed one."""
    ns = [1 << 10, 1 << 12, 1 << 14]
    rows = repro.sweep_n(ns, (1.0, 4.0), runs=40, settings=("fixed", "iid"), seed=5)
    err = {(r["setting"], r["schedule"], r["epsilon"], r["n"]): r["error"] for r in rows}
    for setting in ("fixed", "iid"):
        for s in ("lower", "unknown"):
            for e in (1.0, 4.0):
                curve = [err[(setting, s, e, n)] for n in ns]
                assert curve[0] > curve[-1], (setting, s, e, curve)
                assert all(err[(setting, s, 4.0, n)] < err[(setting, s, 1.0, n)] for n in ns)
    assert err[("fixed", "unknown", 1.0, 1 << 10)] > 0.8       # γ ≥ 1: drifts toward the top, error ~ 1-2
    for key, value in err.items():   # reference numbers of §4.5 within 25% (40 runs)
        k = int(math.log2(key[3]))
        if key[0] == "fixed" and k in repro.REFERENCE_N:
            ref = repro.REFERENCE_N[k][("lower", "unknown").index(key[1]) * 2 + (key[2] == 4.0)]
            assert value == pytest.approx(ref, rel=0.25), key
    eps_rows = repro.sweep_eps([1 << 12], [0.125, 1.0, 8.0], runs=30, seed=6)
    by_eps = {(r["schedule"], r["epsilon"]): r["error"] for r in eps_rows}
    for s in ("lower", "unknown"):
        assert by_eps[(s, 0.125)] > 1.5 > by_eps[(s, 1.0)] > by_eps[(s, 8.0)]   # saturation at ≈ 2 for small ε
    lap = repro.laplace_baseline([1 << 10], (1.0,), runs=40)
    assert lap[0]["error"] == pytest.approx(repro.REFERENCE_LAPLACE[(1.0, 10)], rel=0.1) and lap[0]["error"] > 1


def test_movielens_path_on_a_small_file_in_the_ml_latest_format(tmp_path):
    rng = np.random.default_rng(12)
    users, lines = 3000, ["userId,movieId,rating,timestamp"]
    for u in range(1, users + 1):
        for m in rng.choice(500, size=int(rng.integers(1, 40)), replace=False):
            lines.append(f"{u},{m + 1},{rng.integers(1, 11) / 2},{1500000000 + u}")
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(lines) + "\n")
    ml = repro.load_movielens(str(path))
    assert ml["users"] == users and 400 < ml["movies"] <= 500
    rows = repro.movielens(ml, [1 << 8, 1 << 9, 1 << 10, 1 << 11], (1.0, 4.0), runs=8)
    assert {(r["task"], r["direction"]) for r in rows} == {("rating", "min"), ("rating", "max"), ("count", "min"),
                                                            ("count", "max")}
    assert all(0 <= r["error"] <= 2 and 0 <= r["error_vs_subsample"] <= 2 for r in rows)
    fit = repro.fit_rate([1 << 8, 1 << 9, 1 << 10, 1 << 11],
                         {e: [r["error"] for r in rows if r["task"] == "count" and r["direction"] == "min"
                              and r["epsilon"] == e] for e in (1.0, 4.0)})
    assert set(fit) == {"A", "B", "alpha", "A_b6a", "alpha_b6a"}
    out = repro.main(["--runs", "2", "--quick", "--no-iid", "--no-plot", "--laplace-runs", "2", "--out",
                      str(tmp_path / "out"), "--movielens", str(path), "--ml-runs", "3", "--ml-sizes", "9,10,11"])
    assert (tmp_path / "out" / "min_movielens.csv").exists() and len(out["fits"]) == 4


def test_fit_rate_recovers_a_known_alpha():
    ns = [1 << k for k in range(14, 19)]
    errs = {e: [c * (math.log(n) ** 6 / n) ** (1 / (2 * 1.5)) for n in ns] for e, c in ((1.0, 2.0), (4.0, 0.5))}
    fit = repro.fit_rate(ns, errs)
    assert fit["alpha_b6a"] == pytest.approx(1.5, rel=1e-6) and fit["alpha"] == pytest.approx(1.5, rel=1e-3)
