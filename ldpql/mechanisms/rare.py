"""Intervals for a mean where few reports leave their band: the Piecewise and Hybrid Mechanisms at a high ε.

Why: a PM report lands outside the narrow band around x with probability P_out (≈ M/e^ε at ε = 16, independent of
x), and a Hybrid user runs Duchi's mechanism with probability 1 − β; each such *far* report moves the mean by up
to ~2/n. Where λ = n·P_far is small the error of the mean is a few such jumps, not normal, and est ± z·se misses
whenever one lands: 0.85-0.87 at 90% and 0.90-0.93 at 95% at n = 1,000, ε = 16 (the coverage grid's rows
``PM_FEW_FAR``). Spread-out data are worse than point masses (the near reports' offsets, which keep a report
unbiased, cancel among users on both sides while the far jumps do not; examples/pm14).

What: the error's law at given data is exact and cheap. Reports lie on one lattice of step h (Hybrid's two Duchi
values rounded to it, an error of at most h/2 on a rare report), so Σ y_i is a sum of independent lattice variables
whose law is the product of the users' characteristic functions: one FFT per distinct input. The data are unknown,
so the half-width is the largest (confidence)-quantile of |Σ(y_i − x_i)|/n over envelope data sets with the
release's own E[x²] = q (which it estimates without bias; the 0.01-wide bracket holding it): ±a in halves and all at
a, for a at both ends of the bracket (√q's neighbours halfway between PM's grid inputs, where the input rounding is
noisiest), and ±1 on a share q (halves, 70/30, all +1) with 0 elsewhere; plus half a lattice step, a continuity
correction (:func:`halfwidth`). Designed on uniform, bimodal,
heavy-tailed, discrete and three-point data at ε = 8-20, n = 30-10^4 (coverage ≥ 0.898 at 90%, ≥ 0.946 at 95%, where
est ± z·se falls to 0.846 / 0.893 and reaches 1.000 at ε = 20); held out, on 1,080 random data sets at ε = 0.5-20,
n = 10-5,000: ≥ 0.900 at 90%, ≥ 0.940 at 95% (examples/pm15; the ε range is PM's: HM at ε ≤ 0.61 is Duchi's
mechanism, whose release has no q, and gets the q-free width of :func:`halfwidth`). Where λ > ``FEW`` est ± z·se
holds and is kept.
Post-processing of the release (q, n and ε only).
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist

import numpy as np

FEW = 16.0   # far reports expected; above it est ± z·se holds (examples/pm15)
TINY = 3     # fewer users: q̂ is one or two reports' and moves with the error; the half-width is q-free (audit 19 M3)


def error_law(values: np.ndarray, law, data: dict[float, int], cache: dict | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The law of Σ_i (y_i − x_i) over the users of ``data`` ({input: users}), where a user with input x reports
    ``values[k]`` with probability ``law(x)[k]``: (errors, probabilities). ``values[0]`` and ``values[1]`` are
    neighbours on the lattice of step h the others are rounded to; exact up to that rounding, by FFT on a window
    wide enough for 12 sd. ``cache`` (one dict per ``values`` and ``law``) keeps each input's law and transform
    across calls: a GROUP BY asks for thousands of group sizes over the same few envelope inputs."""
    cache = {} if cache is None else cache
    for x in data.keys() - cache.keys():   # each input's law and its second moment about x
        p = np.asarray(law(x), dtype=float)
        cache[x] = (p, float(np.dot(p, (values - x) ** 2)))
    h = float(values[1] - values[0])
    used = np.any([cache[x][0] > 0 for x in data], axis=0)   # the outputs some input gives: HM at ε ≤ 0.61 gives
    index = np.rint((values[used] - values[0]) / h).astype(np.int64)   # Duchi's two alone, on a lattice 2C wide
    low, step = int(index.min()), max(int(np.gcd.reduce(index - index.min())), 1)
    base, h, index = values[0] + low * h, h * step, (index - low) // step   # compact index 0 is at base
    n, total = sum(data.values()), sum(x * c for x, c in data.items())
    var = sum(c * cache[x][1] for x, c in data.items())
    size = 1 << int(math.ceil(math.log2(24 * math.sqrt(var) / h + 2 * index.max() + 2)))
    log_modulus, phase = np.zeros(size // 2 + 1), np.zeros(size // 2 + 1)
    for x, c in data.items():   # φ^c as c·log|φ| and c·arg φ (an integer power: any branch of arg will do)
        key = (x, size, low, step)
        if key not in cache:
            pmf = np.zeros(size)
            np.add.at(pmf, index, cache[x][0][used])
            cf = np.fft.rfft(pmf)
            with np.errstate(divide="ignore"):
                cache[key] = (np.log(np.abs(cf)), np.angle(cf))
        log_modulus += c * cache[key][0]
        phase += c * cache[key][1]
    mass = np.clip(np.fft.irfft(np.exp(log_modulus + 1j * phase), size), 0, None)
    k = np.arange(size)
    centre = (total - n * base) / h   # the expected lattice index of Σ y: unwrap the window around it
    k = k + np.round((centre - k) / size) * size
    return n * base + k * h - total, mass / mass.sum()


def error_quantile(values: np.ndarray, law, data: dict[float, int], confidence: float,
                   cache: dict | None = None) -> float:
    """The ``confidence``-quantile of |Σ_i (y_i − x_i)| under :func:`error_law`."""
    error, mass = error_law(values, law, data, cache)
    first = int(np.argmin(error))   # the window is consecutive lattice points, rotated: unrotate, no sort needed
    error, cdf = np.roll(error, -first), np.cumsum(np.roll(mass, -first))

    def cover(t: float) -> float:   # P(-t ≤ E ≤ t), non-decreasing in t
        below = int(np.searchsorted(error, -t, "left"))
        return cdf[np.searchsorted(error, t, "right") - 1] - (cdf[below - 1] if below else 0.0)

    reach, zero = np.abs(error), int(np.searchsorted(error, 0.0))
    best = float(reach.max())
    for t in (reach[zero:], reach[:zero][::-1]):   # each side's candidates, ascending: bisect for the first covered
        lo, hi = 0, len(t)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if cover(t[mid]) >= confidence else (mid + 1, hi)
        best = min(best, float(t[lo])) if lo < len(t) else best
    return best


def envelopes(n: int, q: tuple[float, float], step: float) -> list[dict[float, int]]:
    """Data sets of n users in [-1, 1] with E[x²] in ``q`` = (low, high) that bound the far reports' effect (module
    docstring): ±a in halves and all users at a, for a just below √low and just above √high (a far jump's reach and
    the near reports' summed offset move in opposite directions with a, so both ends of the bracket are needed), each
    halfway between two of the randomizer's grid inputs (``step`` apart), where its unbiased rounding adds the most
    noise; and ±1 on a share `high` (halves, 70/30, all +1) with 0 elsewhere."""
    out = []
    for a in (math.floor((math.sqrt(q[0]) + 1) / step - 0.5), math.ceil((math.sqrt(q[1]) + 1) / step - 0.5)):
        a = min(max(a + 0.5, 0.5), 2 / step - 0.5) * step - 1   # the half-grid point, inside [-1, 1]
        out += [{a: n // 2, -a: n - n // 2}, {a: n}]
    k = int(round(q[1] * n))
    for share in (0.5, 0.7, 1.0):
        up = int(round(k * share))
        out.append({1.0: up, -1.0: k - up, 0.0: n - k})
    return [{x: c for x, c in d.items() if c} for d in out]


_SEEN: dict[tuple, float] = {}   # (mechanism, ε, lattice, n, q, confidence) -> half-width: releases share the work
_LAWS: dict[tuple, dict] = {}   # (mechanism, ε, lattice) -> error_law's cache: releases over other n share the work


def _off_lattice(values: np.ndarray, far: float, n: int) -> float:
    """The most that rounding reports onto the lattice can hide: Hybrid's two Duchi values lie off PM's lattice by
    up to half a step, and a law built from k such reports all rounded one way is off by k times that (audit 19:
    two users at +1, Hybrid at ε = 0.5, fell short by 3e-4 on [-1, 1] and covered 0.848 at 90%). k is a count
    of far reports that at most ~1e-4 of releases exceed (λ + 4√λ + 4), and 0 for PM, whose values are all on it."""
    h = values[1] - values[0]
    off = float(np.max(np.abs(values - (values[0] + np.rint((values - values[0]) / h) * h))))
    return 0.0 if off <= 1e-6 * h else off * min(n, math.ceil(far + 4 * math.sqrt(far) + 4))


def halfwidth(randomizer, n: int, q: float | None, confidence: float) -> float:
    """The half-width of a mean of n users' reports at ``confidence``: the largest quantile over the envelope data
    sets with E[x²] in the 0.01-wide bracket holding q (so that repeated releases share the work), plus half a step
    of the reports' lattice, a continuity correction (where no far report is likely the law is a few atoms a step
    apart, and the data's lattice of Σy is offset from an envelope's: audit 19 found 0.825 at 90% without it);
    0 where λ = n·P_far > ``FEW``. Over every bracket where q is None (a Hybrid release with no PM report has no
    q̂) or n < ``TINY`` (q̂ from one or two reports moves with the error: a far report from a user at +1 lowers
    it, and the width with it; audit 19 found 0.84 at 90% for one user at ε = 2)."""
    if n <= 0 or n * randomizer.far_share > FEW:
        return 0.0
    low = None if q is None or n < TINY else min(0.99, math.floor(max(q, 0.0) * 100 + 1e-9) / 100)
    grid = getattr(randomizer, "pm", randomizer)   # the lattice (Hybrid: its PM branch's): a randomizer's own
    # Duchi's reports alone (HM with no PM report) sum to atoms 2C apart, and an envelope's atoms sit up to C from
    # the data's: C is their continuity correction (audit 20: 0.870 at 90% for 16 users at ε = 0.5 without it)
    coarse = randomizer.duchi.C if q is None and hasattr(randomizer, "duchi") else 0.0
    key = (type(randomizer), randomizer.epsilon, grid.cells, grid.steps, n, low, coarse, round(confidence, 6))
    if key not in _SEEN:
        if len(_SEEN) > 65536:
            _SEEN.clear()
        if len(_LAWS) > 16 or sum(map(len, _LAWS.values())) > 512:   # (≤ ~0.5 MB an entry)
            _LAWS.clear()
        # (cells and steps: audit 20 built a PM of 512 cells at one ε); a q-free width's hundreds of inputs are
        # not kept (audit 20: up to 414 MB after one call)
        laws = _LAWS.setdefault(key[:4], {}) if low is not None else {}
        values = randomizer.report_values()
        step = 2 / grid.steps   # PM's grid inputs
        brackets = [low] if low is not None else [k / 100 for k in range(100)]
        sets = {tuple(sorted(d.items())) for b in brackets for d in envelopes(n, (b, b + 0.01), step)}
        worst = max(error_quantile(values, randomizer.output_distribution, dict(d), confidence, laws) for d in sets)
        half_step = max((values[1] - values[0]) / 2, coarse)
        _SEEN[key] = (worst + half_step + _off_lattice(values, n * randomizer.far_share, n)) / n
    return _SEEN[key]


def widen(est, confidence: float):
    """A planner ``derive``: where λ ≤ ``FEW``, the estimate's interval at ``confidence`` is ± :func:`halfwidth`
    (in quadrature with a users split's sampling term, z·its se) instead of est ± z·se, which misses there when a
    far report lands, and is many times too wide when none is likely (ε = 20, n = 100: 1.000 at 90%). Reads
    ``extra['far']`` = (randomizer, n, q, |scale|, sampling variance) that :func:`~ldpql.mechanisms.base.one_round`
    keeps; anything else is returned unchanged."""
    far = est.extra.get("far")
    if far is None or est.interval is not None:
        return est
    randomizer, n, q, scale, sampling = far
    rare = halfwidth(randomizer, n, q, confidence)
    if not rare:
        return est
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half, value = scale * math.sqrt(rare ** 2 + z * z * sampling), float(est.values[0])
    return dataclasses.replace(est, interval=(np.array([value - half]), np.array([value + half])),
                               interval_confidence=confidence)
