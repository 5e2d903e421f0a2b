"""Mutual information I(X;Y) of the frequency oracles, in nats, for X uniform on the d inputs (spec 002 §4).

With no prior knowledge the aggregator models each user's value as uniform on the d categories; I(X;Y) is
then the information one report carries about its user's value (Wang et al. 2016, Thm 2.1). Every channel
here is a mixture of k-subset channels or close to one, so the formulas are built on

    I_k(ε, d) = ln(d/(k e^ε + d − k)) + k ε e^ε/(k e^ε + d − k)        (spec §2.6 (a))

the information of the k-subset mechanism. :func:`channel_information` computes I(X;Y) by brute force from
a channel matrix; the tests check every closed form against it on small d. Pure numpy/scipy; the only
mechanism knowledge is :data:`BY_MECHANISM`, keyed by registered name (no imports of the mechanisms).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np


def subset_information(d: int, k, epsilon: float):
    """I_k of the k-subset mechanism (k an int or an array); 0 for k = 0 or k = d (the report is then
    independent of the input). Stable for large ε (in t = k/d and e^{-ε}) and small ε (log1p/expm1), §2.7.

    >>> round(subset_information(4, 2, math.log(3)), 6)   # ln(1/2) + (3/4) ln 3, spec §2.5
    0.130812
    """
    t = np.asarray(k, dtype=float) / d
    if epsilon > 1.0:
        denom = t + (1 - t) * math.exp(-epsilon)          # (k e^ε + d − k)/(d e^ε)
        info = -(epsilon + np.log(denom)) + epsilon * t / denom
    else:
        grow = t * math.expm1(epsilon)                    # (k e^ε + d − k)/d − 1
        info = -np.log1p(grow) + epsilon * t * math.exp(epsilon) / (1 + grow)
    info = np.where((t > 0) & (t < 1), info, 0.0)
    return float(info) if info.ndim == 0 else info


def subset_sizes_information(d: int, weights: np.ndarray, epsilon: float) -> float:
    """Σ_k w_k I_k: the information of a symmetric channel whose report size |Z| = k has probability w_k
    whatever the input and which is the k-subset channel given |Z| = k (spec §4.1, Cor. 2.2)."""
    return float(np.dot(weights, subset_information(d, np.arange(len(weights)), epsilon)))


def unary_information(d: int, p: float, q: float) -> float:
    """A unary encoding (BRR/basic RAPPOR, OUE): the true bit is 1 w.p. p, every other bit w.p. q.

    Q(Z|x) depends on |Z| and on [x ∈ Z] only, with ratio r = p(1−q)/((1−p)q), so it is the hybrid k-subset
    channel at ε' = ln r with w_k = p·Bin(k−1; d−1, q) + (1−p)·Bin(k; d−1, q) (spec §3.1, Eq. 8).
    """
    sizes = np.arange(d + 1)
    from scipy.stats import binom  # imported here: scipy.stats adds ~1 s to `import ldpql`

    weights = p * binom.pmf(sizes - 1, d - 1, q) + (1 - p) * binom.pmf(sizes, d - 1, q)
    return subset_sizes_information(d, weights, math.log(p * (1 - q) / ((1 - p) * q)))


def grr_information(d: int, epsilon: float) -> float:
    """GRR (MRR) is the 1-subset mechanism: I_1, which is also its channel capacity (spec §4.3)."""
    return subset_information(d, 1, epsilon)


def local_hashing_information(d: int, epsilon: float, g: int) -> float:
    """OLH with a *uniformly random* hash h: [d] → [g] (the report is (h, y), h independent of X).

    I(X; H, Y) = E_h I(X; Y | h); given h, Y is GRR over [g] of h(X), and P(y | h) depends only on the
    bucket size m_y ~ Bin(d, 1/g). Our Carter–Wegman family is close to, not exactly, a random function, so
    this is the idealised value (the tests check it by enumerating all g^d functions).
    """
    e = math.exp(epsilon)
    p, q = e / (e + g - 1), 1 / (e + g - 1)
    m = np.arange(d + 1)
    py = (p * m + q * (d - m)) / d
    from scipy.stats import binom  # imported here: scipy.stats adds ~1 s to `import ldpql`

    output_entropy = g * float(np.sum(binom.pmf(m, d, 1 / g) * -py * np.log(py)))
    return output_entropy - float(-p * math.log(p) - (g - 1) * q * math.log(q))


def walsh_hadamard(v: np.ndarray) -> np.ndarray:
    """H_K·v for the K×K Sylvester Hadamard matrix (K = len(v), a power of 2), in O(K log K)."""
    v = np.array(v, dtype=float)
    h = 1
    while h < v.size:
        v = v.reshape(-1, 2, h)
        v = np.concatenate([v[:, 0] + v[:, 1], v[:, 0] - v[:, 1]], axis=1)
        h *= 2
    return v.reshape(-1)


def hadamard_information(d: int, epsilon: float) -> float:
    """Hadamard response: Q(j|x) = c·e^ε if H[x+1, j] = +1 else c, c = 2/(K(e^ε+1)) (spec §3.2).

    a_j = #{x < d : H[x+1, j] = +1} = (d + s_j)/2 with s = H·1{rows 1..d}, so the exact MI costs O(K log K).
    """
    e, K = math.exp(epsilon), 1 << max(1, math.ceil(math.log2(d + 1)))
    rows = np.zeros(K)
    rows[1:d + 1] = 1
    a = (d + walsh_hadamard(rows)) / 2
    c = 2 / (K * (e + 1))
    py = c * (e * a + d - a) / d
    return float(np.sum(a * c * e * np.log(c * e / py) + (d - a) * c * np.log(c / py)) / d)


def channel_information(channel: np.ndarray) -> float:
    """Brute force: I(X;Y) of a channel matrix (rows: the d inputs, columns: outputs), X uniform."""
    channel = np.asarray(channel, dtype=float)
    py = channel.mean(axis=0)
    ratio = np.divide(channel, py, out=np.ones_like(channel), where=channel > 0)
    return float(np.sum(channel * np.log(ratio)) / channel.shape[0])


def information_bound(epsilon: float) -> float:
    """sup over d of the largest I(X;Y) of any ε-LDP channel: u − 1 − ln u, u = εe^ε/(e^ε − 1) (spec §4.3)."""
    u = epsilon / -math.expm1(-epsilon)
    return u - 1 - math.log(u)


BY_MECHANISM: dict[str, Callable] = {
    "grr": lambda r: grr_information(r.input_size, r.epsilon),
    "ksubset": lambda r: subset_information(r.input_size, r.subset_size, r.epsilon),
    "oue": lambda r: unary_information(r.input_size, r.p, r.q),
    "brr": lambda r: unary_information(r.input_size, r.p, r.q),
    "olh": lambda r: local_hashing_information(r.input_size, r.epsilon, r.g),
    "hadamard": lambda r: hadamard_information(r.input_size, r.epsilon),
}


def mutual_information(r) -> float:
    """I(X;Y) in nats of a frequency-oracle randomizer's report, X uniform on its inputs."""
    return BY_MECHANISM[r.name](r)
