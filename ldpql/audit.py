"""Exact privacy audits of every registered local randomizer (DESIGN §5).

For a finite output space, the audit enumerates the output distribution for every input of a small domain
and takes, for each output, the largest log ratio of its probability over two inputs. For a continuous
output (the Piecewise Mechanism) it does the same with the density on a fine grid that includes the
breakpoints. A randomizer passes when that worst log ratio is at most its ε (tolerance 1e-9); the suite also
checks that it is *tight*: not far below ε, so a mechanism that silently over-charges is caught too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpql.mechanisms import REGISTRY, Randomizer

TOLERANCE = 1e-9


@dataclass(frozen=True)
class AuditResult:
    """The worst log ratio found for one randomizer instance, against its claimed ε."""

    randomizer: str
    epsilon: float
    max_log_ratio: float

    @property
    def passed(self) -> bool:
        return self.max_log_ratio <= self.epsilon + TOLERANCE


def _worst_log_ratio(table: np.ndarray) -> float:
    """Rows: inputs; columns: outputs (probabilities or densities). Max over outputs of log(max/min)."""
    hi, lo = table.max(axis=0), table.min(axis=0)
    reachable = hi > 0
    if np.any(lo[reachable] <= 0):
        return math.inf  # some input can produce an output another input never produces
    return float(np.max(np.log(hi[reachable] / lo[reachable])))


def output_table(r: Randomizer) -> np.ndarray:
    """Every audited input's output distribution (or density on a grid), one row per input."""
    xs = r.audit_inputs()
    try:
        return np.array([r.output_distribution(x) for x in xs])
    except TypeError:  # continuous output: compare densities on a grid with both sides of every breakpoint
        bound = getattr(r, "C", 1.0)
        grid = np.linspace(-bound - 0.05, bound + 0.05, 4001)
        edges = np.concatenate([np.array(getattr(r, "_interval")(np.float64(x))) for x in xs]) \
            if hasattr(r, "_interval") else np.array([])
        grid = np.unique(np.concatenate([grid, edges, edges - 1e-9, edges + 1e-9]))
        return np.array([r.density(x, grid) for x in xs])


def audit(r: Randomizer) -> AuditResult:
    """Audit one randomizer instance exactly."""
    table = output_table(r)
    finite = type(r).output_distribution is not Randomizer.output_distribution
    rows_ok = np.allclose(table.sum(axis=1), 1.0) if finite else True  # a density on a grid does not sum to 1
    worst = _worst_log_ratio(table) if rows_ok else math.inf
    return AuditResult(r.name, r.epsilon, worst)


def audit_registry() -> list[AuditResult]:
    """Audit the small instances of every registered randomizer."""
    return [audit(r) for cls in REGISTRY.values() for r in cls.audit_cases()]
