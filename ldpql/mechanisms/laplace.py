"""The Laplace mechanism for the mean of a value in [-1, 1] (Dwork, McSherry, Nissim and Smith, "Calibrating Noise
to Sensitivity in Private Data Analysis", TCC 2006), in its discrete form: every report lies on one public lattice,
so that no low bit of a float identifies the input (Mironov, "On Significance of the Least Significant Bits for
Differential Privacy", CCS 2012).

Privacy: ε-LDP as it runs. The user rounds x without bias to a point k of the lattice −1 + 2k/M, k ∈ {0..M}
(M = 2^12; ``random() < fraction``, a step on its own value only, so a report's law is a mixture of the laws of
two lattice points) and reports k + G1 − G2 on the same lattice, with G1 − G2 the discrete Laplace noise of
:class:`~ldpql.mechanisms.gaussian.LaplaceSum` (sensitivity M cells, scale M/ε cells): its realised ε is
ln(1/ρ') ≤ ε with ρ' = ⌈e^{−ε}·2^53⌉/2^53 (:meth:`~ldpql.mechanisms.minimum.LaplaceMin.realised_epsilon`), for
every pair of lattice points, hence for every pair of mixtures of them: if P_k(y) ≤ c·P_k'(y) for all k, k', then
(1−u)P_k(y) + uP_{k+1}(y) ≤ c·min_k' P_k'(y). The audits enumerate the window [−2M, 3M] of the output lattice
(beyond it every ratio repeats with period M) for the formula and as drawn, rounding included.
Utility: the report y is unbiased for x (the rounding for x, the noise has mean 0). Per user Var = σ² + r(x),
σ² = (2/M)²·2·Var(G), Var(G) = M²ρ'/(1−ρ')² + Σ_j 4^j β_j'(1−β_j') (G = M·Q + R with Q geometric and R's bits
independent), the noise's exact variance as drawn, ≈ 8/ε² (that of Laplace(2/ε)); r(x) = f(1−f)(2/M)² ≤ 1/M² is
the rounding's (f: x's fraction of a lattice step). Mean of n users: Var ≤ (σ² + 1/M²)/n, whatever the data: the
noise does not depend on x, so the worst case is every case. Its worst-case standard error is 1.37-1.52× the best of
Duchi et al., PM and HM for ε ≤ 4 (Duchi's C² ≈ 4/ε² + 1/3 against 8/ε² at small ε) and more beyond (2.2× at ε = 8,
44× at 20: the Laplace noise falls as 1/ε, PM's as e^{−ε/2}): a baseline, run only when asked for. The summary keeps Σy², from which E[x_k²] (the rounded
inputs', at most 1/M² above E[x²]) is estimated without bias as Σy²/n − σ²: the users' spread for the sampling
term of a users split. Runtime: O(n(log M + 1/(1 − e^{−ε}))) coins, vectorised. No exact-aggregate path.
Citations: seed-003-vector.md §4.5 (Laplace, one coordinate); Canonne, Kamath and Steinke, "The Discrete Gaussian
for Differential Privacy", NeurIPS 2020 (the discrete Laplace).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Randomizer, below, check_epsilon, register
from ldpql.mechanisms.gaussian import LaplaceSum
from ldpql.mechanisms.minimum import LAPLACE_LATTICE_BITS


@register
class LaplaceMean(Randomizer):
    """Discrete Laplace on a lattice of [-1, 1] for the mean; a report is a lattice point (a float, exact), the
    summary is (Σy, Σy²)."""

    name = "laplace"
    estimates = "mean"

    def __init__(self, epsilon: float, lattice_bits: int = LAPLACE_LATTICE_BITS):
        check_epsilon("laplace", epsilon)
        self.sum = LaplaceSum(epsilon, lattice_bits)   # lattice index + discrete Laplace of sensitivity M
        self.epsilon, self.cells = self.sum.epsilon, self.sum.cells
        self.width = 2.0 / self.cells
        noise = self.sum.noise
        rho = math.ldexp(noise.carry_threshold, -53)
        bits = [math.ldexp(k, -53) for k in noise.bit_thresholds]
        var_g = self.cells ** 2 * rho / (1 - rho) ** 2 + sum(4 ** j * b * (1 - b) for j, b in enumerate(bits))
        self.noise_variance = self.width ** 2 * 2 * var_g   # σ²: the noise's variance as drawn, on the x scale
        self.rounding = self.width ** 2 / 4                 # the most the unbiased rounding adds per user

    def _grid(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lattice index below x and the fraction of a step above it, in the floats :meth:`randomize` uses."""
        pos = np.clip(np.asarray(x, dtype=float), -1, 1)
        pos += 1
        pos *= self.cells / 2   # a power of two: exact
        low = np.floor(pos)
        return low.astype(np.int64), pos - low

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k, fraction = self._grid(x)
        k += rng.random(len(k)) < fraction   # unbiased rounding to the lattice (local pre-processing)
        return self.sum.randomize(k, rng) * self.width - 1.0   # post-processing: the same lattice for everyone

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        y = np.asarray(reports, dtype=float)
        return np.array([y.sum(), np.dot(y, y)])

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float)[:1] / n

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        """(σ² + 1/M²)/n for every data set: the noise does not depend on x (``second_moment`` is not needed)."""
        return np.full(np.shape(truth), (self.noise_variance + self.rounding) / max(n, 1))

    def second_moment(self, summary: np.ndarray, n: int) -> float | None:
        """Unbiased E[x_k²] (the rounded inputs', at most 1/M² above E[x²]) as Σy²/n − σ², clipped to [0, 1]."""
        if n <= 0 or len(summary) < 2:
            return None
        return float(np.clip(float(summary[1]) / n - self.noise_variance, 0.0, 1.0))

    def step(self, n: int) -> float:
        """Reports lie on a lattice of width 2/M, so the mean of n of them on one of width 2/(Mn)."""
        return self.width / max(n, 1)

    # -- the audits ----------------------------------------------------------------------------------------------
    def _row(self, k: int) -> list[Fraction]:
        """The exact pmf of the report from lattice point k, clamped to the window (LaplaceSum's, as drawn)."""
        rows = self.__dict__.setdefault("_rows", {})   # each lattice point's row is shared by the inputs near it
        if k not in rows:
            rows[k] = self.sum.realised_distribution(k)
        return rows[k]

    def realised_distribution(self, x: float) -> list[Fraction]:
        """As drawn: rounding up w.p. ⌈f·2^53⌉/2^53, then the lattice point's exact noise pmf."""
        k, fraction = self._grid(np.array([x]))
        k, up = int(k[0]), below(fraction[0])
        if not up:
            return list(self._row(k))
        return [(1 - up) * p + up * q for p, q in zip(self._row(k), self._row(k + 1))]

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array([float(p) for p in self.realised_distribution(x)])

    def audit_inputs(self) -> np.ndarray:
        """Every lattice point (both ends: the worst ratio), midpoints between them, and off-grid inputs."""
        return np.concatenate([np.linspace(-1.0, 1.0, 2 * self.cells + 1), [-0.7731, 0.3, 1 - 1e-12]])

    @classmethod
    def audit_cases(cls):
        return [cls(e, bits) for e in (0.1, 0.5, 1.0, 2.0, 5.0) for bits in (1, 3)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2)]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, M=2^{self.cells.bit_length() - 1})"
