"""The two halves of a mechanism (DESIGN 4.1): local randomizers, and protocols written as round generators.

A :class:`Randomizer` is what one user's device runs. It is vectorised over many users, states its ε once,
and (where its output space is finite) gives its exact output distribution, which :mod:`ldpql.audit` checks.
Its reports are summed into an additive ``summary`` (so batches can be aggregated one by one); where the
distribution of that summary is known in closed form from the users' true input histogram,
:meth:`Randomizer.sample_aggregate` draws it directly (the exact-aggregate path of DESIGN 4.2).

A protocol is a generator: it yields :class:`Round` objects and receives a :class:`Reply` for each; when it
returns, its value is an :class:`Estimate`. This module is pure numpy: no DuckDB, no I/O.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, ClassVar, Generator, Iterable

import numpy as np

REGISTRY: dict[str, type["Randomizer"]] = {}

EPSILON_CAP = 30.0
"""The largest ε any one local randomizer runs at (DESIGN §4.5: samplers keep their ε as they run).

Why 30: at ε = 30 a randomized-response bit is flipped with probability 1/(1+e^30) ≈ 9.4e-14, so among even
10^10 users the expected number of reports that are not the true value is below 10^-3: beyond the cap a
report *is* the value itself for any practical n, and more ε buys no accuracy. And the rare event is then
only ~843 steps of the 2^-53 grid on which ``Generator.random()`` draws (1 step at ε ≈ 36.7, 0 beyond, which
is how ``EPSILON 40`` once released every user's exact bit): below the cap every sampler resolves its rare
event to within ~1e-3 of ε, and the realised-ε audit (:func:`ldpql.audit.realised_audit`) checks all of them
up to it. The planner refuses larger ε before anything runs; constructors refuse it as an internal invariant.
"""

UNIFORM_BITS = 53  # Generator.random() returns k/2^53, k uniform on 0..2^53-1


def check_epsilon(name: str, epsilon: float) -> None:
    """Refuse ε outside (0, EPSILON_CAP]: every randomizer's constructor calls this first (an internal
    invariant; the planner refuses such statements with a PlanError before any randomizer is built)."""
    if not 0 < epsilon <= EPSILON_CAP:
        raise ValueError(f"{name} needs 0 < epsilon <= EPSILON_CAP = {EPSILON_CAP:g}, got epsilon={epsilon}")


def grid_ceil(probability: float, bits: int = UNIFORM_BITS) -> int:
    """⌈probability·2^bits⌉, for an event drawn as "uniform integer below it": its realised probability is this
    count over 2^bits, never below ``probability``. The relative margin 2^-50 (8 ulps) covers the rounding of
    exp and division in the float ``probability``, so the count is at least the exact real value too."""
    return math.ceil(math.ldexp(probability, bits) * (1 + 2.0 ** -50))


def log_exact(value: Fraction) -> float:
    """ln of an exact positive rational, to a double's precision (``float()`` of a Fraction rounds correctly;
    beyond a double's range, the logs of numerator and denominator)."""
    try:
        return math.log(float(value))
    except (OverflowError, ValueError):
        return math.log(value.numerator) - math.log(value.denominator)


def below(probability: float, bits: int = UNIFORM_BITS) -> Fraction:
    """The exact probability that a uniform k/2^bits (k uniform on 0..2^bits-1) is below the float
    ``probability``: ⌈probability·2^bits⌉/2^bits (the scaling is exact, so so is the ceiling)."""
    return Fraction(math.ceil(math.ldexp(float(probability), bits)), 1 << bits)


def register(cls: type["Randomizer"]) -> type["Randomizer"]:
    """Class decorator: add a randomizer to the registry that the privacy audit walks."""
    REGISTRY[cls.name] = cls
    return cls


class Randomizer(ABC):
    """A local randomizer at privacy level ``epsilon`` (pure ε-LDP).

    Inputs are encoded by the executor before randomizing: an integer 0..input_size-1 for finite inputs
    (categories, bits), a float in [-1, 1] for continuous ones (``input_size`` None).
    """

    name: ClassVar[str]
    epsilon: float
    input_size: int | None = None
    report_width: int = 1  # values per user report (a unary encoding's d), to bound memory per chunk
    estimates: ClassVar[str] = "histogram"  # what estimate() returns: 'histogram' (d), 'ones' or 'mean' (1)

    @abstractmethod
    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One report per user (row i of the result is user i's report)."""

    @abstractmethod
    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        """The additive summary of a batch of reports (summaries of batches add up)."""

    @abstractmethod
    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """The unbiased estimate from the summary of n users' reports."""

    @abstractmethod
    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Closed-form variance of :meth:`estimate` when the true statistic is ``truth``."""

    def step(self, n: int) -> float:
        """The most one user's report moves :meth:`estimate` over n users, where reports are discrete (0 where they
        are not, or where the lattice is too fine to matter). Intervals add half of it (a continuity correction):
        when a bin's reports rarely flip, as at a high ε, one flip moves the estimate further than z·stderr."""
        return 0.0

    def second_moment(self, summary: np.ndarray, n: int) -> float | None:
        """An unbiased estimate of the users' E[x²] from the release (continuous inputs), for :meth:`variance`'s
        ``second_moment``; None when the release carries none (the variance then uses its bound)."""
        return None

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Draw the summary directly from the users' true input histogram ``counts`` (length input_size)."""
        raise TypeError(f"{self.name} has no exact-aggregate path")

    @property
    def exact(self) -> bool:
        """Whether :meth:`sample_aggregate` is available."""
        return type(self).sample_aggregate is not Randomizer.sample_aggregate

    # -- for the audit -------------------------------------------------------------------------------------
    def output_distribution(self, x: float) -> np.ndarray:
        """Probabilities of every output for input ``x`` (finite output spaces), in a fixed order."""
        raise TypeError(f"{self.name} has no finite output distribution")

    def realised_distribution(self, x: float) -> list[Fraction]:
        """Exact probabilities of every output for input ``x`` *as the sampler draws them* (its float thresholds
        as rationals: ⌈p·2^53⌉/2^53 for ``random()`` comparisons, ⌈p·2^w⌉/2^w for w-bit integer ones, exact
        for ``rng.integers``), in the order of :meth:`output_distribution`. DESIGN §4.5, §5."""
        raise TypeError(f"{self.name} has no finite output distribution")

    @classmethod
    @abstractmethod
    def audit_cases(cls) -> Iterable["Randomizer"]:
        """Small instances (several ε and domain sizes) for the exact privacy audit."""

    @classmethod
    @abstractmethod
    def realised_cases(cls, epsilon: float) -> Iterable["Randomizer"]:
        """Small instances at ``epsilon`` for the realised-ε audit, which sweeps ε up to :data:`EPSILON_CAP`."""

    def audit_inputs(self) -> np.ndarray:
        """The inputs the audit compares: every input of a finite domain, a grid on [-1, 1] otherwise."""
        if self.input_size is not None:
            return np.arange(self.input_size)
        return np.linspace(-1.0, 1.0, 41)

    def __repr__(self) -> str:
        d = f", d={self.input_size}" if self.input_size is not None else ""
        return f"{self.name}(epsilon={self.epsilon:g}{d})"


class NoiseOff:
    """Mixin of the noise-off randomizers (EPSILON INF, evaluation mode only): no privacy claim, so nothing for
    the exact or realised-ε audits to check."""

    @classmethod
    def audit_cases(cls):
        return []

    @classmethod
    def realised_cases(cls, epsilon: float):
        return []


def debias(count: np.ndarray, n: int, p: float, q: float) -> np.ndarray:
    """Unbiased fraction of users holding a value, when holders report it with probability p and
    non-holders with probability q: f̂ = (c/n - q)/(p - q). Shared by RR, GRR and the unary encodings."""
    return (np.asarray(count) / n - q) / (p - q)


def debiased_variance(f: np.ndarray, n: int, p: float, q: float) -> np.ndarray:
    """Var(f̂) = [f p(1-p) + (1-f) q(1-q)] / (n (p-q)²): the closed form that goes with :func:`debias`."""
    f = np.asarray(f, dtype=float)
    if p == q:   # an ε so small that p and q round to the same float: the release says nothing
        return np.full(f.shape, np.inf)
    return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)


def debiased_skewness(f: np.ndarray, n: int, p: float, q: float) -> np.ndarray:
    """The skewness (third cumulant over σ³) of :func:`debias`'s f̂: the count of reports in a bin is a sum of
    Bernoullis (p for its holders, q for the others), whose third cumulant is Σ π(1-π)(1-2π). At a high ε a bin's
    noise is a few flips, skewed like a Poisson count (|skewness| up to 1/√(expected flips)), not normal."""
    f = np.clip(np.asarray(f, dtype=float), 0.0, 1.0)
    var = f * p * (1 - p) + (1 - f) * q * (1 - q)
    third = f * p * (1 - p) * (1 - 2 * p) + (1 - f) * q * (1 - q) * (1 - 2 * q)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(np.sign(p - q) * third / np.sqrt(n * var ** 3))


def debiased_covariance(f: np.ndarray, s: int, n: int, p: float, q: float, both: float, with_own: float) -> np.ndarray:
    """Cov(f̂_i, f̂_s) of :func:`debias` for every bin i (i = s: the variance) when each user's report hits a set of
    bins (fixed data): a user holding neither i nor s hits both with probability ``both``, a holder of one of them
    hits both with ``with_own``; the covariance of one user's hits is that minus the product of its hit rates.
    Zero for independent bits (OUE, RAPPOR); negative for one report per user (GRR: ``both = with_own = 0``)."""
    f = np.asarray(f, dtype=float)
    cov = ((1 - f - f[s]) * (both - q * q) + (f + f[s]) * (with_own - p * q)) / (n * (p - q) ** 2)
    cov[s] = debiased_variance(f[s], n, p, q)
    return cov


def debiased_total_variance(d: int, n: int, p: float, q: float) -> float:
    """E‖f̂ - f‖²₂ = Σ_i Var(f̂_i) of :func:`debias` over d bins, the same for every f on the simplex (the sum
    is linear in f and Σ f_i = 1), so it is the value at a point mass: one holder bin and d - 1 others."""
    return float(debiased_variance(1.0, n, p, q) + (d - 1) * debiased_variance(0.0, n, p, q))


def _log_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Φ(b) − Φ(a)) for a <= b, stable in both tails (the upper tail by symmetry: Φ(−a) − Φ(−b))."""
    from scipy.special import log_ndtr  # imported here: scipy.special adds ~0.2 s to `import ldpql`
    upper = a > 0
    lo, hi = np.where(upper, -b, a), np.where(upper, -a, b)
    top, bottom = log_ndtr(hi), log_ndtr(lo)
    with np.errstate(divide="ignore"):
        return top + np.log1p(-np.exp(np.minimum(bottom - top, 0.0)))


def truncated_cdf(x: np.ndarray, mu: np.ndarray, sigma: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """P(Y <= x | lo <= Y <= hi) for Y ~ N(mu, sigma²), lo <= x <= hi; decreasing in mu (the truncated normal of
    selective inference: LDP_TOPK's winners, an unflagged conditional mean)."""
    u, a, b = (x - mu) / sigma, (lo - mu) / sigma, (hi - mu) / sigma
    with np.errstate(invalid="ignore"):   # a == b (x at both ends): no information, F = 1/2
        return np.nan_to_num(np.clip(np.exp(_log_mass(a, u) - _log_mass(a, b)), 0.0, 1.0), nan=0.5)


def check_categorical(name: str, epsilon: float, d: int) -> None:
    """Validate the parameters of a mechanism over d categories: 0 < ε <= EPSILON_CAP and d ≥ 2."""
    check_epsilon(name, epsilon)
    if d < 2:
        raise ValueError(f"{name} needs d >= 2, got d={d}")


class HitRates:
    """Mixin for a mechanism whose holders of a value report it with probability ``p`` and everyone else with
    ``q``: the unbiased estimate and its variance are :func:`debias` and :func:`debiased_variance`."""

    p: float
    q: float

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return debias(summary, n, self.p, self.q)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return debiased_variance(truth, n, self.p, self.q)

    def pair_hits(self) -> tuple[float, float] | None:
        """(P(a report hits bins i and j | the user holds neither), P(it hits i and j | the user holds i)), for
        :func:`debiased_covariance`; None when a report's bins are hit independently (no covariance)."""
        return None

    def step(self, n: int) -> float:
        """A report's hit in a bin moves that bin's estimate by 1/(n(p − q))."""
        return 1 / (max(n, 1) * (self.p - self.q)) if self.p > self.q else math.inf


@dataclass(frozen=True)
class Encoding:
    """How a user turns its row into the randomizer's input: ``expr`` (an :mod:`ldpql.expr` expression of the
    row, which a backend renders) and the input size (None for a value in [-1, 1]).

    ``base`` is what a backend counts to answer the round on the exact path: the encoding itself, or (for
    encodings that are a function of a coarser one, like a threshold bit of a coin) that coarser expression,
    so that one read answers every round over it; :meth:`inputs` maps base values to inputs.
    """

    expr: Any
    size: int | None = None
    label: str = ""

    @property
    def base(self) -> Any:
        return self.expr

    def inputs(self, values: np.ndarray) -> np.ndarray:
        """The randomizer's input of every base value."""
        return np.asarray(values).astype(np.int64)

    def histograms(self, counts: Callable, cells: list[int]) -> dict[int, np.ndarray]:
        """Every cell's input histogram from ``counts(expr)``, the backend's value counts per cell of an
        expression over the round's users (read once per run and shared by every encoding with this base)."""
        out = {}
        for cell, (values, n) in counts(self.base).items():
            if cell in cells:
                out[cell] = np.bincount(self.inputs(values), weights=n, minlength=self.size).astype(np.int64)
        return out


@dataclass(frozen=True)
class Round:
    """One round: the users in ``users`` (a sub-interval of this aggregate's share of users, so two rounds
    with disjoint intervals reach disjoint users) each run ``randomizer`` on ``encoding`` of their row.

    ``virtual`` is the input histogram of simulated users that the server adds to the round (the padding of
    a quantile reduction, seed 001 §1.5): they are not users and spend no budget, but their inputs pass
    through the same randomizer, drawn by :func:`add_virtual`, so the reply's law is that of a padded data set.
    """

    randomizer: Randomizer
    encoding: Encoding
    users: tuple[float, float] = (0.0, 1.0)
    label: str = ""
    virtual: np.ndarray | None = None


@dataclass(frozen=True)
class Reply:
    """What the server learns from a round: the summed reports of the ``n`` users who took part."""

    summary: np.ndarray
    n: int


def add_virtual(rnd: Round, reply: Reply, rng: np.random.Generator) -> Reply:
    """``reply`` with the reports of the round's virtual users added (their randomized inputs, summed)."""
    if rnd.virtual is None or not rnd.virtual.any():
        return reply
    return Reply(reply.summary + rnd.randomizer.sample_aggregate(rnd.virtual, rng), reply.n + int(rnd.virtual.sum()))


@dataclass
class Estimate:
    """A protocol's answer: one value per output cell, with its standard error (NaN when unknown).

    A protocol whose theory gives an interval other than estimate ± z·stderr (one-sided, calibrated, or in
    rank space) sets ``interval`` to (low, high) arrays at ``interval_confidence``; the result then shows
    that interval instead. ``note`` is shown under the result (e.g. "no interval: the theory gives none").
    """

    values: np.ndarray
    stderr: np.ndarray
    note: str = ""
    extra: dict = field(default_factory=dict)
    interval: tuple[np.ndarray, np.ndarray] | None = None
    interval_confidence: float | None = None
    step: float = 0.0   # the estimate's lattice step (Randomizer.step), for the intervals' continuity correction


Protocol = Generator[Round, Reply, Estimate]
ProtocolFactory = Callable[[int], Protocol]


UNSEEN = 3.0   # the rule of three: a share of users above 3/n is missed by n random users with probability < e^-3


def unseen(max_spread: float, n: int, sampled: float) -> float:
    """The sampling variance a users split cannot see in its own sample. Values held by fewer than 3/n of the users
    are all missed by the n asked with probability up to e^-3 (about 5%: the rule of three), so the sample's spread
    shows nothing of them, yet they move the population's mean from the sample's by up to
    (1 - n/N)·(3/n)·range, where range = 2·√max_spread (Bhatia-Davis); this is that shift over z(95%), squared.
    Negligible beside the sampling term at large n; what holds a mean over a handful of users, or one outlier
    among many, that the plug-in spread misses (audit 19 M4: one user at 100, the rest at 0, half asked, ε = 16:
    0.48-0.59 at 90% without it)."""
    return (sampled * UNSEEN / n * 2 * math.sqrt(max_spread) / 1.959964) ** 2 if n > 0 else 0.0


def one_round(randomizer: Randomizer, encoding: Encoding, scale: float = 1.0, shift: float = 0.0,
              population: int | None = None) -> Protocol:
    """The protocol of every one-shot mechanism: one round over all users, then ``scale*estimate + shift``.

    When the round reaches a random part of a ``population`` (the statement split its users among aggregates),
    the estimate stands for the whole population, so its variance adds the sampling term: the per-user variance
    (at most f(1-f) for a frequency, 1 - μ² for a value in [-1, 1], Bhatia-Davis) times the finite-population
    factor (1 - n/N) over n, and what the users asked cannot show (:func:`unseen`). Where the release gives an
    unbiased E[x²] (:meth:`Randomizer.second_moment`), both the mechanism's variance and the users' spread
    E[x²] - μ² use it instead of their worst cases.
    With ``n == 0`` users there is nothing to estimate; the estimate is NaN.
    """
    reply = yield Round(randomizer, encoding)
    if reply.n == 0:
        nan = np.full(encoding.size if randomizer.estimates == "histogram" else 1, np.nan)
        return Estimate(nan, nan, note="no users")
    est = randomizer.estimate(reply.summary, reply.n)
    plug_in = np.clip(est, *(-1.0, 1.0) if encoding.size is None else (0.0, 1.0))
    spread = 1 - plug_in ** 2 if encoding.size is None else plug_in * (1 - plug_in)
    m2 = randomizer.second_moment(reply.summary, reply.n) if encoding.size is None else None
    if m2 is None:
        noise = randomizer.variance(plug_in, reply.n)
    else:   # the data's own E[x²], estimated without bias, instead of the worst case
        noise, spread = randomizer.variance(plug_in, reply.n, second_moment=m2), np.maximum(m2 - plug_in ** 2, 0.0)
    sampled = max(0.0, 1 - reply.n / population) if population else 0.0
    sampling = sampled * spread / reply.n + unseen(1.0 if encoding.size is None else 0.25, reply.n, sampled)
    se = np.sqrt(noise + sampling)
    pairs = getattr(randomizer, "pair_hits", lambda: None)() if encoding.size is not None else None
    extra = {} if pairs is None else {"pairs": (randomizer.p, randomizer.q, *pairs, reply.n, sampled)}
    if encoding.size is None and hasattr(randomizer, "far_share"):   # few far reports: rare.widen at the confidence
        extra["far"] = (randomizer, reply.n, m2, abs(scale), float(sampling[0]))
    if encoding.size is not None and isinstance(randomizer, HitRates):   # LDP_TOPK's intervals near the lattice
        with np.errstate(divide="ignore", invalid="ignore"):   # the sampling term (if any) dilutes the skew
            shrink = np.nan_to_num((noise / se ** 2) ** 1.5)
        extra["skew"] = debiased_skewness(plug_in, reply.n, randomizer.p, randomizer.q) * shrink
    return Estimate(scale * est + shift, abs(scale) * se, step=abs(scale) * randomizer.step(reply.n), extra=extra)
