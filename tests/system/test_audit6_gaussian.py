"""audit6: a hostile review of the Gaussian means (Joseph, Kulkarni, Mao, Wu, "Locally Private Gaussian
Estimation", NeurIPS 2019). Passing tests record what held; ``xfail(strict=True)`` tests record a finding with its
measured numbers (the heavy measurements: ``examples/audit6_gaussian_coverage.py``)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql
from ldpql import expr as E
from ldpql.audit import audit
from ldpql.executor import _max_coverage
from ldpql.mechanisms import REGISTRY, Reply
from ldpql.mechanisms import gaussian as G
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.rr import RandomizedResponse

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from audit6_gaussian_coverage import run, setting

X = E.Column("x")
SETTINGS = {"kv": G.Setting(-1000, 1000, 1.0, 1.0, 1.0, 0.0125), "uv": G.Setting(-1000, 1000, 0.25, 16.0, 1.0, 0.0125)}


def coverage(s, n, rounds, runs, mu, sigma, seed):
    rng = np.random.default_rng(seed)
    hits, errs = 0, []
    for _ in range(runs):
        est = run(s, rng.normal(mu, sigma, n), rounds, rng)
        hits += est.interval[0][0] <= mu <= est.interval[1][0]
        errs.append(est.values[0] - mu)
    return hits / runs, math.sqrt(np.mean(np.square(errs)))


# ---- what held: privacy ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["kv", "uv"])
@pytest.mark.parametrize("rounds", [1, 2])
def test_every_user_sends_one_message_through_an_audited_randomizer_at_the_claimed_epsilon(kind, rounds):
    """Drive each protocol on real data: every round is GRR(4), RR or LaplaceSum at exactly ε, the rounds' user
    intervals are disjoint (max coverage = ε), and every input index lies in the randomizer's audited domain, also
    for the extreme shifted values 0 and W (NaN/inf/NULL are mapped to the domain in SQL before the shift)."""
    s, n = SETTINGS[kind], 200_000
    rng = np.random.default_rng(3)
    x = np.clip(rng.normal(5.0, 3.0, n), s.origin, s.origin + s.width) - s.origin
    extremes = np.array([0.0, s.width, s.width / 2, np.nextafter(s.width, 0)])
    gen, spent = G.protocol(s, X, n, rounds), []
    rnd = next(gen)
    try:
        while True:
            assert type(rnd.randomizer) in (GRR, RandomizedResponse, G.LaplaceSum)
            assert rnd.randomizer.epsilon == s.epsilon and rnd.randomizer.name in REGISTRY
            for v in (x[:5000], extremes):
                idx = rnd.encoding.inputs(v)
                assert idx.min() >= 0 and idx.max() < rnd.randomizer.input_size == rnd.encoding.size
            spent.append((*rnd.users, rnd.randomizer.epsilon))
            a, b = rnd.users
            mine = x[math.ceil(a * n - 0.5):math.ceil(b * n - 0.5)]
            hist = np.bincount(rnd.encoding.inputs(mine), minlength=rnd.encoding.size)
            rnd = gen.send(Reply(rnd.randomizer.sample_aggregate(hist, rng), int(hist.sum())))
    except StopIteration:
        pass
    assert _max_coverage(spent) == pytest.approx(s.epsilon)


def test_laplace_sum_audit_is_tight_at_the_audited_lattices():
    for r in G.LaplaceSum.audit_cases():
        assert audit(r).passed


@pytest.mark.parametrize("decl", ["SIGMA 1", "SIGMA BETWEEN 0.25 AND 16"])
@pytest.mark.parametrize("rounds", [1, 2])
def test_hostile_values_neither_fail_nor_overspend(tmp_path, decl, rounds):
    """NaN, ±inf, ±1e308 and NULL in a Gaussian column: the statement runs on both paths, the answer is finite, and
    the ledger charges exactly the statement's ε once (each user in one group of the protocol)."""
    rng = np.random.default_rng(8)
    n = 60_000
    x = rng.normal(3.0, 1.0, n)
    x[:6] = [np.nan, np.inf, -np.inf, 1e308, -1e308, 0.0]
    mask = np.zeros(n, dtype=bool)
    mask[5] = True
    path = tmp_path / "hostile.parquet"
    pq.write_table(pa.table({"x": pa.array(x, mask=mask)}), path)
    con = ldpql.connect(seed=5, evaluation=True)
    # NOT NULL: the Gaussian protocols run only on a column declared without NULLs; the hostile NULL and NaN then
    # count as the midpoint (the promise is never checked), which must not fail either
    con.sql(f"CREATE TABLE h FROM '{path}' (x PRIVATE BETWEEN -100 AND 100 DISTRIBUTION GAUSSIAN ({decl}) NOT NULL) "
            "BUDGET EPSILON 10")
    for sim in ("auto", "per_user"):
        r = con.sql(f"SELECT LDP_MEAN(x) FROM h EPSILON 4 OPTIONS (mechanism = 'gaussian{'' if rounds == 2 else '_1round'}', "
                    f"simulation = '{sim}')")
        assert math.isfinite(r.fetchone()[0])
    assert con.remaining_budget("h") == pytest.approx(2.0)
    con.close()


# ---- what held: honesty in the theory-free regime ------------------------------------------------------------

@pytest.mark.parametrize("kind, rounds, n, sigma", [("kv", 2, 100_000, 1.0), ("uv", 2, 100_000, 3.0),
                                                    ("kv", 1, 100_000, 1.0)])
def test_interval_covers_mu_on_fresh_gaussian_data(kind, rounds, n, sigma):
    """60 runs here (400 in the script: KV2 0.963 ± 0.009, UV2 0.950 ± 0.011, KV1 0.965 ± 0.009 at stated 0.95)."""
    rate, _ = coverage(SETTINGS[kind], n, rounds, 60, 123.4, sigma, seed=11)
    assert rate >= 0.85


# ---- findings ---------------------------------------------------------------------------------------------------

def _grouped(tmp_path, decl):
    rng = np.random.default_rng(4)
    big, small = 100_000, 6_000
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"x": np.concatenate([rng.normal(50, 2, big), rng.normal(-20, 2, small)]),
                             "g": np.repeat([0, 1], [big, small])}), path)
    con = ldpql.connect(seed=7, evaluation=True)
    con.sql(f"CREATE TABLE h FROM '{path}' (x PRIVATE BETWEEN -1000 AND 1000 DISTRIBUTION GAUSSIAN ({decl}) NOT NULL, "
            "g PUBLIC) BUDGET EPSILON 100")
    return con


# fixed (was a strict xfail): F1
def test_group_by_rejects_gaussian_for_a_group_below_k_min(tmp_path):
    con = _grouped(tmp_path, "SIGMA 2")
    text = str(con.sql("EXPLAIN SELECT g, LDP_MEAN(x) FROM h GROUP BY g EPSILON 1"))
    assert "mechanism * gaussian" not in text or "too few users per level" in text


# fixed (was a strict xfail): F1b
def test_group_by_small_group_interval_covers(tmp_path):
    rng = np.random.default_rng(4)
    big, small = 100_000, 9_000
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": np.concatenate([rng.normal(50, 2, big), rng.normal(-20, 2, small)]),
                                "g": np.repeat([0, 1], [big, small])}),
                 private={"x": {"between": (-1000, 1000), "gaussian_sigma": (0.5, 8), "not_null": True}}, public=["g"], budget=1e9)
    r = con.sql("EVALUATE SELECT g, LDP_MEAN(x) FROM h GROUP BY g EPSILON 1 REPEAT 40")
    rows = [dict(zip(r.columns, row)) for row in r.fetchall()]
    assert min(row["coverage"] for row in rows) >= 0.85


# fixed (was a strict xfail): F2. NULLs in a nullable column are skipped (SQL's AVG, by Collision), and the Gaussian
# protocols, which assume no point mass, are not candidates there (they run when the column is declared NOT NULL)
def test_nulls_in_a_gaussian_column_are_covered_or_refused():
    rng = np.random.default_rng(5)
    n = 60_000
    x = rng.normal(123.4, 1, n)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": pa.array(x, mask=rng.random(n) < 0.1)}),
                 private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1}}, budget=1e9)
    r = con.sql("EVALUATE SELECT LDP_MEAN(x) FROM h EPSILON 2 REPEAT 10")
    row = dict(zip(r.columns, r.fetchone()))
    assert row["coverage"] >= 0.8


# fixed (was a strict xfail): F3. A σ declared 10 times too large (σ = 10, data σ = 1, n = 10^5, ε = 1) made the
# σ-known protocol's rmse 49 vs predicted 0.14 and its 95% interval cover 0.555 (400 runs); 10 times too small: rmse
# 6.75, coverage 0.000. Round 1's released counts now test the declared σ (likelihood ratio, false alarm 1%) and a
# rejected σ is replaced by a profile-likelihood fit over every report (post-processing, no ε): measured coverage
# 0.98 (overstated) and the figures in docs/gaussian.md.
def test_kv_with_sigma_overstated_tenfold_still_covers():
    rate, _ = coverage(setting(-1000, 1000, 10, 10, 1), 100_000, 2, 30, 123.4, 1.0, seed=6)
    assert rate >= 0.9   # 30 runs (1.0 here; 40 runs: 1.0): the defect (0.555) passes with probability ~1e-6


def _flagged_runs(s, n, rounds, runs, mu, sigma, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        est = run(s, rng.normal(mu, sigma, n), rounds, rng)
        out.append((est.extra["sigma_check"].flagged, est.interval[0][0] <= mu <= est.interval[1][0], est.note))
    return out


@pytest.mark.parametrize("rounds", [2, 1])
def test_kv_with_sigma_understated_tenfold_is_flagged_on_every_answer_and_covers(rounds):
    """σ declared 1, data σ = 10: every answer says so, and the re-estimated interval covers µ."""
    out = _flagged_runs(setting(-1000, 1000, 1, 1, 1), 100_000, rounds, 12, 123.4, 10.0, seed=9)
    assert all(flag and "does not fit the first round's reports" in note for flag, _, note in out)
    assert sum(hit for _, hit, _ in out) >= 10   # 12 runs (was 20 at >= 17): the defect covered 0.000


def test_sigma_check_rarely_flags_the_true_sigma():
    """False alarms at the declared σ (ALPHA = 1%): at most 2 of 40 answers (KV, two rounds, µ at a bin edge of
    every level: x' = 1040 = 65·16), and the interval is the σ-known one when not flagged."""
    out = _flagged_runs(setting(-1000, 1000, 1, 1, 1), 100_000, 2, 40, 0.0, 1.0, seed=10)
    assert sum(flag for flag, _, _ in out) <= 2 and sum(hit for _, hit, _ in out) >= 35


def test_a_flagged_answer_spends_exactly_its_epsilon_and_says_so_in_sql():
    rng = np.random.default_rng(2)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": rng.normal(123.4, 1, 60_000)}),
                 private={"x": {"between": (-1000, 1000), "gaussian_sigma": 10, "not_null": True}}, budget=10)
    assert "σ check     the first round's reports test the declared σ" in str(
        con.sql("EXPLAIN SELECT LDP_MEAN(x) FROM h EPSILON 2"))
    r = con.sql("SELECT LDP_MEAN(x) FROM h EPSILON 2 OPTIONS (mechanism = 'gaussian')")
    assert "WARNING: the declared σ = 10 does not fit the first round's reports" in str(r)
    lo, hi, _ = r.intervals()[0][0]   # (its coverage is measured by the tests above, not on one answer)
    assert hi - lo > 1 and abs(r.fetchone()[0] - 123.4) < 5   # as wide as σ free makes it: level-3 bins of 8
    assert con.remaining_budget("h") == pytest.approx(8.0)


# fixed (was a strict xfail): F4
def test_beta_above_one_minus_confidence_is_refused_and_spends_nothing():
    rng = np.random.default_rng(5)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": rng.normal(3, 1, 100_000)}),
                 private={"x": {"between": (-1000, 1000), "gaussian_sigma": 1, "not_null": True}}, budget=10)
    with pytest.raises(ldpql.Error):
        con.sql("SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (beta = 0.99)")
    assert con.remaining_budget("h") == 10


def _narrow():
    rng = np.random.default_rng(5)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("h", pa.table({"x": rng.normal(0.9, 1, 100_000)}),
                 private={"x": {"between": (0, 1), "gaussian_sigma": 1, "not_null": True}}, budget=1e9)
    return con


# fixed (was a strict xfail): F5a. µ = 0.9 in [0, 1], σ = 1, n = 10^5, ε = 1: the planner picked hybrid (predicted
# ±0.0064 over [0, 1]), which answered 0.657 (the [0, 1]-clamped mean 0.650), 0.24 from µ. Every candidate now
# averages the values clamped to [-4, 5], the protocol's own padded range: all estimate µ (to 10⁻⁵σ), and
# their predicted errors compare like with like (each forced candidate lands near µ too).
def test_planner_choice_on_a_narrow_gaussian_range_estimates_mu():
    con = _narrow()
    assert abs(con.sql("SELECT LDP_MEAN(x) FROM h EPSILON 1").fetchone()[0] - 0.9) < 0.1
    for mechanism in ("duchi", "piecewise", "hybrid", "gaussian"):
        r = con.sql(f"SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = '{mechanism}')")
        assert abs(r.fetchone()[0] - 0.9) < 0.1, mechanism
    text = str(con.sql("EXPLAIN SELECT LDP_MEAN(x) FROM h EPSILON 1"))
    assert "clamped to [-4, 5]" in text and "rejected    hybrid" in text


# fixed (was a strict xfail): F5b. EVALUATE's truth was the mean of the values clamped to [lo, hi] (0.650), while
# the Gaussian protocol estimates µ (its answer 0.905 scored coverage 0 of 5, bias 0.254); the truth is now the
# mean clamped to the padded range, which the protocol estimates (and the note says so).
def test_evaluate_truth_for_the_gaussian_protocol_is_what_it_estimates():
    con = _narrow()
    r = con.sql("EVALUATE SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = 'gaussian') REPEAT 5")
    row = dict(zip(r.columns, r.fetchone()))
    assert row["coverage"] >= 0.6 and abs(row["truth"] - 0.9) < 0.01
    r = con.sql("EVALUATE SELECT LDP_MEAN(x) FROM h EPSILON 1 OPTIONS (mechanism = 'hybrid') REPEAT 5")
    assert dict(zip(r.columns, r.fetchone()))["coverage"] >= 0.6
    assert "EVALUATE's truth is that mean" in str(con.sql("SELECT LDP_MEAN(x) FROM h EPSILON 1 "
                                                          "OPTIONS (mechanism = 'hybrid')"))
