"""Privacy audits of every registered local randomizer (DESIGN §4.5, §5).

Two audits, both over every class in :data:`~ldpql.mechanisms.REGISTRY`:

- :func:`audit`, the exact audit of the *formulas*: for a finite output space it enumerates
  ``output_distribution`` for every input of a small domain and takes, for each output, the largest log ratio
  of its probability over two inputs; for a continuous output (the Piecewise Mechanism) it does the same with
  the density on a fine grid that includes the breakpoints. Tolerance 1e-9.
- :func:`realised_audit`, the audit of the *samplers as they run*: ``realised_distribution`` gives each
  output's probability as an exact rational read off the sampler's own thresholds (⌈p·2^53⌉/2^53 for a
  ``random()`` comparison, ⌈p·2^w⌉/2^w for a w-bit integer one, exact for ``rng.integers``), at every ε of
  :data:`EPSILON_GRID`, which covers what the planner allows up to :data:`~ldpql.mechanisms.base.EPSILON_CAP`.
  Every row must sum to exactly 1, and the worst log ratio must be at most ε up to a relative 1e-12 (the
  double evaluation of the final logarithm). For the Piecewise Mechanism, whose output is continuous, what is
  checked is its realised density: the exact probabilities of its two branches (band or not), each spread
  over the length the sampler uses (C - 1 and C + 1 in floats), on a grid with both sides of every
  breakpoint; not the float positions inside a branch. The Hybrid Mechanism's output is PM's density (times the
  probability of its branch) plus the two atoms of its Duchi branch: the atoms are compared as extra outputs.

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


def _density_grid(r: Randomizer, points: int = 4001) -> np.ndarray:
    """Points of [-C-0.05, C+0.05] including both sides of every breakpoint of the audited inputs' densities."""
    bound = getattr(r, "C", 1.0)
    grid = np.linspace(-bound - 0.05, bound + 0.05, points)
    edges = np.concatenate([np.array(getattr(r, "_interval")(np.float64(x))) for x in r.audit_inputs()]) \
        if hasattr(r, "_interval") else np.array([])
    return np.unique(np.concatenate([grid, edges, edges - 1e-9, edges + 1e-9]))


def output_table(r: Randomizer) -> np.ndarray:
    """Every audited input's output distribution (or density on a grid), one row per input."""
    xs = r.audit_inputs()
    try:
        return np.array([r.output_distribution(x) for x in xs])
    except TypeError:  # continuous output: compare densities on a grid with both sides of every breakpoint
        grid = _density_grid(r)   # with the point outputs (atoms) of a mixed output space as extra columns
        return np.array([np.concatenate([r.density(x, grid), r.atoms(x)]) for x in xs])


def audit(r: Randomizer) -> AuditResult:
    """Audit one randomizer instance's formulas exactly."""
    table = output_table(r)
    finite = type(r).output_distribution is not Randomizer.output_distribution
    rows_ok = np.allclose(table.sum(axis=1), 1.0) if finite else True  # a density on a grid does not sum to 1
    worst = _worst_log_ratio(table) if rows_ok else math.inf
    return AuditResult(r.name, r.epsilon, worst)


def realised_table(r: Randomizer) -> tuple[list[list[Fraction]], bool]:
    """Every audited input's realised output distribution (or realised density on a grid), exactly; and
    whether the rows are distributions (which must then sum to exactly 1)."""
    xs = r.audit_inputs()
    if type(r).realised_distribution is not Randomizer.realised_distribution:
        return [r.realised_distribution(x) for x in xs], True
    grid = _density_grid(r, 201)  # the density is constant between breakpoints, which the grid includes
    return [r.realised_density(x, grid) + r.realised_atoms(x) for x in xs], False


def realised_audit(r: Randomizer) -> AuditResult:
    """Audit one randomizer instance as its sampler runs (exact rationals; DESIGN §4.5)."""
    rows, finite = realised_table(r)
    normalised = all(sum(row) == 1 for row in rows) if finite else True
    worst = _worst_exact_log_ratio(rows) if normalised else math.inf
    return AuditResult(r.name, r.epsilon, worst, realised=True)


def audit_registry() -> list[AuditResult]:
    """Audit the small instances of every registered randomizer."""
    return [audit(r) for cls in REGISTRY.values() for r in cls.audit_cases()]


def realised_registry(grid: tuple[float, ...] = EPSILON_GRID) -> list[AuditResult]:
    """Audit every registered randomizer's realised cases at every ε of ``grid``."""
    return [realised_audit(r) for cls in REGISTRY.values() for eps in grid for r in cls.realised_cases(eps)]
