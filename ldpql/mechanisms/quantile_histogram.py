"""Quantiles from a one-round histogram: every user reports its bin once; τ is read from the cumulative sums.

Privacy: ε-LDP. The K coins are grouped into ``bins`` consecutive bins of equal width (a public choice of the
planner); each user reports the bin holding its value, once, through the engine's frequency oracle GRR or
OUE (both audited, :mod:`ldpql.mechanisms.grr`, :mod:`ldpql.mechanisms.oue`) at ε. Nothing is adaptive.
Utility: the bin frequencies f̂ are unbiased, so the prefix F̂(j) = Σ_{i<=j} f̂_i is unbiased for the share of
users in bins 0..j, with the closed-form variance of :func:`prefix_variance` (a prefix of J bins: OUE's bits
are independent, GRR's report falls in the prefix with probability p + (J-1)q for a member, Jq otherwise).
Every user answers, so there is no sampling term. The answer is the bin that splits the bins with the fewest
on the wrong side of τ (F̂ is not monotone), and inside a bin wider than one coin the coin at the linear
interpolation of τ (exact for data spread evenly inside the bin; otherwise the bin's own mass bounds the
extra rank error). GRR is used below 3e^ε + 2 bins, OUE above: the smaller variance of the two (Wang,
Blocki, Li, Jha, "Locally Differentially Private Protocols for Frequency Estimation", USENIX Security 2017).
It is the flat (one-level) case of the hierarchical histogram of Cormode, Kulkarni, Srivastava, "Answering
Range Queries Under Local Differential Privacy" (VLDB 2019): better when the prefix at τ spans few bins or
ε is large (GRR's noise vanishes as ε grows; the tree's level split keeps a sampling error).
Runtime: one exact-path round (a DuckDB GROUP BY over the bins), then O(bins) numpy.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np

from ldpql.mechanisms.base import Estimate, Protocol, Randomizer, Round
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.identity import Identity
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.quantile import CoinSpace, _no_users, crossing


def bin_width(coins: int, bins: int) -> int:
    """Coins per bin for at most ``bins`` bins."""
    return max(1, -(-coins // max(bins, 1)))


def oracle(eps: float, bins: int) -> Randomizer:
    """GRR below 3e^ε + 2 bins, OUE from there (the smaller per-bin variance, Wang et al. 2017)."""
    if math.isinf(eps):
        return Identity(max(bins, 2))
    return GRR(eps, max(bins, 2)) if bins < 3 * math.exp(min(eps, 30.0)) + 2 else OUE(eps, max(bins, 2))


def prefix_variance(r: Randomizer, mass: np.ndarray | float, width: np.ndarray | float, n: int) -> np.ndarray:
    """Var F̂ of a prefix of ``width`` bins holding ``mass`` of the n users, under GRR or OUE (0 noise off)."""
    mass, width = np.asarray(mass, dtype=float), np.asarray(width, dtype=float)
    if isinstance(r, Identity):
        return np.zeros(np.broadcast(mass, width).shape)
    p, q = r.p, r.q
    if isinstance(r, GRR):   # one report per user: in the prefix w.p. p + (J-1)q (member), Jq (other)
        inside, outside = p + (width - 1) * q, width * q
        var = mass * inside * (1 - inside) + (1 - mass) * outside * (1 - outside)
    else:                    # OUE: independent bits, the bins' variances add
        var = mass * p * (1 - p) + (width - mass) * q * (1 - q)
    with np.errstate(divide="ignore"):   # p = q in floats at a vanishing ε: the variance is infinite, as it is
        return var / (max(n, 1) * (p - q) ** 2)


def read_out(cdf: np.ndarray, freq: np.ndarray, tau: float, width: int, coins: int) -> int:
    """The coin answering τ: the bin that splits the bins with the fewest on the wrong side of τ
    (:func:`~ldpql.mechanisms.quantile.crossing`), then the interpolated coin inside it."""
    below = np.concatenate([[0.0], cdf[:-1]])
    j = crossing(cdf, tau)
    lo, hi = j * width, min((j + 1) * width, coins) - 1
    if hi == lo or freq[j] <= 0:
        return lo
    share = min(max((tau - below[j]) / freq[j], 0.0), 1.0)
    return min(lo + int(share * (hi - lo + 1)), hi)


def certified_bins(cdf: np.ndarray, var: np.ndarray, tau: float, bin_of_answer: int,
                   confidence: float) -> tuple[int, int]:
    """Bins [low, high] holding the true τ-quantile's bin: low is the first bin whose upper bound reaches τ,
    high the first whose lower bound does (Bonferroni over the bins it scans)."""
    miss = 1 - confidence
    se = np.sqrt(var)
    up = np.flatnonzero(cdf + NormalDist().inv_cdf(1 - miss / 2) * se >= tau)
    down = np.flatnonzero(cdf - NormalDist().inv_cdf(1 - miss / (2 * max(len(cdf), 1))) * se >= tau)
    low = int(up[0]) if len(up) else 0
    high = int(down[0]) if len(down) else len(cdf) - 1
    return min(low, high, bin_of_answer), max(low, high, bin_of_answer)


def histogram_protocol(space: CoinSpace, eps: float, taus: list[float], bins: int) -> Callable[[int], Protocol]:
    """One collection over all users: each reports its bin (``bins`` bins of the coins); every τ of ``taus``
    is read from the same cumulative sums (``extra['answers']``)."""
    width = bin_width(space.size, bins)

    def protocol(n: int) -> Protocol:
        if n == 0:
            return _no_users()
        enc = space.level(width)
        r = oracle(eps, enc.size)
        reply = yield Round(r, enc, users=(0.0, 1.0), label=f"{enc.size} bins of width {width}")
        freq = np.asarray(r.estimate(reply.summary, reply.n), dtype=float)[: enc.size]
        cdf = np.cumsum(freq)
        var = prefix_variance(r, np.clip(cdf, 0.0, 1.0), np.arange(1, enc.size + 1), reply.n)
        unit_var = np.asarray(r.variance(np.clip(freq, 0.0, 1.0), reply.n), dtype=float)[: enc.size]
        return _release(space, taus, freq, cdf, var, width, unit_var)
    return protocol


def _release(space: CoinSpace, taus: list[float], freq: np.ndarray, cdf: np.ndarray, var: np.ndarray,
             width: int, unit_var: np.ndarray | None = None) -> Estimate:
    answers = {}
    ends = np.minimum(np.arange(1, len(cdf) + 1) * width, space.size) - 1   # the last coin of each bin
    for tau in taus:
        coin = read_out(cdf, freq, tau, width, space.size)

        def interval(confidence: float, tau=tau, coin=coin):
            low, high = certified_bins(cdf, var, tau, coin // width, confidence)
            return np.array([space.lower_edge(low * width)]), np.array([space.upper_edge(ends[high])])

        answers[tau] = Estimate(np.array([space.value(coin)]), np.array([math.nan]),
                                extra={"coin": coin, "mechanism": "histogram", "interval": interval,
                                       "cdf_points": (ends, cdf), "cdf_var": var, "unit_width": width,
                                       "bucketed": space.bucketed,
                                       "units": (ends, freq, np.zeros(len(freq)) if unit_var is None else unit_var)})
    values = np.array([float(a.values[0]) for a in answers.values()])
    first = next(iter(answers.values()))
    return Estimate(values, np.full(len(values), math.nan),
                    extra={"answers": answers, "coin": first.extra["coin"], "bins": len(cdf), "width": width})
