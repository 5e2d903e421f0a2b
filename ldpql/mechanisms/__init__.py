"""Local randomizers and protocols, one module per family (randomizer, estimator and variance side by side).

Importing this package registers every randomizer in :data:`REGISTRY`, which the privacy audit walks.
Only the planner and the executor import it.
"""

from ldpql.mechanisms import duchi, grr, hybrid, oue, piecewise, rr  # noqa: F401  (registers the randomizers)
from ldpql.mechanisms import hadamard, ksubset, olh, unary  # noqa: F401  (frequency oracles, seed 002)
from ldpql.mechanisms import minimum  # noqa: F401  (min/max finding, seed 000)
from ldpql.mechanisms import gaussian  # noqa: F401  (Gaussian mean estimation, seed 004)
from ldpql.mechanisms import coco, collision, harmony, keyvalue, vector  # noqa: F401  (vectors and key-value, seed 003)
from ldpql.mechanisms import laplace, square_wave  # noqa: F401  (mean baselines, seed 003 §4.5)
from ldpql.mechanisms.base import (REGISTRY, Encoding, Estimate, Protocol, Randomizer, Reply, Round, add_virtual,
                                   debias, debiased_variance, one_round)
from ldpql.mechanisms.identity import Identity

__all__ = ["REGISTRY", "Encoding", "Estimate", "Identity", "Protocol", "Randomizer", "Reply", "Round", "add_virtual",
           "debias", "debiased_variance", "one_round"]
