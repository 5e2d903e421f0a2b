"""LDP_MEAN on a column declared Gaussian: the protocols of Joseph, Kulkarni, Mao and Wu, "Locally Private Gaussian
Estimation" (NeurIPS 2019), as candidates beside Duchi et al., the Piecewise and the Hybrid Mechanism.

A column declared ``x PRIVATE BETWEEN lo AND hi DISTRIBUTION GAUSSIAN (SIGMA s)`` (or ``(SIGMA BETWEEN a AND b)``)
tells the planner, as public metadata never checked against the data, that the values are N(µ, σ²) with µ in
[lo, hi]. Rules, all from public facts:

1. Known σ gives the KV protocols, a σ range the UV ones (:func:`resolve`).
2. Two candidates join LDP_MEAN's: ``gaussian`` (two rounds, adaptive) and ``gaussian_1round`` (one round,
   non-adaptive, a reconstruction), each with the closed-form predicted error of spec seed-004 §2.6; the planner's
   usual rule keeps the smallest, so a Gaussian protocol runs exactly where its predicted error is below Duchi's,
   PM's and HM's, and EXPLAIN lists all of them. ``rounds = 1`` (or the table's ``ROUNDS 1``) rejects the
   two-round one, and EXPLAIN shows the predicted price of one round.
3. The k_min check (:func:`~ldpql.mechanisms.gaussian.k_min`): with too few users per level the coarse stage
   cannot find µ, so the candidate is rejected with the reason and the planner falls back to the others (or,
   with ``mechanism = 'gaussian'``, refuses).
4. ``beta`` (the coarse stage's failure probability, default a quarter of 1 − confidence) drives the thresholds
   and the interval; ``constants = 'practical'`` (default) or ``'paper'`` picks the thresholds profile.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from statistics import NormalDist

from ldpql import expr as E
from ldpql.catalog import NumericDomain, Table
from ldpql.errors import PlanError
from ldpql.grammar import ast
from ldpql.mechanisms import Identity, one_round
from ldpql.mechanisms import gaussian as G
from ldpql.mechanisms.base import EPSILON_CAP
from ldpql.planner.aggregates import MEAN_ARGS, AggregateSpec, _err, mean_candidates, register_aggregate, resolve_mean
from ldpql.planner.plan import Candidate, Target

NAMES = {2: "gaussian", 1: "gaussian_1round"}


@dataclass
class GaussianTarget(Target):
    """LDP_MEAN's target on a column declared Gaussian, with what the Gaussian candidates need."""

    low: float = 0.0
    high: float = 1.0
    sigma: tuple[float, float] = (1.0, 1.0)
    value: E.Expr | None = None
    beta: float = 0.05
    profile: str = "practical"
    confidence: float = 0.95

    def setting(self, eps: float) -> G.Setting:
        return G.Setting(self.low, self.high, *self.sigma, eps, self.beta, self.profile)


def default_beta(confidence: float) -> float:
    """A quarter of 1 − confidence, so that the interval's statistical part is at confidence + β < 1."""
    return (1 - confidence) / 4


def resolve(call: ast.Call, table: Table, text: str, select=None, options: dict | None = None) -> Target:
    """LDP_MEAN's target; on a column declared Gaussian, with the declaration and the statement's options."""
    target = resolve_mean(call, table, text)
    dom = table.column(call.args[0].name).domain
    if not isinstance(dom, NumericDomain) or dom.gaussian is None:
        return target
    options = options or {}
    conf = float(options.get("confidence", 0.95))
    beta = float(options.get("beta", default_beta(conf)))
    if beta >= 1 - conf:   # the interval holds at confidence only if the coarse stage fails less often (audit6 F4)
        raise _err(PlanError, f"beta = {beta:g} must be below 1 - confidence = {1 - conf:.4g}: the coarse stage's "
                              f"failure probability is part of the interval's", call, text,
                   hint=f"beta = {default_beta(conf):.4g} (the default, a quarter of 1 - confidence)")
    # every candidate clamps to the protocol's own padded range, so all estimate one quantity (audit6 F5)
    pad = G.PAD_SIGMAS * dom.gaussian[1]
    # (symmetric: the midpoint a NULL may count as is the same; DEFAULT and NOT NULL, hence the NULL semantics, kept)
    padded = dataclasses.replace(dom, low=dom.low - pad, high=dom.high + pad)
    target = resolve_mean(call, table, text, domain=padded)
    fields = {f.name: getattr(target, f.name) for f in dataclasses.fields(Target)}
    fields["domain_text"] = (f"{dom.describe()}; BETWEEN is the range of µ: every candidate averages the values "
                             f"clamped to [{padded.low:g}, {padded.high:g}] (µ's range ± {G.PAD_SIGMAS:g}σ_max)")
    value = E.null_to(E.number(target.column), dom.null_value)   # clamped by the protocol to the range ± 4σ_max
    return GaussianTarget(**fields, low=dom.low, high=dom.high, sigma=dom.gaussian, value=value,
                          beta=beta,
                          profile=options.get("constants", "practical"), confidence=conf)


def candidates(target: Target) -> list[Candidate]:
    """Duchi et al., PM and HM, and on a Gaussian column the two Gaussian protocols."""
    out = mean_candidates(target)
    if isinstance(target, GaussianTarget):
        extra = [_candidate(target, 2), _candidate(target, 1)]
        out = [_noted(c, padded_note(target)) for c in out]
        if target.nulls.nullable:   # a NULL is a point mass the Gaussian model has no room for (audit6 F2)
            for c in extra:
                c.rejected = (f"assumes every value is Gaussian, and `{target.column}` may hold NULLs (a point mass); "
                              "declare it NOT NULL if it has none")
        out += extra
    return out


def padded_note(t: GaussianTarget) -> str:
    """What every candidate on a Gaussian column estimates, and what EVALUATE compares with."""
    half, mid = t.affine
    return (f"on a column declared Gaussian every candidate averages the values clamped to [{mid - half:g}, "
            f"{mid + half:g}] (the range of µ ± {G.PAD_SIGMAS:g}σ_max; within 10⁻⁵σ of µ when the declaration holds), "
            "and EVALUATE's truth is that mean")


def _noted(c: Candidate, note: str) -> Candidate:
    """The candidate with ``note`` added to every answer's note (post-processing of its estimate)."""
    make = c.protocol

    def protocol(eps: float):
        factory = make(eps)

        def run(n: int):
            est = yield from factory(n)
            return dataclasses.replace(est, note="; ".join(filter(None, (est.note, note))))
        return run
    return dataclasses.replace(c, protocol=protocol)


def _candidate(t: GaussianTarget, rounds: int) -> Candidate:
    def predict(eps: float, n: int) -> float:
        """The closed-form sd, widened by z(confidence + β)/z(confidence): the interval allows for the coarse
        stage's failure probability β, so EXPLAIN's ±z·(this) is the interval's half-width as run."""
        if not 0 < eps <= EPSILON_CAP:
            return math.inf
        stat = t.confidence + t.beta if t.confidence + t.beta < 1 else t.confidence
        widen = NormalDist().inv_cdf(0.5 + stat / 2) / NormalDist().inv_cdf(0.5 + t.confidence / 2)
        return G.predicted_sd(t.setting(eps), n, rounds) * widen

    def protocol(eps: float):
        if math.isinf(eps):   # noise off (EPSILON INF, EVALUATE's truth): the exact mean of the clamped values
            half, mid = t.affine
            return lambda n: one_round(Identity(None, "mean"), t.encoding, half, mid)
        return lambda n: G.protocol(t.setting(eps), t.value, n, rounds, t.confidence)

    note = ("closed form at σ = σ_max" if t.sigma[0] != t.sigma[1] else "closed form") + ", assuming the declared " \
        "Gaussian; widened for β"
    return Candidate(NAMES[rounds], "local", rounds, predict, protocol, note, check=lambda eps, n: check(t, rounds,
                     eps, n), describe=lambda eps, n: describe(t, rounds, eps, n), share_n=True,
                     aliases=("gausstimate",) if rounds == 2 else ("gausstimate_1round",))


def check(t: GaussianTarget, rounds: int, eps: float, n: int) -> str | None:
    """Why the protocol cannot run at (ε, n), or None: noise off, or fewer users per level than k_min."""
    if math.isinf(eps):
        return None
    s = t.setting(eps)
    g, need = G.grouping(s, n, rounds), G.k_min(s)
    if g.k < need:
        return (f"too few users per level for the coarse stage: k = {g.k:,} < k_min = {need:,} ({s.levels} levels, "
                f"{s.profile} constants, β = {s.beta:g}); needs about {2 * need * s.levels:,} users")
    if rounds == 1 and g.m < 2:
        return f"too few users for {g.groups} subgroups"
    return None


def describe(t: GaussianTarget, rounds: int, eps: float, n: int) -> list[str]:
    """EXPLAIN lines: protocol, assumption, grouping, thresholds and theory regime, the price of one round, the
    interval and the privacy statement."""
    s = t.setting(eps)
    g = G.grouping(s, n, rounds)
    kind = "KV" if s.known else "UV"
    name = ("" if rounds == 2 else "1ROUND") + f"{kind}GAUSSTIMATE"
    how = "two rounds, adaptive" if rounds == 2 else ("one round, non-adaptive; reconstructed from the paper's "
                                                      "description (its pseudocode is not in the proceedings version)")
    sigma = f"σ = {s.sigma_lo:g}" if s.known else f"σ between {s.sigma_lo:g} and {s.sigma_hi:g}"
    second = f"|U_2| = {g.n2:,}" + (f" in g = {g.groups} subgroups of {g.m:,} (ρ = {G.rho(s, n)})" if rounds == 1 else "")
    regime = "yes" if G.theory_regime(s, g.k, n) else "no"
    price = G.one_round_price(s, n)
    stat = t.confidence + s.beta
    lines = [f"protocol    {name} ({how})",
             f"assumes     values ~ Gaussian, {sigma}, mean in [{s.low:g}, {s.high:g}] (declared, never checked)",
             f"groups      |U_1| = {s.levels} levels × k = {g.k:,} (bins 2^{s.lmin}..2^{s.lmax}), {second}",
             (f"thresholds  {s.profile} constants, β = {s.beta:g}, k_min = {G.k_min(s):,}; theory regime (the "
              f"proofs' constants): {regime}"),
             f"rounds      one round predicts ×{price:.2f} the two-round error" +
             (f" (√(5ρ) = {math.sqrt(5 * G.rho(s, n)):.2f})" if s.known else ""),
             (f"interval    ±z·se at {stat:.4g} if that is below 1 (the coarse stage fails with probability ≤ β), else "
              "at the confidence less β"),
             (f"σ check     the first round's reports test the declared σ (likelihood ratio) and that some Gaussian "
              f"fits them (deviance), false alarms {G.SIGMA_CHECK_ALPHA:g} in all; if σ is rejected, " +
              ("µ and its interval are re-estimated with σ free" if s.known else "the answer is flagged") +
              ", if no Gaussian fits, the answer is flagged as not holding; the note says so (post-processing: no ε)"),
             ("privacy     pure ε-LDP, one message per user (4-ary RR, binary RR or discrete Laplace), "
              "sequentially interactive")]
    return lines


register_aggregate(AggregateSpec("LDP_MEAN", "LDP_MEAN(column)", "mean of a bounded numeric column (over the users "
                                 "with a value on a nullable one)", "mean", resolve, candidates, MEAN_ARGS,
                                 statement_aware=True), "LDP_AVG")
