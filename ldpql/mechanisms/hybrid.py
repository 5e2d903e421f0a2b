"""The Hybrid Mechanism, HM (Wang et al., "Collecting and Analyzing Multidimensional Data with Local Differential
Privacy", ICDE 2019), for a value in [-1, 1].

Privacy: ε-LDP. Each user tosses a coin that does not depend on its value: with probability β it runs the
Piecewise Mechanism at ε (:class:`~ldpql.mechanisms.piecewise.Piecewise`), otherwise Duchi et al.'s one-bit
mechanism at ε (:class:`~ldpql.mechanisms.duchi.Duchi`), and reports which one ran with the output. For any
output of the PM branch the probability (density) is β times PM's, of the Duchi branch (1 − β) times Duchi's;
β cancels in every ratio over two inputs, so the worst ratio is that of the worse branch, at most e^ε. As it
runs: the coin is drawn as ``random() < β`` (β' = ⌈β·2^53⌉/2^53), and each branch is the engine's own sampler
(PM discretized onto one lattice of M cells shared by every input). The output space is finite, the PM cell or
Duchi's ±C_D with the branch flag, and both audits enumerate it exactly (the formula, and as drawn).
Utility: both branches are unbiased for x, so the report is; per user Var = β·Var_PM(x) + (1 − β)·Var_D(x).
Wang et al. take β = 1 − 1/t (t = e^{ε/2}) for ε > ε* ≈ 0.61 (β = 0 below, where HM is Duchi), which cancels the
x² terms of the continuous PM's variance (β/(t−1) = 1 − β). The discretized PM's variance is a + (g−1)·x² with
g ≈ t/(t−1) (:mod:`ldpql.mechanisms.piecewise`), so β = 1/g here cancels them exactly: Var = β·a + (1−β)·C_D²
(plus at most the input rounding's g·Δ²/4 ≈ 1e-7) for every x, within 0.05% of Wang et al.'s
(t+3)/(3t(t−1)) + C_D²/t for ε ≤ 4 and below the worst case of both PM and Duchi (``tests/unit/test_mechanisms.py``
checks it). Mean of n users: Var/n. Runtime: O(n), three to four uniforms and up to two bounded integers per user.
No exact-aggregate path (the sum depends on each user's value).
Citations: seed-003-vector.md §4.5 (HM); Wang et al., ICDE 2019, §III-C.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Randomizer, below, check_epsilon, register
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.piecewise import Piecewise

EPSILON_STAR = 0.61   # Wang et al.'s ε*: at or below it the Hybrid Mechanism is Duchi's alone
FEW_PM = 3            # fewer PM reports give no E[x²] (second_moment), as fewer users do in rare.TINY


def pm_share(epsilon: float) -> float:
    """β: the probability that a user runs PM, 1 − e^{−ε/2} above ε* and 0 at or below it."""
    return 1.0 - math.exp(-epsilon / 2) if epsilon > EPSILON_STAR else 0.0


@register
class Hybrid(Randomizer):
    """PM with probability β, Duchi otherwise. A report is (value on the estimate's scale, 1 if PM ran); the
    summary is (sum of values, sum of squared PM values, number of PM reports)."""

    estimates = "mean"
    name = "hybrid"
    report_width = 2

    def __init__(self, epsilon: float):
        check_epsilon("Hybrid", epsilon)
        self.epsilon = float(epsilon)
        self.pm, self.duchi = Piecewise(self.epsilon), Duchi(self.epsilon)
        # β = 1/g ≈ 1 − 1/t (Wang et al.'s share for the continuous PM): it cancels the x² terms of the discretized
        # PM's variance, a + (g−1)·x², against Duchi's C_D² − x² exactly; 0 at or below ε*
        self.beta = 1 / self.pm.g if pm_share(self.epsilon) > 0 else 0.0
        self.C = self.pm.C   # the PM branch's output range [-C, C] (the audit's grid)

    def _interval(self, x: np.ndarray) -> tuple[float, float]:
        return self.pm._interval(x)   # the PM branch's band

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        runs_pm = rng.random(len(x)) < self.beta   # the branch coin: independent of x
        out = np.empty((len(x), 2))
        out[:, 1] = runs_pm
        out[runs_pm, 0] = self.pm.randomize(x[runs_pm], rng)
        out[~runs_pm, 0] = self.duchi.C * self.duchi.randomize(x[~runs_pm], rng)
        return out

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        reports = np.asarray(reports, dtype=float).reshape(-1, 2)
        pm = reports[:, 1] == 1
        return np.array([reports[:, 0].sum(), np.square(reports[pm, 0]).sum(), float(np.count_nonzero(pm))])

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float)[:1] / n

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        """β·Var_PM + (1 − β)·Var_D at E[x²] = ``second_moment`` (default: truth², Duchi's conservative bound,
        which only matters at β = 0: above ε* the x² terms cancel)."""
        m2 = np.square(truth) if second_moment is None else np.full(np.shape(truth), second_moment)
        duchi_m2 = m2 - self.pm.rounding   # PM's q may overstate E[x²] by up to Δ²/4 ≤ this: stay conservative
        return self.beta * self.pm.variance(truth, n, m2) + (1 - self.beta) * self.duchi.variance(truth, n, duchi_m2)

    def second_moment(self, summary: np.ndarray, n: int) -> float | None:
        """Unbiased E[x_j²] of the rounded inputs from the PM reports (:meth:`Piecewise.second_moment`); None from
        fewer than ``FEW_PM``: one or two reports' estimate moves with the error, and an interval built on it
        misses (audit 20: 0.77 at 90% in releases with one PM report among 8 users, ε = 1.5)."""
        count = float(summary[2]) if len(summary) > 2 else 0.0
        return self.pm.second_moment(np.array([0.0, summary[1]]), int(count)) if count >= FEW_PM else None

    @property
    def far_share(self) -> float:
        """The probability of a report far from x: the PM branch's P_out, or the Duchi branch
        (:mod:`ldpql.mechanisms.rare`)."""
        return self.beta * self.pm.outside + 1 - self.beta

    def report_values(self) -> np.ndarray:
        """The value of each output of :meth:`output_distribution`, in its order (PM's lattice first)."""
        return np.concatenate([self.pm.values, [-self.duchi.C, self.duchi.C]])

    def output_distribution(self, x: float) -> np.ndarray:
        """The PM branch's M cells (times β), then the Duchi branch's −C_D and +C_D (times 1 − β)."""
        return np.concatenate([self.beta * self.pm.output_distribution(x),
                               (1 - self.beta) * self.duchi.output_distribution(x)])

    def realised_distribution(self, x: float) -> list[Fraction]:
        """As drawn: the coin ``random() < β`` is PM w.p. ⌈β·2^53⌉/2^53, then each branch's realised output."""
        beta = below(self.beta)
        return [beta * p for p in self.pm.realised_distribution(x)] + \
            [(1 - beta) * p for p in self.duchi.realised_distribution(x)]

    def audit_inputs(self) -> np.ndarray:
        return self.pm.audit_inputs()

    @classmethod
    def audit_cases(cls):
        return [cls(e) for e in (0.1, 0.5, 1.0, 2.0, 5.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon)]
