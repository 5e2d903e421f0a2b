"""Users held in memory as value counts: what the driver answers sub-interval rounds from, and the data of the
in-memory runs that tests and reproductions use.

:class:`SlicedUsers` is one aggregate's users on one cell as the counts of their encoded values. A round that
reaches the sub-interval [s0, s1) of them (a quantile search's batch, a hierarchical level) gets a random
subset, drawn without replacement from the users not asked yet: with users at independent uniform positions
(the backend's salted hash), the number in a new interval, given the intervals already taken, is binomial
over the users left with probability ℓ/(1 − taken length), and which users they are is a multivariate
hypergeometric draw from the counts left. That is the law of the hashed slice, and it needs one read of the
counts instead of one per round; disjoint intervals reach disjoint users, so no user answers twice.
"""

from __future__ import annotations

import numpy as np

SMALL_SUPPORT = 2048   # up to this many distinct values, numpy's multivariate hypergeometric draws directly


class SlicedUsers:
    """The users of one protocol as counts per distinct base value, asked in disjoint sub-intervals."""

    def __init__(self, base, values: np.ndarray, counts: np.ndarray, rng: np.random.Generator):
        self.base, self.values, self.rng = base, np.asarray(values), rng
        self.left = np.asarray(counts, dtype=np.int64).copy()
        self.taken: list[tuple[float, float]] = []

    def counts(self, encoding, users: tuple[float, float]) -> np.ndarray:
        """The input histogram of the round's users: a random subset of size and values as described above."""
        s0, s1 = users
        if any(a < s1 and s0 < b for a, b in self.taken):
            raise ValueError("simulated rounds overlap: a user would answer twice")
        free = 1.0 - sum(b - a for a, b in self.taken)
        self.taken.append((s0, s1))
        remaining = int(self.left.sum())
        m = int(self.rng.binomial(remaining, min(1.0, (s1 - s0) / free))) if free > 0 and remaining else 0
        drawn = self._draw(m)
        self.left -= drawn
        return np.bincount(encoding.inputs(self.values), weights=drawn, minlength=encoding.size).astype(np.int64)

    def _draw(self, m: int) -> np.ndarray:
        if m == 0:
            return np.zeros(len(self.left), dtype=np.int64)
        if len(self.left) <= SMALL_SUPPORT:
            return self.rng.multivariate_hypergeometric(self.left, m, method="marginals")
        picks = self.rng.choice(int(self.left.sum()), m, replace=False)   # O(m log K), not O(K) per draw
        return np.bincount(np.searchsorted(np.cumsum(self.left), picks, side="right"), minlength=len(self.left))
