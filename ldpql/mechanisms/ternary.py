"""s-sparse ternary vectors: the input of Collision, CoCo and the key-value baselines (Wang, Li, Li, Li, Yang,
Yan, "Differentially Private Numerical Vector Analyses in the Local and Shuffle Model"; spec seed-003 §1).

A user holds x ∈ {−1, 0, 1}^d with at most s non-zeros. Its *set form* is the list of its signed elements,
idx(j₊) = j and idx(j₋) = d + j (0-based, the "+" half first, spec §2.1); a user with fewer than s non-zeros
pads its row with -1 (no element). Every mechanism of the family takes an (n, s) int64 array of elements.

Input adaptation (spec §1.3, an engine decision): a bounded real column with *declared* bounds [lo, hi] is
max-min normalised to v ∈ [−1, 1] and rounded to ±1 with P[+1] = (1 + v)/2 (unbiased for the normalised mean);
a NULL cell becomes 0 (no element). :func:`denormalise_mean` maps a normalised mean back. The rounding is a
local, data-only step done before any randomizer runs; privacy comes from the randomizer alone.
Post-processing (spec §7.1): :func:`project_capped_simplex` projects 2d item frequencies onto
{0 ≤ f ≤ 1, Σ f = s}.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

NO_ELEMENT = -1


def elements_from_ternary(x: np.ndarray, s: int) -> np.ndarray:
    """The (n, s) element array of an (n, d) ternary matrix, -1-padded; rows with more than s non-zeros are
    refused (subsample them first with :func:`subsample`)."""
    x = np.asarray(x)
    n, d = x.shape
    nz = np.count_nonzero(x, axis=1)
    if np.any(nz > s):
        raise ValueError(f"a row has {int(nz.max())} non-zeros, more than the declared sparsity s={s}")
    out = np.full((n, s), NO_ELEMENT, dtype=np.int64)
    rows, cols = np.nonzero(x)
    rank = np.arange(len(rows)) - np.searchsorted(rows, rows)   # position of each non-zero within its row
    out[rows, rank] = cols + d * (x[rows, cols] < 0)
    return out


def subsample(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    """Rows with more than s non-zeros keep s of them uniformly at random (spec §1.3 item 4, §8.21): this
    biases a key's estimates down by s/s_i for such users, so the planner documents it (or raises s)."""
    x = np.array(x, copy=True)
    for i in np.flatnonzero(np.count_nonzero(x, axis=1) > s):
        nz = np.flatnonzero(x[i])
        x[i, rng.choice(nz, size=len(nz) - s, replace=False)] = 0
    return x


def ternary_from_bounded(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Max-min normalise each column to [−1, 1] by its declared bounds, then round to ±1 with P[+1] = (1+v)/2.
    NaN (NULL) cells become 0. Values outside the bounds are clipped to them (declared, never read from data)."""
    values = np.asarray(values, dtype=float)
    lo, hi = np.broadcast_to(lo, values.shape[-1:]), np.broadcast_to(hi, values.shape[-1:])
    v = np.clip(2 * (values - lo) / (hi - lo) - 1, -1, 1)
    signs = np.where(rng.random(values.shape) < (1 + v) / 2, 1, -1).astype(np.int8)
    return np.where(np.isnan(values), 0, signs).astype(np.int8)


def denormalise_mean(mean: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A normalised mean in [−1, 1] back on the column's scale: lo + (hi − lo)(x̄ + 1)/2."""
    return np.asarray(lo) + (np.asarray(hi) - np.asarray(lo)) * (np.asarray(mean) + 1) / 2


def denormalise_variance(var: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The variance of :func:`denormalise_mean`'s output: Var·((hi − lo)/2)²."""
    return np.asarray(var) * ((np.asarray(hi) - np.asarray(lo)) / 2) ** 2


def random_sparse(n: int, d: int, s: int, rng: np.random.Generator) -> np.ndarray:
    """The paper's synthetic data (spec §7.1): s distinct keys uniform from [d], each ±1 w.p. 1/2; as elements."""
    keys = np.argsort(rng.random((n, d)), axis=1)[:, :s] if d <= 64 else _distinct_keys(n, d, s, rng)
    return keys + d * rng.integers(0, 2, size=(n, s))


def _distinct_keys(n: int, d: int, s: int, rng: np.random.Generator) -> np.ndarray:
    """s distinct keys per row, uniform over s-subsets: rows with a repeat are redrawn whole (cheap when s ≪ d)."""
    keys = rng.integers(0, d, size=(n, s))
    todo = np.arange(n)
    while todo.size:
        srt = np.sort(keys[todo], axis=1)
        todo = todo[(srt[:, 1:] == srt[:, :-1]).any(axis=1)]
        keys[todo] = rng.integers(0, d, size=(todo.size, s))
    return keys


def item_frequencies(elements: np.ndarray, d: int) -> np.ndarray:
    """The true f_y = (1/n) #{i : y ∈ Y_i} over the 2d elements."""
    valid = elements[elements >= 0]
    return np.bincount(valid, minlength=2 * d) / len(elements)


def means_from_items(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x̄, x̲) = (f₊ − f₋, f₊ + f₋) from 2d item frequencies (spec §1.2)."""
    d = len(f) // 2
    return f[:d] - f[d:], f[:d] + f[d:]


def conditional_mean(mean: np.ndarray, present: np.ndarray, n: int, floor: float | None = None) -> np.ndarray:
    """x̄_j/x̲_j with the denominator floored at τ = 1/n and the ratio clipped to [−1, 1] (spec §2.4, §8.22)."""
    tau = 1 / n if floor is None else floor
    return np.clip(np.asarray(mean) / np.maximum(present, tau), -1, 1)


def project_capped_simplex(f: np.ndarray, s: float, iterations: int = 100) -> np.ndarray:
    """The Euclidean projection of f onto {0 ≤ f ≤ 1, Σ f = s}: clip(f − τ, 0, 1) with τ found by bisection so
    that the sum is s (the sum is non-increasing in τ). Post-processing only: it costs no privacy."""
    f = np.asarray(f, dtype=float)
    lo, hi = float(f.min()) - 1, float(f.max())
    for _ in range(iterations):
        tau = (lo + hi) / 2
        lo, hi = (tau, hi) if np.clip(f - tau, 0, 1).sum() > s else (lo, tau)
    return np.clip(f - (lo + hi) / 2, 0, 1)


def all_sparse(d: int, s: int) -> list[tuple[int, ...]]:
    """Every s-sparse ternary vector of dimension d in set form (for exhaustive audits of tiny instances)."""
    return [tuple(k + d * b for k, b in zip(keys, signs)) for keys in itertools.combinations(range(d), s)
            for signs in itertools.product((0, 1), repeat=s)]


def count_sparse(d: int, s: int) -> int:
    """C(d, s)·2^s, the number of s-sparse ternary vectors."""
    return math.comb(d, s) * 2 ** s
