"""The one-round bucket search of LDP_MIN / LDP_MAX (issue 11): buckets of a domain, the read-out of a release,
the planned (B, t) and its bound, and the protocol against simulation."""

from __future__ import annotations

import itertools

import duckdb
import numpy as np

from ldpql import expr as E
from ldpql.backends.sql import render
import pytest

from ldpql.mechanisms.base import Encoding
from ldpql.mechanisms.buckets import Buckets, bucket_search, plan_buckets, read_buckets
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.identity import Identity
from ldpql.simulation import drive
from ldpql.mechanisms.oue import OUE


@pytest.mark.parametrize("integer, low, high, size", [(True, 0, 20000, 32), (True, -3, 9, 8), (False, -1.0, 1.0, 64)])
def test_buckets_cover_the_domain_and_sql_agrees_with_numpy(integer, low, high, size):
    b = Buckets(low, high, size, integer)
    x = np.arange(low, high + 1) if integer else np.linspace(low, high, 2001)
    k = b.index(x)
    assert k.min() == 0 and k.max() == size - 1 and np.all(np.diff(k) >= 0)
    assert np.all(b.lower(k) <= x) and np.all(x <= b.upper(k))
    got = duckdb.sql(f"SELECT {render(b.expr(E.Column('v')))} FROM (SELECT unnest({x.tolist()}) AS v)").fetchnumpy()
    assert np.array_equal(next(iter(got.values())), k)
    top = duckdb.sql(f"SELECT {render(b.expr(E.Column('v'), negate=True))} FROM (SELECT unnest({x.tolist()}) AS v)").fetchnumpy()
    assert np.array_equal(next(iter(top.values())), size - 1 - k)


def test_read_buckets_takes_the_lowest_bucket_that_stands_out():
    se0 = np.full(6, 0.01)
    f = np.array([0.02, 0.035, 0.5, 0.0, 0.445, 0.0])
    read = read_buckets(f, se0 ** 2, se0, threshold=3.0, gamma=0.05, confidence=0.95)
    assert read.bucket == 1 and read.share_below == pytest.approx(0.02) and read.share_sd == pytest.approx(0.01)
    # cumulative 0.02, 0.055, 0.555 ± 1.96·√(j+1)·0.01: bucket 0's upper bound 0.0396 < γ = 0.05, bucket 1's
    # lower bound 0.027 < γ, bucket 2's 0.52 ≥ γ: the γ point is in bucket 1 or 2
    assert (read.first, read.last) == (1, 2)
    # a thin tail: no bucket stands out alone (0.02 < 3·0.01), but the first three together do (0.06 > 3·√3·0.01)
    thin = read_buckets(np.array([0.02, 0.02, 0.02, 0.02, 0.02, 0.9]), se0 ** 2, se0, 3.0, 0.05, 0.95)
    assert thin.bucket == 2 and thin.share_below == pytest.approx(0.04)
    none = read_buckets(np.zeros(6), se0 ** 2, se0, 3.0, 0.05, 0.95)
    assert none.bucket is None and none.share_below == 0.0


def test_plan_buckets_bound_falls_with_n_and_epsilon_and_noise_off_is_the_finest_grid():
    bounds = [plan_buckets(lambda d: OUE(1.0, d), n, 20001).bound for n in (1_000, 10_000, 100_000, 1_000_000)]
    assert all(a > b for a, b in itertools.pairwise(bounds)) and bounds[0] < 1
    assert plan_buckets(lambda d: OUE(4.0, d), 10_000, 20001).bound < plan_buckets(lambda d: OUE(1.0, d), 10_000,
                                                                                    20001).bound
    exact = plan_buckets(lambda d: Identity(d), 1000, 1 << 30)
    assert exact.size == 4096 and exact.bound == pytest.approx(1 / 4096)
    assert plan_buckets(lambda d: GRR(8.0, d), 100_000, 20001).size > plan_buckets(lambda d: OUE(0.5, d), 100_000,
                                                                                    20001).size


def test_bound_holds_when_its_assumption_does():
    """Users spread evenly over the whole domain (the bound's assumption, with equality): the measured mean error
    of the bucket search's minimum stays below the planned bound."""
    n, eps = 20_000, 1.0
    bp = plan_buckets(lambda d: OUE(eps, d), n, 1 << 30)
    b = Buckets(0.0, 1.0, bp.size)
    x = np.linspace(0, 1, n)
    counts = np.bincount(b.index(x), minlength=bp.size)
    rng = np.random.default_rng(3)
    errs = [abs(float(drive(bucket_search(OUE(eps, bp.size), b, bp.threshold, 0.05, 0.95, Encoding("", bp.size)),
                            lambda e: counts, rng).values[0]) - 0.0) for _ in range(300)]
    assert np.mean(errs) <= bp.bound


def test_max_is_the_mirror_of_min():
    b = Buckets(0, 99, 10, True)
    x = np.r_[np.full(500, 37), np.full(500, 62)]
    k = b.index(x)
    lo = drive(bucket_search(Identity(10), b, 3.0, 0.0, 0.95, Encoding("", 10)), lambda e: np.bincount(k, minlength=10),
               np.random.default_rng(0))
    hi = drive(bucket_search(Identity(10), b, 3.0, 0.0, 0.95, Encoding("", 10), negate=True),
               lambda e: np.bincount(9 - k, minlength=10), np.random.default_rng(0))
    assert lo.values[0] == 30 and hi.values[0] == 69
