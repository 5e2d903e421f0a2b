"""Privacy audits of every registered local randomizer (DESIGN §4.5, §5).

Two audits, both over every class in :data:`~ldpql.mechanisms.REGISTRY`:

- :func:`audit`, the exact audit of the *formulas*: it enumerates ``output_distribution`` for every audited
  input (every input of a small domain; a few points of [-1, 1] for a numeric input) and takes, for each
  output, the largest log ratio of its probability over two inputs. Tolerance 1e-9.
- :func:`realised_audit`, the audit of the *samplers as they run*: ``realised_distribution`` gives each
  output's probability as an exact rational read off the sampler's own thresholds (⌈p·2^53⌉/2^53 for a
  ``random()`` comparison, ⌈p·2^w⌉/2^w for a w-bit integer one, exact for ``rng.integers``), at every ε of
  :data:`EPSILON_GRID`, which covers what the planner allows up to :data:`~ldpql.mechanisms.base.EPSILON_CAP`.
  Every row must sum to exactly 1, and the worst log ratio must be at most ε up to a relative 1e-12 (the
  double evaluation of the final logarithm). Every randomizer has a finite output space the same for all
  inputs (the Piecewise Mechanism is discretized onto one lattice of cells, the Hybrid Mechanism's output is
  that cell or Duchi's bit with the branch flag), so what is enumerated is everything a report can be.

A randomizer passes when the worst log ratio is at most its ε; the suite also checks that it is *tight*: not
far below ε, so a mechanism that silently over-charges is caught too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ldpql.mechanisms import REGISTRY, Randomizer
from ldpql.mechanisms.base import EPSILON_CAP, log_exact

TOLERANCE = 1e-9
REALISED_TOLERANCE = 1e-12   # relative: only the rounding of the final log of an exact ratio
EPSILON_GRID = tuple(float(e) for e in np.geomspace(0.01, EPSILON_CAP, 40, endpoint=False)) + (EPSILON_CAP,)


@dataclass(frozen=True)
class AuditResult:
    """The worst log ratio found for one randomizer instance, against its claimed ε."""

    randomizer: str
    epsilon: float
    max_log_ratio: float
    realised: bool = False

    @property
    def passed(self) -> bool:
        if self.realised:
            return self.max_log_ratio <= self.epsilon * (1 + REALISED_TOLERANCE)
        return self.max_log_ratio <= self.epsilon + TOLERANCE


def _worst_log_ratio(table: np.ndarray) -> float:
    """Rows: inputs; columns: outputs (probabilities or densities). Max over outputs of log(max/min)."""
    hi, lo = table.max(axis=0), table.min(axis=0)
    reachable = hi > 0
    if np.any(lo[reachable] <= 0):
        return math.inf  # some input can produce an output another input never produces
    return float(np.max(np.log(hi[reachable] / lo[reachable])))


def _worst_exact_log_ratio(rows: list[list[Fraction]]) -> float:
    """The same over exact rationals: the largest max/min of one output over the inputs, then one log."""
    worst = Fraction(1)
    for column in zip(*rows):
        hi, lo = max(column), min(column)
        if hi > 0 and lo <= 0:
            return math.inf
        if hi > 0:
            worst = max(worst, hi / lo)
    return log_exact(worst)


def output_table(r: Randomizer) -> np.ndarray:
    """Every audited input's output distribution, one row per input."""
    return np.array([r.output_distribution(x) for x in r.audit_inputs()])


def audit(r: Randomizer) -> AuditResult:
    """Audit one randomizer instance's formulas exactly."""
    table = output_table(r)
    worst = _worst_log_ratio(table) if np.allclose(table.sum(axis=1), 1.0) else math.inf
    return AuditResult(r.name, r.epsilon, worst)


def realised_table(r: Randomizer) -> list[list[Fraction]]:
    """Every audited input's realised output distribution, exactly."""
    return [r.realised_distribution(x) for x in r.audit_inputs()]


def realised_audit(r: Randomizer) -> AuditResult:
    """Audit one randomizer instance as its sampler runs (exact rationals; DESIGN §4.5)."""
    rows = realised_table(r)
    normalised = all(sum(row) == 1 for row in rows)
    worst = _worst_exact_log_ratio(rows) if normalised else math.inf
    return AuditResult(r.name, r.epsilon, worst, realised=True)


def audit_registry() -> list[AuditResult]:
    """Audit the small instances of every registered randomizer."""
    return [audit(r) for cls in REGISTRY.values() for r in cls.audit_cases()]


def realised_registry(grid: tuple[float, ...] = EPSILON_GRID) -> list[AuditResult]:
    """Audit every registered randomizer's realised cases at every ε of ``grid``."""
    return [realised_audit(r) for cls in REGISTRY.values() for eps in grid for r in cls.realised_cases(eps)]
