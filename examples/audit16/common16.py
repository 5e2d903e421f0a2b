"""Audit 16 (hostile review of 63f8643 and 068a6e2): shapes, coin spaces, the old read-out, scoring.

Written for this audit (nothing imported from examples/qrank5 or earlier audits). Data seeds [1616, ...]; run seeds
[1616, cell, t] (mechanism level) and OPTIONS (seed = 1616000 + t) (SQL).

A ``Shape`` declares its coins as ``ldpql.planner.quantile.coin_space`` does: an INTEGER column one coin per value (or
integer buckets of width ceil(values / resolution)), a DOUBLE column ``resolution`` equal buckets reported by their
midpoint. ``check_space`` compares it with the planner's own CoinSpace through EXPLAIN-free resolution.
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms.quantile import CoinSpace

Z = {c: NormalDist().inv_cdf(0.5 + c / 2) for c in (0.8, 0.9, 0.95)}


class Shape:
    def __init__(self, name, values, low, high, integer, resolution=None):
        self.name, self.low, self.high, self.integer, self.resolution = name, low, high, integer, resolution
        self.x = np.asarray(values, float)
        if integer:
            lo, hi = math.ceil(low), math.floor(high)
            nvals = hi - lo + 1
            w = 1 if resolution is None or resolution >= nvals else -(-nvals // resolution)
            self.size, self.step, self.offset, self.lo = -(-nvals // w), float(w), (w - 1) / 2, lo
            v = np.rint(np.clip(self.x, low, high))
            self.coins = np.clip(np.floor((v - lo) / w), 0, self.size - 1).astype(np.int64)
            self.raw = np.sort(v)
        else:
            self.size = resolution or 65536
            self.step, self.offset, self.lo = (high - low) / self.size, (high - low) / self.size / 2, low
            self.coins = np.clip(np.floor((np.clip(self.x, low, high) - low) / self.step), 0,
                                 self.size - 1).astype(np.int64)
            self.raw = np.sort(np.clip(self.x, low, high))
        self.hist = np.bincount(self.coins, minlength=self.size)
        self.n = len(self.x)
        self.cdf = np.cumsum(self.hist) / self.n

    @property
    def bucketed(self):
        return not (self.integer and self.step == 1)

    def space(self):
        return CoinSpace(self.size, low=float(self.lo), step=self.step, integer=self.integer, offset=self.offset,
                         high=float(self.high))

    def decl(self):
        return {"between": (self.low, self.high)} | ({"integer": True} if self.integer else {})

    def sql_args(self):
        return f", resolution => {self.resolution}" if self.resolution else ""

    def coin_error(self, v, tau):
        return max(0.0, (self.cdf[v - 1] if v > 0 else 0.0) - tau, tau - self.cdf[v])

    def value_error(self, value, tau):
        """Rank error of a reported VALUE on the raw data: max(P(x < m) − τ, τ − P(x ≤ m), 0)."""
        below = np.searchsorted(self.raw, value, "left") / self.n
        upto = np.searchsorted(self.raw, value, "right") / self.n
        return max(0.0, below - tau, tau - upto)

    def error(self, coin, tau):
        """The rank error the engine's shown rank error is a claim about: the coin's (one coin per integer) or the
        reported midpoint's (bucketed)."""
        if not self.bucketed:
            return self.coin_error(coin, tau)
        return self.value_error(self.space().value(coin), tau)

    def true_quantile(self, tau):
        return float(self.raw[max(math.ceil(tau * self.n) - 1, 0)])


def old_crossing(cdf: np.ndarray, tau: float) -> int:
    """The read-out before 068a6e2 (re-implemented from `git show 068a6e2^:ldpql/mechanisms/hierarchical.py`,
    choose_coin, and quantile_histogram.read_out): the middle of the units whose [F̂(j−1), F̂(j)] is closest to
    holding τ."""
    below = np.concatenate([[0.0], cdf[:-1]])
    err = np.maximum(np.maximum(below - tau, tau - cdf), 0.0)
    best = np.flatnonzero(err <= err.min())
    return int(best[len(best) // 2])


def clopper(k, n, level=0.95):
    from scipy.stats import beta
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return round(lo, 3), round(hi, 3)


def rng(*key):
    return np.random.default_rng([1616, *key])


def shapes(n: int) -> dict[str, Shape]:
    """New shapes at n users (data seeds [1616, n, i]); fixed before any result was seen."""
    r = [rng(n, i) for i in range(16)]
    out = []
    # A: F flat at 0.48 (2 points under q = 0.5) over a gap of 800 of 1,024 integer values
    k = int(round(0.48 * n))
    out.append(Shape("gap_below", np.concatenate([r[0].integers(0, 100, k), r[0].integers(900, 1024, n - k)]),
                     0, 1023, True))
    # B: F exactly 0.5 over the gap (q = 0.5 answered by any value 100..899)
    k = n // 2
    out.append(Shape("gap_at", np.concatenate([r[1].integers(0, 100, k), r[1].integers(900, 1024, n - k)]),
                     0, 1023, True))
    # C: an atom of 30% at the domain's minimum, the rest a log-normal tail, INTEGER 0..65535
    k = int(round(0.3 * n))
    out.append(Shape("atom_low", np.concatenate([np.zeros(k), np.minimum(r[2].lognormal(6, 1.5, n - k), 65535)]),
                     0, 65535, True))
    # D: 20% at the domain's maximum, the rest N(500, 100) on INTEGER 0..1000
    k = int(round(0.2 * n))
    out.append(Shape("atom_high", np.concatenate([np.full(k, 1000.0), r[3].normal(500, 100, n - k)]), 0, 1000, True))
    # E: Pareto(1.1) heavy tail on INTEGER 0..65535 (most users in the first few hundred values)
    out.append(Shape("pareto", np.minimum((r[4].pareto(1.1, n) + 1) * 10, 65535), 0, 65535, True))
    # F: two atoms, half the users at 10 and half at 50,000 (0..65535): F = 0.5 exactly on 10..49,999
    k = n // 2
    out.append(Shape("two_atoms", np.concatenate([np.full(k, 10.0), np.full(n - k, 50000.0)]), 0, 65535, True))
    # G: uniform on INTEGER 0..4095 (control)
    out.append(Shape("uniform", r[6].integers(0, 4096, n), 0, 4095, True))
    # H: small domain INTEGER 0..15, Poisson(2) (spiky, few units)
    out.append(Shape("pois16", np.minimum(r[7].poisson(2, n), 15), 0, 15, True))
    # I: two values (INTEGER 0..1), 70% at 1
    out.append(Shape("binary", (r[8].random(n) < 0.7).astype(float), 0, 1, True))
    return {s.name: s for s in out}


def taus_for(name: str) -> tuple[float, ...]:
    return {"gap_below": (0.1, 0.5, 0.9), "gap_at": (0.25, 0.5, 0.75), "atom_low": (0.1, 0.3, 0.5, 0.9),
            "atom_high": (0.5, 0.8, 0.95), "pareto": (0.5, 0.9, 0.99), "two_atoms": (0.25, 0.5, 0.75),
            "uniform": (0.1, 0.5, 0.9), "pois16": (0.1, 0.5, 0.9), "binary": (0.2, 0.3, 0.5)}[name]
