"""Audit 15 (hostile review of 7ecdabb..79149fe): shapes and per-run scoring shared by the audit's scripts.

Every shape here is NEW (none is one of examples/qrank2, audit9, audit14's). Seeds: data [1515, n, i]; runs [1515, t]
(grid), [1516, t] (padding), [1517, t] (SQL).

``Shape15`` declares its coins exactly as ``ldpql.planner.quantile.coin_space`` does (integer columns bucketed in
integer widths by ``resolution``, offset (w - 1)/2; DOUBLE columns in ``resolution`` buckets reported by midpoint), and
``test_coin_space_matches_planner`` in sql15.py checks that against the planner's own CoinSpace.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.planner import quantile as planner

CONFS = (0.8, 0.9, 0.95)
Z = {c: NormalDist().inv_cdf(0.5 + c / 2) for c in CONFS}


class Shape15:
    def __init__(self, name, values, low, high, integer, resolution=None):
        self.name, self.x, self.low, self.high, self.integer, self.resolution = name, np.asarray(values, float), \
            low, high, integer, resolution
        if integer:
            lo, hi = math.ceil(low), math.floor(high)
            nvals = hi - lo + 1
            w = 1 if resolution is None or resolution >= nvals else -(-nvals // resolution)
            self.size, self.step, self.offset, self.lo = -(-nvals // w), float(w), (w - 1) / 2, lo
            self.coins = np.clip(np.floor((np.rint(np.clip(self.x, low, high)) - lo) / w), 0, self.size - 1).astype(np.int64)
        else:
            self.size = resolution or planner.RESOLUTION
            self.step, self.offset, self.lo = (high - low) / self.size, (high - low) / self.size / 2, low
            self.coins = np.clip(np.floor((np.clip(self.x, low, high) - low) / self.step), 0, self.size - 1).astype(np.int64)
        self.hist = np.bincount(self.coins, minlength=self.size)
        self.cdf = np.cumsum(self.hist) / len(self.x)
        self.sorted = np.sort(np.clip(self.x if not integer else np.rint(self.x), low, high))

    @property
    def bucketed(self):
        return not (self.integer and self.step == 1)

    def space(self):
        return CoinSpace(self.size, low=float(self.lo), step=self.step, integer=self.integer, offset=self.offset,
                         high=float(self.high))   # (session 11: as the planner declares it)

    def value(self, v):
        return self.lo + v * self.step + self.offset

    def sql_args(self):
        return f", resolution => {self.resolution}" if self.resolution else ""

    def decl(self):
        return {"between": (self.low, self.high)} | ({"integer": True} if self.integer else {})

    def coin_error(self, v, tau):
        return max(0.0, (self.cdf[v - 1] if v > 0 else 0.0) - tau, tau - self.cdf[v])

    def value_error(self, v, tau, m=None):
        """Rank error of the REPORTED value m (bucket midpoint): max(P(x < m) - τ, τ - P(x <= m), 0) on raw data."""
        m = self.value(v) if m is None else m
        n = len(self.sorted)
        below = np.searchsorted(self.sorted, m, "left") / n
        upto = np.searchsorted(self.sorted, m, "right") / n
        return max(0.0, below - tau, tau - upto)

    def true_quantile(self, tau):
        """The raw data's τ-quantile (smallest x with P(X <= x) >= τ)."""
        n = len(self.sorted)
        return float(self.sorted[max(math.ceil(tau * n) - 1, 0)])

    def true_coin(self, tau):
        return int(np.searchsorted(self.cdf, tau - 1e-12))


def target(shape, tau, confidence=0.95, mode="direct"):
    return planner.QuantileTarget("x", Encoding("x", shape.size, "x"), "", None, planner.UNIT, tau=tau,
                                  space=shape.space(), taus=(tau,), confidence=confidence, mode=mode)


def candidates(shape, tau, confidence=0.95, mode="direct"):
    out = {c.mechanism: c for c in planner.quantile_candidates(target(shape, tau, confidence, mode))}
    out["shuffle_nbs"].delta = 1e-8
    return out


def clopper(k, n, level=0.95):
    from scipy.stats import beta
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return round(lo, 4), round(hi, 4)


def shapes(n):
    """Six new shapes at n users (data seed [1515, n, i])."""
    r = [np.random.default_rng([1515, n, i]) for i in range(8)]
    a40 = int(round(0.4 * n))
    dmass = np.concatenate([np.full(a40, 37.0), r[0].uniform(0, 100, n - a40)])           # DOUBLE atom at 37.0
    h = n // 2
    dwide = np.concatenate([r[1].normal(-3, 1, h), r[1].normal(5, 0.5, n - h)])            # DOUBLE -1000..1000, 256
    dnarrow = r[2].beta(50, 50, n)                                                          # DOUBLE 0..1, 64
    z20 = int(round(0.2 * n))
    ibuck = np.concatenate([np.zeros(z20), np.minimum(np.rint(r[3].exponential(5000, n - z20)), 100000)])
    q = n // 4
    iodd = np.concatenate([np.full(q, 1002), np.full(q, 500), r[4].integers(0, 1003, n - 2 * q)])
    ipois = np.minimum(r[5].poisson(3, n), 20)
    out = [Shape15("dmass", dmass, 0.0, 100.0, False),
           Shape15("dwide", dwide, -1000.0, 1000.0, False, 256),
           Shape15("dnarrow", dnarrow, 0.0, 1.0, False, 64),
           Shape15("ibuck", ibuck, 0, 100000, True, 1000),
           Shape15("iodd", iodd, 0, 1002, True, 100),
           Shape15("ipois", ipois, 0, 20, True)]
    return {s.name: s for s in out}
