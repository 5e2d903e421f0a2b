"""Samplers keep their ε as they run (DESIGN §4.5, issue #10): the realised-ε audit over the whole range the
planner allows, the ε cap in constructors and in the planner, a reproduction of the old failure, and the
discrete Laplace baseline against a Mironov-style attack."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql.audit import EPSILON_GRID, realised_audit, realised_registry
from ldpql.catalog import Column, NumericDomain, Table
from ldpql.grammar import parse_one
from ldpql.mechanisms import REGISTRY
from ldpql.mechanisms.base import EPSILON_CAP, below, grid_ceil
from ldpql.mechanisms.coco import CoCo
from ldpql.mechanisms.collision import Collision
from ldpql.mechanisms.conditional import CollisionMean
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.gaussian import LaplaceSum
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.hadamard import HadamardResponse
from ldpql.mechanisms.keyvalue import PCKVGRR, PCKVUE, PrivKV, Succinct
from ldpql.mechanisms.kv import KVCollision
from ldpql.mechanisms.ksubset import KSubset
from ldpql.mechanisms.laplace import LaplaceMean
from ldpql.mechanisms.minimum import LaplaceMin
from ldpql.mechanisms.olh import OLH
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.harmony import Harmony
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.rr import RandomizedResponse, flip, flip_probability
from ldpql.mechanisms.shuffle import shuffle_budget
from ldpql.mechanisms.square_wave import SquareWave
from ldpql.mechanisms.unary import BRR
from ldpql.mechanisms.vector import VectorMeans
from ldpql.planner import PublicFacts, plan

CAP_CASES = [pytest.param(r, id=repr(r)) for cls in REGISTRY.values() for r in cls.realised_cases(EPSILON_CAP)]
GRID_CASES = [pytest.param(cls, id=name) for name, cls in REGISTRY.items()]


# ---- the cap -------------------------------------------------------------------------------------------------

def test_the_cap_is_at_most_30_and_the_grid_covers_small_epsilon_to_the_cap():
    assert 0 < EPSILON_CAP <= 30
    assert len(EPSILON_GRID) == 41 and min(EPSILON_GRID) <= 0.01 and max(EPSILON_GRID) == EPSILON_CAP
    assert np.all(np.diff(EPSILON_GRID) > 0)


MAKERS = {"rr": lambda e: RandomizedResponse(e), "grr": lambda e: GRR(e, 4), "oue": lambda e: OUE(e, 4),
          "brr": lambda e: BRR(e, 4), "ksubset": lambda e: KSubset(e, 5, 2), "olh": lambda e: OLH(e, 4),
          "hadamard": lambda e: HadamardResponse(e, 4), "duchi": lambda e: Duchi(e), "piecewise": lambda e: Piecewise(e),
          "hybrid": lambda e: Hybrid(e),
          "laplace_min": lambda e: LaplaceMin(e), "laplace_sum": lambda e: LaplaceSum(e),
          "collision": lambda e: Collision(e, 4, 2, 5), "collision_mean": lambda e: CollisionMean(e, 3),
          "coco": lambda e: CoCo(e, 4, 2, 6),
          "privkv": lambda e: PrivKV(e, 4, 2), "pckv_ue": lambda e: PCKVUE(e, 4, 2),
          "pckv_grr": lambda e: PCKVGRR(e, 4, 1), "succinct": lambda e: Succinct(e, 4, 2, 1000),
          "harmony": lambda e: Harmony(e, 3), "vector_means": lambda e: VectorMeans(e, 3, "coco", 8),
          "kv_collision": lambda e: KVCollision(e, 3, 2, 3),
          "laplace": lambda e: LaplaceMean(e), "square_wave": lambda e: SquareWave(e)}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_every_constructor_refuses_epsilon_above_the_cap_and_accepts_the_cap(name):
    make = MAKERS[name]
    assert make(EPSILON_CAP).epsilon == EPSILON_CAP
    for bad in (math.nextafter(EPSILON_CAP, math.inf), 40.0, math.inf, 0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="EPSILON_CAP|epsilon"):
            make(bad)


def test_every_registered_randomizer_is_covered_by_the_constructor_check():
    assert set(MAKERS) | {"threshold_rr"} == set(REGISTRY)


# ---- the realised-ε audit ------------------------------------------------------------------------------------

@pytest.mark.parametrize("r", CAP_CASES)
def test_at_the_cap_the_realised_epsilon_does_not_exceed_the_claim(r):
    result = realised_audit(r)
    assert result.passed, f"{r}: realised {result.max_log_ratio!r} > claimed {r.epsilon}"


@pytest.mark.parametrize("cls", GRID_CASES)
def test_realised_audit_passes_and_is_tight_over_the_whole_grid(cls):
    """Every ε of the grid: the realised worst ratio is at most ε and within 1e-3·max(1, ε) of it (the coarsest
    threshold, k-subset's at the cap, resolves its rare event to ~140 steps of 2^-53)."""
    for eps in EPSILON_GRID:
        for r in cls.realised_cases(eps):
            result = realised_audit(r)
            assert result.passed, f"{r}: realised {result.max_log_ratio!r} > claimed {eps!r}"
            assert result.max_log_ratio > eps - 1e-3 * max(1.0, eps), f"{r}: over-charges"


def test_realised_audit_fails_a_slightly_smaller_claim():
    """Tight from both sides: claiming 1e-3 less than what runs fails, at small ε and at the cap."""
    for eps in (0.05, 1.0, EPSILON_CAP):
        for cls in REGISTRY.values():
            for r in cls.realised_cases(eps):
                r.epsilon = eps - 2e-3 * max(1.0, eps)
                assert not realised_audit(r).passed, repr(r)


def test_registry_sweep_runs_every_case():
    results = realised_registry((0.5, EPSILON_CAP))
    assert len(results) == sum(len(list(c.realised_cases(e))) for c in REGISTRY.values() for e in (0.5, EPSILON_CAP))
    assert all(r.passed for r in results)


def test_realised_distributions_sum_to_exactly_one_and_match_the_float_ones():
    for cls in REGISTRY.values():
        for r in cls.realised_cases(2.0):
            for x in r.audit_inputs()[:3]:
                exact = r.realised_distribution(x)
                assert sum(exact) == 1
                assert np.allclose([float(p) for p in exact], r.output_distribution(x), rtol=1e-9, atol=1e-15)


def test_laplace_baseline_realised_epsilon_at_its_production_lattice_over_the_grid():
    """The 2^12-cell lattice is too large to enumerate; its exact bound ln max P(G=g)/P(G=g+s) is checked."""
    for eps in EPSILON_GRID[::4] + (EPSILON_CAP,):
        realised = LaplaceMin(eps).realised_epsilon()
        assert eps - 1e-3 * max(1.0, eps) < realised <= eps


# ---- the samplers draw what the audit reads ------------------------------------------------------------------

def test_rr_flips_exactly_at_its_realised_rate_at_large_epsilon():
    """At ε = 12 the flip is rare (6e-6); 4e7 coins see ~250 of them, at the rate the estimator uses."""
    rng, n = np.random.default_rng(101), 40_000_000
    flips = np.count_nonzero(flip(np.zeros(n, dtype=np.int8), 12.0, rng))
    q = flip_probability(12.0)
    assert abs(flips - n * q) < 5 * math.sqrt(n * q)


def _oue_64_bit(eps: float) -> OUE:
    """OUE's 64-bit draw path (it runs from ε ≈ 15.3, where q is too rare to count) at a countable q."""
    r = OUE(eps, 2)
    r.width, r.threshold = 64, grid_ceil(1 / (math.exp(eps) + 1), 64)
    return r


@pytest.mark.parametrize("make", [lambda: GRR(9.0, 3), lambda: KSubset(9.0, 4, 2), lambda: HadamardResponse(9.0, 3),
                                  lambda: OUE(11.0, 2), lambda: _oue_64_bit(9.0)],
                         ids=["grr", "ksubset", "hadamard", "oue-32bit", "oue-64bit"])
def test_rare_events_happen_at_the_realised_rate(make):
    """Users all hold 0; how often the report misses 0 (the rare event) matches the realised distribution."""
    r, rng, n = make(), np.random.default_rng(102), 8_000_000
    reports = np.concatenate([r.randomize(np.zeros(n // 4, dtype=np.int64), rng) for _ in range(4)])
    summary = r.aggregate(reports)
    probs = [float(p) for p in r.realised_distribution(0)]
    if isinstance(r, OUE):   # bit 1 is set w.p. q
        expected, seen = n * float(Fraction(r.threshold, 1 << r.width)), summary[1]
    elif isinstance(r, HadamardResponse):
        expected, seen = n * float(flip_probability(9.0)), n - r.hits(summary)[0]
    elif isinstance(r, KSubset):
        expected, seen = n * float(r.miss_probability()), n - summary[0]
    else:
        expected, seen = n * (1 - probs[0]), n - summary[0]
    assert expected > 100 and abs(seen - expected) < 5 * math.sqrt(expected)


class _Uniforms:
    """A generator whose ``random()`` returns one chosen value (everything else from a real generator): puts a
    sampler's comparison exactly on either side of the threshold the audit reads."""

    def __init__(self, u: float):
        self.u, self._rng = u, np.random.default_rng(0)

    def random(self, n):
        return np.full(n, self.u)

    def __getattr__(self, name):
        return getattr(self._rng, name)


def _sides(k: int) -> tuple[_Uniforms, _Uniforms]:
    """Uniforms (k-1)/2^53 (below the threshold k/2^53: the rare event happens) and k/2^53 (it does not)."""
    return _Uniforms(math.ldexp(k - 1, -53)), _Uniforms(math.ldexp(k, -53))


def test_samplers_compare_uniforms_with_exactly_the_threshold_the_audit_reads():
    """At the cap: one step of 2^-53 below the audited threshold the rare event happens, at it it does not.
    (The sampler before issue #10 drew the keep, ``random() < p``: it never flipped on a small uniform.)"""
    eps = EPSILON_CAP
    k = int(RandomizedResponse(eps).realised_distribution(0)[1] * 2 ** 53)
    lo, hi = _sides(k)
    assert np.all(flip(np.zeros(50, np.int8), eps, lo) == 1) and np.all(flip(np.zeros(50, np.int8), eps, hi) == 0)
    r = KSubset(eps, 5, 2)
    lo, hi = _sides(r.miss_threshold)
    assert not r.randomize(np.zeros(50, np.int64), lo)[:, 0].any() and r.randomize(np.zeros(50, np.int64), hi)[:, 0].all()
    r = HadamardResponse(eps, 3)
    lo, hi = _sides(k)
    assert np.all(r.hits(r.aggregate(r.randomize(np.zeros(50, np.int64), lo))) < 50)
    assert r.hits(r.aggregate(r.randomize(np.zeros(50, np.int64), hi)))[0] == 50
    r = Piecewise(eps)
    lo, hi = _sides(int(Fraction(r.outside) * 2 ** 53))
    left, right = r._interval(np.float64(1.0))
    assert np.all(r.randomize(np.ones(50), lo) < left) and np.all(r.randomize(np.ones(50), hi) >= left)


# ---- the old failure, and the audit catching it ----------------------------------------------------------------

class _OldSamplerRR(RandomizedResponse):
    """RR as it was before issue #10: keep = random() < 1/(1+e^-ε), no cap. Deliberately broken."""

    def __init__(self, epsilon: float):
        self.epsilon, self.input_size = float(epsilon), 2

    def realised_distribution(self, x: float) -> list[Fraction]:
        keep = below(1 / (1 + math.exp(-self.epsilon)))   # what `random() < p` realises
        return [1 - keep, keep] if x == 1 else [keep, 1 - keep]


def test_the_old_sampler_at_epsilon_40_releases_the_exact_bit_and_the_audit_says_so():
    result = realised_audit(_OldSamplerRR(40.0))
    assert math.isinf(result.max_log_ratio) and not result.passed


def test_the_old_sampler_already_exceeds_its_claim_at_the_cap():
    assert not realised_audit(_OldSamplerRR(EPSILON_CAP)).passed
    assert realised_audit(RandomizedResponse(EPSILON_CAP)).passed


# ---- the Laplace baseline against Mironov's attack -------------------------------------------------------------

def test_discrete_laplace_outputs_are_reachable_from_every_input_with_bounded_ratio():
    """Mironov 2012: x + float Laplace lands on floats whose set depends on x. Here every report lies on one
    lattice, and for two inputs at the ends of the domain (and two neighbours) every output reachable from
    one is reachable from the other, with ratio ≤ e^ε in the realised pmf."""
    for eps in (0.5, 4.0, EPSILON_CAP):
        r = LaplaceMin(eps, 3)
        for a, b in ((-1.0, 1.0), (0.25, 0.5), (0.3, 0.3 + 1e-12)):
            pa_, pb = r.realised_distribution(a), r.realised_distribution(b)
            assert all(p > 0 for p in pa_) and all(p > 0 for p in pb)
            worst = max(max(p / q, q / p) for p, q in zip(pa_, pb))
            assert worst <= Fraction(math.exp(eps)) * (1 + Fraction(1, 10 ** 12))


def test_discrete_laplace_reports_share_one_lattice_whatever_the_input():
    r, rng = LaplaceMin(4.0), np.random.default_rng(7)
    for x in (0.123456789, -0.777, 1.0):
        y = r.randomize(np.full(10_000, x), rng)
        steps = (y + 1) * (r.cells / 2)
        assert np.array_equal(steps, np.rint(steps))


def test_discrete_laplace_noise_has_the_laplace_variance():
    r, rng = LaplaceMin(2.0), np.random.default_rng(8)
    y = r.randomize(np.zeros(400_000), rng)
    assert abs(y.mean()) < 5 * math.sqrt(8 / 4 / 400_000)
    assert y.var() == pytest.approx(8 / 4, rel=0.02)


# ---- the planner refuses above the cap, before anything runs -----------------------------------------------------

def _table() -> Table:
    cols = {"x": Column("x", "DOUBLE", False, NumericDomain(0, 100))}
    return Table(name="t", source_kind="file", source_text="/nonexistent.parquet", from_sql="'/nonexistent.parquet'",
                 source_id="file:/nonexistent.parquet", columns=cols, budget_epsilon=100.0, budget_delta=1e-6)


def _plan(sql: str, n: int = 10_000):
    return plan(parse_one(sql), _table(), PublicFacts(n, 1, 100.0, 1e-6), {}, sql)


@pytest.mark.parametrize("sql", [
    "SELECT LDP_MEAN(x) FROM t EPSILON 40",
    "SELECT LDP_MEAN(x) FROM t EPSILON 30.5",
    "SELECT LDP_MEAN(x), LDP_SUM(x) FROM t EPSILON 40",
    "SELECT LDP_MEAN(x, epsilon => 35), LDP_SUM(x, epsilon => 5) FROM t EPSILON 40",
    "SELECT LDP_MIN(x) FROM t EPSILON 40",
    "SELECT LDP_MEDIAN(x) FROM t EPSILON 40",
])
def test_planner_refuses_a_per_randomizer_epsilon_above_the_cap(sql):
    with pytest.raises(ldpql.PlanError) as info:
        _plan(sql)
    text = str(info.value) + (info.value.hint or "")
    assert "cap" in text and f"{EPSILON_CAP:g}" in text and "lower EPSILON" in text


def test_planner_accepts_the_cap_and_shares_that_stay_under_it():
    assert _plan("SELECT LDP_MEAN(x) FROM t EPSILON 30").aggregates[0].epsilon == EPSILON_CAP
    p = _plan("SELECT LDP_MEAN(x, epsilon => 20), LDP_SUM(x, epsilon => 20) FROM t EPSILON 40")
    assert [a.epsilon for a in p.aggregates] == [20, 20]


def test_planner_hint_offers_splitting_epsilon_when_there_are_several_aggregates():
    with pytest.raises(ldpql.PlanError) as info:
        _plan("SELECT LDP_MEAN(x), LDP_SUM(x) FROM t EPSILON 40")
    assert "epsilon => shares" in info.value.hint


def test_shuffle_candidate_whose_local_epsilon0_exceeds_the_cap_is_rejected_with_that_reason(monkeypatch):
    """10^18 users: amplification would let each user run RR at ε₀ ≈ 33 > the cap for a central ε = 1. (Batch
    sizes taken as exact: scipy's binomial quantile does not converge at that n.)"""
    from ldpql.mechanisms import shuffle
    monkeypatch.setattr(shuffle, "batch_floor", lambda n, batches, exact=False, slack=0.0: n // max(batches, 1))
    n = 10 ** 18
    b = shuffle_budget(1.0, 1e-6, n, 1 << 10)
    assert b.epsilon0 > EPSILON_CAP and not b.feasible and b.local_epsilon == 1.0 and "cap" in b.reason
    p = _plan("SELECT LDP_MEDIAN(x) FROM t EPSILON 1 DELTA 1e-6 OPTIONS (model = 'auto')", n=n)
    shuffle = next(c for c in p.aggregates[0].candidates if c.model == "shuffle")
    assert "cap" in shuffle.rejected and p.aggregates[0].chosen.model == "local"
    assert "cap" in str(p)   # EXPLAIN lists the rejected candidate with its reason


def test_refused_statement_spends_nothing_and_writes_no_ledger_row():
    con = ldpql.connect(seed=5, evaluation=True)
    con.register("t", pa.table({"x": np.linspace(0, 100, 500)}), private={"x": (0, 100)}, budget=100)
    before = (con.remaining_budget("t"), len(con.ledger.charges()))
    for sql in ("SELECT LDP_MEAN(x) FROM t EPSILON 40", "SELECT LDP_COUNT(x > 3) FROM t EPSILON 31"):
        with pytest.raises(ldpql.PlanError, match="cap"):
            con.sql(sql)
    assert (con.remaining_budget("t"), len(con.ledger.charges())) == before
    (v,), = con.sql("SELECT LDP_MEAN(x) FROM t EPSILON INF").fetchall()   # noise off still works
    assert v == pytest.approx(50.0)
    con.close()
