"""Shared by design.py and heldout.py: the coverage of the few-far-reports interval under the exact law."""
from __future__ import annotations

import numpy as np

from ldpql.mechanisms import rare


def coverage(r, data: dict[float, int], half: float) -> float:
    """P(|mean error| <= half) for the mechanism ``r`` at ``data`` ({input: users}), under the exact law."""
    error, mass = rare.error_law(r.report_values(), r.output_distribution, data)
    return float(mass[np.abs(error) <= half * sum(data.values()) * (1 + 1e-9)].sum())


def normal_halfwidth(r, n: int, q: float, z: float) -> float:
    """est ± z·se's half-width at the data's own E[x²] = q (what the interval was before)."""
    return z * float(np.sqrt(r.variance(np.zeros(1), n, second_moment=q)[0]))
