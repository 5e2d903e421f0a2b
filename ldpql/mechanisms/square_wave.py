"""The Square Wave mechanism, SW (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić, "Estimating Numerical Distributions
under Local Differential Privacy", SIGMOD 2020), for v = (x + 1)/2 ∈ [0, 1], discretized onto one public lattice.

The continuous SW reports ṽ ∈ [−b, 1 + b] with density p = e^ε/(2b·e^ε + 1) within b of v and q = 1/(2b·e^ε + 1)
elsewhere, b = (ε·e^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)) (the b that maximises the mutual information of v and ṽ).

Discretized (why: as for the Piecewise Mechanism, a float drawn in an input-dependent interval leaks the input
through its low bits; Mironov, CCS 2012): with J = 2^12 grid inputs steps, the input is rounded without bias to
v_j = j/J (``random() < fraction``, on the user's own value only), the band is K = max(1, round(2bJ)) cells and
the output range [−b', 1 + b'] with b' = K/(2J) is cut into M = J + K cells of width 1/J: the band of v_j is
cells j..j+K−1, exactly [v_j − b', v_j + b']. Every cell has probability p_h = e^ε/(K e^ε + M − K) in the band
and p_l = 1/(K e^ε + M − K) outside: the continuous SW at b' (density p_h·J = e^ε/(2b'e^ε + 1)), b' within
1/(2J) of b (b' = 1/(2J) ≫ b only where 2bJ < 1/2, ε ≳ 13, where SW's band is narrower than one cell).
On the x scale this is the band lattice of :class:`~ldpql.mechanisms.piecewise.Piecewise` with range [−C, C],
C = M/J = 1 + 2b', and the same K: the sampler, audits and unbiased reports are that class's.
Privacy: ε-LDP as it runs, with proof. The sampler draws "outside the band" as ``random() < P_out'`` with
P_out' = ⌈P_out·2^53⌉/2^53 ≥ P_out = (M−K)/(K e^ε + M−K), then a cell uniformly (exact ``rng.integers``) among
the M − K outside cells, else among the K band cells. Under every grid input each cell thus has probability
h' = (1 − P_out')/K or l' = P_out'/(M − K), and h'/l' = (1 − P_out')(M−K)/(K·P_out') ≤ (1 − P_out)(M−K)/(K·P_out)
= e^ε since P_out' ≥ P_out. A user's input is a mixture of two grid inputs, and a mixture of rows whose entries all
lie in [l', h'] has its entries there too, so every ratio over any two inputs is ≤ h'/l' ≤ e^ε; it is attained
(grid inputs 0 and J have different bands), so the realised ε is exactly ln(h'/l'), below ε by the rounding of
P_out to the 2^-53 grid only (1e-16 relative at ε = 0.5, 5e-9 at ε = 30).
Both audits enumerate the M cells exactly (formula and as drawn, the rounding's realised probability included).
Estimators. (1) Linear (the engine's): E[ṽ | v_j] is affine in v_j, E = p_l·M/2 + (p_h − p_l)K·v_j (the cell
midpoints sum to M/2, the band's to K·v_j), so the Piecewise report (midpoint over s) is unbiased for x_j, hence for
x; per user Var = a + (g − 1)x² + g·r(x) with g = 1/((p_h − p_l)K) (Piecewise's closed form), ≈ that of the
continuous SW's linear estimator (``tests/unit/test_mean_baselines.py`` checks within 0.2% for ε ≤ 4; at ε = 8 it
is 4% below, from the rounding of K). (2) EMS (the paper's): the distribution over input buckets by EM with
binomial smoothing from the histogram of reported cells (:func:`ems`), the mean from it. That mean is biased
toward the middle of the range (the smoothing spreads mass, and EM stops at a finite tolerance from a uniform
start): measured at n = 10^5 on skewed data (mean −0.43), +0.015 at ε = 0.5 (1.8 of its own sd; its MSE 1.6× the
linear estimator's), +0.003 at ε = 1 and +0.0006 at ε = 4 (MSE 0.74× and 0.80×: a shrinkage estimator); its
variance has no closed form, and a normal interval with the linear estimator's se covers 0.93 at ε = 0.5. So the
engine answers LDP_MEAN with the linear estimator and its normal interval (unbiased, closed form, covers 0.92-0.955
on the same grid: ``benchmarks/mean_baselines.py``); :func:`ems` is kept for distributions and for the measured
comparison (docs/means.md). SW is built for distributions, not means: its band is wider than the Piecewise Mechanism's, so its linear mean's worst-case
standard error is larger than PM's (ε = 0.5: 1.007×, 1: 1.028×, 2: 1.109×, 4: 1.42×, 8: 2.75×) and than the best
of Duchi et al., PM and HM (1.136×, 1.134×, 1.203×, 1.49×, 2.77×); the planner lists it as a baseline, run only
when asked for (``mechanism => 'square_wave'``). From ε ≈ 16, where 2bJ < 1/2, its band is one cell and it is PM's
one-cell lattice up to a rescaling (equal errors to 0.03%).
Runtime: O(n), as PM's. The summary is the histogram of reported cells (M numbers): the mean, E[y²] and EMS all
come from it. No exact-aggregate path.
Citations: seed-003-vector.md §4.5 (SW); Li et al., SIGMOD 2020, §4 (SW, b), §5 (EM, EMS).
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.mechanisms.base import check_epsilon, register
from ldpql.mechanisms.piecewise import Piecewise

STEPS = 1 << 12   # J: grid inputs on [0, 1], cells of width 1/J


def band_half_width(epsilon: float) -> float:
    """SW's b = (ε·e^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)), in expm1 form (no cancellation at small ε)."""
    e = math.exp(epsilon)
    return (epsilon * e - math.expm1(epsilon)) / (2 * e * (math.expm1(epsilon) - epsilon))


@register
class SquareWave(Piecewise):
    """Discretized Square Wave on inputs in [-1, 1] (v = (x+1)/2); a report is one of M fixed floats (cell
    midpoints on the x scale over s, unbiased), the summary is the histogram of reported cells."""

    name = "square_wave"

    def __init__(self, epsilon: float, steps: int = STEPS):
        check_epsilon("SquareWave", epsilon)
        self.epsilon, self.b = float(epsilon), band_half_width(epsilon)
        k = max(1, round(2 * self.b * steps))
        self.cells = int(steps) + k
        self._lattice(self.cells / steps, k)   # C = M/J: the band of grid input x_j is centred at x_j exactly

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        """The histogram of reported cells (reports are exactly ``values[cell]``, which increase with the cell)."""
        cells = np.searchsorted(self.values, np.asarray(reports, dtype=float))
        return np.bincount(cells, minlength=self.cells).astype(float)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.array([np.dot(summary, self.values) / n])

    def second_moment(self, summary: np.ndarray, n: int) -> float | None:
        if n <= 0:
            return None
        return super().second_moment(np.array([0.0, np.dot(summary, self.values ** 2)]), n)

    def transition(self, buckets: int, outputs: int | None = None) -> np.ndarray:
        """P(output group | input bucket), as the sampler runs: column i averages the rows of the grid inputs in bucket
        i of ``buckets`` equal buckets of [0, 1] (a grid input on a boundary counts half to each side); the rows are
        the ``outputs`` groups of consecutive cells of :meth:`groups` (every cell when None)."""
        k, m, j = self.band, self.cells, np.arange(self.steps + 1)
        high, low = (1 - self.outside) / k, self.outside / (m - k)
        edges = np.linspace(0, self.steps, buckets + 1)
        weight = np.clip(np.minimum(j[:, None] + 0.5, edges[None, 1:]) - np.maximum(j[:, None] - 0.5,
                                                                                     edges[None, :-1]), 0, None)
        weight /= weight.sum(axis=0)
        # cell c is in the band of grid inputs c − K + 1 .. c: its probability is low + (high − low)·(their weight)
        total = np.vstack([np.zeros((1, buckets)), np.cumsum(weight, axis=0)])   # total[i] = Σ_{j < i} weight[j]
        c = np.arange(m)
        inside = total[np.minimum(c + 1, self.steps + 1)] - total[np.maximum(c - k + 1, 0)]
        return self.groups(low + (high - low) * inside, outputs)

    def groups(self, hist: np.ndarray, outputs: int | None) -> np.ndarray:
        """``hist`` (cells along the first axis) summed over ``outputs`` groups of consecutive cells (as is if None)."""
        if outputs is None:
            return np.asarray(hist, dtype=float)
        starts = np.unique(np.linspace(0, self.cells, outputs + 1).astype(np.int64)[:-1])
        return np.add.reduceat(np.asarray(hist, dtype=float), starts, axis=0)

    def bucket_centres(self, buckets: int) -> np.ndarray:
        """The x-scale centres of the ``buckets`` input buckets."""
        return -1 + (2 * np.arange(buckets) + 1) / buckets

    def audit_inputs(self) -> np.ndarray:
        return np.array([-1.0, -0.77, 0.0, 0.3, 1 - 1e-12, 1.0])

    @classmethod
    def audit_cases(cls):
        return [cls(e, steps) for e in (0.1, 0.5, 1.0, 2.0, 5.0, 20.0) for steps in (16, 256)] + [cls(1.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 64)]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, J={self.steps}, K={self.band})"


def ems(hist: np.ndarray, transition: np.ndarray, smooth: bool = True, tolerance: float = 1e-3,
        max_iter: int = 10_000) -> np.ndarray:
    """Li et al.'s EM (``smooth`` False) or EMS: the input distribution over the transition's columns that
    (nearly) maximises the likelihood of the reported cells' histogram, each M-step followed by the binomial
    smoothing (1, 2, 1)/4 of adjacent buckets; stops when the log-likelihood gains less than ``tolerance``
    (Li et al. stop at 10^-3·e^ε; a smaller tolerance only runs longer). Post-processing of the release."""
    hist = np.asarray(hist, dtype=float)
    f = np.full(transition.shape[1], 1 / transition.shape[1])
    kernel, previous = np.array([0.25, 0.5, 0.25]), -math.inf
    for _ in range(max_iter):
        predicted = transition @ f
        f = f * (transition.T @ (hist / predicted))
        f /= f.sum()
        if smooth:
            f = np.convolve(np.pad(f, 1, mode="edge"), kernel, mode="valid")
            f /= f.sum()
        likelihood = float(hist @ np.log(transition @ f))
        if likelihood - previous < tolerance:
            break
        previous = likelihood
    return f
