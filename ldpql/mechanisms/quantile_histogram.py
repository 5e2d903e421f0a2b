"""Quantiles from a histogram: every user reports its bin once; τ is read from the cumulative sums.

Privacy: ε-LDP. The K coins are grouped into ``bins`` consecutive bins of equal width (a public choice of the
planner); each user reports the bin holding its value, once, through the engine's frequency oracle GRR or
OUE (both audited, :mod:`ldpql.mechanisms.grr`, :mod:`ldpql.mechanisms.oue`) at ε. With the zoom (below) the
users answer in two disjoint halves, and the second half's partition is a function of the first half's release.
Utility: the bin frequencies f̂ are unbiased, so the prefix F̂(j) = Σ_{i<=j} f̂_i is unbiased for the share of
users in bins 0..j, with the closed-form variance of :func:`prefix_variance` (a prefix of J bins: OUE's bits
are independent, GRR's report falls in the prefix with probability p + (J-1)q for a member, Jq otherwise).
Every user answers, so there is no sampling term (a zoomed answer is read from half of the users and adds
their sampling variance). The answer is the bin that splits the bins with the fewest
on the wrong side of τ (F̂ is not monotone), and inside a bin wider than one coin the coin at the linear
interpolation of τ (exact for data spread evenly inside the bin; otherwise the bin's own mass bounds the
extra rank error). GRR is used below 3e^ε + 2 bins, OUE above: the smaller variance of the two (Wang,
Blocki, Li, Jha, "Locally Differentially Private Protocols for Frequency Estimation", USENIX Security 2017).
It is the flat (one-level) case of the hierarchical histogram of Cormode, Kulkarni, Srivastava, "Answering
Range Queries Under Local Differential Privacy" (VLDB 2019): better when the prefix at τ spans few bins or
ε is large (GRR's noise vanishes as ε grows; the tree's level split keeps a sampling error).
Zoom: with bins wider than one coin, an atom or a spike inside the bin answering τ makes the interpolated coin
wrong by up to the bin's mass (audit 14: Zipf data, 27% of the users at 0, a bin of 782 coins, rank error 0.68).
The users then answer in two halves: the second half splits the bins the first half shows to be heavier than their
neighbours into finer cells (:func:`heavy_bins`, :class:`ZoomEncoding`), or, where none is, reports its bin too and
both halves are pooled (exactly the one-round histogram). The split is chosen from the first half's release alone.
Runtime: one or two exact-path rounds (a DuckDB GROUP BY over the bins), then O(bins) numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, Callable

import numpy as np

from ldpql import expr as E
from ldpql.mechanisms.base import Encoding, Estimate, Protocol, Randomizer, Reply, Round
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.identity import Identity
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.quantile import CoinSpace, _no_users, crossing

ZOOM_SHARE = 0.5  # the users of the first round when a bin may be split (the second round has the rest)
ZOOM_CELLS = 4    # a zoomed bin is split into about this many times the first round's number of bins
ZOOM_Z = 2.0      # a bin split is heavier than its neighbours by this many standard errors of the difference


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


def read_out(cdf: np.ndarray, freq: np.ndarray, tau: float, ends: np.ndarray) -> int:
    """The coin answering τ: the cell (bin) that splits the cells with the fewest on the wrong side of τ
    (:func:`~ldpql.mechanisms.quantile.crossing`), then the interpolated coin inside it. ``ends``: the last coin
    of each cell."""
    below = np.concatenate([[0.0], cdf[:-1]])
    j = crossing(cdf, tau)
    lo, hi = (int(ends[j - 1]) + 1 if j else 0), int(ends[j])
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


@dataclass(frozen=True)
class ZoomEncoding(Encoding):
    """The second round's partition: the first round's bins of ``width`` coins, each bin of ``zooms`` (its first
    coin, the width of its cells) split into cells of that width. A coin's cell is c // width plus, for every
    zoomed bin, the cells it added before c: min(max(c - start, 0), width - 1) // cell (clamped before the
    division, so every operand is non-negative and SQL's integer division is Python's). Its base is the coin."""

    width: int = 1
    zooms: tuple[tuple[int, int], ...] = ()
    bucket: Any = None

    @property
    def base(self) -> Any:
        return self.bucket

    def inputs(self, values: np.ndarray) -> np.ndarray:
        c = np.asarray(values).astype(np.int64)
        return c // self.width + sum(np.clip(c - start, 0, self.width - 1) // cell for start, cell in self.zooms)

    def ends(self, coins: int) -> np.ndarray:
        """The last coin of every cell."""
        firsts = np.unique(np.concatenate([np.arange(0, coins, self.width)] +
                                          [np.arange(start, min(start + self.width, coins), cell)
                                           for start, cell in self.zooms]))
        return np.concatenate([firsts[1:] - 1, [coins - 1]])


def zoom_encoding(space: CoinSpace, width: int, zooms: tuple[tuple[int, int], ...]) -> ZoomEncoding:
    c = space.bucket
    cell = E.op("//", c, int(width))
    for start, sub in zooms:
        cell = E.op("+", cell, E.op("//", E.clamp(E.op("-", c, int(start)), 0, int(width) - 1), int(sub)))
    enc = ZoomEncoding(cell, 0, "", width=int(width), zooms=zooms, bucket=c)
    size = len(enc.ends(space.size))
    return replace(enc, size=size, label=f"{size} cells: bins of width {width}, {len(zooms)} split into cells of "
                                         f"{', '.join(str(s) for _, s in zooms)}")


def zoom_cells(width: int, bins: int) -> int:
    """The width of the cells a zoomed bin of ``width`` coins is split into: about ZOOM_CELLS times as many cells as
    the first round has bins. The second round's oracle then has up to (1 + ZOOM_CELLS)·bins cells: GRR's noise
    grows little with them at the ε where bins are many (Zipf, 256 bins of 782 coins at ε = 8: cells of 4 coins left
    the 0.05-quantile's shown rank error at ±0.71, cells of 1 coin give ±0.015, both with rank error 0)."""
    return bin_width(width, ZOOM_CELLS * bins)


def heavy_bins(freq: np.ndarray, unit_var: np.ndarray, cdf_var: np.ndarray, taus: list[float], cells: list[int],
               sampling: float) -> list[int]:
    """The bins answering some τ (``cells``) that the second round splits: those the first round shows to hold more
    than their heavier neighbour by ZOOM_Z standard errors, and by more than twice the standard error of a rank read
    from the second round alone (its randomizer's, as the first round's at that bin, plus the sampling of its half of
    the users). Inside such a bin the interpolated coin can be off by up to that excess, an atom or a spike (Zipf
    data: 27% of the users at 0 in a bin of 782 coins, audit 14); a bin about as heavy as its neighbours holds a
    smooth stretch of the density, where interpolation is close and splitting would only add the half's noise.
    Post-processing of the first round's release."""
    heavy = []
    for j, tau in zip(cells, taus):
        nb = [k for k in (j - 1, j + 1) if 0 <= k < len(freq)]
        k = max(nb, key=lambda i: freq[i]) if nb else None
        excess = freq[j] - (freq[k] if k is not None else 0.0)
        se = math.sqrt(max(float(unit_var[j]) + (float(unit_var[k]) if k is not None else 0.0), 0.0))
        cost = 2 * math.sqrt(max(float(cdf_var[j]), 0.0) + sampling * tau * (1 - tau))
        if excess - ZOOM_Z * se > cost and j not in heavy:
            heavy.append(j)
    return sorted(heavy)


def histogram_protocol(space: CoinSpace, eps: float, taus: list[float], bins: int,
                       zoom: bool = True) -> Callable[[int], Protocol]:
    """Every τ of ``taus`` read from one histogram (``bins`` bins of the coins, ``extra['answers']``).

    With bins wider than one coin (and ``zoom``) the users answer in two halves: the first reports its bin; where
    that release shows the bin answering a τ to be heavy (:func:`heavy_bins`), the second half reports its cell
    of a partition that splits that bin into ``zoom_cells`` cells (:class:`ZoomEncoding`), and τ is read from the
    second half's release alone (its CDF is the whole line's: the cells cover every coin); otherwise the second
    half reports its bin too and both halves' reports are pooled: the one-round histogram of all users, exactly.
    The choice is post-processing of the first half's release; every user answers once, at ε."""
    width = bin_width(space.size, bins)

    def protocol(n: int) -> Protocol:
        if n == 0:
            return _no_users()
        enc = space.level(width)
        r = oracle(eps, enc.size)
        label = f"{enc.size} bins of width {width}"
        if width == 1 or not zoom:
            reply = yield Round(r, enc, users=(0.0, 1.0), label=label)
            return _release(space, taus, *_cells(r, reply, enc.size), enc_ends(enc, space), width, bins=enc.size)
        first = yield Round(r, enc, users=(0.0, ZOOM_SHARE), label=label + ", the first half of the users")
        freq, cdf, var, unit_var = _cells(r, first, enc.size)
        ends = enc_ends(enc, space)
        sampling = 1 / max(n - first.n, 1) - 1 / n   # a rank read from the second half: its users' sampling
        heavy = heavy_bins(freq, unit_var, var, taus, [crossing(cdf, t) for t in taus], sampling)
        if not heavy:
            second = yield Round(r, enc, users=(ZOOM_SHARE, 1.0), label=label + ", the second half of the users")
            pooled = Reply(first.summary + second.summary, first.n + second.n)
            return _release(space, taus, *_cells(r, pooled, enc.size), ends, width, bins=enc.size)
        fine = zoom_encoding(space, width, tuple((j * width, zoom_cells(width, enc.size)) for j in heavy))
        rf = oracle(eps, fine.size)
        second = yield Round(rf, fine, users=(ZOOM_SHARE, 1.0), label=fine.label)
        freq, cdf, var, unit_var = _cells(rf, second, fine.size)
        var = var + np.clip(cdf, 0.0, 1.0) * (1 - np.clip(cdf, 0.0, 1.0)) * max(1 / max(second.n, 1) - 1 / n, 0.0)
        return _release(space, taus, freq, cdf, var, unit_var, fine.ends(space.size), width, bins=enc.size,
                        zoomed=[int(j) for j in heavy])
    return protocol


def enc_ends(enc: Encoding, space: CoinSpace) -> np.ndarray:
    """The last coin of every bin of a level encoding."""
    return np.minimum(np.arange(1, enc.size + 1) * enc.width, space.size) - 1


def _cells(r: Randomizer, reply: Reply, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A release over ``size`` cells: its per-cell frequencies, its CDF, the CDF's variances, the cells' variances."""
    freq = np.asarray(r.estimate(reply.summary, reply.n), dtype=float)[:size]
    cdf = np.cumsum(freq)
    var = prefix_variance(r, np.clip(cdf, 0.0, 1.0), np.arange(1, len(cdf) + 1), reply.n)
    unit_var = np.asarray(r.variance(np.clip(freq, 0.0, 1.0), reply.n), dtype=float)[: len(freq)]
    return freq, cdf, var, unit_var


def _release(space: CoinSpace, taus: list[float], freq: np.ndarray, cdf: np.ndarray, var: np.ndarray,
             unit_var: np.ndarray, ends: np.ndarray, width: int, bins: int, zoomed: list[int] | None = None) -> Estimate:
    answers = {}
    starts = np.concatenate([[0], ends[:-1] + 1])
    for tau in taus:
        coin = read_out(cdf, freq, tau, ends)
        at = int(np.searchsorted(ends, coin))

        def interval(confidence: float, tau=tau, at=at):
            low, high = certified_bins(cdf, var, tau, at, confidence)
            return np.array([space.lower_edge(int(starts[low]))]), np.array([space.upper_edge(int(ends[high]))])

        answers[tau] = Estimate(np.array([space.value(coin)]), np.array([math.nan]),
                                extra={"coin": coin, "mechanism": "histogram", "interval": interval,
                                       "cdf_points": (ends, cdf), "cdf_var": var,
                                       "unit_width": int(ends[at] - starts[at] + 1), "bucketed": space.bucketed,
                                       "units": (ends, freq, unit_var)})
    values = np.array([float(a.values[0]) for a in answers.values()])
    first = next(iter(answers.values()))
    return Estimate(values, np.full(len(values), math.nan),
                    extra={"answers": answers, "coin": first.extra["coin"], "bins": bins, "width": width,
                           "zoomed": zoomed or []})
