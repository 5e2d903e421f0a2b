"""Shuffle-model accounting (Wang et al., vector analyses, Section 6; spec seed-003 §5): the exact clone-reduction
δ against brute-force enumeration, the golden values of spec §5.7 to ±1e-3, the inverse ε₀ = f(ε_c, δ, n) with
its verification, the mixture weights, and the comparison bounds' ordering (this paper < FMT'23 < FMT'21 <
blanket) that Fig. 2 shows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from ldpql.mechanisms import coco, collision
from ldpql.mechanisms.shuffle import (
    blanket_central,
    central_epsilon,
    clone_delta,
    erlingsson_central,
    feldman_central,
    fmt21_weights,
    generic_weights,
    grr_weights,
    local_epsilon,
    sparse_weights,
)


def brute_delta(eps0, eps_c, n, alpha1, r):
    """D_{e^ε_c}(P‖Q) by enumerating every point (x, y) of the two count laws (spec §5.1)."""
    a, b = math.exp(eps0), math.exp(eps_c)
    gamma = 1 - (a + 1) * alpha1
    size = n + 1
    base = np.zeros((size, size))
    for c in range(n):
        for k in range(c + 1):
            base[k, c - k] += binom.pmf(c, n - 1, 2 * r) * binom.pmf(k, c, 0.5)
    shift_x, shift_y = np.zeros_like(base), np.zeros_like(base)
    shift_x[1:, :] = base[:-1, :]
    shift_y[:, 1:] = base[:, :-1]
    p = a * alpha1 * shift_x + alpha1 * shift_y + gamma * base
    q = alpha1 * shift_x + a * alpha1 * shift_y + gamma * base
    return float(np.maximum(p - b * q, 0).sum()), float(np.maximum(q - b * p, 0).sum())


@pytest.mark.parametrize("eps0, eps_c, weights", [(1.0, 0.3, generic_weights), (2.0, 0.5, fmt21_weights),
                                                  (3.0, 1.0, sparse_weights(4, lambda e: collision.paper_t(e, 4))),
                                                  (0.5, 0.05, grr_weights(5))])
def test_clone_delta_matches_brute_force_enumeration_both_directions(eps0, eps_c, weights):
    forward, backward = brute_delta(eps0, eps_c, 60, *weights(eps0))
    assert forward == pytest.approx(backward, rel=1e-9, abs=1e-15)   # Q(x, y) = P(y, x)
    assert clone_delta(eps0, eps_c, 60, *weights(eps0)) == pytest.approx(forward, rel=1e-7, abs=1e-14)


def test_delta_is_zero_at_eps0_and_falls_with_eps_c_and_with_n():
    w = generic_weights(2.0)
    assert clone_delta(2.0, 2.0, 1000, *w) == pytest.approx(0.0, abs=1e-15)
    deltas = [clone_delta(2.0, e, 1000, *w) for e in (0.1, 0.3, 0.6, 1.0)]
    assert all(x > y for x, y in zip(deltas, deltas[1:]))
    by_n = [clone_delta(2.0, 0.3, n, *w) for n in (500, 1000, 4000)]
    assert by_n[0] > by_n[1] > by_n[2]


def test_invalid_mixture_weights_are_refused():
    with pytest.raises(ValueError, match="mixture"):
        clone_delta(2.0, 0.5, 100, 0.5, 0.5)   # the TV parameter plugged in as a weight (spec §8.1)


GOLDEN = {  # (n, s, ε₀): (Collision, FMT'23 stronger clone or None, FMT'21 clone or None), spec §5.7
    (10 ** 4, 4, 0.5): (0.0147, 0.0181, 0.0204), (10 ** 4, 4, 1): (0.0335, 0.0432, 0.0530),
    (10 ** 4, 4, 2): (0.0825, 0.1144, 0.1550), (10 ** 4, 4, 3): (0.1579, 0.2261, None),
    (10 ** 4, 4, 5): (0.4854, 0.7421, None), (10 ** 4, 64, 0.5): (0.0140, None, None),
    (10 ** 4, 64, 1): (0.0322, None, None), (10 ** 4, 64, 2): (0.0815, None, None),
    (10 ** 4, 64, 3): (0.1573, None, None), (10 ** 4, 64, 5): (0.4850, None, None),
    (10 ** 5, 4, 0.5): (0.0051, 0.0063, None), (10 ** 5, 4, 1): (0.0115, 0.0148, None),
    (10 ** 5, 4, 2): (0.0281, 0.0387, None), (10 ** 5, 4, 3): (0.0534, 0.0757, None),
    (10 ** 5, 4, 5): (0.1620, 0.2343, None), (10 ** 5, 64, 0.5): (0.0048, None, None),
    (10 ** 5, 64, 1): (0.0111, None, None), (10 ** 5, 64, 2): (0.0277, None, None),
    (10 ** 5, 64, 3): (0.0531, None, None), (10 ** 5, 64, 5): (0.1619, None, None),
}


@pytest.mark.parametrize("key", list(GOLDEN), ids=[f"n{n}-s{s}-eps{e}" for n, s, e in GOLDEN])
def test_golden_central_epsilons(key):
    n, s, eps0 = key
    delta = 0.01 / n
    mine, strong, clone = GOLDEN[key]
    assert central_epsilon(eps0, n, delta, sparse_weights(s, lambda e: collision.paper_t(e, s))) == pytest.approx(
        mine, abs=1e-3)
    if strong is not None:
        assert central_epsilon(eps0, n, delta) == pytest.approx(strong, abs=1e-3)
    if clone is not None:
        assert central_epsilon(eps0, n, delta, fmt21_weights) == pytest.approx(clone, abs=1e-3)


INVERSE = [  # (n, δ, ε_c): generic, Collision s=4, s=64, CoCo s=4, s=64 (spec §5.7)
    (10 ** 4, 1e-6, 0.1, (1.830, 2.272, 2.289, 2.280, 2.252)),
    (10 ** 4, 1e-6, 1.0, (5.470, 6.379, 6.379, 6.379, 6.378)),
    (10 ** 5, 1e-7, 0.1, (3.469, 4.108, 4.111, 4.108, 4.103)),
]


@pytest.mark.parametrize("n, delta, eps_c, expect", INVERSE)
def test_golden_local_epsilons_and_their_verification(n, delta, eps_c, expect):
    rules = [None] + [sparse_weights(s, lambda e, s=s, mod=mod: mod.paper_t(e, s)) for mod in (collision, coco) for s in (4, 64)]
    for weights, value in zip(rules, expect):
        weights = weights or generic_weights
        e0 = local_epsilon(eps_c, delta, n, weights)
        assert e0 == pytest.approx(value, abs=1e-3)
        assert clone_delta(e0, eps_c, n, *weights(e0)) <= delta   # what runs is feasible with its exact t
        assert central_epsilon(e0, n, delta, weights) <= eps_c + 1e-6


def test_local_epsilon_gains_nothing_for_one_user_and_respects_the_cap():
    assert local_epsilon(0.5, 1e-8, 1) == pytest.approx(0.5, abs=1e-6)
    assert local_epsilon(1.0, 1e-6, 10 ** 7, cap=3.0) == 3.0


def test_comparison_bounds_order_as_in_fig_2():
    """This paper < FMT'23 < FMT'21 (numeric) < blanket and FMT'21's closed form; EFMRTT19 and the FMT'21 closed
    form at the values spec §5.7 quotes."""
    n, delta = 10 ** 4, 1e-6
    for eps0 in (0.5, 1.0, 2.0):
        mine = central_epsilon(eps0, n, delta, sparse_weights(4, lambda e: collision.paper_t(e, 4)))
        strong, clone = central_epsilon(eps0, n, delta), central_epsilon(eps0, n, delta, fmt21_weights)
        assert mine < strong < clone < min(blanket_central(eps0, n, delta), feldman_central(eps0, n, delta))
    assert erlingsson_central(0.5, n, delta) == pytest.approx(0.223, abs=1e-3)
    assert feldman_central(1.0, n, delta) == pytest.approx(0.214, abs=1e-3)
    assert math.isnan(erlingsson_central(1.0, n, delta))


def test_savings_over_fmt23_are_15_to_35_percent():
    """Collision's budget saving 1 − ε_c/ε_c(FMT'23) grows from ~15% to ~31–35% over ε₀ ∈ [0.1, 5] (spec §5.7)."""
    n = 10 ** 4
    w = sparse_weights(4, lambda e: collision.paper_t(e, 4))
    save = [1 - central_epsilon(e, n, 0.01 / n, w) / central_epsilon(e, n, 0.01 / n) for e in (0.1, 1.0, 5.0)]
    assert 0.12 < save[0] < save[1] < save[2] < 0.36 and save[2] > 0.30


def test_huge_n_is_evaluated_conservatively_at_the_exact_cap():
    from ldpql.mechanisms.shuffle import EXACT_USERS
    w = generic_weights(3.0)
    assert clone_delta(3.0, 0.01, 10 ** 18, *w) == clone_delta(3.0, 0.01, EXACT_USERS, *w)
