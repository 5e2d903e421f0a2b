"""audit7: a hostile review of the fixes of audit6's F3 (a wrong declared σ: the σ check on round 1's released
counts and the profile-likelihood refit) and F5 (every LDP_MEAN candidate on a Gaussian column averages the values
clamped to the padded range [lo − 4σ_max, hi + 4σ_max]) for Joseph, Kulkarni, Mao, Wu, "Locally Private Gaussian
Estimation" (NeurIPS 2019). Passing tests record what held; ``xfail(strict=True)`` tests record a finding with its
measured numbers. The larger measurements (60 to 400 runs a cell, fresh data every run, n = 10^5, ε = 1, 95%
intervals) are in the module's comments; the tests rerun a few runs of each with fixed seeds."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql import expr as E
from ldpql.audit import audit, realised_audit
from ldpql.mechanisms import Reply
from ldpql.mechanisms import gaussian as G
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.rr import RandomizedResponse

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from audit6_gaussian_coverage import run, setting

X = E.Column("x")
MU = 123.4


def _drive(s, x, rounds, rng, replies=None):
    """Run a protocol on values x like the executor's exact path; returns (estimate, rounds seen, replies sent).
    With ``replies`` given, those are sent instead (the values are then never looked at)."""
    n = len(x)
    perm = rng.permutation(n)
    xs = np.clip(x, s.origin, s.origin + s.width) - s.origin
    gen, seen, sent = G.protocol(s, X, n, rounds), [], []
    rnd = next(gen)
    try:
        while True:
            seen.append((repr(rnd.randomizer), rnd.users))
            if replies is None:
                a, b = rnd.users
                mine = xs[perm[math.ceil(a * n - 0.5):math.ceil(b * n - 0.5)]]
                hist = np.bincount(rnd.encoding.inputs(mine), minlength=rnd.encoding.size)
                reply = Reply(rnd.randomizer.sample_aggregate(hist, rng), int(hist.sum()))
            else:
                reply = replies[len(sent)]
            sent.append(reply)
            rnd = gen.send(reply)
    except StopIteration as stop:
        return stop.value, seen, sent


def _runs(s, rounds, runs, seed, data):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        est = run(s, data(rng), rounds, rng)
        lo, hi = est.interval[0][0], est.interval[1][0]
        out.append((est.extra["sigma_check"].flagged, lo <= MU <= hi, est.values[0]))
    return out


def _gauss(sigma, n=100_000):
    return lambda rng: rng.normal(MU, sigma, n)


# ---- 1. privacy: the check is post-processing of released counts --------------------------------------------------

@pytest.mark.parametrize("decl, rounds", [((1, 1), 2), ((1, 1), 1), ((0.25, 16), 2), ((0.25, 16), 1)])
def test_sigma_check_and_refit_are_a_function_of_the_released_replies_only(decl, rounds):
    """Replaying a run's replies without its values gives the same answer, check and note (the generator never sees
    a value; the check adds no round, no randomness, no ε), and a flagged run (data σ = 10 against a declared 1 or
    [0.25, 16] at 64) asks exactly the rounds an unflagged one asks: same randomizers at the same ε, same users."""
    s = setting(-1000, 1000, *decl, 1)
    bad_sigma = 10.0 if decl == (1, 1) else 64.0
    flagged, seen_bad, sent = _drive(s, np.random.default_rng(1).normal(MU, bad_sigma, 100_000), rounds,
                                     np.random.default_rng(2))
    again, _, _ = _drive(s, np.zeros(100_000), rounds, np.random.default_rng(2), replies=sent)
    assert flagged.extra["sigma_check"].flagged and "WARNING" in flagged.note
    assert again.values[0] == flagged.values[0] and again.note == flagged.note
    assert again.interval[0][0] == flagged.interval[0][0] and again.interval[1][0] == flagged.interval[1][0]
    ok, seen_ok, _ = _drive(s, np.random.default_rng(1).normal(MU, 1.0, 100_000), rounds, np.random.default_rng(2))
    assert not ok.extra["sigma_check"].flagged
    assert [(r, u) for r, u in seen_ok] == [(r, u) for r, u in seen_bad]


def test_flagged_and_unflagged_answers_charge_the_same_and_log_the_same():
    """SQL: a flagged answer (declared σ = 1, data σ = 5) and an unflagged one (data σ = 1) each charge the
    statement's ε once, one ledger row each."""
    rng = np.random.default_rng(3)
    con = ldpql.connect(seed=7, evaluation=True)
    for name, sd in (("ok", 1.0), ("bad", 5.0)):
        con.register(name, pa.table({"x": rng.normal(MU, sd, 60_000)}),
                     private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1, "not_null": True}}, budget=10)
        text = str(con.sql(f"SELECT LDP_MEAN(x) FROM {name} EPSILON 2 OPTIONS (mechanism = 'gaussian')"))
        assert ("WARNING" in text) == (name == "bad")
        assert con.remaining_budget(name) == pytest.approx(8.0)
    rows = [row for row in con.sql("SHOW LEDGER").fetchall() if row[2] == "query"]
    assert sorted(row[3] for row in rows) == ["bad", "ok"]


@pytest.mark.parametrize("eps", [0.3, 1.0, 8.0])
def test_every_gaussian_randomizer_audits_tight_from_both_sides(eps):
    """GRR(4) (RR1) and binary RR (KVRR2) at the ε the protocols run, exact and as their samplers run: the claimed ε
    passes and the worst ratio is within 10⁻³ of it; the discrete Laplace of UVRR2 at its audited lattices."""
    for r in (GRR(eps, 4), RandomizedResponse(eps)):
        for result in (audit(r), realised_audit(r)):
            assert result.passed and result.max_log_ratio > eps - 1e-3 * max(1.0, eps), repr(r)
    for r in G.LaplaceSum.audit_cases():
        result = audit(r)
        assert result.passed and result.max_log_ratio > r.epsilon - 1e-3 * max(1.0, r.epsilon), repr(r)


# ---- 2. coverage ------------------------------------------------------------------------------------------------
# Measured (fresh data every run; coverage of µ by the 95% interval; Clopper-Pearson 95% CIs):
#   σ declared 2, data 1 (KV2)      flagged 60/60, covered 60/60 [0.94, 1]   rmse 0.036
#   σ declared 1, data 2 (KV2)      flagged 60/60, covered 60/60 [0.94, 1]   rmse 0.033
#   σ declared 3, data 1 (KV2)      flagged 60/60, covered 60/60 [0.94, 1]   rmse 0.035
#   σ declared 1, data 3 (KV2)      flagged 60/60, covered 60/60 [0.94, 1]   rmse 0.051
#   σ declared 10, data 1 (KV2)     flagged 100/100, covered 100/100 [0.96, 1] rmse 2.07 (bins start at 8)
#   σ declared 1, data 10 (KV2)     flagged 100/100, covered 100/100 [0.96, 1] rmse 0.25
#   σ declared 100, data 1 (KV2)    flagged 60/60, covered 59/60 [0.91, 1]   rmse 30, bias −26, width 60 (bins of 64)
#   σ declared 1, data 100 (KV2)    flagged 60/60, covered 60/60 [0.94, 1]   rmse 1.09, width 8.5
#   σ declared 3, data 1 (KV1)      flagged 60/60, covered 59/60 [0.91, 1]
#   σ declared 1, data 3 (KV1)      flagged 60/60, covered 60/60 [0.94, 1]
#   σ range [1, 2], data 8 (UV2)    flagged 60/60, covered 58/60 [0.88, 1.00]
#   σ range [4, 8], data 0.5 (UV2)  flagged 60/60, covered 58/60 [0.88, 1.00]
#   true σ (KV2, µ = 123.4)         flagged 2/400 = 0.5% [0.06%, 1.8%], covered 389/400 = 0.973 [0.951, 0.986]
#   true σ (KV1)                    flagged 1/200 = 0.5% [0.01%, 2.8%], covered 191/200 = 0.955 [0.916, 0.979]
#   true σ = σ_max of [1, 4] (UV2)  flagged 0/60, covered 59/60 [0.91, 1]
#   true σ = σ_min of [0.25, 16] (UV2) flagged 0/60, covered 59/60 [0.91, 1]
#   true σ = 0.25, known (KV2)      flagged 1/60, covered 60/60 [0.94, 1]
#   true σ, paper constants (KV2)   flagged 0/60, covered 58/60 [0.88, 1.00]
#   true σ, n = 26,000 ≈ k_min (KV2) flagged 1/60, covered 56/60 = 0.933 [0.84, 0.98]
#   µ = 1 on the bound of [0, 1], true σ = 1 (KV2)       flagged 2/60, covered 57/60 = 0.95 [0.86, 0.99]
#   µ = 1 on the bound of [0, 1], declared 1, data 3     flagged 60/60, covered 58/60 [0.88, 1.00]
#   Student t, 3 df, sd 1, declared σ = 1 (KV2)          flagged 60/60, covered 60/60, bias +0.013
#   bimodal (modes µ ± 0.9, sd 1), declared σ = 1 (KV2)  flagged 60/60, covered 0/60 [0, 0.06], bias +0.22   (finding)
#   lognormal (shape 0.5, sd 1), declared σ = 1 (KV2)    flagged 60/60, covered 0/60 [0, 0.06], bias −0.20   (finding)

@pytest.mark.parametrize("declared, data, rounds", [(2, 1, 2), (1, 2, 2), (3, 1, 2), (1, 3, 2), (100, 1, 2),
                                                    (1, 100, 2), (3, 1, 1), (1, 3, 1)])
def test_a_sigma_off_by_2_3_or_100_times_is_flagged_on_every_answer_and_covered(declared, data, rounds):
    out = _runs(setting(-1000, 1000, declared, declared, 1), rounds, 8, seed=20 + declared + data, data=_gauss(data))
    assert all(flag for flag, _, _ in out) and sum(hit for _, hit, _ in out) >= 7


@pytest.mark.parametrize("decl, sd", [((1, 2), 8.0), ((4, 8), 0.5)])
def test_a_sigma_range_declared_too_narrow_is_flagged_and_the_uv_answer_covers(decl, sd):
    out = _runs(setting(-1000, 1000, *decl, 1), 2, 10, seed=30, data=_gauss(sd))
    assert all(flag for flag, _, _ in out) and sum(hit for _, hit, _ in out) >= 8


@pytest.mark.parametrize("name, s, rounds, n", [("kv2", setting(-1000, 1000, 1, 1, 1), 2, 100_000),
                                                ("kv1", setting(-1000, 1000, 1, 1, 1), 1, 100_000),
                                                ("paper", setting(-1000, 1000, 1, 1, 1, profile="paper"), 2, 100_000),
                                                ("uv2_at_sigma_max", setting(-1000, 1000, 1, 4, 1), 2, 100_000),
                                                ("kv2_near_k_min", setting(-1000, 1000, 1, 1, 1), 2, 26_000)])
def test_at_the_true_sigma_the_check_rarely_flags_and_the_interval_covers(name, s, rounds, n):
    """False alarms at the declared σ: measured 2/400 (KV2), 1/200 (KV1), 0/60 (paper constants, UV2 at σ_max),
    1/60 (n near k_min). Here 20 runs a case: at most 2 flags, at least 17 covered."""
    sd = 4.0 if name == "uv2_at_sigma_max" else 1.0
    out = _runs(s, rounds, 20, seed=40, data=_gauss(sd, n))
    assert sum(flag for flag, _, _ in out) <= 2 and sum(hit for _, hit, _ in out) >= 17


@pytest.mark.parametrize("declared, data", [(1, 1), (1, 3)])
def test_mu_on_the_bound_of_a_narrow_range_is_covered(declared, data):
    """µ = 1 in BETWEEN 0 AND 1 (the padded clamp [−4, 5] cuts data σ = 3 at 1.7σ: the refit covers µ anyway,
    58/60 measured)."""
    rng = np.random.default_rng(50)
    s, hits = setting(0, 1, declared, declared, 1), 0
    for _ in range(12):
        est = run(s, rng.normal(1.0, data, 100_000), 2, rng)
        hits += est.interval[0][0] <= 1.0 <= est.interval[1][0]
    assert hits >= 10


def test_heavy_tails_t3_are_flagged_and_the_refit_covers():
    out = _runs(setting(-1000, 1000, 1, 1, 1), 2, 10, seed=60,
                data=lambda rng: MU + rng.standard_t(3, 100_000) / math.sqrt(3))
    assert all(flag for flag, _, _ in out) and sum(hit for _, hit, _ in out) >= 9


# fixed (was a strict xfail): A1
@pytest.mark.parametrize("shape", ["bimodal", "lognormal"])
def test_flagged_answers_on_non_gaussian_data_cover_or_say_the_shape_does_not_fit(shape):
    def bimodal(rng):
        return MU + np.where(rng.random(100_000) < .5, -0.9, 0.9) + rng.normal(0, math.sqrt(0.19), 100_000)

    def lognormal(rng):
        v = (math.exp(0.25) - 1) * math.exp(0.25)
        return MU + (rng.lognormal(0, 0.5, 100_000) - math.exp(0.125)) / math.sqrt(v)
    rng = np.random.default_rng(70)
    s, good = setting(-1000, 1000, 1, 1, 1), 0
    for _ in range(8):
        est = run(s, (bimodal if shape == "bimodal" else lognormal)(rng), 2, rng)
        good += est.interval[0][0] <= MU <= est.interval[1][0] or "not Gaussian" in est.note
    assert good >= 6


# ---- robustness of the refit (4.) ----------------------------------------------------------------------------------

# fixed (was a strict xfail): A2
def test_the_refit_answers_on_data_far_outside_the_declaration():
    x = np.random.default_rng(1).normal(0, 1e4, 100_000)
    con = ldpql.connect(seed=4, evaluation=True)
    con.register("h", pa.table({"x": x}), private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1, "not_null": True}}, budget=10)
    r = con.sql("SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = 'gaussian')")
    assert math.isfinite(r.fetchone()[0])


# fixed (was a strict xfail): A4
def test_a_grossly_understated_sigma_is_flagged_or_covered():
    x = np.random.default_rng(1).normal(0, 1e4, 100_000)
    truth = np.clip(x, -1004, 1004).mean()
    con = ldpql.connect(seed=1, evaluation=True)
    con.register("h", pa.table({"x": x}), private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1, "not_null": True}}, budget=10)
    r = con.sql("SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = 'gaussian')")
    lo, hi, _ = r.intervals()[0][0]
    assert "WARNING" in str(r) or lo <= truth <= hi


# fixed (was a strict xfail): A3
def test_a_refit_answer_stays_within_the_padded_range():
    s = setting(-1000, 1000, 1, 1, 1)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        est = run(s, rng.uniform(-1000, 1000, 100_000), 1, rng)
        assert -1004 <= est.values[0] <= 1004, est.values[0]


# ---- 3. estimand consistency (F5) ----------------------------------------------------------------------------------

def _grouped_narrow():
    rng = np.random.default_rng(3)
    n0, n1 = 80_000, 30_000
    x = np.concatenate([rng.normal(0.9, 1, n0), rng.normal(0.1, 1, n1)])
    g, w = np.repeat([0, 1], [n0, n1]), rng.integers(0, 2, n0 + n1)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": x, "g": g, "w": w}), private={"x": {"between": (0, 1), "gaussian_sigma": 1, "not_null": True}},
                 public=["g", "w"], budget=1e9)
    return con, x, g, w


def test_evaluate_truth_is_the_padded_clamp_mean_for_every_candidate_under_where_and_group_by():
    """Unequal groups (80,000 and 30,000 users, µ = 0.9 and 0.1 in [0, 1], σ = 1) and a WHERE on a public column:
    every candidate's EVALUATE truth is the group's mean clamped to [−4, 5] (the [0, 1]-clamped means, 0.650 and
    0.350, are what audit6 found), and every candidate lands near it."""
    con, x, g, w = _grouped_narrow()
    want = {str(k): np.clip(x[(g == k) & (w == 1)], -4, 5).mean() for k in (0, 1)}
    for mech in ("duchi", "piecewise", "hybrid", "gaussian"):
        r = con.sql(f"EVALUATE SELECT g, LDP_MEAN(x) FROM h WHERE w = 1 GROUP BY g EPSILON 1 "
                    f"OPTIONS (mechanism = '{mech}') REPEAT 3")
        for row in (dict(zip(r.columns, t)) for t in r.fetchall()):
            assert row["truth"] == pytest.approx(want[row["group"]], abs=1e-9), mech
            assert abs(row["mean_estimate"] - want[row["group"]]) < 0.15, mech


def test_nulls_count_the_same_for_every_candidate():
    """With 10% NULL the truth is one number for every candidate: the padded-clamp mean with NULLs as the declared
    NULL value (branch gauss2) or without them (branch nulls, where a nullable column skips NULLs)."""
    rng = np.random.default_rng(5)
    x = rng.normal(0.9, 1, 60_000)
    null = rng.random(60_000) < 0.1
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": pa.array(x, mask=null)}),
                 private={"x": {"between": (0, 1), "gaussian_sigma": 1}}, budget=1e9)
    truths = set()
    for mech in ("collision", "split"):   # (a nullable column: the candidates that skip NULLs)
        r = con.sql(f"EVALUATE SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = '{mech}') REPEAT 2")
        truths.add(round(dict(zip(r.columns, r.fetchone()))["truth"], 12))
    as_default = round(np.clip(np.where(null, 0.5, x), -4, 5).mean(), 12)
    skipped = round(np.clip(x[~null], -4, 5).mean(), 12)
    assert len(truths) == 1 and truths.pop() in (as_default, skipped)


def test_the_planner_picks_the_gaussian_protocol_where_it_is_measured_more_accurate():
    """µ = 0.5 in [0, 1], σ = 1, n = 10^5, ε = 2: the planner picks the two-round protocol (±0.0174 against HM's
    worst case ±0.0285), and measured against EVALUATE's truth it is (rmse 0.0062 against 0.012 for HM and PM, 40
    repeats). At ε = 4 the planner rejects it (±0.0137 against HM's ±0.0131; main's near-minimax rule then picks PM)
    and PM measured 0.0039 against its 0.0050: both choices agree with the measurement."""
    rng = np.random.default_rng(5)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": rng.normal(0.5, 1, 100_000)}),
                 private={"x": {"between": (0, 1), "gaussian_sigma": 1, "not_null": True}}, budget=1e9)
    assert "mechanism * gaussian:" in str(con.sql("EXPLAIN SELECT LDP_MEAN(x) FROM h EPSILON 2"))
    rmse = {}
    for mech in ("gaussian", "hybrid", "piecewise", "duchi"):
        r = con.sql(f"EVALUATE SELECT LDP_MEAN(x) FROM h EPSILON 2 OPTIONS (mechanism = '{mech}') REPEAT 20")
        rmse[mech] = dict(zip(r.columns, r.fetchone()))["rmse"]
    assert rmse["gaussian"] < min(rmse["hybrid"], rmse["piecewise"], rmse["duchi"])


def test_explain_shows_every_candidate_with_its_basis_and_the_padded_range():
    con, *_ = _grouped_narrow()
    text = str(con.sql("EXPLAIN SELECT g, LDP_MEAN(x) FROM h WHERE w = 1 GROUP BY g EPSILON 1"))
    assert "clamped to [-4, 5]" in text and "σ check" in text
    for mech in ("duchi", "piecewise", "hybrid", "gaussian_1round"):
        assert f"rejected    {mech}: ±" in text
    assert "(worst case over the domain)" in text and "assuming the declared Gaussian" in text


# ---- 4. bad input spends nothing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("stmt", ["SELECT LDP_MEAN(y) FROM h EPSILON 1 OPTIONS (mechanism = 'gaussian')",
                                  "SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = 'gaussian', confidence = 1.5)",
                                  "SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (constants = 'loose')",
                                  "SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (beta = -0.1)",
                                  "SELECT LDP_MEAN(x) FROM h EPSILON 0.01 OPTIONS (mechanism = 'gaussian')"])
def test_bad_gaussian_statements_are_refused_without_spending_or_quoting_data(stmt):
    rng = np.random.default_rng(9)
    x = rng.normal(MU, 1, 30_000)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": x, "y": rng.normal(0, 1, 30_000)}),
                 private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1, "not_null": True}, "y": {"between": (-5, 5)}}, budget=10)
    with pytest.raises(ldpql.Error) as err:
        con.sql(stmt)
    assert con.remaining_budget("h") == 10
    assert f"{x[0]:.4g}" not in str(err.value) and "123.4" not in str(err.value)
