"""Key-value data through one Collision report per user (ldpql.mechanisms.kv): the user's own assembly (rows of a
key averaged, a random s of its keys), the randomizer's audits, and the per-key estimators, statistically with fixed
seeds (unbiased counts, conditional means and sums; interval coverage; the subsampling bias of users with 2s keys)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpql.audit import audit, realised_audit
from ldpql.mechanisms.kv import (KVCollision, assemble, exact_answers, key_answers, merge, predicted_se,
                                project_capped_simplex)

LOW, HIGH = 1.0, 5.0


def users_with_keys(n: int, d: int, s: int, rng: np.random.Generator, keys_per_user=(1, 2, 3), null_share=0.1):
    """Rows of n users: each holds a random number of distinct keys among d (skewed popularity); a key j's values
    have mean (j % 5)/4·2 − 1 on [−1, 1]; some values are missing. Duplicated rows of a key are added too."""
    counts = rng.choice(keys_per_user, n)
    pop = np.linspace(2, 1, d)
    pop /= pop.sum()
    users, keys = [], []
    for i, c in enumerate(counts):
        ks = rng.choice(d, size=c, replace=False, p=pop)
        users += [i] * c
        keys += list(ks)
    users, keys = np.array(users, np.uint64), np.array(keys, np.int64)
    centre = (keys % 5) / 4 * 1.6 - 0.8
    values = np.clip(centre + rng.uniform(-0.2, 0.2, len(keys)), -1, 1)
    values[rng.random(len(keys)) < null_share] = np.nan
    dup = rng.random(len(keys)) < 0.2   # a second row for the same key (averaged by the user's device)
    return (np.r_[users, users[dup]], np.r_[keys, keys[dup]],
            np.r_[values, np.clip(values[dup] + 0.1, -1, 1)])


def truth(users, keys, values, d: int):
    """Exact per-key answers after the merge (no subsampling: every user has at most s keys)."""
    _, k, v = merge(users, keys, values)
    return exact_answers(k, v, d, len(np.unique(users)), LOW, HIGH)


# ---- assembly -----------------------------------------------------------------------------------------------

def test_rows_of_a_key_are_averaged_and_a_key_without_values_keeps_its_presence():
    u = np.array([5, 5, 5, 7, 7, 9], np.uint64)
    k = np.array([1, 1, 2, 0, 0, -1])
    v = np.array([0.5, np.nan, 1.0, np.nan, np.nan, 0.3])
    ids, keys, values = assemble(u, k, v, 3, np.random.default_rng(0))
    assert ids.tolist() == [5, 7, 9]
    pairs = {int(i): sorted((int(a), None if math.isnan(b) else b) for a, b in zip(ks, vs) if a >= 0)
             for i, ks, vs in zip(ids, keys, values)}
    assert pairs == {5: [(1, 0.5), (2, 1.0)], 7: [(0, None)], 9: []}   # user 9's one row had no key: it sends nothing


def test_a_user_with_more_than_s_keys_keeps_a_uniform_random_s_of_them():
    rng = np.random.default_rng(3)
    n, d, s = 20_000, 6, 2
    users = np.repeat(np.arange(n, dtype=np.uint64), d)
    keys = np.tile(np.arange(d), n)
    _, kept, _ = assemble(users, keys, np.zeros(len(keys)), s, rng)
    assert (kept >= 0).sum(axis=1).tolist() == [s] * n                 # exactly s each, distinct
    assert np.all(kept[:, 0] != kept[:, 1])
    share = np.bincount(kept.ravel(), minlength=d) / n                   # each key kept w.p. s/d = 1/3
    assert np.all(np.abs(share - s / d) < 5 * math.sqrt((s / d) * (1 - s / d) / n))


# ---- privacy -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("states", [1, 2, 3])
def test_audits_pass_tight_for_every_state_layout(states):
    for eps in (0.2, 2.0):
        r = KVCollision(eps, 2, 1, states, 2 if states != 2 else 3)
        a = audit(r)
        assert a.passed and a.max_log_ratio > eps - 1e-9
        assert realised_audit(r).passed
        r.epsilon = eps * 0.99
        assert not audit(r).passed


def test_inputs_with_more_keys_than_s_and_repeated_keys_are_among_the_audited():
    rows = KVCollision.AUDIT_ROWS
    assert any(len({k for k, _ in r}) > 1 for r in rows) and any(len(r) > len({k for k, _ in r}) for r in rows)


def test_fast_and_faithful_server_paths_agree_in_distribution(monkeypatch):
    """The server's counts c_y: every hash evaluated (deployment-faithful) against the O(ns + d) draw."""
    rng = np.random.default_rng(5)
    users, keys, values = users_with_keys(3000, 5, 3, rng)
    _, k, v = assemble(users, keys, values, 3, rng)
    r = KVCollision(1.0, 5, 3, 3)
    faithful = np.array([r.summary(k, v, rng) for _ in range(40)])
    monkeypatch.setattr("ldpql.mechanisms.kv.FAST", 0)
    fast = np.array([r.summary(k, v, rng) for _ in range(40)])
    se = np.sqrt(faithful.var(axis=0) / 40 + fast.var(axis=0) / 40)
    assert np.all(np.abs(faithful.mean(axis=0) - fast.mean(axis=0)) < 5 * se + 1e-9)


# ---- estimators --------------------------------------------------------------------------------------------

def _runs(users, keys, values, d, s, eps, runs, seed):
    rng = np.random.default_rng(seed)
    r = KVCollision(eps, d, s, 3)
    out = []
    for _ in range(runs):
        _, k, v = assemble(users, keys, values, s, rng)
        out.append(key_answers(r, r.summary(k, v, rng), len(np.unique(users)), LOW, HIGH))
    return out


def test_counts_conditional_means_and_sums_are_unbiased():
    rng = np.random.default_rng(11)
    d, s, runs = 10, 3, 12
    users, keys, values = users_with_keys(20_000, d, s, rng)
    want = truth(users, keys, values, d)
    got = _runs(users, keys, values, d, s, 2.0, runs, 12)
    for kind in ("count", "mean", "sum"):
        est = np.array([g[kind].values for g in got])
        se = np.array([g[kind].stderr for g in got]).mean(axis=0) / math.sqrt(runs)
        gap = np.abs(est.mean(axis=0) - want[kind].values)
        assert np.all(gap < 5 * se), (kind, gap / se)
    # and a broken estimator would fail: the tolerance is below a 25% error on every key, and the total count over
    # the keys (their errors are independent) is checked to within 5%
    se = np.array([g["count"].stderr for g in got]).mean(axis=0) / math.sqrt(runs)
    assert np.all(5 * se < 0.25 * want["count"].values)
    total = np.array([g["count"].values.sum() for g in got]).mean()
    assert abs(total - want["count"].values.sum()) < 5 * math.sqrt((se ** 2).sum()) < 0.05 * want["count"].values.sum()


def test_intervals_cover_at_about_their_confidence():
    rng = np.random.default_rng(21)
    d, s, runs = 8, 3, 40
    users, keys, values = users_with_keys(5000, d, s, rng)
    want = truth(users, keys, values, d)
    got = _runs(users, keys, values, d, s, 1.0, runs, 22)
    z = 1.959964
    for kind in ("count", "mean", "sum"):
        hits = [np.abs(g[kind].values - want[kind].values) <= z * g[kind].stderr for g in got]
        assert np.mean(hits) > 0.9, (kind, np.mean(hits))


def test_users_with_2s_keys_report_half_of_them():
    """The documented subsampling bias (spec §8.21): every user holds 2s keys, sends s, so counts come out halved."""
    rng = np.random.default_rng(31)
    n, d, s = 10_000, 10, 3
    users, keys, values = users_with_keys(n, d, 2 * s, rng, keys_per_user=(2 * s,), null_share=0)
    full = truth(users, keys, values, d)["count"].values
    got = _runs(users, keys, values, d, s, 2.0, 2, 32)
    est = np.mean([g["count"].values for g in got], axis=0)
    se = np.mean([g["count"].stderr for g in got], axis=0) / math.sqrt(2)
    assert abs(est.sum() / full.sum() - 0.5) < 5 * math.sqrt((se ** 2).sum()) / full.sum()
    assert np.all(np.abs(est - full / 2) < 5 * se + 0.02 * full)


def test_predicted_errors_bound_the_realised_ones():
    d, s, n = 8, 3, 5000
    pred = predicted_se(1.0, d, s, 3, n, LOW, HIGH)
    rng = np.random.default_rng(41)
    users, keys, values = users_with_keys(n, d, s, rng)
    got = _runs(users, keys, values, d, s, 1.0, 3, 42)
    for kind in ("count", "sum"):
        assert np.all(np.array([g[kind].stderr for g in got]) <= pred[kind] * 1.001), kind


def test_capped_simplex_projection_is_the_euclidean_projection():
    """clip(f − τ, 0, 1) with Σ = s when the clipped vector overshoots s, the clipped vector otherwise; and no point
    of the set is closer (checked against random feasible points)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        f, s = rng.normal(0.3, 0.6, 12), int(rng.integers(1, 5))
        p = project_capped_simplex(f, s)
        assert p.min() >= 0 and p.max() <= 1 and p.sum() <= s + 1e-9
        if np.clip(f, 0, 1).sum() > s:
            assert p.sum() == pytest.approx(s, abs=1e-9)
        else:
            assert np.array_equal(p, np.clip(f, 0, 1))
        others = rng.uniform(0, 1, (200, 12))
        others = others * np.minimum(1, s / others.sum(axis=1))[:, None]
        assert (np.linalg.norm(others - f, axis=1) >= np.linalg.norm(p - f) - 1e-9).all()
