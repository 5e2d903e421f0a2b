"""Run one protocol over users held in memory: the reproductions' and the statistical tests' runs.

Both functions use the engine's one protocol driver (:meth:`ldpql.executor.Executor.run_protocol`) over an
in-memory backend (:mod:`ldpql.backends.memory`), so a reproduction exercises the same round code (value
counts, sub-interval draws, exact aggregates) as a statement does.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ldpql.backends.memory import FunctionBackend, MemoryBackend
from ldpql.executor import Executor
from ldpql.mechanisms import Encoding, Estimate, Protocol


def simulate(protocol: Protocol, rng: np.random.Generator, coins: np.ndarray | None = None,
             hist: np.ndarray | None = None, exact_positions: bool = True) -> Estimate:
    """Run ``protocol`` over users holding ``coins`` (or with coin histogram ``hist``) in column ``x``.

    ``exact_positions`` gives a round over [u0, u1) exactly round(n·(u1 - u0)) users (the paper's batch sizes);
    otherwise their number is binomial, as under the backends' hash (the paper's random choice of a level)."""
    if hist is None:
        backend = MemoryBackend.of_values("x", np.asarray(coins))
    else:
        backend = MemoryBackend({"x": np.arange(len(hist))}, np.asarray(hist))
    return Executor(backend).run_protocol(protocol, rng, exact_positions)


def drive(protocol: Protocol, histogram: Callable[[Encoding], np.ndarray], rng: np.random.Generator) -> Estimate:
    """Run a protocol whose every round reaches all users, each round's input histogram given by
    ``histogram(encoding)`` (data drawn lazily from a distribution: the minimum-finding reproduction)."""
    return Executor(FunctionBackend(histogram)).run_protocol(protocol, rng)
