"""The exact ε audit over every registered randomizer (DESIGN §5), tight from both sides (rule 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpql.audit import audit, audit_registry
from ldpql.mechanisms import REGISTRY
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.rr import RandomizedResponse

CASES = [pytest.param(r, id=f"{r.name}-eps{r.epsilon:g}-d{r.input_size}") for cls in REGISTRY.values()
         for r in cls.audit_cases()]


def test_every_registered_randomizer_has_audit_cases():
    assert {"rr", "grr", "oue", "duchi", "piecewise", "hybrid"} <= set(REGISTRY)
    for name, cls in REGISTRY.items():
        assert list(cls.audit_cases()), f"{name} has no audit cases"


@pytest.mark.parametrize("r", CASES)
def test_claimed_epsilon_passes(r):
    result = audit(r)
    assert result.passed, f"{r}: worst log ratio {result.max_log_ratio} > ε"


@pytest.mark.parametrize("r", CASES)
def test_slightly_smaller_epsilon_fails(r):
    """The claim is tight: the worst ratio is within 1e-3 of ε, so claiming ε(1 - 1e-3) would fail."""
    assert audit(r).max_log_ratio > r.epsilon - 1e-3 * max(1.0, r.epsilon)


@pytest.mark.parametrize("r", CASES)
def test_output_distributions_sum_to_one(r):
    rows = np.array([r.output_distribution(x) for x in r.audit_inputs()])
    assert np.allclose(rows.sum(axis=1), 1.0)


class _Overclaiming(RandomizedResponse):
    """RR that keeps its bit more often than its ε allows (a broken privacy parameter)."""

    def __init__(self, epsilon):
        super().__init__(epsilon)
        self.p = 1 / (1 + math.exp(-1.1 * epsilon))


def test_audit_catches_a_randomizer_that_leaks_more_than_it_claims():
    assert not audit(_Overclaiming(1.0)).passed


def test_audit_catches_an_output_only_some_inputs_produce():
    class Leaky(GRR):
        def output_distribution(self, x):
            out = super().output_distribution(x)
            out[0] = 0.0 if x == 1 else out[0]
            return out / out.sum()

    assert math.isinf(audit(Leaky(1.0, 3)).max_log_ratio)


def test_registry_audit_runs_every_case():
    results = audit_registry()
    assert len(results) == len(CASES) and all(r.passed for r in results)
