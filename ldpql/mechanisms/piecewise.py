"""The Piecewise Mechanism, PM (Wang et al., "Collecting and Analyzing Multidimensional Data with Local Differential
Privacy", ICDE 2019), for a value in [-1, 1], discretized onto one output lattice shared by every input.

Why discretized: the continuous PM samples its band as fl(u·(C−1) + ℓ(x)) with u = k/2^53; the set of floats
this can produce depends on x, so the low bits of one report identify the input (Mironov, "On Significance of the
Least Significant Bits for Differential Privacy", CCS 2012). Here a report is one of M = 2^12 fixed values.

Privacy: ε-LDP as it runs. With t = e^{ε/2} and C = (t+1)/(t-1), [-C, C] is cut into M cells of width w = 2C/M;
the band is K = max(1, round((C−1)/w)) consecutive cells. The input is first rounded without bias to one of the
J + 1 = M − K + 1 grid inputs x_j = −1 + 2j/J (``random() < fraction``; pre-processing on the user's own value,
so privacy is that of the grid inputs), whose band is cells j..j+K−1, centred at x_j·(C − wK/2). Given x_j the
report is outside the band with probability P_out = (M−K)/(K·e^ε + M−K), drawn directly as ``random() < P_out``
(its realised value ⌈P_out·2^53⌉/2^53 is rounded up, which only lowers the ratio), then uniform among the M − K
other cells, otherwise uniform among the K band cells (exact ``rng.integers``). Every cell has probability
p_h = (1 − P_out)/K or p_l = P_out/(M−K) under every grid input, so any ratio is at most p_h/p_l ≤ e^ε. The
output space is finite and the same for all inputs: both audits enumerate it exactly (formula and as drawn,
including the input rounding's realised probability), which the continuous PM's float positions escaped.
Utility: a report is the cell's midpoint m_i divided by s = (p_h − p_l)·K·(C − wK/2); the midpoints sum to 0, so
E[m | x_j] = (p_h − p_l)·K·x_j·(C − wK/2) and the report is unbiased for x_j, hence for x. With
g = 1/((p_h − p_l)K) and a = [p_l·M·(C²/3 − w²/12) + (p_h − p_l)·K(K²−1)w²/12]/s², E[y² | x_j] = a + g·x_j²;
the rounding adds r(x) = E[x_j²] − x² ∈ [0, Δ²/4], Δ = 2/J. Per user Var = a + (g−1)·x² + g·r(x); the mean of
n users uses the bound (a + (g−1)·q + g·Δ²/4)/n, valid at q = E[x²] and at q = E[x_j²], q ≤ 1 when unknown.
The summary keeps Σy², from which q = E[x_j²] is estimated without bias (:meth:`Piecewise.second_moment`; it
overstates E[x²] by at most Δ²/4 ≈ 6e-8).
Against the continuous PM's Var = x²/(t−1) + (t+3)/(3(t−1)²), the variance bound at M = 2^12 is (ratio at
x = 0 / at |x| = 1): ε = 0.5: 1.00001 / 1.00004; ε = 1: 1.00004 / 1.00010; ε = 4: 1.00032 / 1.00045;
ε = 8: 0.99588 / 0.99564 (K rounds down). Where the band is a few cells the rounding of K matters more: ε = 10:
1.015, 12: 1.013, 14: 0.933, 16: 1.374 (K = 1 while (C−1)/w = 1.34), 18: 0.51, 20: 0.19 (x = 0 and |x| = 1
alike); a larger M would bring ε = 16 to 1.10 (2^14) or 1.00 (2^16), at 4-16× the audits' cost.
Runtime: O(n), two uniforms and two bounded integers per user. No exact-aggregate path (the sum of reports
depends on each user's value, not on a histogram).
Citations: seed-003-vector.md §4.5 (PM).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Randomizer, below, check_epsilon, register

CELLS = 1 << 12   # M: the variance is within 0.05% of the continuous PM's for ε ≤ 4 (module docstring)


def _band_row(j: int, up, high, low, cells: int, band: int) -> list:
    """Probabilities of the ``cells`` outputs for an input rounded up from grid input j to j + 1 with
    probability ``up``: (1 − up)·row(j) + up·row(j+1), where row(j) is ``high`` on cells j..j+band−1 and
    ``low`` elsewhere. Works on floats and on exact Fractions (then each row sums to exactly 1)."""
    row = [low] * j + [high] * band + [low] * (cells - band - j)
    if up:   # cells j and j + band are the only ones the two rows give differently
        row[j], row[j + band] = (1 - up) * high + up * low, (1 - up) * low + up * high
    return row


@register
class Piecewise(Randomizer):
    """Discretized Piecewise Mechanism on inputs in [-1, 1]; a report is one of M fixed floats (the cell
    midpoints over the estimator's scale), the summary is (Σy, Σy²)."""

    estimates = "mean"
    name = "piecewise"

    def __init__(self, epsilon: float, cells: int = CELLS):
        check_epsilon("Piecewise", epsilon)
        self.epsilon, self.cells = float(epsilon), int(cells)
        self.t = math.exp(self.epsilon / 2)
        C = (self.t + 1) / (self.t - 1)
        self._lattice(C, max(1, round((C - 1) / (2 * C / self.cells))))

    def _lattice(self, C: float, k: int) -> None:
        """Output range [−C, C] in M = ``self.cells`` cells, a band of k cells, and everything derived from them
        (shared with the discretized Square Wave, :mod:`ldpql.mechanisms.square_wave`, a band mechanism too)."""
        self.C, m = C, self.cells
        w = 2 * self.C / m
        self.band = k
        self.steps = m - k   # J: grid inputs 0..J
        # privacy-critical: the rare branch, drawn directly, rounded up (relative margin 2^-50 over the float
        # evaluation) so that its realised probability is at least the exact (M−K)/(K e^ε + M−K)
        self.outside = float(below((m - k) / (k * math.exp(self.epsilon) + m - k) * (1 + 2.0 ** -50)))
        high, low = (1 - self.outside) / k, self.outside / (m - k)
        scale = (high - low) * k * (self.C - w * k / 2)
        self.values = (2 * np.arange(m) + 1 - m) * (self.C / m) / scale   # midpoints / s: unbiased reports
        self.g = 1 / ((high - low) * k)
        spread = low * m * (self.C ** 2 / 3 - w * w / 12) + (high - low) * k * (k * k - 1) * w * w / 12
        self.floor = spread / scale ** 2   # a: E[y²] at x_j = 0
        self.rounding = self.g / self.steps ** 2   # g·Δ²/4, Δ = 2/J: the most the input rounding adds

    def _grid(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The grid input below x and the fraction of a step above it, in the floats :meth:`randomize` uses."""
        pos = np.clip(np.asarray(x, dtype=float), -1, 1)
        pos += 1
        pos *= self.steps / 2
        low = np.floor(pos)
        return low.astype(np.int64), pos - low

    def _interval(self, x: np.ndarray) -> tuple[float, float]:
        """The smallest and largest report of the band of x's lower grid input."""
        j = int(self._grid(np.atleast_1d(x))[0][0])
        return float(self.values[j]), float(self.values[j + self.band - 1])

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(x)
        j, fraction = self._grid(x)
        j += rng.random(n) < fraction   # unbiased rounding to a grid input (local pre-processing)
        outside = rng.random(n) < self.outside   # privacy-critical: the rare branch, as audited
        cell = rng.integers(0, self.cells - self.band, n)   # a cell outside the band: skip the band's K cells
        cell += self.band * (cell >= j)
        inside = j + rng.integers(0, self.band, n)
        np.copyto(cell, inside, where=~outside)
        return self.values[cell]

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        reports = np.asarray(reports, dtype=float)
        return np.array([reports.sum(), np.dot(reports, reports)])   # Σy, and Σy² for the variance

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float)[:1] / n

    def second_moment(self, summary: np.ndarray, n: int) -> float | None:
        """Unbiased q = E[x_j²] (the rounded inputs', at most Δ²/4 above E[x²]) from E[y²] = a + g·q, clipped to
        [0, 1]. None without users."""
        if n <= 0 or len(summary) < 2:
            return None
        return float(np.clip((float(summary[1]) / n - self.floor) / self.g, 0.0, 1.0))

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        """(a + (g−1)·q + g·Δ²/4)/n at q = ``second_moment`` (1, the worst case, when None)."""
        m2 = np.ones(np.shape(truth)) if second_moment is None else np.full(np.shape(truth), second_moment)
        return (self.floor + (self.g - 1) * m2 + self.rounding) / n

    @property
    def far_share(self) -> float:
        """P_out: the probability that a report leaves its band (:mod:`ldpql.mechanisms.rare`)."""
        return self.outside

    def report_values(self) -> np.ndarray:
        """The value of each output of :meth:`output_distribution`, in its order."""
        return self.values

    def output_distribution(self, x: float) -> np.ndarray:
        """The formula: exact rounding fraction, P_out = (M−K)/(K e^ε + M−K)."""
        j, fraction = self._grid(np.array([x]))
        k, m = self.band, self.cells
        low = 1 / (k * math.exp(self.epsilon) + m - k)
        return np.array(_band_row(int(j[0]), float(fraction[0]), low * math.exp(self.epsilon), low, m, k))

    def realised_distribution(self, x: float) -> list[Fraction]:
        """As drawn: rounding up w.p. ⌈f·2^53⌉/2^53, the rare branch w.p. ``outside`` (on the 2^-53 grid), then
        exact uniform integers."""
        j, fraction = self._grid(np.array([x]))
        out, k = Fraction(self.outside), self.band
        return _band_row(int(j[0]), below(fraction[0]), (1 - out) / k, out / (self.cells - k), self.cells, k)

    def audit_inputs(self) -> np.ndarray:
        """Both ends (disjoint bands: the worst ratio), an interior grid input, and off-grid inputs."""
        return np.array([-1.0, -0.77, 0.0, 0.3, 1 - 1e-12, 1.0])

    @classmethod
    def audit_cases(cls):
        return [cls(e) for e in (0.1, 0.5, 1.0, 2.0, 5.0, 20.0)] + [cls(1.0, cells=16), cls(8.0, cells=64)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon)]
